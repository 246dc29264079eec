"""Adaptive choice of ``n`` for one budget: run a few ``n``, stop the dominated ones, extend the
winner to the budget. Pure decision logic, fed by evaluation records as they arrive; the same
code drives live runs (``isosim validate --adaptive``) and the replay over committed records.

The rules (chosen from the shape of isocompute curves, not fitted to any sweep; the second
round's changes, 2026-12-04, are marked *new* and were scored on all committed sweeps at once,
studies/LOG.md):

* **Rungs.** Decisions are taken when every active run has reached a rung: ``C / 32``, ``C / 16``,
  ``C / 8``, ``C / 4``, ``C / 2`` rollouts (``first_rung`` and ``eta``; *new*: the first rung was
  ``C / 16``; a rung costs a stopped run half as much as the next, and most stops happen at the
  first). A run "reaches" a rung at its last evaluation at or below it (see :func:`reveal`), so
  a run is always paused on an evaluation (no extra evaluations, and the paused run continues
  exactly: the lr schedule is constant after warm-up and the evaluation steps are placed over
  the full budget ``C`` from the start).
* **Start.** The ``start`` list (the prediction's ``n`` and its neighbours two octaves away, or
  a spread over the grid when there is no prediction).
* **Level and slope.** Each run's curve is read locally: a least-squares line in ``ln rollouts``
  through its evaluations within one octave below its last one (at least two points; *new*:
  was two octaves, which carries a run's rise into its level past a peak), giving the level at
  the rung and the slope per unit of ``ln rollouts``.
* **Noise.** One seed per ``n``, so seed noise is not measured directly. ``sigma`` is the larger
  of (a) the evaluation's sampling error ``sqrt(v (1 - v) / (V N))`` (V validation problems, N
  samples each; an upper bound for a mean of per-problem rates) and (b) the curves' roughness:
  the robust spread of each evaluation around the straight line through its two neighbours
  (last four evaluations of every run, scaled for the interpolation weights). Both are logged.
* **Peak** (*new*). A run whose level has fallen below its own best evaluation by more than
  ``z`` standard deviations of that difference, with a negative slope, has peaked (with few
  training problems a run overfits, and a smaller ``n``, taking more steps for the same
  rollouts, peaks earlier). Its value at ``C`` is below its level now, so it is carried down its
  falling line to ``C`` (its "base"); any other run's base is its level. A peaked run that does
  not lead stops; once a run has peaked, the next larger untried ``n`` starts (when the largest
  ``n`` running has not peaked) and no smaller one is started.
* **Stop.** The leader is the run with the best base. A run stops when even its optimistic
  projection to ``C`` -- its base plus the excess of its slope over the leader's (if any, and
  not for a peaked run) times the ``ln`` rollouts left -- is below the leader's base minus
  ``z * sigma * sqrt(2)``
  (``z = 2``). Curves are concave in ``ln rollouts`` past their take-off, so the straight-line
  projection overstates what a rising run can still gain, and the leader's own future gain is
  ignored: both err towards keeping a run.
* **New n.** When the leader is the smallest ``n`` running and no smaller grid ``n`` was tried,
  the next smaller grid ``n`` starts; when the largest ``n`` running leads, or its projection
  overtakes the leader's, the next larger one starts. A new run first catches up to the current
  rung, then the rung is decided again. *New*: at most one new ``n`` starts per rung
  (``spawns_per_rung``); before, one noisy rung could start every larger ``n`` in turn.
* **Choice and extension.** When one run is left it is extended to ``C``. At the last rung
  (``C / 2``) the run with the best base is chosen, unless another's projection to ``C`` beats
  the leader's by more than ``z`` times its sd. The chosen run continues to ``C``.
* **Log.** Every decision is a JSON-ready dict (``event``: start, rung, stop, spawn, advance,
  choose, done); :class:`Adaptive` rebuilt from the list continues where it stopped.

Known weakness (tests mark it): the ``C / 32`` rung decides before a larger ``n`` has taken off,
so a late riser that trails there by more than the noise (fewer steps at the same rollouts) is
stopped, and a start below the answer may never go up. On the committed sweeps the cheaper rung
cost no regret and halved the overhead; on a sweep like organism_f8/hard-128 nothing tried here
finds the late riser (studies/LOG.md, 2026-12-04).

The other rule, ``policy="lines"`` (:func:`lines_settings`, ``--search lines``): every grid ``n``
runs to ``C / 4``; the two whose local lines carried to ``C`` are best continue to ``C / 2``; the
better evaluation there is chosen. It equals the reference reader of that name (:data:`REFERENCES`)
and costs about 1.2 runs; of the rules tried it is the only one whose mean regret stays under
twice the mean seed noise on every committed sweep, organism_f8/hard-128 (runs peak early, larger
n later) included.

Overhead is the rollouts spent on runs that were not chosen, divided by ``C`` (the chosen run is
the user's training run). :func:`successive_halving` is the blind baseline; the replay runs it on
its first-round rungs (``C / 16`` up, :data:`SH_FIRST_RUNG`) and, as an extra column, on the
adaptive policy's (:data:`SH_CHEAP`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError

Curve = Sequence[tuple[float, float]]
"""(rollouts, value) pairs of one run, in order of rollouts."""

REACH_RTOL = 1e-9
BOUNDARY = ("start", "spawn", "advance", "choose", "done")
"""decision events that end an update (the state between two updates is fully described)"""


FIRST_ROUND_RULES = {"trend": "optimistic", "peak_stop": False, "spawns_per_rung": 0, "noise_past_takeoff": False,
                     "matched_steps": False}
"""the second round's settings as the first round behaved (for decision logs written before them)"""


