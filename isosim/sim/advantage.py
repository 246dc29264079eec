"""The GRPO group advantage, defined once for the simulator and for real runs.

For a group of rollouts of one problem with rewards ``r``::

    A = (r - b) / (s + eps)     (GRPO)          A = r - b     (Dr.GRPO: mean-only)

with baseline ``b`` the group's mean reward and ``s`` its standard deviation (Bessel's
correction, as TRL and verl compute it). With a decoupled baseline the mean and std come from
``n_est`` rollouts and the update uses ``n`` of them. Every caller builds its advantages from
these functions:

* ``llm_runs.training.grpo.group_advantages`` and ``isosim.sim.reference``: per rollout, from the rewards
  (:func:`baseline`, :func:`spread`);
* the simulator's general path (``isosim.sim.engine.grpo.advantages``): per response, from the number
  of correct draws of a 0/1 group (:func:`bernoulli_baseline`, :func:`bernoulli_spread`);
* the simulator's closed form (``isosim.sim.engine.grpo._closed_step``): the sum of the correct draws' centred
  rewards, ``m * centre(1, b)``, divided by the same :func:`divisor`.

Change the formula here and every path changes (``tests/test_engine.py`` perturbs
:func:`divisor` and checks that the default simulator path sees it).

The functions use only arithmetic operators and ``sqrt``/``clip``, so they take torch tensors and
numpy arrays alike (:func:`spread` of raw rewards is torch's ``std``, what its callers hold).
"""

from __future__ import annotations

import numpy as np

# The epsilon differs between the two worlds on purpose, and both are kept so that results stay
# what they were: the simulator uses TRL's 1e-4 (every stored simulator record and the fitted
# frontiers in studies/results depend on it); llm_runs uses verl's 1e-6 (its real runs and their
# checkpoints were made with it). Pass the one that applies; there is no default.
SIM_EPS = 1e-4
LLM_EPS = 1e-6

KINDS = ("grpo", "drgrpo")


def baseline(rewards, dim: int = -1):
    """The group's mean reward along ``dim`` (kept as a size-1 axis): GRPO's baseline."""
    if _is_torch(rewards):
        return rewards.mean(dim=dim, keepdim=True)
    return rewards.mean(axis=dim, keepdims=True)


def bernoulli_baseline(m, n):
    """The mean reward of a 0/1 group with ``m`` of ``n`` draws correct."""
    return m / n


def spread(rewards, dim: int = -1):
    """The group's sample standard deviation along ``dim`` (Bessel's correction; kept axis)."""
    if _is_torch(rewards):
        return rewards.std(dim=dim, keepdim=True)
    return rewards.std(axis=dim, ddof=1, keepdims=True)


def bessel(n):
    """Bessel's factor ``n / max(n - 1, 1)`` turning a 0/1 group's ``mu (1 - mu)`` into the
    unbiased sample variance (1 for a group of one)."""
    if _is_torch(n):
        return n / (n - 1.0).clamp(min=1.0)
    if isinstance(n, np.ndarray):
        return n / np.maximum(n - 1.0, 1.0)
    return n / max(n - 1.0, 1.0)


def bernoulli_spread(mu, bessel_factor):
    """:func:`spread` of a 0/1 group from its mean ``mu``: ``sqrt(mu (1 - mu) * bessel)``."""
    var = mu * (1.0 - mu)
    if _is_torch(var):
        return (var.clip(min=0.0) * bessel_factor).sqrt()
    return np.sqrt(np.maximum(var, 0.0) * bessel_factor)


def divisor(sd, eps: float):
    """What GRPO divides the centred rewards by: ``std + eps``."""
    return sd + eps


def centre(rewards, base):
    """Centred rewards ``r - b``: Dr.GRPO's advantage, GRPO's before the division."""
    return rewards - base


def normalise(centred, div):
    """GRPO's scaling of centred rewards (or of a sum of them) by :func:`divisor`."""
    return centred / div


def advantage(rewards, base, div=None):
    """``(r - b) / div`` (GRPO), or ``r - b`` when ``div`` is None (Dr.GRPO)."""
    c = centre(rewards, base)
    return c if div is None else normalise(c, div)


def group_advantages(groups, n: int, kind: str, eps: float):
    """Advantages ``[G, n]`` of the first ``n`` rollouts of each group ``groups[g]`` of ``n_est``
    rewards (``[G, n_est]``): baseline (and std, for GRPO) over all ``n_est`` of them."""
    if kind not in KINDS:
        raise ValueError(f"unknown advantage kind {kind!r}: use one of {', '.join(KINDS)}")
    base = baseline(groups, 1)
    div = divisor(spread(groups, 1), eps) if kind == "grpo" else None
    return advantage(groups[:, :n], base, div)


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")  # (no torch import: numpy callers need not load it)


__all__ = [
    "KINDS",
    "LLM_EPS",
    "SIM_EPS",
    "advantage",
    "baseline",
    "bernoulli_baseline",
    "bernoulli_spread",
    "bessel",
    "centre",
    "divisor",
    "group_advantages",
    "normalise",
    "spread",
]
