"""isosim.sim.epochs: the one epoch sampler behind the engine, the env and real runs."""

import numpy as np
import pytest

from isosim.errors import IsosimError
from isosim.sim.epochs import EpochSampler


def queue_reference(num_items, rng, sizes):
    """The sampler as the engine and the env wrote it before: a queue refilled with permutations."""
    queue, out = np.empty(0, dtype=np.int64), []
    for size in sizes:
        while queue.size < size:
            queue = np.concatenate([queue, rng.permutation(num_items)])
        out.append(queue[:size])
        queue = queue[size:]
    return out


@pytest.mark.parametrize("sizes", [[4] * 9, [10, 10, 3], [25, 1, 0, 7], [3, 7, 10, 11]])
def test_generator_epochs_draw_what_the_queue_drew(sizes):
    got = EpochSampler.from_generator(10, np.random.default_rng(5))
    want = queue_reference(10, np.random.default_rng(5), sizes)
    for size, w in zip(sizes, want):
        np.testing.assert_array_equal(got.next(size), w)


def test_every_epoch_is_a_permutation_and_seeded_epochs_resume_exactly():
    s = EpochSampler.seeded(7, seed=2)
    draws = s.next(21)
    for e in range(3):
        assert sorted(draws[7 * e: 7 * e + 7].tolist()) == list(range(7))
    assert not np.array_equal(draws[:7], draws[7:14])  # a fresh order per epoch
    a = EpochSampler.seeded(7, seed=2)
    a.next(10)
    b = EpochSampler.seeded(7, seed=2)
    b.seek(a.epoch, a.pos)
    np.testing.assert_array_equal(a.next(9), b.next(9))
    with pytest.raises(IsosimError):
        EpochSampler.seeded(0, seed=1)
