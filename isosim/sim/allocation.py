"""Per-problem rollout allocation: the pass-rate estimator and the rules, defined once for the
simulator and for real runs (pure numpy; the trainer reaches it through isosim's public API).

A rule turns a batch's *estimated* pass rates into rollouts per problem at the compute of a
uniform step (``b_p * n`` rollouts). The estimates come from each problem's own sampled history
(:class:`PassRateEstimator`), never from a simulator's truth.

Rules (:data:`RULES`):

* ``uniform``: every problem of the batch gets ``n`` (today's GRPO).
* ``filter``: a pre-rollout filter in the spirit of DAPO's dynamic sampling and GRESO: from the
  step's candidates (``CANDIDATES x b_p`` problems in epoch order) the batch keeps, in order, those
  whose predicted chance of a mixed group ``1 - p^n - (1 - p)^n`` is at least ``signal_min``; a
  shortfall is filled with the remaining candidates most likely to give a mixed group. Each kept
  problem gets ``n``: the same rollouts per step, spent on groups predicted to carry signal.
* ``variance``: ``n_i`` proportional to ``sqrt(p_i (1 - p_i))`` (VIP's objective), within
  ``[n_min, n_max]``.
* ``knapsack``: maximise the expected number of problems with signal,
  ``sum_i 1 - p_i^{n_i} - (1 - p_i)^{n_i}``, at the step's rollouts. For ``n_i >= 1`` each
  problem's marginal gain ``p (1 - p)^n + (1 - p) p^n`` falls with ``n``, so taking the largest
  marginal gains (greedy) is exact.
* ``band``: a pass-rate band curriculum: the batch keeps, in order, the candidates whose estimated
  pass rate lies in ``[band_lo, band_hi]``, filling a shortfall with those nearest the band; each
  gets ``n``.

:func:`plan_batch` picks a step's problems from its candidates and their counts;
:func:`allocate` only the counts of a given batch. Both are deterministic given ``rng`` (ties are
broken by a random order drawn from it, or by position when it is None).
"""

from __future__ import annotations


import numpy as np

from isosim.errors import IsosimError

RULES = ("uniform", "filter", "variance", "knapsack", "band")
SELECTING = ("filter", "band")
"""rules that choose the batch's problems among more candidates than ``b_p``"""
CANDIDATES = 2
"""candidates per batch slot that a selecting rule chooses from (the others take ``b_p``)"""
SIGNAL_MIN = 0.1
"""``filter``: least predicted chance of a mixed group for a candidate to be kept"""
BAND = (0.1, 0.9)
"""``band``: estimated pass rates kept by the curriculum"""
N_MAX_FACTOR = 4
"""most rollouts of one problem, in multiples of the uniform ``n`` (:func:`bounds`)"""
DECAY = 0.5
"""default discount of a problem's earlier evidence each time it is sampled again"""


def check_rule(name: str) -> str:
    """``name`` if it is a rule, else an :class:`IsosimError` naming the valid ones."""
    if name not in RULES:
        raise IsosimError(f"unknown allocation rule {name!r} (use {', '.join(RULES)})")
    return name


def bounds(n: int) -> tuple[int, int]:
    """The fewest and most rollouts a problem gets from a rule at uniform group size ``n``:
    ``min(2, n)`` (a group of one carries no signal) and ``N_MAX_FACTOR * n``."""
    return min(2, n), N_MAX_FACTOR * n


def candidates_per_step(rule: str, b_p: int) -> int:
    """How many candidate problems a step of ``rule`` draws (in epoch order) for ``b_p`` slots."""
    return CANDIDATES * b_p if check_rule(rule) in SELECTING else b_p