@dataclass(frozen=True)
class Settings:
    budget: float
    grid: tuple[int, ...]
    start: tuple[int, ...]
    first_rung: float = 1 / 32
    eta: float = 2.0
    z: float = 2.0
    eval_samples: int | None = None
    """V * N of the validation (problems x samples each), for the sampling error; None: unknown"""
    window_octaves: float = 1.0
    guard_takeoff: bool = True
    """never stop a run whose last evaluations curve upwards in ln rollouts beyond noise (still
    taking off: its slope understates what it will gain)"""
    refine: bool = True
    """start the untried grid n between the leader and its better tried neighbour"""
    tie_stop: bool = True
    """also stop a run that cannot beat the leader at C by more than one evaluation's noise
    (sigma * sqrt 2): choosing either of two such runs costs less than the noise can show"""
    trend: str = "peak"
    """how a run is carried to C: "peak" (a peaked run down its falling line, any other at its
    level, plus the slope where it favours the trailing run), "optimistic" (the first round's
    rule: level, plus the favourable slope), "signed" (every run down or up its line, leader by
    projection) or "half" (half a rising run's straight-line gain, a falling run down its line);
    the last two were tried and lost (studies/LOG.md, 2026-12-04)"""
    peak_stop: bool = True
    """a run whose level has fallen below its own best evaluation beyond noise has peaked: it
    stops (unless it leads) and the next larger untried n starts"""
    spawns_per_rung: int = 1
    """at most this many new n start at one rung (0: no limit)"""
    noise_past_takeoff: bool = False
    """read the roughness only from evaluations past the take-off (:func:`past_takeoff`); tried,
    off: it lowered sigma, which started more runs"""
    matched_steps: bool = False
    """never stop a run of larger n than the leader that is at least as good as the leader was
    after the same number of steps; tried, off: it kept runs of larger n to late rungs"""
    policy: str = "adaptive"
    """"adaptive" (the rules above) or "lines": every grid n to C / 4, the two whose local lines
    carried to C are best continue to C / 2, the better evaluation there wins (:func:`lines_settings`;
    about 1.2 runs of overhead, for training sets small enough that runs peak; studies/LOG.md)"""

    def __post_init__(self) -> None:
        if not (self.budget > 0 and math.isfinite(self.budget)):
            raise IsosimError(f"budget must be a positive number of rollouts, got {self.budget}")
        if not self.grid:
            raise IsosimError("the grid of n is empty")
        if any(int(n) < 1 for n in self.grid):
            raise IsosimError(f"grid n must be >= 1, got {list(self.grid)}")
        bad = sorted(set(self.start) - set(self.grid))
        if bad:
            raise IsosimError(f"start n {bad} not in the grid {sorted(self.grid)}")
        if not self.start:
            raise IsosimError("no n to start with")
        if not 0 < self.first_rung < 1:
            raise IsosimError(f"first_rung must be a fraction of the budget in (0, 1), got {self.first_rung}")
        if self.eta <= 1:
            raise IsosimError(f"eta must be > 1, got {self.eta}")
        if self.trend not in ("signed", "optimistic", "peak", "half"):
            raise IsosimError(f"trend must be 'peak', 'optimistic', 'signed' or 'half', got {self.trend!r}")
        if self.policy not in ("adaptive", "lines"):
            raise IsosimError(f"policy must be 'adaptive' or 'lines', got {self.policy!r}")
        if self.policy == "lines" and sorted(self.start) != sorted(set(self.grid)):
            raise IsosimError("the 'lines' policy starts every grid n (see lines_settings)")

    def rungs(self) -> list[float]:
        """Decision points in rollouts, below the budget: C * first_rung * eta^k < C ("lines":
        C / 4 and C / 2)."""
        if self.policy == "lines":
            return [self.budget / 4, self.budget / 2]
        out, r = [], self.budget * self.first_rung
        while r < self.budget * (1 - 1e-9):
            out.append(r)
            r *= self.eta
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["grid"], d["start"] = list(self.grid), list(self.start)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Settings:
        """Settings from a decision log; a log written before the second round's rules existed
        gets the first round's (no peak rule, no cap on new n), so it continues as it began."""
        d = {**FIRST_ROUND_RULES, **d}
        d["grid"], d["start"] = tuple(int(n) for n in d["grid"]), tuple(int(n) for n in d["start"])
        return cls(**d)


