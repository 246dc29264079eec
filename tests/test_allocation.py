"""isosim.sim.allocation: the pass-rate estimator and the per-problem allocation rules."""

import itertools
import json

import numpy as np
import pytest

from isosim.errors import IsosimError
from isosim.sim.allocation import (
    RULES,
    PassRateEstimator,
    allocate,
    candidates_per_step,
    check_rule,
    plan_batch,
    signal_probability,
)


def test_check_rule_names_the_valid_rules():
    assert check_rule("knapsack") == "knapsack"
    with pytest.raises(IsosimError, match="uniform, filter, variance, knapsack, band"):
        check_rule("greedy")


@pytest.mark.parametrize("rule", RULES)
def test_counts_sum_to_total_within_bounds(rule):
    rng = np.random.default_rng(0)
    for _ in range(200):
        B = int(rng.integers(1, 40))
        n = int(rng.integers(1, 20))
        total = B * n + (int(rng.integers(0, B)) if rule != "knapsack" else 0)
        p = rng.beta(0.3, 0.3, B) if rng.random() < 0.5 else rng.random(B)
        p[rng.random(B) < 0.2] = rng.choice([0.0, 1.0])
        n_min = int(rng.integers(1, n + 1))
        n_max = int(rng.integers(n + 1, 4 * n + 2))
        c = allocate(rule, p, total, n_min=n_min, n_max=n_max, rng=np.random.default_rng(1))
        assert c.dtype == np.int64 and c.sum() == total
        assert c.min() >= n_min and c.max() <= n_max
        again = allocate(rule, p, total, n_min=n_min, n_max=n_max, rng=np.random.default_rng(1))
        np.testing.assert_array_equal(c, again)


def test_uniform_gives_everyone_n():
    np.testing.assert_array_equal(allocate("uniform", np.random.default_rng(0).random(7), 7 * 5), np.full(7, 5))


def test_variance_follows_sqrt_p_one_minus_p():
    p = np.array([0.5, 0.1, 0.02, 0.5])
    c = allocate("variance", p, 4000, n_min=0)
    w = np.sqrt(p * (1 - p))
    np.testing.assert_allclose(c / c.sum(), w / w.sum(), atol=1e-3)


def _signal(p, c):
    return float(signal_probability(p, c).sum())


@pytest.mark.parametrize("seed", range(25))
def test_knapsack_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    B = int(rng.integers(2, 5))
    n_min, n_max = 1, int(rng.integers(3, 7))
    total = int(rng.integers(B * n_min, B * n_max + 1))
    p = rng.random(B) ** rng.choice([1, 3])
    best = max(_signal(p, np.array(c)) for c in itertools.product(range(n_min, n_max + 1), repeat=B)
               if sum(c) == total)
    got = allocate("knapsack", p, total, n_min=n_min, n_max=n_max, rng=rng)
    assert got.sum() == total
    assert _signal(p, got) == pytest.approx(best, abs=1e-12)


def test_knapsack_beats_uniform_on_mixed_difficulty():
    p = np.array([0.98, 0.95, 0.5, 0.05, 0.02, 0.5])
    got = allocate("knapsack", p, 6 * 8, n_min=1, n_max=32)
    assert _signal(p, got) > _signal(p, np.full(6, 8)) + 0.1


def test_estimator_uses_the_prior_for_unseen_problems_and_the_history_for_seen():
    est = PassRateEstimator(5, prior_mean=0.3, prior_strength=2.0, decay=1.0, pooled=False)
    np.testing.assert_allclose(est.mean(), 0.3)
    est.update([1], [8], [8])
    m = est.mean()
    assert m[1] == pytest.approx((8 + 0.6) / 10)
    np.testing.assert_allclose(m[[0, 2, 3, 4]], 0.3)
    pooled = PassRateEstimator(5, prior_mean=0.5, prior_strength=2.0, decay=1.0)
    pooled.update([0, 1], [0, 0], [8, 8])  # the set looks hard: unseen problems start low
    assert pooled.prior() == pytest.approx(1.0 / 18)
    assert pooled.mean([4])[0] == pytest.approx(1.0 / 18)


def test_decay_tracks_an_improving_problem():
    slow = PassRateEstimator(1, decay=1.0, pooled=False)
    fast = PassRateEstimator(1, decay=0.5, pooled=False)
    for est in (slow, fast):
        for _ in range(5):
            est.update([0], [0], [8])
        est.update([0], [8], [8])
    assert fast.mean()[0] > 0.45 > slow.mean()[0]


def test_estimator_resume_round_trip_is_exact():
    rng = np.random.default_rng(3)
    a = PassRateEstimator(50, decay=0.7)
    for _ in range(10):
        ids = rng.choice(50, 8, replace=False)
        t = rng.integers(1, 9, 8)
        a.update(ids, rng.binomial(t, 0.4), t)
    b = PassRateEstimator.from_state_dict(json.loads(json.dumps(a.state_dict())))
    for _ in range(5):
        ids = rng.choice(50, 8, replace=False)
        t = rng.integers(1, 9, 8)
        s = rng.binomial(t, 0.4)
        a.update(ids, s, t)
        b.update(ids, s, t)
    np.testing.assert_array_equal(a.mean(), b.mean())
    assert a.state_dict() == b.state_dict()