# ----------------------------------------------------------------------------------------
# The estimator
# ----------------------------------------------------------------------------------------
class PassRateEstimator:
    """Per-problem pass rates from each problem's own sampled history, with a pooled prior.

    Problem ``i`` holds discounted counts ``s_i`` (correct) and ``t_i`` (rollouts): each time it
    is sampled again its earlier counts are multiplied by ``decay`` (1: keep everything; smaller:
    track an improving policy) before the new ones are added. Its estimate is the posterior mean
    of a Beta prior of mean ``m0`` and strength ``prior_strength``::

        p_i = (s_i + prior_strength * m0) / (t_i + prior_strength)

    With ``pooled=True`` (default) ``m0`` is itself estimated from the history of every seen
    problem, ``(S + prior_strength * prior_mean) / (T + prior_strength)`` with ``S, T`` the sums
    of the ``s_i, t_i``: an unseen problem starts at the set's current pass rate, which is
    ``prior_mean`` before any evidence. With ``pooled=False`` ``m0 = prior_mean`` throughout.
    """

    def __init__(self, num_problems: int, prior_mean: float = 0.5, prior_strength: float = 2.0,
                 decay: float = DECAY, pooled: bool = True):
        if not (isinstance(num_problems, (int, np.integer)) and num_problems >= 1):
            raise IsosimError(f"the estimator needs num_problems >= 1 (got {num_problems!r})")
        if not 0.0 < prior_mean < 1.0:
            raise IsosimError(f"prior_mean must lie in (0, 1) (got {prior_mean})")
        if not prior_strength > 0:
            raise IsosimError(f"prior_strength must be positive (got {prior_strength})")
        if not 0.0 < decay <= 1.0:
            raise IsosimError(f"decay must lie in (0, 1] (got {decay})")
        self.num_problems = int(num_problems)
        self.prior_mean, self.prior_strength = float(prior_mean), float(prior_strength)
        self.decay, self.pooled = float(decay), bool(pooled)
        self.successes = np.zeros(self.num_problems)
        self.trials = np.zeros(self.num_problems)
        self.seen = np.zeros(self.num_problems, dtype=bool)

    def _ids(self, ids) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_problems):
            raise IsosimError(f"problem ids must lie in [0, {self.num_problems}) (got {ids.min()}..{ids.max()})")
        return ids

    def update(self, ids, successes, trials) -> None:
        """Add ``successes`` of ``trials`` rollouts of problems ``ids`` (one entry per problem;
        a repeated id is added in order, each time discounting what came before)."""
        ids = self._ids(ids)
        s = np.asarray(successes, dtype=np.float64).reshape(-1)
        t = np.asarray(trials, dtype=np.float64).reshape(-1)
        if not (s.shape == t.shape == ids.shape):
            raise IsosimError("update: ids, successes and trials must have the same length")
        if np.any(t < 0) or np.any(s < 0) or np.any(s > t):
            raise IsosimError("update: need 0 <= successes <= trials")
        if np.unique(ids).size == ids.size:  # the common case, vectorised
            self.successes[ids] = self.successes[ids] * self.decay + s
            self.trials[ids] = self.trials[ids] * self.decay + t
            self.seen[ids] |= t > 0
            return
        for i, si, ti in zip(ids, s, t):
            self.successes[i] = self.successes[i] * self.decay + si
            self.trials[i] = self.trials[i] * self.decay + ti
            self.seen[i] |= ti > 0

    def prior(self) -> float:
        """The prior mean ``m0`` an unseen problem starts from."""
        if not self.pooled:
            return self.prior_mean
        k = self.prior_strength
        return float((self.successes.sum() + k * self.prior_mean) / (self.trials.sum() + k))

    def mean(self, ids=None) -> np.ndarray:
        """Estimated pass rates of problems ``ids`` (every problem when None)."""
        ids = np.arange(self.num_problems) if ids is None else self._ids(ids)
        k = self.prior_strength
        return (self.successes[ids] + k * self.prior()) / (self.trials[ids] + k)

    def state_dict(self) -> dict:
        """Everything needed to resume exactly (JSON-serialisable; floats round-trip)."""
        return {"num_problems": self.num_problems, "prior_mean": self.prior_mean,
                "prior_strength": self.prior_strength, "decay": self.decay, "pooled": self.pooled,
                "successes": self.successes.tolist(), "trials": self.trials.tolist(),
                "seen": self.seen.tolist()}

    @classmethod
    def from_state_dict(cls, d: dict) -> "PassRateEstimator":
        """The estimator :meth:`state_dict` described."""
        try:
            est = cls(int(d["num_problems"]), d["prior_mean"], d["prior_strength"], d["decay"], d["pooled"])
            for name in ("successes", "trials"):
                arr = np.asarray(d[name], dtype=np.float64)
                if arr.shape != (est.num_problems,):
                    raise IsosimError(f"estimator state: {name} has {arr.size} entries, not {est.num_problems}")
                setattr(est, name, arr)
            est.seen = np.asarray(d["seen"], dtype=bool).reshape(est.num_problems)
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, IsosimError):
                raise
            raise IsosimError(f"estimator state is malformed: {e}") from None
        return est