def spread_start(grid: Sequence[int], predicted: int | None = None) -> list[int]:
    """The starting n: the predicted n and the grid n two octaves either side (clipped to the
    grid); without a prediction, the smallest, middle and largest grid n."""
    g = sorted(set(int(n) for n in grid))
    if predicted is None:
        return sorted({g[0], g[len(g) // 2], g[-1]})
    near = min(g, key=lambda n: (abs(math.log2(n) - math.log2(predicted)), n))
    i = g.index(near)
    return sorted({g[max(0, i - 2)], near, g[min(len(g) - 1, i + 2)]})


def lines_settings(budget: float, grid: Sequence[int], eval_samples: int | None = None) -> Settings:
    """Settings of the "lines" policy: every grid n starts; decisions at C / 4 and C / 2."""
    g = tuple(sorted(set(int(n) for n in grid)))
    return Settings(budget=budget, grid=g, start=g, eval_samples=eval_samples, policy="lines")


# --------------------------------------------------------------------------------------------
# reading curves
# --------------------------------------------------------------------------------------------
def local_fit(curve: Curve, at: float, window_octaves: float = 2.0) -> tuple[float, float, float, float]:
    """(level at ``at``, slope per unit ln rollouts, and their variances per unit evaluation
    variance) of a least-squares line in ln rollouts through the run's evaluations within
    ``window_octaves`` below its last one (at least the last two). A single evaluation gives
    slope 0 with an unbounded variance (nothing can be concluded about its trend)."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]
    if not pts:
        vals = [float(v) for _, v in curve if math.isfinite(v)]
        return (vals[-1] if vals else float("nan")), 0.0, 1.0, math.inf
    last = pts[-1][0]
    win = [p for p in pts if p[0] >= last / 2 ** window_octaves]
    if len(win) < 2:
        win = pts[-2:]
    if len(win) < 2:
        return win[-1][1], 0.0, 1.0, math.inf
    x = np.log([p[0] for p in win])
    y = np.array([p[1] for p in win])
    slope, icpt = np.polyfit(x, y, 1)
    sxx = float(((x - x.mean()) ** 2).sum())
    xa = math.log(at)
    return (float(icpt + slope * xa), float(slope), 1 / len(x) + (xa - x.mean()) ** 2 / sxx, 1 / sxx)


def accelerating(curve: Curve, sigma: float, z: float = 2.0, last: int = 5) -> bool:
    """Whether the run's last ``last`` evaluations curve upwards in ln rollouts beyond noise (a
    quadratic's x^2 coefficient above ``z`` of its standard error at evaluation noise ``sigma``):
    the run is still taking off, so its slope understates what it will gain."""
    pts = [(math.log(r), v) for r, v in curve if r > 0 and math.isfinite(v)][-last:]
    if len(pts) < 4:
        return False
    x = np.array([p[0] for p in pts])
    x = x - x.mean()
    X = np.stack([x ** 2, x, np.ones_like(x)], axis=1)
    xtx = X.T @ X
    if abs(np.linalg.det(xtx)) < 1e-12:
        return False
    coef = np.linalg.solve(xtx, X.T @ np.array([p[1] for p in pts]))
    se = sigma * math.sqrt(float(np.linalg.inv(xtx)[0, 0]))
    return bool(coef[0] > z * se)


def past_takeoff(curve: Curve, frac: float = 0.75) -> list[tuple[float, float]]:
    """The evaluations of a run from the first one at ``frac`` of its rise (first evaluation to its
    best) on: the part read as a slowly bending line, where the take-off's curvature is over."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]
    if len(pts) < 2:
        return pts
    lo, hi = pts[0][1], max(v for _, v in pts)
    i = next(i for i, (_, v) in enumerate(pts) if v >= lo + frac * (hi - lo))
    return pts[i:]


def roughness(curves: Sequence[Curve], last: int = 4, takeoff: bool = False) -> tuple[float, int]:
    """Robust spread of single evaluations around their neighbours' line (ln rollouts), from the
    last ``last`` evaluations of every curve (with ``takeoff``, only those past the take-off, see
    :func:`past_takeoff`): (sigma, number of triples used)."""
    devs = []
    for c in curves:
        c = past_takeoff(c) if takeoff else c
        pts = [(math.log(r), v) for r, v in c if r > 0 and math.isfinite(v)][-last:]
        for (x0, y0), (x1, y1), (x2, y2) in zip(pts, pts[1:], pts[2:]):
            if x2 <= x0:
                continue
            w = (x2 - x1) / (x2 - x0)  # weight of the left neighbour in the interpolation at x1
            devs.append(abs(y1 - (w * y0 + (1 - w) * y2)) / math.sqrt(1 + w * w + (1 - w) ** 2))
    if not devs:
        return 0.0, 0
    return float(1.4826 * np.median(devs)), len(devs)


def noise(curves: Sequence[Curve], levels: Sequence[float], eval_samples: int | None,
          takeoff: bool = False) -> dict[str, Any]:
    """sigma of one evaluation of one run: max(sampling error, roughness), with both."""
    rough, k = roughness(curves, takeoff=takeoff)
    samp = 0.0
    if eval_samples:
        v = min((x for x in levels if math.isfinite(x)), key=lambda x: abs(x - 0.5), default=0.5)
        v = min(max(v, 0.0), 1.0)
        samp = math.sqrt(max(v * (1 - v), 1e-12) / eval_samples)
    return {"sigma": max(samp, rough), "sampling": samp, "roughness": rough, "roughness_triples": k,
            "source": "sampling" if samp >= rough else "roughness"}


# --------------------------------------------------------------------------------------------
# the policy
# --------------------------------------------------------------------------------------------
@dataclass
class Adaptive:
    """The adaptive search's state, rebuilt from its decisions; :meth:`requests` says which run
    must reach how many rollouts, :meth:`update` decides once they have."""

    settings: Settings
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        s = self.settings
        self.rungs = s.rungs()
        if not self.rungs:
            raise IsosimError("no decision rung below the budget")
        self.active: list[int] = []
        self.tried: set[int] = set()
        self.stopped: dict[int, float] = {}
        self.rung_i = 0
        self.chosen: int | None = None
        self.done = False
        self.dominated: set[int] = set()  # stopped beyond noise (not merely tied)
        self.levels: dict[int, float] = {}  # each run's level at the last rung it was read
        self.peaked: set[int] = set()  # runs read as peaked (falling beyond noise) at some rung
        past, self.decisions = list(self.decisions), []
        # one update's decisions are a unit: a log cut inside one (a kill while writing) is
        # trimmed back to the last complete update, which is then decided again
        ends = [i for i, d in enumerate(past) if d.get("event") in BOUNDARY]
        past = past[: ends[-1] + 1] if ends else []
        if not past:
            self._log({"event": "start", "n": sorted(s.start), "rung": self.rungs[0], "settings": s.to_json(),
                       "why": "the starting spread"})
        for d in past:
            self._log(d)

    # -- state from decisions ---------------------------------------------------------------
    def _log(self, d: dict[str, Any]) -> dict[str, Any]:
        ev = d["event"]
        if ev == "start":
            self.active = sorted(int(n) for n in d["n"])
            self.tried |= set(self.active)
        elif ev == "spawn":
            self.active = sorted(set(self.active) | {int(d["n"])})
            self.tried.add(int(d["n"]))
        elif ev == "stop":
            self.active.remove(int(d["n"]))
            self.stopped[int(d["n"])] = float(d["spent"])
            if d.get("kind", "dominated") == "dominated":
                self.dominated.add(int(d["n"]))
        elif ev == "rung":
            self.levels.update({int(k): float(v) for k, v in d["level"].items()})
            self.peaked |= {int(n) for n in d.get("peaked", ())}
        elif ev == "advance":
            self.rung_i = int(d["rung_index"])
        elif ev == "choose":
            self.chosen = int(d["n"])
            for n in list(self.active):
                if n != self.chosen:
                    self.active.remove(n)
                    self.stopped[n] = float(d["spent"][str(n)])
        elif ev == "done":
            self.done = True
        else:
            raise IsosimError(f"unknown decision event {ev!r}")
        self.decisions.append(d)
        return d

    @property
    def rung(self) -> float:
        return self.rungs[self.rung_i]

    def requests(self) -> dict[int, float]:
        """Run n -> rollouts it must reach before the next decision (empty when done)."""
        if self.done:
            return {}
        if self.chosen is not None:
            return {self.chosen: self.settings.budget}
        return {n: self.rung for n in self.active}

    # -- deciding ---------------------------------------------------------------------------
    def update(self, curves: Mapping[int, Curve]) -> list[dict]:
        """Decide on the curves observed so far: every requested run has run to its target (its
        last evaluation at or below it, see :func:`reveal`)."""
        start = len(self.decisions)
        for n in self.requests():
            if not curves.get(n):
                raise IsosimError(f"no records of run n={n}")
        if self.done:
            return []
        if self.chosen is not None:
            self._log({"event": "done", "n": self.chosen, "spent": spent(curves.get(self.chosen, ())),
                       "overhead": self.overhead(), "why": f"n={self.chosen} reached the budget"})
            return self.decisions[start:]
        if self.settings.policy == "lines":
            return self._update_lines(curves, start)
        s, r = self.settings, self.rung
        last = {n: max(spent(curves[n]), 1.0) for n in self.active}
        left_n = {n: max(math.log(s.budget / last[n]), 0.0) for n in self.active}
        fits = {n: local_fit(curves[n], last[n], s.window_octaves) for n in self.active}
        level = {n: fits[n][0] for n in self.active}
        slope = {n: fits[n][1] for n in self.active}
        proj = {n: level[n] + slope[n] * left_n[n] for n in self.active}
        nz = noise([curves[n] for n in sorted(self.tried) if n in curves], list(level.values()), s.eval_samples,
                   takeoff=s.noise_past_takeoff)
        # each run's own roughness where it is larger (a run can be noisier than the others)
        own = {n: max(nz["sigma"], roughness([curves[n]], last=6, takeoff=s.noise_past_takeoff)[0]) for n in self.active}
        margin = s.z * nz["sigma"] * math.sqrt(2)
        signed = s.trend == "signed"
        at_c = {n: local_fit(curves[n], s.budget, s.window_octaves) for n in self.active}
        if signed:
            proj = {n: at_c[n][0] for n in self.active}
        best_eval = {n: max((v for r, v in curves[n] if r > 0 and math.isfinite(v)), default=level[n])
                     for n in self.active}
        # peaked: the level now is below the run's own best evaluation by more than z x the sd of
        # their difference (one evaluation against the fitted level)
        peaked = {n: s.peak_stop and slope[n] < 0 and
                  best_eval[n] - level[n] > s.z * own[n] * math.sqrt(1 + fits[n][2]) for n in self.active}
        # a peaked run is carried down its falling line (its level at C is below its level now);
        # any other run is read at its level (plus the favourable slope in the gap below)
        base = {n: level[n] + (slope[n] * left_n[n] if peaked[n] and s.trend == "peak" else 0.0)
                for n in self.active}
        if s.trend == "half":
            # concave past take-off: a rising run's slope is taken to fall linearly to zero by C
            # (half its straight-line gain); a falling run is carried down its line
            k_sl = {n: (0.5 if slope[n] > 0 else 1.0) for n in self.active}
            base = {n: level[n] + k_sl[n] * slope[n] * left_n[n] for n in self.active}
        key = proj if signed else base
        leader = max(self.active, key=lambda n: (key[n], -n))

        def gap(n: int) -> tuple[float, float]:
            """n's projected gap to the leader at C and its standard deviation: signed, the gap of
            the two lines at C; optimistic, the gap now plus the slope difference, if in n's
            favour, carried over the ln rollouts left."""
            lft, a, b = left_n[n], own[n] ** 2, own[leader] ** 2
            if signed:
                return proj[n] - proj[leader], math.sqrt(a * at_c[n][2] + b * at_c[leader][2])
            g, var = base[n] - base[leader], a * fits[n][2] + b * fits[leader][2]
            if s.trend == "half":
                var += lft ** 2 * (a * k_sl[n] ** 2 * fits[n][3] + b * k_sl[leader] ** 2 * fits[leader][3])
                return g, math.sqrt(var)
            if slope[n] > slope[leader] and not peaked[n]:
                g += (slope[n] - slope[leader]) * lft
                var += lft ** 2 * (a * fits[n][3] + b * fits[leader][3])
            return g, math.sqrt(var)

        gaps = {n: gap(n) for n in self.active if n != leader}
        rising = {n: accelerating(curves[n], own[n], s.z) for n in self.active}
        self._log({"event": "rung", "rung": r, "rung_index": self.rung_i, "active": list(self.active),
                   "level": {str(n): level[n] for n in self.active}, "slope": {str(n): slope[n] for n in self.active},
                   "projection": {str(n): proj[n] for n in self.active},
                   "gap": {str(n): list(v) for n, v in gaps.items()},
                   "accelerating": [n for n in self.active if rising[n]],
                   "peaked": [n for n in self.active if peaked[n]],
                   "spent": {str(n): spent(curves[n]) for n in self.active},
                   "noise": nz, "margin": margin, "leader": leader})
        tol = nz["sigma"] * math.sqrt(2) if s.tie_stop else 0.0
        nz["own"] = {str(n): own[n] for n in self.active}
        # matched steps: a run of larger n that is ahead of the leader at the same number of steps
        # (steps = rollouts / (n B_p)) trails at matched rollouts only for having taken fewer steps
        ahead = {n: s.matched_steps and n > leader and
                 level[n] >= value_at_steps(curves[leader], last[n] * leader / n) for n in self.active}
        for n, (g, sd) in gaps.items():
            if g + s.z * sd < tol and not (s.guard_takeoff and rising[n]) and not ahead[n]:
                self._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]),
                           "kind": "dominated" if g + s.z * sd < 0 else "tied",
                           "why": f"projected gap to the leader n={leader} at C {g:.4f} + {s.z:g} x its sd {sd:.4f} "
                                  f"< {tol:.4f} "
                                  f"(level {level[n]:.4f} vs {level[leader]:.4f}, slope {slope[n]:.4f} vs "
                                  f"{slope[leader]:.4f} per ln rollouts, {left_n[n]:.2f} left)"})
            elif peaked[n] and not (s.guard_takeoff and rising[n]):
                self._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]), "kind": "peaked",
                           "why": f"peaked: level {level[n]:.4f} is {best_eval[n] - level[n]:.4f} below its best "
                                  f"evaluation {best_eval[n]:.4f}, beyond {s.z:g} x its sd, and n={leader} leads"})
        grid = sorted(s.grid)
        lo, hi = min(self.active), max(self.active)
        smaller = [g for g in grid if g < lo and g not in self.tried]
        larger = [g for g in grid if g > hi and g not in self.tried]
        edge_lo, edge_hi = lo == min(self.tried), hi == max(self.tried)
        closing = hi != leader and hi in gaps and gaps[hi][0] > 0
        spawn, why = None, ""
        peak = sorted(self.peaked)
        if leader == lo and edge_lo and smaller and self.dominated and not peak:
            spawn, why = max(smaller), f"the smallest n tried (n={lo}) leads and a larger n was dominated"
        elif edge_hi and larger and ((leader == hi and self.dominated) or closing or (peak and hi not in peak)):
            spawn = min(larger)
            why = f"the largest n tried (n={hi}) " + (
                "leads and a smaller n was dominated" if leader == hi and self.dominated else
                f"is closing on the leader beyond the margin (projection {proj[hi]:.4f})" if closing else
                f"has not peaked while n={peak} did (a larger n takes fewer steps for the same rollouts)")
        elif self.dominated and s.refine:
            spawn, why = self._refine(leader, grid)
        if spawn is not None and s.spawns_per_rung and sum(
                d["event"] == "spawn" and d["rung"] == r for d in self.decisions) >= s.spawns_per_rung:
            spawn = None
        if spawn is not None:
            self._log({"event": "spawn", "n": spawn, "rung": r, "why": why + f": n={spawn} starts, catching up to "
                                                                             f"{r:.0f} rollouts"})
            return self.decisions[start:]
        if len(self.active) == 1:
            self._choose(leader, curves, r, f"n={leader} is the only run left")
        elif self.rung_i == len(self.rungs) - 1:
            pick, why = leader, f"best level at the last rung ({level[leader]:.4f})"
            over = [n for n in self.active if n in gaps and gaps[n][0] > s.z * gaps[n][1]]
            if over:
                pick = max(over, key=lambda n: (gaps[n][0], -n))
                why = (f"its projected gap over the leader n={leader} at C ({gaps[pick][0]:.4f}) exceeds "
                       f"{s.z:g} x its sd ({gaps[pick][1]:.4f})")
            self._choose(pick, curves, r, why)
        else:
            self._log({"event": "advance", "rung_index": self.rung_i + 1, "rung": self.rungs[self.rung_i + 1],
                       "active": list(self.active)})
        return self.decisions[start:]

    def _update_lines(self, curves: Mapping[int, Curve], start: int) -> list[dict]:
        """The "lines" policy: at C / 4 every run's local line is carried to C and the two best
        continue; at C / 2 the better last evaluation is chosen (ties to the smaller n)."""
        s, r = self.settings, self.rung
        fits = {n: local_fit(curves[n], s.budget, s.window_octaves) for n in self.active}  # the lines at C
        level = {n: float(curves[n][-1][1]) for n in self.active}
        line = {n: fits[n][0] for n in self.active}
        key = line if self.rung_i == 0 else level
        ranked = sorted(self.active, key=lambda n: (-key[n], n))
        self._log({"event": "rung", "rung": r, "rung_index": self.rung_i, "active": list(self.active),
                   "level": {str(n): level[n] for n in self.active},
                   "slope": {str(n): fits[n][1] for n in self.active},
                   "projection": {str(n): line[n] for n in self.active}, "leader": ranked[0],
                   "spent": {str(n): spent(curves[n]) for n in self.active}})
        if self.rung_i == 0 and len(ranked) > 2:
            for n in ranked[2:]:
                self._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]), "kind": "dominated",
                           "why": f"its line carried to C ({line[n]:.4f}) is below the two best "
                                  f"(n={ranked[0]} {line[ranked[0]]:.4f}, n={ranked[1]} {line[ranked[1]]:.4f})"})
        if self.rung_i == 0 and len(ranked) > 1:
            self._log({"event": "advance", "rung_index": 1, "rung": self.rungs[1], "active": list(self.active)})
        else:
            why = (f"the better evaluation at C/2 ({level[ranked[0]]:.4f} against "
                   f"{level[ranked[1]]:.4f} for n={ranked[1]})" if len(ranked) > 1 else f"n={ranked[0]} is the only run")
            self._choose(ranked[0], curves, r, why)
        return self.decisions[start:]

    def _refine(self, leader: int, grid: list[int]) -> tuple[int | None, str]:
        """The untried grid n next to the leader on the side of its better tried neighbour, when
        it lies in a gap of the tried n (so the answer is resolved to the grid's spacing)."""
        i = grid.index(leader)
        sides = []
        for step in (-1, 1):
            tried = [g for g in grid[i + step::step] if g in self.tried] if 0 <= i + step < len(grid) else []
            if tried:
                sides.append((self.levels.get(tried[0], float("-inf")), step, tried[0]))
        if not sides:
            return None, ""
        _, step, neighbour = max(sides)
        nxt = grid[i + step]
        if nxt in self.tried:
            return None, ""
        return nxt, (f"the leader n={leader} and its better tried neighbour n={neighbour} leave untried n between "
                     f"them, and a run was dominated")

    def _choose(self, n: int, curves: Mapping[int, Curve], r: float, why: str) -> None:
        self._log({"event": "choose", "n": n, "rung": r, "why": why,
                   "spent": {str(m): spent(curves[m]) for m in self.active}})

    def overhead(self) -> float:
        return float(sum(self.stopped.values()) / self.settings.budget)


