"""What every sampler returns (:class:`SampleBatch`) and the interface it implements
(:class:`Sampler`); below both backends (:mod:`samplers`, :mod:`vllm_sampler`) so neither imports the other
for them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class SamplingStopped(Exception):
    """A sampler's ``should_stop`` turned true during a call (a stop signal): its draws are dropped."""


def check_stop(sampler: Any) -> None:
    """Raise :class:`SamplingStopped` when the sampler's ``should_stop`` (a callable, or None) says so."""
    should_stop = getattr(sampler, "should_stop", None)
    if should_stop is not None and should_stop():
        raise SamplingStopped()


def report_chunk(sampler: Any, done: int, total: int) -> None:
    """Tell the sampler's ``on_chunk`` (a callable, or None) that ``done`` of ``total`` sequences are sampled."""
    on_chunk = getattr(sampler, "on_chunk", None)
    if on_chunk is not None:
        on_chunk(done, total)


@dataclass
class SampleBatch:
    prompt_ids: list[list[int]] = field(default_factory=list)
    completion_ids: list[list[int]] = field(default_factory=list)
    logprobs: list[list[float]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    truncated: list[bool] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.completion_ids)

    @property
    def num_tokens(self) -> int:
        return sum(len(c) for c in self.completion_ids)

    def add(self, prompt: Sequence[int], tokens: Sequence[int], logprobs: Sequence[float], eos: set[int]) -> None:
        """Append one sampled row, cut after its first eos (truncated if it has none)."""
        length, truncated = cut_at_eos(tokens, eos)
        self.prompt_ids.append(list(prompt) if not isinstance(prompt, list) else prompt)
        self.completion_ids.append(list(tokens[:length]))
        self.logprobs.append(list(logprobs[:length]))
        self.truncated.append(truncated)


class Sampler(Protocol):
    def generate(self, prompts: Sequence[Sequence[int]], n: int | Sequence[int], temperature: float, top_p: float,
                 max_new_tokens: int, seed: int) -> SampleBatch:
        """``n`` samples of every prompt, or ``n[i]`` of prompt ``i`` (groups of unequal size);
        prompt-major either way (:func:`group_sizes`)."""

    def sync_weights(self, model: Any) -> None:
        """Make the sampler draw from ``model``'s current weights."""

    def release(self) -> None:
        """Free sampler memory while the trainer runs (no-op where nothing is held)."""

    @property
    def needs_sync(self) -> bool:
        """True when the sampler lost its weights (e.g. vLLM's level-2 sleep): sync before generate."""

    def close(self) -> None: ...


def group_sizes(n: int | Sequence[int], num_prompts: int) -> list[int]:
    """Samples per prompt: ``n`` for each of ``num_prompts`` prompts, or the list ``n`` itself
    (one non-negative count per prompt)."""
    if isinstance(n, int):
        return [n] * num_prompts
    sizes = [int(k) for k in n]
    if len(sizes) != num_prompts or any(k < 0 for k in sizes):
        raise ValueError(f"need one sample count >= 0 per prompt ({num_prompts}), got {sizes}")
    return sizes


def cut_at_eos(tokens: Sequence[int], eos: set[int]) -> tuple[int, bool]:
    """Length of the completion (through the first eos) and whether it was truncated."""
    for i, t in enumerate(tokens):
        if t in eos:
            return i + 1, False
    return len(tokens), True
