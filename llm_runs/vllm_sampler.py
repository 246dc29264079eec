"""A vLLM engine colocated with the trainer: one engine per training process, on its GPU.

UNTESTED HERE: this machine has no GPU and no vLLM. Written against vLLM's offline ``LLM`` API
(0.33: ``LLM.generate`` with token-id prompts, ``SamplingParams``, sleep mode, ``collective_rpc``,
``reset_prefix_cache``) and tested only where vLLM and a CUDA GPU exist (``pytest -m vllm``).

How it works (TRL's "colocate" mode, tensor parallel size 1):

* The engine runs *in this process* (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so weights are handed
  to it by reference, never pickled. Under ``accelerate launch`` each process builds its own
  engine with ``distributed_executor_backend="external_launcher"`` on its own GPU, taking
  ``vllm_gpu_memory_utilization`` of that GPU's memory.
* ``sync_weights(model)`` streams the trainer's current parameters (gathered per tensor under
  FSDP / DeepSpeed ZeRO-3) in bf16 chunks into the engine's ``model.load_weights`` through
  ``LLM.collective_rpc`` (a callable runs on the worker, which is this process), then clears the
  prefix cache, whose entries were computed with the old weights.
* With ``vllm_sleep`` the engine sleeps (level 2: weights and KV cache discarded) while the trainer
  runs, and wakes in two stages around each sync (weights first, then the KV cache), the pattern
  vLLM's sleep-mode docs give for RL weight updates.
* Log-probs: the engine is built with ``logprobs_mode="processed_logprobs"`` and sampled with
  ``logprobs=0``, so each token's log-prob is taken after temperature and top-p, i.e. from the
  distribution it was drawn from, as the hf sampler reports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from isosim.errors import IsosimError
from llm_runs.samplers import SampleBatch

CHUNK_BYTES = 1 << 30  # weights are sent in ~1 GiB pieces
_WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.", "module.")


def _load_weights_on_worker(worker: Any, weights: list[tuple[str, Any]]) -> int:
    """Runs inside vLLM's worker (here: this process) via ``LLM.collective_rpc``."""
    worker.model_runner.model.load_weights(weights=weights)
    return len(weights)


def _clean_name(name: str) -> str:
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def iter_full_parameters(model: Any, accelerator: Any) -> Iterator[tuple[str, Any]]:
    """(name, full tensor) for every parameter, gathering shards one tensor at a time."""
    import torch
    from accelerate.utils import DistributedType

    dist = accelerator.distributed_type
    if dist == DistributedType.DEEPSPEED and getattr(getattr(accelerator.state, "deepspeed_plugin", None),
                                                     "zero_stage", 0) == 3:
        import deepspeed

        for name, param in model.named_parameters():
            with deepspeed.zero.GatheredParameters([param], modifier_rank=None):
                yield _clean_name(name), param.data.detach()
        return
    if dist == DistributedType.FSDP:
        try:
            from torch.distributed.tensor import DTensor
        except ImportError:  # pragma: no cover - old torch
            DTensor = None
        params = list(model.named_parameters())
        if DTensor is not None and params and isinstance(params[0][1], DTensor):  # FSDP2 (fully_shard)
            for name, param in params:
                yield _clean_name(name), param.full_tensor().detach()
            return
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # FSDP1

        with FSDP.summon_full_params(model, recurse=True, writeback=False):
            for name, param in model.named_parameters():
                yield _clean_name(name), param.detach()
        return
    with torch.no_grad():
        for name, param in accelerator.unwrap_model(model).named_parameters():
            yield _clean_name(name), param.detach()