def value_at_steps(curve: Curve, rollouts: float) -> float:
    """A run's value at ``rollouts`` (linear in ln rollouts between its evaluations); beyond its
    last evaluation +inf (not reached: nothing says the other run is ahead)."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0 and math.isfinite(v)]
    if not pts or rollouts > pts[-1][0] * (1 + REACH_RTOL):
        return math.inf
    if rollouts <= pts[0][0]:
        return pts[0][1]
    return float(np.interp(math.log(rollouts), np.log([p[0] for p in pts]), [p[1] for p in pts]))


def spent(curve: Curve) -> float:
    return float(curve[-1][0]) if curve else 0.0


# --------------------------------------------------------------------------------------------
# replay over complete records
# --------------------------------------------------------------------------------------------
def reveal(curve: Curve, target: float) -> list[tuple[float, float]]:
    """The part of a complete curve a run paused at ``target`` rollouts has written: every
    evaluation up to its last one at or below the target (up to its first positive one if none
    is: a run is always paused on an evaluation, the one that tells)."""
    out = []
    for r, v in curve:
        if r > target * (1 + REACH_RTOL) and any(p[0] > 0 for p in out):
            break
        out.append((float(r), float(v)))
        if r > target * (1 + REACH_RTOL):
            break
    return out


def replay(full: Mapping[int, Curve], settings: Settings) -> dict[str, Any]:
    """Run the adaptive policy over complete curves, revealing each up to what it was asked to
    spend. Returns chosen n, overhead, the decisions and the rollouts spent per n."""
    pol = Adaptive(settings)
    seen: dict[int, list[tuple[float, float]]] = {}
    for _ in range(1000):
        req = pol.requests()
        if not req:
            break
        for n, target in req.items():
            if n not in full:
                raise IsosimError(f"replay: no records for n={n}")
            seen[n] = reveal(full[n], target)
        pol.update(seen)
    spentd = {n: spent(c) for n, c in seen.items()}
    return {"chosen": pol.chosen, "overhead": pol.overhead(), "spent": spentd, "decisions": pol.decisions,
            "tried": sorted(pol.tried)}


def successive_halving(full: Mapping[int, Curve], settings: Settings) -> dict[str, Any]:
    """Plain successive halving on the same rungs: every grid n starts; at each rung the better
    half (by the last evaluation reached, ties to the smaller n) continues; the last one left
    (or the best at the last rung) continues to C."""
    s = settings
    alive = sorted(s.grid)
    seen: dict[int, list[tuple[float, float]]] = {}
    stopped: dict[int, float] = {}
    rungs = s.rungs()
    for i, r in enumerate(rungs):
        for n in alive:
            seen[n] = reveal(full[n], r)
        keep = 1 if i == len(rungs) - 1 else max(1, math.ceil(len(alive) / s.eta))
        ranked = sorted(alive, key=lambda n: (-seen[n][-1][1], n))
        for n in ranked[keep:]:
            stopped[n] = spent(seen[n])
        alive = sorted(ranked[:keep])
        if len(alive) == 1:
            break
    chosen = alive[0]
    seen[chosen] = reveal(full[chosen], s.budget)
    return {"chosen": chosen, "overhead": float(sum(stopped.values()) / s.budget),
            "spent": {n: spent(c) for n, c in seen.items()}}


# --------------------------------------------------------------------------------------------
# scoring against a measured sweep
# --------------------------------------------------------------------------------------------
def value_at(curve: Curve, budget: float, rtol: float = 0.01) -> float:
    """A run's value at ``budget`` rollouts: linear in ln rollouts between its evaluations; a run
    ending within ``rtol`` short of the budget counts at its last point; NaN if it ends earlier."""
    pts = [(float(r), float(v)) for r, v in curve if r > 0]
    if not pts or pts[-1][0] < budget * (1 - rtol):
        return float("nan")
    if budget >= pts[-1][0]:
        return pts[-1][1]
    if budget <= pts[0][0]:
        return pts[0][1]
    x = np.log([p[0] for p in pts])
    return float(np.interp(math.log(budget), x, [p[1] for p in pts]))


def truth_at(runs: Mapping[int, Mapping[int, Curve]], budget: float) -> dict[str, Any]:
    """Seed-mean value per n at ``budget`` (``runs[n][seed]``), the best n, the standard error of
    a seed-mean (pooled over n) and the tie band (n within 2 standard errors of the best)."""
    means, devs, dof = {}, 0.0, 0
    k = 0
    for n, seeds in runs.items():
        vals = np.array([value_at(c, budget) for c in seeds.values()])
        vals = vals[np.isfinite(vals)]
        if not len(vals):
            continue
        means[int(n)] = float(vals.mean())
        if len(vals) > 1:
            devs += float(((vals - vals.mean()) ** 2).sum())
            dof += len(vals) - 1
            k = max(k, len(vals))
    if not means:
        raise IsosimError(f"no run reaches {budget:.0f} rollouts")
    sd = math.sqrt(devs / dof) if dof else float("nan")
    se = sd / math.sqrt(k) if dof else float("nan")
    best = max(means, key=lambda n: (means[n], -n))
    band = sorted(n for n, v in means.items() if v >= means[best] - 2 * se) if dof else [best]
    return {"budget": float(budget), "mean": {str(n): means[n] for n in sorted(means)}, "best": best,
            "seed_sd": sd, "seed_se": se, "tie_band": band}


# --------------------------------------------------------------------------------------------
# the evidence
# --------------------------------------------------------------------------------------------
def plot_search(curves: Mapping[int, Curve], decisions: Sequence[Mapping[str, Any]], path: str | Path,
                metric: str = "val_avg") -> Path:
    """Each run's curve as far as it ran (the chosen one bold), a cross where a run was stopped,
    the decision rungs and the budget; written as PNG (and SVG) at ``path``."""
    from isosim.frontier import plots

    ns = sorted(curves)
    cmap, norm = plots.n_colors(ns)
    fig, (ax,) = plots.figure()
    chosen = next((int(d["n"]) for d in decisions if d["event"] == "choose"), None)
    stops = {int(d["n"]): float(d["spent"]) for d in decisions if d["event"] == "stop"}
    spawns = {int(d["n"]) for d in decisions if d["event"] == "spawn"}
    for n in ns:
        pts = [(r, v) for r, v in curves[n] if r > 0]
        if not pts:
            continue
        color = cmap(norm(math.log2(n)))
        label = f"n = {n}" + (" (chosen)" if n == chosen else "") + (" (started later)" if n in spawns else "")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, lw=2.5 if n == chosen else 1.2,
                ms=3, label=label)
        if n in stops or (chosen is not None and n != chosen):
            ax.plot([pts[-1][0]], [pts[-1][1]], "x", color="crimson", ms=9, mew=2)
    budget = next(float(d["settings"]["budget"]) for d in decisions if d["event"] == "start")
    for r in sorted({float(d["rung"]) for d in decisions if d["event"] == "rung"}):
        ax.axvline(r, color="grey", ls=":", lw=0.8)
    ax.axvline(budget, color="black", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("rollouts")
    ax.set_ylabel(f"validation {metric}")
    ax.set_title("adaptive search: rungs (dotted), budget (dashed), stopped (x)", fontsize=9)
    ax.legend(fontsize=7)
    return plots.save(fig, path)[0]


# --------------------------------------------------------------------------------------------
# scoring the policy on a committed sweep
# --------------------------------------------------------------------------------------------
SH_FIRST_RUNG = 1 / 16
"""the successive-halving baseline's first rung (C / 16, C / 8, ...), kept from the first round"""
SH_CHEAP = "successive halving (adaptive's rungs)"
"""name of the extra column: successive halving on the adaptive policy's rungs (C / 32, ...)"""

