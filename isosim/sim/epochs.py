"""Epoch-wise shuffling, defined once: the simulator's runs, the gymnasium env and real runs
draw their batches of problems from an :class:`EpochSampler`.

Every epoch visits each of ``num_items`` problems once, in a fresh random order; a batch that
runs past the end of an epoch continues into the next one. What differs between callers is only
where an epoch's order comes from:

* :meth:`EpochSampler.from_generator`: the next permutation of one numpy ``Generator`` (the
  simulator's per-run stream, the env's ``np_random``); epochs must be drawn in order.
* :meth:`EpochSampler.seeded`: a pure function of ``(seed, epoch)``, so the whole state is
  ``(epoch, pos)`` and resuming from a checkpoint is exact (``llm_runs``).

An epoch's order is drawn when its first item is needed (never ahead), so a generator shared
with other draws sees the same sequence of calls as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from isosim.errors import IsosimError

SEEDED_TAG = 0xE90C  # mixed into (seed, epoch) for seeded orders


def seeded_order(num_items: int, seed: int) -> Callable[[int], np.ndarray]:
    """Epoch -> its permutation of ``range(num_items)``, a pure function of ``(seed, epoch)``."""
    return lambda epoch: np.random.default_rng([seed, epoch, SEEDED_TAG]).permutation(num_items)


class EpochSampler:
    """Batches of indices in ``range(num_items)``, one fresh permutation per epoch."""

    def __init__(self, num_items: int, permutation: Callable[[int], np.ndarray], epoch: int = 0, pos: int = 0):
        if num_items < 1:
            raise IsosimError("no training problems left to sample from")
        self.num_items, self.epoch, self.pos = num_items, epoch, pos
        self._permutation = permutation
        self._perm: np.ndarray | None = None  # the current epoch's order, drawn when first needed

    @classmethod
    def from_generator(cls, num_items: int, rng: np.random.Generator) -> EpochSampler:
        """Epoch ``e``'s order is the ``e``-th ``rng.permutation(num_items)``."""
        return cls(num_items, lambda epoch: rng.permutation(num_items))

    @classmethod
    def seeded(cls, num_items: int, seed: int, epoch: int = 0, pos: int = 0) -> EpochSampler:
        """Epoch ``e``'s order is a pure function of ``(seed, e)`` (:func:`seeded_order`)."""
        return cls(num_items, seeded_order(num_items, seed), epoch, pos)

    def next(self, size: int) -> np.ndarray:
        """The next ``size`` indices (int64), crossing into new epochs as needed."""
        parts = []
        need = size
        while need > 0:
            if self.pos == self.num_items:
                self.epoch, self.pos, self._perm = self.epoch + 1, 0, None
            if self._perm is None:
                self._perm = self._permutation(self.epoch)
            take = min(need, self.num_items - self.pos)
            parts.append(self._perm[self.pos:self.pos + take])
            self.pos += take
            need -= take
        if len(parts) == 1:
            return parts[0].astype(np.int64, copy=False)
        return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.empty(0, dtype=np.int64)

    def seek(self, epoch: int, pos: int) -> None:
        """Continue from item ``pos`` of epoch ``epoch`` (orders that are pure functions of the epoch)."""
        self.epoch, self.pos, self._perm = epoch, pos, None
