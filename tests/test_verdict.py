"""The validation verdict (isosim.validation.verdict.decide) on made-up frontier pairs: every outcome, and for
each one a pair that differs in one respect and flips it."""

from __future__ import annotations

import math

import pytest

from isosim.errors import IsosimError
from isosim.validation.verdict import Observed, Prediction, decide, eval_se

SE = 0.005  # two runs differ when their rewards differ by more than 2 * sqrt(2) * SE = 0.0141


def obs(**rewards: float) -> dict[int, Observed]:
    """obs(n16=0.7, n64=0.72) -> {16: Observed(0.7, SE), 64: ...}."""
    return {int(k[1:]): Observed(v, SE) for k, v in rewards.items()}


def test_agrees_and_flips_to_disagrees():
    pred = Prediction(n_star=64)
    v = decide(pred, obs(n16=0.60, n64=0.70, n256=0.65), base_reward=0.50)
    assert (v.agreement, v.testable, v.best_n, v.tied) == ("agrees", True, 64, [64])
    flipped = decide(pred, obs(n16=0.60, n64=0.65, n256=0.70), base_reward=0.50)  # best moved to 256
    assert flipped.agreement == "disagrees" and flipped.best_n == 256


def test_disagrees_and_flips_when_the_gap_is_within_noise():
    pred = Prediction(n_star=16)
    v = decide(pred, obs(n16=0.60, n64=0.70, n256=0.65), base_reward=0.50)
    assert v.agreement == "disagrees" and "beats every predicted n" in v.reason
    close = decide(pred, obs(n16=0.69, n64=0.70, n256=0.65), base_reward=0.50)  # 0.01 < 0.0141
    assert close.agreement == "consistent, unresolved" and close.tied == [16, 64]


def test_consistent_unresolved_flips_to_agrees_with_a_predicted_tie_band():
    observed = obs(n16=0.695, n64=0.70, n256=0.60)
    v = decide(Prediction(n_star=64), observed, base_reward=0.50)
    assert v.agreement == "consistent, unresolved"
    banded = decide(Prediction(n_star=64, n_tol=16, n_tie_hi=64), observed, base_reward=0.50)
    assert banded.agreement == "agrees" and banded.predicted_set == [16, 64]


def test_not_testable_and_flips_when_something_was_learned():
    pred = Prediction(n_star=64)
    v = decide(pred, obs(n16=0.505, n64=0.507, n256=0.503), base_reward=0.50)  # gains < 2 se = 0.01
    assert (v.agreement, v.testable, v.saturation) == ("inconclusive", False, "unresolved")
    assert "too small" in v.reason
    learned = decide(pred, obs(n16=0.505, n64=0.52, n256=0.503), base_reward=0.50)
    assert learned.testable and learned.agreement == "agrees"


def test_saturation_seen_and_flips_to_unresolved_within_noise():
    pred = Prediction(n_star=64)
    v = decide(pred, obs(n16=0.60, n64=0.70, n256=0.65), base_reward=0.50)
    assert v.saturation == "seen" and "n = 256 ends below n = 64" in v.saturation_detail
    near = decide(pred, obs(n16=0.60, n64=0.70, n256=0.69), base_reward=0.50)
    assert near.saturation == "unresolved"


def test_saturation_not_seen_and_flips_when_the_top_ties():
    pred = Prediction(n_star=256)
    v = decide(pred, obs(n16=0.60, n64=0.65, n256=0.70), base_reward=0.50)
    assert v.saturation == "not seen" and v.agreement == "agrees"
    tie = decide(pred, obs(n16=0.60, n64=0.695, n256=0.70), base_reward=0.50)
    assert tie.saturation == "unresolved"


def test_every_n_tied_as_predicted():
    observed = obs(n16=0.70, n64=0.70, n256=0.70)
    assert decide(Prediction(n_star=64, n_tol=16, n_tie_hi=256), observed, 0.5).agreement == "agrees"
    assert decide(Prediction(n_star=64), observed, 0.5).agreement == "consistent, unresolved"


def test_nearest_planned_n_stands_for_a_prediction_between_planned_n():
    v = decide(Prediction(n_star=100), obs(n16=0.60, n128=0.70, n512=0.65), base_reward=0.5)
    assert v.nearest_n == 128 and v.predicted_set == [128] and v.agreement == "agrees"


def test_without_a_base_reward_learning_is_not_checked():
    v = decide(Prediction(n_star=64), obs(n16=0.60, n64=0.70), base_reward=None)
    assert v.testable and v.agreement == "agrees"


def test_bad_input():
    with pytest.raises(IsosimError):
        decide(Prediction(n_star=4), {})
    with pytest.raises(IsosimError):
        decide(Prediction(n_star=4), {4: Observed(float("nan"), 0.1)})


def test_eval_se():
    assert eval_se(0.5, 100, 16) == pytest.approx(math.sqrt(0.25 / 1600))
    assert eval_se(0.0, 100, 16) == pytest.approx(math.sqrt(1e-4 / 1600))  # floored, never 0