MIN_STEPS = 20
"""updates a run must get at the budget to be in the grid (``isosim validate``'s default)"""


def load_sweep(folder: str | Path, metric: str = "val_avg") -> dict[str, Any]:
    """A sweep folder of ``nN_bpB_sS/records.jsonl`` runs: ``runs[n][seed]`` curves, B_p, the
    largest budget and the validation size (V x N) from the runs' records."""
    import json

    runs: dict[int, dict[int, list[tuple[float, float]]]] = {}
    b_ps, samples, top = set(), set(), []
    for rec in sorted(Path(folder).glob("*/records.jsonl")):
        rows = []
        for line in rec.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        rows = [r for r in rows if r.get(metric) is not None]
        if not rows:
            raise IsosimError(f"{rec}: no records with {metric}")
        n, seed = int(rows[0]["n"]), int(rows[0]["seed"])
        runs.setdefault(n, {})[seed] = sorted((float(r["rollouts"]), float(r[metric])) for r in rows)
        b_ps.add(int(rows[0]["b_p"]))
        top.append(float(rows[0].get("budget") or rows[-1]["rollouts"]))
        if rows[0].get("val_size") and rows[0].get("eval_n"):
            samples.add(int(rows[0]["val_size"]) * int(rows[0]["eval_n"]))
    if not runs:
        raise IsosimError(f"{folder}: no run folders with records.jsonl")
    if len(b_ps) != 1:
        raise IsosimError(f"{folder}: runs of several B_p {sorted(b_ps)}; a sweep compares n at one B_p")
    return {"runs": runs, "b_p": b_ps.pop(), "max_budget": min(top),
            "eval_samples": min(samples) if samples else None, "seeds": sorted({s for v in runs.values() for s in v})}