class VLLMSampler:
    def __init__(self, model_path: str, tokenizer: Any, eos_ids: Sequence[int], *, cfg: Any, accelerator: Any):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in-process: no weight pickling
        try:
            import torch
            from vllm import LLM, SamplingParams
        except ImportError as exc:
            raise IsosimError(f"--sampler vllm needs vLLM (pip install 'isosim[vllm]') and a CUDA GPU "
                              f"({exc})") from None
        if not torch.cuda.is_available():
            raise IsosimError("--sampler vllm needs a CUDA GPU")
        self._SamplingParams = SamplingParams
        self.cfg, self.accelerator, self.tokenizer = cfg, accelerator, tokenizer
        self.eos = [int(e) for e in eos_ids]
        kwargs: dict[str, Any] = dict(
            model=model_path, tokenizer=model_path, dtype="bfloat16",
            gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            max_model_len=cfg.vllm_max_model_len or cfg.max_prompt_tokens + max(cfg.max_new_tokens,
                                                                               cfg.eval_max_new_tokens),
            enable_sleep_mode=cfg.vllm_sleep, enable_prefix_caching=True, seed=cfg.seed + accelerator.process_index,
            logprobs_mode="processed_logprobs",
        )
        if accelerator.num_processes > 1:
            # One engine per training process (tp = 1), started by the launcher's torch.distributed env.
            kwargs["distributed_executor_backend"] = "external_launcher"
        try:
            self.llm = LLM(**kwargs)
        except Exception as exc:  # CUDA OOM, unsupported architecture...: one line for the user
            raise IsosimError(f"vLLM could not start ({type(exc).__name__}: {exc})") from None
        self.sleeping = False
        if cfg.vllm_sleep:
            self.llm.sleep(level=2)
            self.sleeping = True
        accelerator.wait_for_everyone()

    def sync_weights(self, model: Any) -> None:
        import torch

        if self.sleeping:
            self.llm.wake_up(tags=["weights"])
        chunk: list[tuple[str, Any]] = []
        size = 0
        for name, tensor in iter_full_parameters(model, self.accelerator):
            t = tensor.to(device="cuda", dtype=torch.bfloat16, copy=True)
            chunk.append((name, t))
            size += t.numel() * t.element_size()
            if size >= CHUNK_BYTES:
                self.llm.collective_rpc(_load_weights_on_worker, args=(chunk,))
                chunk, size = [], 0
        if chunk:
            self.llm.collective_rpc(_load_weights_on_worker, args=(chunk,))
        del chunk
        torch.cuda.empty_cache()
        if self.sleeping:
            self.llm.wake_up(tags=["kv_cache"])
            self.sleeping = False
        self.llm.reset_prefix_cache()

    def release(self) -> None:
        if self.cfg.vllm_sleep and not self.sleeping:
            self.llm.sleep(level=2)
            self.sleeping = True

    def close(self) -> None:
        self.release()

    def generate(self, prompts: Sequence[Sequence[int]], n: int, temperature: float, top_p: float,
                 max_new_tokens: int, seed: int) -> SampleBatch:
        if self.sleeping:  # weights were discarded at level 2: a sync must come first
            raise RuntimeError("vLLM engine is asleep: call sync_weights before generate")
        params = [
            self._SamplingParams(n=n, temperature=temperature, top_p=top_p, top_k=-1, max_tokens=max_new_tokens,
                                 stop_token_ids=self.eos, logprobs=0, seed=(seed + i) & 0x7FFFFFFF,
                                 skip_special_tokens=True)
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts], sampling_params=params,
                                    use_tqdm=False)
        out = SampleBatch()
        eos = set(self.eos)
        for prompt, result in zip(prompts, outputs):
            for comp in sorted(result.outputs, key=lambda c: c.index):
                ids = list(comp.token_ids)
                if comp.logprobs is None or len(comp.logprobs) != len(ids):
                    raise RuntimeError("vLLM returned no per-token log-probs (is logprobs=0 supported?)")
                lps = [float(comp.logprobs[t][tok].logprob) for t, tok in enumerate(ids)]
                out.prompt_ids.append(list(prompt))
                out.completion_ids.append(ids)
                out.logprobs.append(lps)
                out.texts.append(comp.text)
                out.truncated.append(comp.finish_reason == "length" and not (ids and ids[-1] in eos))
        return out