def test_estimator_rejects_bad_input():
    with pytest.raises(IsosimError):
        PassRateEstimator(0)
    est = PassRateEstimator(3)
    with pytest.raises(IsosimError):
        est.update([5], [1], [2])
    with pytest.raises(IsosimError):
        est.update([0], [3], [2])
    with pytest.raises(IsosimError, match="malformed"):
        PassRateEstimator.from_state_dict({"num_problems": 3})


def test_repeated_ids_update_in_order():
    a = PassRateEstimator(2, decay=0.5)
    a.update([0, 0], [1, 2], [2, 2])
    b = PassRateEstimator(2, decay=0.5)
    b.update([0], [1], [2])
    b.update([0], [2], [2])
    assert a.state_dict() == b.state_dict()


@pytest.mark.parametrize("rule", RULES)
def test_plan_batch_spends_uniform_compute_from_history_alone(rule):
    """The plan reads only the estimator (built from sampled outcomes), never a true pass rate."""
    rng = np.random.default_rng(0)
    truth = rng.beta(0.4, 0.4, 64)
    est = PassRateEstimator(64)
    b_p, n = 8, 6
    for step in range(30):
        cand = rng.choice(64, candidates_per_step(rule, b_p), replace=False)
        ids, counts = plan_batch(rule, est, cand, b_p, n, rng=np.random.default_rng(step))
        assert ids.size == b_p == np.unique(ids).size and set(ids) <= set(cand)
        assert counts.sum() == b_p * n and counts.min() >= 1
        est.update(ids, rng.binomial(counts, truth[ids]), counts)


def test_filter_and_band_keep_the_predicted_useful_candidates():
    est = PassRateEstimator(8, decay=1.0, pooled=False)
    est.update(np.arange(8), [0, 40, 20, 40, 0, 20, 40, 0], np.full(8, 40))  # 0, 1, .5 pass rates
    ids, counts = plan_batch("filter", est, np.arange(8), 2, 4)
    np.testing.assert_array_equal(ids, [2, 5])
    np.testing.assert_array_equal(counts, [4, 4])
    ids, _ = plan_batch("band", est, np.arange(8), 3, 4)  # two in the band, one nearest to it
    assert {2, 5} <= set(ids) and ids.size == 3


def _top_units_by_full_sort(gain, units, rng):
    """The greedy's definition: sort every marginal gain (largest first; ties: fewer units, then
    tie rank) and take the first ``units``."""
    B, C = gain.shape
    rank = rng.permutation(B) if rng is not None else np.arange(B)
    take = np.lexsort((np.repeat(rank, C), np.tile(np.arange(C), B), -gain.reshape(-1)))[:units]
    return np.bincount(take // C, minlength=B)


def test_knapsack_selection_equals_the_full_sort_with_ties():
    from isosim.sim.allocation import _top_units

    rng = np.random.default_rng(7)
    for _ in range(300):
        B, C = int(rng.integers(1, 12)), int(rng.integers(1, 20))
        x = rng.choice([0.0, 0.1, 0.25, 0.5], (B, C)) if rng.random() < 0.5 else rng.random((B, C))
        gain = np.sort(x, 1)[:, ::-1]  # rows non-increasing, with ties when drawn from few values
        units = int(rng.integers(0, B * C + 1))
        seed = int(rng.integers(1 << 30))
        got = _top_units(gain, units, np.random.default_rng(seed))
        want = _top_units_by_full_sort(gain, units, np.random.default_rng(seed))
        np.testing.assert_array_equal(got, want)


def test_the_knapsacks_counts_are_those_of_its_whole_table_of_gains():
    """allocate computes only the gains near the cut exactly (the rest estimated by exp): the counts and
    the tie-break draw must be those of the whole table, ties, pass rates of 0 and 1, tiny ones and ones a
    few bits apart (whose estimates may order them wrong) included."""
    from isosim.sim.allocation import _knapsack_gain, _knapsack_units, _top_units, bounds

    rng = np.random.default_rng(11)
    for _ in range(1500):
        B, n = int(rng.integers(1, 48)), int(2 ** rng.integers(0, 11))
        n_min, n_max = bounds(n)
        near = rng.choice([0.03, 0.3, 0.7], B) * (1 + rng.integers(-3, 4, B) * 2e-16)  # gains a few bits apart
        p = [rng.random(B), rng.choice([0.0, 1.0, 0.5, 0.25, 0.75], B), rng.random(B) ** 8,
             rng.choice([1e-12, 1e-3, 0.5, 1 - 1e-9], B), np.round(rng.random(B), 2), near][int(rng.integers(6))]
        units = (int(rng.integers(B * n_min, B * n_max + 1)) if rng.random() < 0.3 else B * n) - n_min * B
        seed = int(rng.integers(1 << 30))
        whole = _knapsack_gain(p[:, None], np.arange(n_max - n_min)[None, :] + n_min)
        want_rng, got_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        want = _top_units(whole, units, want_rng)
        got = _knapsack_units(p, n_min, n_max - n_min, units, got_rng)
        np.testing.assert_array_equal(got, want)
        assert got_rng.random() == want_rng.random()  # the same draws taken