def grid_at(ns: Sequence[int], budget: float, b_p: int, min_steps: int = MIN_STEPS) -> list[int]:
    return sorted(n for n in ns if budget // (b_p * n) >= min_steps)


def _seed_replays(sweep: Mapping[str, Any], budgets: Sequence[float], min_steps: int = MIN_STEPS):
    """(budget, grid, truth, seed, that seed's curves) for every budget and every seed that has a
    run of every grid n there: what one replay sees and what it is scored against."""
    for budget in budgets:
        grid = grid_at(list(sweep["runs"]), budget, sweep["b_p"], min_steps)
        truth = truth_at({n: sweep["runs"][n] for n in grid}, budget)
        for seed in sweep["seeds"]:
            full = {n: sweep["runs"][n][seed] for n in grid if seed in sweep["runs"][n]}
            if sorted(full) == grid:
                yield budget, grid, truth, seed, full


def _scored(truth: Mapping[str, Any], budget: float, seed: int, policy: str, chosen: int, overhead: float,
            tried: list[int]) -> dict[str, Any]:
    """One replay's row: the chosen n's regret at C against the sweep's best, beside the seed noise."""
    regret = truth["mean"][str(truth["best"])] - truth["mean"][str(chosen)]
    return {"budget": float(budget), "seed": int(seed), "policy": policy, "chosen": int(chosen),
            "best": truth["best"], "tie_band": truth["tie_band"], "regret": regret,
            "seed_se": truth["seed_se"], "regret_over_se": regret / truth["seed_se"] if truth["seed_se"] > 0 else float("nan"),
            "within_2se": bool(regret <= 2 * truth["seed_se"] + 1e-12), "overhead": float(overhead), "tried": tried}


def score_sweep(sweep: Mapping[str, Any], budgets: Sequence[float], predicted: Callable[[float], int | None] | None = None,
                min_steps: int = MIN_STEPS) -> list[dict[str, Any]]:
    """Replay every seed at every budget: the adaptive policy started at the prediction (if any)
    and at the grid spread, successive halving, and one run at the predicted n; each scored by
    regret at C (seed-mean of the best n minus that of the chosen n) against the seed noise."""
    rows = []
    for budget, grid, truth, seed, full in _seed_replays(sweep, budgets, min_steps):
        pred = predicted(budget) if predicted else None
        pred_n = min(grid, key=lambda n: (abs(math.log2(n) - math.log2(pred)), n)) if pred else None
        policies = {}
        if pred_n is not None:
            policies["adaptive (prediction)"] = replay(full, Settings(
                budget=budget, grid=tuple(grid), start=tuple(spread_start(grid, pred_n)),
                eval_samples=sweep["eval_samples"]))
            policies["one run at the predicted n"] = {"chosen": pred_n, "overhead": 0.0}
        policies["adaptive (spread)"] = replay(full, Settings(
            budget=budget, grid=tuple(grid), start=tuple(spread_start(grid)), eval_samples=sweep["eval_samples"]))
        policies["successive halving"] = successive_halving(full, Settings(
            budget=budget, grid=tuple(grid), start=tuple(grid), eval_samples=sweep["eval_samples"],
            first_rung=SH_FIRST_RUNG))
        # an extra column, not the baseline: the same halving on the adaptive policy's cheaper rungs
        policies[SH_CHEAP] = successive_halving(full, Settings(
            budget=budget, grid=tuple(grid), start=tuple(grid), eval_samples=sweep["eval_samples"]))
        for name, res in policies.items():
            rows.append(_scored(truth, budget, seed, name, res["chosen"], res["overhead"],
                                res.get("tried", sorted(res.get("spent", {})))))
    return rows


REFERENCES = {"every n to C/2, best level": (2.0, "level"), "every n to C/2, best line to C": (2.0, "line"),
              "every n to C/4, best level": (4.0, "level"), "every n to C/4, best line to C": (4.0, "line"),
              "every n to C, best at C (this seed)": (1.0, "level"),
              "every n to C/4, best two lines to C/2, best level": (4.0, "line2")}
"""reference readers (not policies: they pay for every run): what could be chosen with every grid n
run to C / frac, read at its last evaluation ("level") or carried to C along its local line
("line"); at frac 1 the seed's own best run at C, which no search can beat on that seed. "line2":
the two best lines at C / 4 continue to C / 2, where the better level is chosen (the cheapest
two-stage reading that met the regret bar on all five sweeps of 2026-12-04, of six tried;
studies/LOG.md)"""


def informed_choice(full: Mapping[int, Curve], budget: float, frac: float = 2.0, reading: str = "level",
                    window_octaves: float = 1.0) -> dict[str, Any]:
    """The n a reader chooses with every run of ``full`` revealed up to ``budget / frac`` rollouts
    (see :func:`reveal`), and the overhead that costs (rollouts of the runs not chosen / budget).
    ``reading`` "level": the best last evaluation; "line": the best local line (``window_octaves``
    below the last evaluation, :func:`local_fit`) carried to the budget; "line2": the two best
    lines continue to ``budget * 2 / frac`` and the better level there is chosen."""
    if frac < 1:
        raise IsosimError(f"frac must be >= 1 (runs revealed up to budget / frac), got {frac}")
    if reading not in ("level", "line", "line2"):
        raise IsosimError(f"reading must be 'level', 'line' or 'line2', got {reading!r}")
    seen = {n: reveal(c, budget / frac) for n, c in full.items()}
    if reading == "line2":  # the two best lines go on to budget / (frac / 2); the better level wins
        first = informed_choice(full, budget, frac, "line", window_octaves)
        lines = first["value"]
        top = sorted(full, key=lambda n: (-lines[n], n))[:2]
        for n in top:
            seen[n] = reveal(full[n], budget * 2 / frac)
        value = {n: seen[n][-1][1] for n in top}
        chosen = max(value, key=lambda n: (value[n], -n))
        return {"chosen": int(chosen), "value": value,
                "overhead": float(sum(spent(c) for n, c in seen.items() if n != chosen) / budget)}
    if frac == 1:
        value = {n: value_at(full[n], budget) for n in full}
    elif reading == "level":
        value = {n: c[-1][1] for n, c in seen.items()}
    else:
        value = {n: local_fit(c, budget, window_octaves)[0] for n, c in seen.items()}
    value = {n: v if math.isfinite(v) else -math.inf for n, v in value.items()}
    chosen = max(value, key=lambda n: (value[n], -n))
    return {"chosen": int(chosen), "value": value,
            "overhead": float(sum(spent(c) for n, c in seen.items() if n != chosen) / budget)}


def score_references(sweep: Mapping[str, Any], budgets: Sequence[float], min_steps: int = MIN_STEPS) -> list[dict[str, Any]]:
    """:data:`REFERENCES` scored like :func:`score_sweep`'s policies, every seed at every budget:
    how much of the regret any reading of the curves up to C / 2 (or C / 4) can remove."""
    rows = []
    for budget, _grid, truth, seed, full in _seed_replays(sweep, budgets, min_steps):
        for name, (frac, reading) in REFERENCES.items():
            res = informed_choice(full, budget, frac, reading)
            rows.append(_scored(truth, budget, seed, name, res["chosen"], res["overhead"], sorted(full)))
    return rows


def default_budgets(max_budget: float, lo: float = 64.0, k: int = 25) -> list[float]:
    """The frontier analysis' budget grid of a sweep: ``k`` log-spaced budgets from ``lo``."""
    return [float(b) for b in np.geomspace(lo, max_budget, k)]
