"""isosim.sim.advantage: GRPO's group advantage, one definition for numpy and torch callers."""

import numpy as np
import pytest
import torch

from isosim.sim import advantage as adv


@pytest.mark.parametrize("kind", ["grpo", "drgrpo"])
@pytest.mark.parametrize("n", [4, 2])
def test_numpy_and_torch_give_the_same_advantages(kind, n):
    r = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    a_np = adv.group_advantages(r, n, kind, adv.LLM_EPS)
    a_t = adv.group_advantages(torch.tensor(r), n, kind, adv.LLM_EPS)
    assert isinstance(a_np, np.ndarray) and a_np.shape == (3, n)
    np.testing.assert_allclose(a_np, a_t.numpy(), rtol=0, atol=1e-15)
    assert np.all(a_np[1] == 0)  # a group whose rewards are equal carries no signal
    if kind == "grpo":  # (1 - 0.5) / (std 0.577... + eps) for the first group's correct draws
        np.testing.assert_allclose(a_np[0, 0], 0.5 / (np.std([1, 0, 0, 1], ddof=1) + adv.LLM_EPS))
    else:
        np.testing.assert_allclose(a_np[0, :n], r[0, :n] - 0.5)


def test_the_bernoulli_form_is_the_std_of_the_draws():
    """The simulator's std from a 0/1 group's mean equals the Bessel-corrected std of its draws."""
    for m, n in ((1, 4), (3, 8), (0, 5), (7, 7), (13, 100)):
        draws = np.r_[np.ones(m), np.zeros(n - m)]
        mu = adv.bernoulli_baseline(m, n)
        for x in (mu, torch.tensor(mu, dtype=torch.float64), np.float64(mu)):
            sd = adv.bernoulli_spread(x, adv.bessel(float(n)))
            np.testing.assert_allclose(float(sd), np.std(draws, ddof=1), rtol=1e-12, atol=1e-15)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown advantage kind"):
        adv.group_advantages(np.zeros((2, 4)), 4, "rloo", adv.SIM_EPS)