# ----------------------------------------------------------------------------------------
# The rules
# ----------------------------------------------------------------------------------------
def signal_probability(p, n):
    """Chance that a group of ``n`` rollouts at pass rate ``p`` is mixed (has a non-zero
    advantage): ``1 - p^n - (1 - p)^n`` (0 for ``n <= 1``)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    n = np.asarray(n, dtype=np.float64)
    return np.where(n >= 2, 1.0 - p ** n - (1.0 - p) ** n, 0.0)


def _order(size: int, rng) -> np.ndarray:
    """Tie-break rank of each position: a random permutation from ``rng``, or the positions."""
    return rng.permutation(size) if rng is not None else np.arange(size)


def _bounds(total: int, size: int, n_min: int, n_max: int | None) -> tuple[int, int]:
    if size < 1:
        raise IsosimError("allocate: the batch holds no problems")
    if not (isinstance(total, (int, np.integer)) and total >= 0):
        raise IsosimError(f"allocate: total must be an integer >= 0 (got {total!r})")
    n_max = int(total) if n_max is None else int(n_max)
    if not 0 <= n_min <= n_max:
        raise IsosimError(f"allocate: need 0 <= n_min <= n_max (got {n_min}, {n_max})")
    if not size * n_min <= total <= size * n_max:
        raise IsosimError(f"allocate: {total} rollouts cannot go to {size} problems with "
                          f"{n_min} <= n_i <= {n_max}")
    return int(n_min), n_max


def _top_units(gain: np.ndarray, units: int, rng) -> np.ndarray:
    """Per row of ``gain`` [B, C] (each row non-increasing), how many of the ``units`` largest
    entries overall fall in it; equal gains go to the row with fewer units first, then by tie rank.
    (Every entry above the ``units``-th largest value is taken; the ties at that value in that
    order.)"""
    B, C = gain.shape
    if units <= 0:
        return np.zeros(B, dtype=np.int64)
    rank = _order(B, rng)
    thr = np.partition(gain.reshape(-1), gain.size - units)[gain.size - units]  # the units-th largest
    counts = (gain > thr).sum(1).astype(np.int64)
    rest = units - int(counts.sum())
    if rest > 0:
        rows, cols = np.nonzero(gain == thr)
        take = np.lexsort((rank[rows], cols))[:rest]
        counts += np.bincount(rows[take], minlength=B)
    return counts


def _knapsack_gain(p: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """The signal one more rollout adds to a problem of pass rate ``p`` whose group already has
    ``extra`` (broadcast together): ``p (1 - p)^k + (1 - p) p^k``, the chance that a group of ``k + 1``
    is not all alike less that of ``k``; it falls as ``k`` grows."""
    return p * (1.0 - p) ** extra + (1.0 - p) * p ** extra


KNAPSACK_MARGIN = 1e-9
"""how far (relative) :func:`_knapsack_units` looks either side of the cut its estimate of the gains puts:
far beyond that estimate's error (about 1e-12: ``exp`` of ``k log(1 - p)`` for ``k`` <= 1e4)"""


