"""The validation verdict: does a real sweep agree with the simulator's prediction?

A pure function of the two frontiers at one budget and their uncertainties, so every outcome
can be tested on made-up numbers:

- the **prediction**: the simulated n*(C) at the budget and its tie band (``n_tol`` .. ``n_tie_hi``,
  every n the simulator finds within its tie tolerance of the frontier), with the fitted n_sat;
- the **observation**: the final reward of each planned n with its standard error, and the
  base model's reward.

Two n are told apart when their rewards differ by more than ``Z`` (= 2) combined standard
errors. The verdict has two parts:

``agreement``
    ``inconclusive``  no n improved on the base reward by more than ``Z`` standard errors: the
                      budget is too small to test anything;
    ``agrees``        every n tied with the observed best lies in the predicted set (the planned
                      n inside the predicted tie band, or the nearest planned n when none is);
    ``consistent, unresolved``  a predicted n is tied with the best, but so are n outside the
                      predicted set: noise cannot rank them;
    ``disagrees``     every predicted n is worse than the best run beyond noise.
``saturation``
    ``seen``          the largest n tried ends below the best beyond noise;
    ``not seen``      the largest n tried is the best beyond noise (n* may lie higher);
    ``unresolved``    neither (the largest n is within noise of the best, or nothing was learned).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from isosim.errors import IsosimError

Z = 2.0
"""Standard errors by which two rewards must differ to be called different."""


def eval_se(r: float, val_size: float, eval_n: float) -> float:
    """Sampling error of a validation avg@k measured with ``eval_n`` samples on ``val_size`` problems."""
    r = min(max(float(r), 0.0), 1.0)
    return math.sqrt(max(r * (1 - r), 1e-4) / max(val_size * eval_n, 1.0))


@dataclass(frozen=True)
class Prediction:
    """The simulator's frontier at the validated budget."""

    n_star: int
    """Argmax n*(C) of the simulated frontier."""
    n_tol: int | None = None
    """Smallest n within the simulator's tie tolerance of its frontier (None: not known)."""
    n_tie_hi: int | None = None
    """Largest such n (None: not known)."""
    n_sat: float | None = None
    """Fitted saturation n_sat (None: no learning simulated)."""


@dataclass(frozen=True)
class Observed:
    """One planned n's final reward (seed mean) and its standard error."""

    reward: float
    se: float


@dataclass
class Verdict:
    agreement: str
    saturation: str
    testable: bool
    best_n: int
    tied: list[int]
    predicted_set: list[int]
    nearest_n: int
    reason: str
    saturation_detail: str
    tolerance: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _log2_dist(a: float, b: float) -> float:
    return abs(math.log2(max(a, 1e-12)) - math.log2(max(b, 1e-12)))


def decide(pred: Prediction, observed: dict[int, Observed], base_reward: float | None = None) -> Verdict:
    """The verdict for one budget (see the module docstring); raises IsosimError on empty input."""
    if not observed:
        raise IsosimError("the verdict needs at least one observed n")
    for n, o in observed.items():
        if n < 1 or not (math.isfinite(o.reward) and math.isfinite(o.se) and o.se >= 0):
            raise IsosimError(f"observed n = {n}: reward and standard error must be finite, se >= 0")
    ns = sorted(observed)
    best = max(ns, key=lambda n: (observed[n].reward, -n))

    def tol(a: int, b: int) -> float:
        return Z * math.sqrt(observed[a].se ** 2 + observed[b].se ** 2)

    tied = [n for n in ns if observed[best].reward - observed[n].reward <= tol(best, n)]
    lo = pred.n_tol if pred.n_tol is not None else pred.n_star
    hi = pred.n_tie_hi if pred.n_tie_hi is not None else pred.n_star
    lo, hi = min(lo, pred.n_star), max(hi, pred.n_star)
    nearest = min(ns, key=lambda n: (_log2_dist(n, pred.n_star), n))
    inside = [n for n in ns if lo <= n <= hi]
    pset = inside or [nearest]
    learned = True
    if base_reward is not None and math.isfinite(base_reward):
        learned = any(observed[n].reward - base_reward > Z * observed[n].se for n in ns)

    top = ns[-1]
    r = {n: observed[n].reward for n in ns}
    if not learned:
        saturation, sat_txt = "unresolved", "unresolved: nothing was learned"
    elif best != top and r[best] - r[top] > tol(best, top):
        saturation = "seen"
        sat_txt = (f"yes: n = {top} ends below n = {best} ({r[top]:.3f} vs {r[best]:.3f}, beyond the "
                   f"tolerance {tol(best, top):.3f})")
    elif best == top and tied == [top]:
        saturation, sat_txt = "not seen", f"no: the largest n tried ({top}) is best beyond noise; n* may lie higher"
    else:
        saturation = "unresolved"
        sat_txt = (f"unresolved: n = {top} is within noise of the best (n = {best}); {r[top]:.3f} vs "
                   f"{r[best]:.3f}, tolerance {tol(best, top):.3f}")

    band = f"n = {pset}" if len(pset) > 1 else f"n = {pset[0]}"
    # the predicted set: planned n inside the predicted band, or (none inside) the n tried nearest n*
    what = (f"predicted n ({band})" if inside else
            f"n tried nearest the predicted n* = {pred.n_star} (n = {nearest}; no n in the predicted band was run)")
    if not learned:
        agreement = "inconclusive"
        why = (f"no run improved on the base model ({base_reward:.3f}) by more than {Z:g} standard errors: "
               "the budget is too small to rank the allocations")
    elif not set(tied) & set(pset):
        agreement = "disagrees"
        worst_gap = min(r[best] - r[n] for n in pset)
        why = (f"the best run (n = {best}, {r[best]:.3f}) beats {'every ' if inside else 'the '}{what} beyond noise "
               f"(by at least {worst_gap:.3f})")
    elif set(tied) <= set(pset):
        agreement = "agrees"
        why = (f"the best run(s) {tied} lie in the predicted set ({band if inside else what}); every other n is "
               "worse beyond noise" if len(ns) > len(tied) else f"every n tried ties, as predicted ({band})")
    else:
        agreement = "consistent, unresolved"
        why = (f"{'a ' if inside else 'the '}{what} is within noise of the best run (n = {best}), but so are n "
               f"outside the prediction: tied n in {tied}")
    return Verdict(agreement=agreement, saturation=saturation, testable=learned, best_n=best, tied=tied,
                   predicted_set=pset, nearest_n=nearest, reason=why, saturation_detail=sat_txt,
                   tolerance={f"{best}-{n}": tol(best, n) for n in ns if n != best})