def _knapsack_units(p: np.ndarray, n_min: int, width: int, units: int, rng) -> np.ndarray:
    """:func:`_top_units` of the knapsack's gains [B, width] (group sizes ``n_min`` onward) for
    ``units``, the same counts and the same draw from ``rng``, without every power: the gains are
    estimated by ``exp`` (a fraction of the cost of a power), the ``units``-th largest estimate is the
    cut, and only the gains within :data:`KNAPSACK_MARGIN` of it are computed exactly (by the same
    powers as the whole table); the estimates on either side are ordered right whatever their error.
    Where the cut is near underflow, or too many gains lie near it, the whole table is computed."""
    B = p.size
    extra = np.arange(width) + n_min  # the n a further rollout is added to

    def whole() -> np.ndarray:
        return _top_units(_knapsack_gain(p[:, None], extra[None, :]), units, rng)

    if units <= 0 or units > B * width:  # (what _top_units does with them, on the whole table)
        return whole()
    q = 1.0 - p
    with np.errstate(divide="ignore", under="ignore"):
        est = p[:, None] * np.exp(extra * np.log(q)[:, None]) + q[:, None] * np.exp(extra * np.log(p)[:, None])
    flat = est.reshape(-1)
    cut = np.partition(flat, flat.size - units)[flat.size - units]
    above = est > cut * (1.0 + KNAPSACK_MARGIN)
    near = ~above & (est >= cut * (1.0 - KNAPSACK_MARGIN))
    n_near = int(near.sum())
    if not cut > 1e-280 or n_near > 4 * B + 64:  # subnormal territory, or long runs of ties: every power
        return whole()
    rank = _order(B, rng)  # (drawn where _top_units draws it: only for units > 0)
    rows, cols = np.nonzero(near)
    exact = _knapsack_gain(p[rows], extra[cols])
    counts = above.sum(1).astype(np.int64)
    left = units - int(counts.sum())  # taken among the near ones, largest first, as _top_units takes them
    thr = np.partition(exact, exact.size - left)[exact.size - left]
    over = exact > thr
    counts += np.bincount(rows[over], minlength=B)
    rest = left - int(over.sum())
    if rest > 0:
        tie = np.nonzero(exact == thr)[0]
        take = tie[np.lexsort((rank[rows[tie]], cols[tie]))[:rest]]
        counts += np.bincount(rows[take], minlength=B)
    return counts


def _proportional(weights: np.ndarray, total: int, n_min: int, n_max: int, rng) -> np.ndarray:
    """Integer counts in ``[n_min, n_max]`` summing to ``total``, proportional to ``weights``
    above the floor (water-filling at the cap, largest remainders for the rounding)."""
    B = weights.size
    w = np.maximum(weights, 0.0)
    if not w.sum() > 0:
        w = np.ones(B)
    counts = np.full(B, n_min, dtype=np.int64)
    free = np.ones(B, dtype=bool)
    left = total - n_min * B
    share = np.zeros(B)
    while left > 0 and free.any():  # cap the over-full and share the rest again
        ws = np.where(free, w, 0.0)
        if not ws.sum() > 0:
            ws = free.astype(np.float64)
        share = np.where(free, left * ws / ws.sum(), 0.0)
        over = free & (counts + share > n_max)
        if not over.any():
            break
        left -= int((n_max - counts[over]).sum())
        counts[over] = n_max
        free &= ~over
        share = np.zeros(B)
    whole = np.floor(share).astype(np.int64)
    counts += whole
    rest = total - int(counts.sum())
    if rest > 0:  # largest remainders among the problems below the cap
        frac = np.where(counts < n_max, share - whole, -1.0)
        rank = _order(B, rng)
        counts[np.lexsort((rank, -frac))[:rest]] += 1
    return counts


def allocate(rule: str, p_hat, total: int, *, n_min: int = 1, n_max: int | None = None,
             signal_n: int | None = None, band: tuple[float, float] = BAND,
             signal_min: float = SIGNAL_MIN, rng: np.random.Generator | None = None) -> np.ndarray:
    """Rollouts per problem (int64) of one batch with estimated pass rates ``p_hat``, summing
    exactly to ``total``, each within ``[n_min, n_max]`` (``n_max`` None: no cap).

    ``uniform`` splits ``total`` evenly (the remainder, if any, one each to problems chosen by
    tie rank); ``variance`` and ``knapsack`` as in the module docstring. ``filter`` and ``band``
    given a batch (no candidates to choose from) give its rollouts evenly to the problems they
    would keep (the others get ``n_min``), all of them when none is kept; ``signal_n`` is the
    group size their signal is predicted at (default ``total // len(p_hat)``).
    """
    check_rule(rule)
    p = np.clip(np.asarray(p_hat, dtype=np.float64).reshape(-1), 0.0, 1.0)
    B = p.size
    n_min, n_max = _bounds(total, B, n_min, n_max)
    if rule == "variance":
        return _proportional(np.sqrt(p * (1.0 - p)), total, n_min, n_max, rng)
    if rule == "knapsack":
        if n_min < 1:
            raise IsosimError("allocate: knapsack needs n_min >= 1 (its gain is concave from one rollout on)")
        return n_min + _knapsack_units(p, n_min, n_max - n_min, total - n_min * B, rng)
    keep = np.ones(B, dtype=bool)
    if rule == "filter":
        keep = signal_probability(p, signal_n or max(total // B, 1)) >= signal_min
    elif rule == "band":
        keep = (p >= band[0]) & (p <= band[1])
    if not keep.any():
        keep[:] = True
    weights = keep.astype(np.float64)
    return _proportional(weights, total, n_min, n_max, rng)


def plan_batch(rule: str, estimator: PassRateEstimator, candidate_ids, b_p: int, n: int,
               rng: np.random.Generator | None = None, *, n_min: int | None = None, n_max: int | None = None,
               band: tuple[float, float] = BAND, signal_min: float = SIGNAL_MIN) -> tuple[np.ndarray, np.ndarray]:
    """A step's problems and their rollouts: ``(ids [b_p], counts [b_p])`` with
    ``counts.sum() == b_p * n``.

    ``candidate_ids`` are the step's candidates in epoch order: ``b_p`` of them for ``uniform``,
    ``variance`` and ``knapsack`` (the batch is the candidates; the rule sets the counts), at
    least ``b_p`` for ``filter`` and ``band`` (:func:`candidates_per_step`), which keep ``b_p``
    of them as the module docstring says and give each ``n``. The pass rates are the
    ``estimator``'s; ``n_min`` and ``n_max`` default to :func:`bounds`.
    """
    check_rule(rule)
    lo, hi = bounds(n)
    n_min = lo if n_min is None else n_min
    n_max = hi if n_max is None else n_max
    cand = np.asarray(candidate_ids, dtype=np.int64).reshape(-1)
    if cand.size < b_p:
        raise IsosimError(f"plan_batch: {cand.size} candidates for {b_p} problems")
    if rule not in SELECTING:
        ids = cand[:b_p]
        counts = allocate(rule, estimator.mean(ids), b_p * n, n_min=n_min, n_max=n_max, rng=rng)
        return ids, counts
    p = estimator.mean(cand)
    if rule == "filter":
        score = signal_probability(p, n)  # higher is better
        ok = score >= signal_min
    else:
        score = -np.maximum(band[0] - p, p - band[1]).clip(min=0.0)  # 0 inside, minus the distance outside
        ok = (p >= band[0]) & (p <= band[1])
    pos = np.arange(cand.size)
    rank = _order(cand.size, rng)
    # kept candidates first in epoch order, then the rest by score (ties by tie rank)
    order = np.lexsort((rank, np.where(ok, pos, 0), np.where(ok, 0.0, -score), ~ok))
    pick = np.sort(order[:b_p])  # the batch in epoch order
    return cand[pick], np.full(b_p, n, dtype=np.int64)


__all__ = [
    "BAND", "CANDIDATES", "DECAY", "N_MAX_FACTOR", "RULES", "SELECTING", "SIGNAL_MIN", "PassRateEstimator", "allocate", "bounds",
    "candidates_per_step", "check_rule", "plan_batch", "signal_probability",
]
