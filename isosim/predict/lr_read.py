"""The simfit model read at the lr each run actually had.

The simfit model (:mod:`isosim.predict.simfit`) was calibrated on sweeps trained at the square-root
rule: run ``n`` at ``lr_n = lr_0 * sqrt(B_p n / B_0)``, the lr ``lr_0`` set where it suits the batch
``B_0``. That rule is *the calibration*: what the learner's calibration says each n needs, from the
point ``(lr_0, B_0)`` where the user's lr was tuned (:class:`Anchor`). A run of ``n`` whose lr is
``rho_n`` times that (:func:`rho`) is read with two changes to the model, and none where every
``rho_n`` is 1 (there it *is* the calibrated model, fit for fit):

1. **The step.** Under Adam a step moves about lr, so the simulated step of ``n`` is multiplied by
   ``rho_n ** a`` (:attr:`LrCalibration.a`, 1 unless the learner's lr calibration says otherwise).
2. **Over-stepping.** Over ``M = C / (B_p n)`` steps the noise part of the walk grows as
   ``M lr_n**2``; relative to the calibration, run ``n`` walks ``rho_n**2`` times as far a rollout.
   The part above it costs value at a rate ``decay`` per 1e6 rollouts:
   ``v = v_model * exp(-decay * (C / 1e6) * max(rho_n**2 - 1, 0))``. ``decay`` is the learner's
   (:class:`LrCalibration`, measured on an lr grid: runs of two n each at three lrs); it is fitted to
   the cheap runs under that prior only where a measured run over-steps, else taken as it is.

Every form of ``recommend --runs`` reads its runs through this one model: one measured n (the
frozen calibration's cheap run), two n, or every n (their cheap curves fit the step, the ceiling
and the exponent, and the model carries each n to C). Where every run is at the calibration
(``rho`` 1 for every n), one or two measured n are the frozen calibration itself
(:func:`at_calibration_pick`: :func:`choose_calibrated` under the prior and tie band of
:data:`FROZEN_FILE`) and every n reads the one n the frozen calibration was scored on.

The frozen methods are these parameters, not other code:

- **the frozen calibration** (:data:`FROZEN`, chosen by ``studies/scoring/simfit.py`` among twelve;
  the commit, prior and tie band in :data:`FROZEN_FILE`): one cheap run of n = 8 to 5 % of C, the
  step size and the ceiling fitted (:data:`ONE_FREE`), the measured n kept when it is in the band;
  two measured n are :data:`TWO_RUNS`, the exponent fitted too (scored, not frozen);
- **the method frozen at 07a27e7** (:data:`COMMIT_07A27E7`): the frozen calibration read from the
  anchor :func:`anchor_07a27e7`, 1,024 rollouts a step whatever the runs' lr (the lr the runs' rule
  gives that batch, so only the rule's name is read), with :data:`CALIBRATION_07A27E7` (a = 1, decay
  prior 0 ± :data:`LEGACY_DECAY_SD`).

Their committed predictions name the commit that made them (each sweep's ``manifest.json``);
``tests/test_frozen_replay.py`` replays that commit's own files and checks this model at these
parameters gives the same picks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.predict import simfit as sf

CALIBRATED_EXPONENT = 0.5
"""the rule every sweep the simfit prior was fitted on was trained at (lr grows as the batch ** 0.5)"""
DECAY_SCALE = 1e6
DECAY_MAX = 50.0
LEGACY_DECAY_SD = 1.0
"""07a27e7's prior sd of ``decay`` (mean 0), fixed a priori there"""
ROOT = Path(__file__).resolve().parents[2]
LR_CALIBRATION_FILE = ROOT / "studies" / "results" / "organism_lr_grid" / "calibration.json"
"""the first organism's lr grid, fitted (``studies/scoring/lr_grid.py``)"""
FROZEN_FILE = ROOT / "studies" / "results" / "simfit_method.json"
"""the frozen calibration: its settings, prior for a new learner, tie band and the commit it was chosen at"""
FROZEN = "simfit (no gap) n=8 @5% wide, stay"
"""the frozen calibration (one measured n)"""
TWO_RUNS = "simfit (no gap) n=2+32 @2.5% wide, stay"
"""the calibration for two measured n (the exponent fitted too; scored on the nine sweeps, not frozen)"""
VARIANT = "clusters64"
"""the bank variant the calibration was frozen with (64 skill directions on the ``hard-flat`` recipe)"""
SCORES_FILE = ROOT / "studies" / "results" / f"simfit_{VARIANT}.json"
"""the simfit study's scores of every calibration on the nine organism sweeps, with their full fits"""


@dataclass(frozen=True)
class Anchor:
    """Where the user's lr suits the batch: ``lr`` at ``batch`` rollouts a step (``B_p * n_tuned``)."""

    lr: float
    batch: float
    source: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise IsosimError(f"the lr the runs were tuned at must be a positive number, got {self.lr}")
        if not (math.isfinite(self.batch) and self.batch >= 1):
            raise IsosimError(f"the batch the lr was tuned at must be at least 1 rollout, got {self.batch}")


@dataclass(frozen=True)
class LrCalibration:
    """The learner's lr calibration: the step's exponent in ``rho`` and the over-stepping decay
    (prior mean and sd), with where they came from."""

    a: float = 1.0
    decay: float = 0.0
    decay_sd: float = LEGACY_DECAY_SD
    source: str = "a priori (Adam: a step moves about lr; no decay measured)"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def learner_calibration(path: Path | None = None) -> LrCalibration:
    """The committed lr calibration (:data:`LR_CALIBRATION_FILE`), or the a-priori one where it is
    missing (an installed package without the studies)."""
    p = Path(path) if path is not None else LR_CALIBRATION_FILE
    if not p.is_file():
        return LrCalibration()
    doc = json.loads(p.read_text())["calibration"]
    return LrCalibration(a=float(doc["a"]), decay=float(doc["decay"]), decay_sd=float(doc["decay_sd"]),
                         source=str(doc["source"]))


def rho(lr: float, n: int, b_p: int, anchor: Anchor) -> float:
    """The run's lr over the lr the calibration gives its batch from ``anchor``."""
    if not (math.isfinite(lr) and lr > 0):
        raise IsosimError(f"a run of n = {n} has lr {lr}: a positive lr is needed to read it")
    return float(lr / (anchor.lr * (b_p * n / anchor.batch) ** CALIBRATED_EXPONENT))


def lrs_by_rule(ns: Sequence[int] | set[int], b_p: int, base: float, ref_batch: float, rule: str) -> dict[int, float]:
    """Each n's lr by ``rule`` from ``base`` at ``ref_batch`` rollouts a step (``B_p n`` a step for n)."""
    from isosim.sim.config import scaled_lr

    return {int(n): scaled_lr(base, b_p * int(n), ref_batch, rule) for n in ns}


def rhos(lrs: Mapping[int, float], b_p: int, anchor: Anchor) -> dict[int, float]:
    return {int(n): rho(float(v), int(n), b_p, anchor) for n, v in lrs.items()}


def at_calibration(rho_n: Mapping[int, float], tol: float = 1e-3) -> bool:
    """Every run's lr is the calibration's (within ``tol``, relative)."""
    return all(abs(r - 1.0) <= tol for r in rho_n.values())


def excess(r: float) -> float:
    return max(r * r - 1.0, 0.0)


def theta_for(theta: Mapping[str, float], r: float, cal: LrCalibration) -> dict[str, float]:
    """The model's numbers for a run at ``r`` times the calibration's lr (item 1)."""
    th = dict(theta)
    if r != 1.0:
        th["log_lr"] = th["log_lr"] + cal.a * math.log(r)
    return th


def predict_at(bank: Mapping[str, Any], theta: Mapping[str, float], n: int, rollouts: np.ndarray, v0: float,
               r: float, cal: LrCalibration) -> np.ndarray:
    base = sf.predict_at(bank, theta_for(theta, r, cal), n, rollouts, v0)
    decay = float(theta.get("decay", 0.0))
    if decay <= 0 or excess(r) <= 0:
        return base
    x = np.maximum(np.asarray(rollouts, float), 0.0) / DECAY_SCALE * excess(r)
    return base * np.exp(-decay * x)


def value(bank: Mapping[str, Any], theta: Mapping[str, float], n: int, budget: float, reading: str, v0: float,
          r: float, cal: LrCalibration) -> float:
    """The predicted gain over step 0 of ``n`` at ``budget`` (``best``: the largest up to C)."""
    rr, _ = sf.gain_curve(bank, n, 1.0)
    pts = np.append(rr[(rr > 0) & (rr < budget)], budget)
    v = predict_at(bank, theta, n, pts, v0, r, cal) - v0
    return float(v.max() if reading == "best" else v[-1])


def fit(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], rho_n: Mapping[int, float],
        prior: Mapping[str, tuple[float, float]], free: Sequence[str], cal: LrCalibration,
        noise: float = sf.NOISE) -> dict[str, Any]:
    """Least squares of the measured ``points`` ((n, rollouts, value); step 0 gives ``v0``) under
    ``prior``, each n read at its ``rho``; ``decay`` free (prior ``cal.decay``, ``cal.decay_sd``)
    where a measured n over-steps, else fixed at ``cal.decay``."""
    from scipy.optimize import least_squares

    zero = [v for _, r, v in points if r <= 0]
    later = [(int(n), float(r), float(v)) for n, r, v in points if r > 0]
    if not zero or not later:
        raise IsosimError("the lr-read fit needs the cheap runs' step-0 evaluation and at least one after it")
    missing = sorted({n for n, _, _ in later} - set(rho_n))
    if missing:
        raise IsosimError(f"no lr for the measured n = {', '.join(map(str, missing))}")
    v0 = float(np.mean(zero))
    start = {p: prior[p][0] for p in sf.PARAMS if p in prior}
    names = [p for p in free if p in start]
    walks = any(excess(rho_n[n]) > 0 for n, _, _ in later)
    names_all = names + (["decay"] if walks else [])
    pri = {**{p: tuple(prior[p]) for p in names}, "decay": (cal.decay, cal.decay_sd)}
    by_n: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for n in sorted({n for n, _, _ in later}):
        by_n[n] = (np.array([r for m, r, _ in later if m == n]), np.array([v for m, _, v in later if m == n]))

    def theta(x: np.ndarray) -> dict[str, float]:
        return {**start, "decay": float(cal.decay), **dict(zip(names_all, (float(v) for v in x)))}

    def residuals(x: np.ndarray) -> np.ndarray:
        th = theta(x)
        res = [(predict_at(bank, th, n, r, v0, rho_n[n], cal) - v) / noise for n, (r, v) in by_n.items()]
        res.append(np.array([(th[p] - pri[p][0]) / pri[p][1] for p in names_all]))
        return np.concatenate(res)

    if not names_all:
        th = theta(np.array([]))
        data = np.concatenate([predict_at(bank, th, n, r, v0, rho_n[n], cal) - v for n, (r, v) in by_n.items()])
        return {"theta": th, "v0": v0, "rms": float(np.sqrt(np.mean(data ** 2))), "points": len(later), "decay_fitted": False}
    lo = [sf.BOUNDS[p][0] for p in names] + ([0.0] if walks else [])
    hi = [sf.BOUNDS[p][1] for p in names] + ([DECAY_MAX] if walks else [])
    x0 = np.clip([start[p] for p in names] + ([cal.decay] if walks else []), np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0)
    data = residuals(res.x)[:len(later)] * noise
    return {"theta": theta(res.x), "v0": v0, "rms": float(np.sqrt(np.mean(data ** 2))), "points": len(later),
            "decay_fitted": walks}


def choose(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], grid: Sequence[int], budget: float,
           rho_n: Mapping[int, float], prior: Mapping[str, tuple[float, float]], free: Sequence[str], band: float,
           stay: Sequence[int], cal: LrCalibration) -> dict[str, Any]:
    """Fit, read every n of ``grid`` at ``budget`` in both readings at its ``rho``, and pick: the
    best of the ``stay`` n (the measured one, or the cheap leader) that sits within ``band`` of the
    model's best, else the model's best."""
    missing = sorted(set(int(n) for n in grid) - set(rho_n))
    if missing:
        raise IsosimError(f"no lr for n = {', '.join(map(str, missing))} of the grid")
    res = fit(bank, points, rho_n, prior, free, cal)
    out: dict[str, Any] = {k: res[k] for k in ("theta", "v0", "rms", "points", "decay_fitted")}
    out["rho"] = {str(int(n)): float(rho_n[int(n)]) for n in grid}
    out["lr_calibration"] = cal.as_dict()
    for reading in ("best", "final"):
        vals = {int(n): value(bank, res["theta"], int(n), budget, reading, res["v0"], rho_n[int(n)], cal) for n in grid}
        top = max(vals.values())
        best = max(vals, key=lambda n: (round(vals[n], 6), -n))
        st = stay[reading] if isinstance(stay, Mapping) else stay
        kept = [n for n in st if n in vals and vals[n] >= top - band]
        out[reading] = {"pick": int(max(kept, key=lambda n: vals[n]) if kept else best), "simulator_best": int(best),
                        "predicted_gain": {str(n): v for n, v in vals.items()},
                        "within_band": sorted(n for n, v in vals.items() if v >= top - band)}
    return out


def cheap_leader(runs: Mapping[int, Mapping[int, Sequence[tuple[float, float]]]]) -> int:
    """The measured n whose cheap curves lead (the plane's cheap leader and ``recommend --runs``'s
    default reader ``level``): the seed mean of each run's last value; ties to the smaller n."""
    score = {int(n): float(np.mean([max(c)[1] for c in seeds.values() if len(c)]))
             for n, seeds in runs.items() if any(len(c) for c in seeds.values())}
    if not score:
        raise IsosimError("no cheap points to read a leader from")
    return max(score, key=lambda n: (round(score[n], 9), -n))


ONE_FREE = ("log_lr", "log_h")
"""the numbers one measured n moves (the frozen calibration's)"""
EVERY_FREE = ("log_lr", "power", "log_h")
"""the numbers every n's cheap curves move (the exponent too)"""


def read_runs(bank: Mapping[str, Any], runs: Mapping[int, Mapping[int, Sequence[tuple[float, float]]]],
              grid: Sequence[int], budget: float, lrs: Mapping[int, float], anchor: Anchor,
              prior: Mapping[str, tuple[float, float]], band: float, cal: LrCalibration, every: bool) -> dict[str, Any]:
    """The model's answer for cheap runs (n -> seed -> curve, step 0 included; every seed's points
    enter one fit), each n read at its lr (``lrs``: every n of ``grid`` and of ``runs``) from
    ``anchor``. ``every`` False: the measured n are the frozen calibration's cheap runs and a measured
    n in the band is kept; True: every n's curves fit the step, the exponent and the ceiling, and
    the cheap leader is kept when it is in the band. Where every run is at the calibration (``rho``
    1 for every n), the every-n form reads the one n the frozen calibration was scored on (n = 8, or
    the measured n nearest it): the model is then the frozen method, which the sqrt-rule sweeps
    scored above every reading of the cheap part alone."""
    rho_n = rhos(lrs, int(bank["b_p"]), anchor)
    asked = "every n" if every else "one n"
    if every and at_calibration({n: rho_n[n] for n in set(grid) | set(runs)}):
        one = 8 if 8 in runs else min(runs, key=lambda n: (abs(math.log(n / 8)), n))
        runs, every = {one: runs[one]}, False
    points = [(int(n), float(r), float(v)) for n, seeds in runs.items() for c in seeds.values() for r, v in c]
    if not any(r > 0 for _, r, _ in points):
        raise IsosimError("the cheap runs have no evaluation after step 0: nothing to calibrate on")
    lead = cheap_leader(runs) if every else None
    stay = (lead,) if every else tuple(sorted(int(n) for n in runs))
    got = choose(bank, points, grid, budget, rho_n, prior, EVERY_FREE if every else ONE_FREE, band, stay, cal)
    got.update({"form": asked, "read_as": "every n" if every else "one n", "cheap_leader": lead, "stay": list(stay),
                "anchor": {"lr": anchor.lr, "batch": anchor.batch, "source": anchor.source},
                "lr": {str(int(n)): float(v) for n, v in sorted(lrs.items())},
                "at_calibration": at_calibration({n: rho_n[n] for n in grid})})
    return got


def frozen() -> dict[str, Any]:
    """:data:`FROZEN_FILE`: the frozen calibration's settings, prior, tie band and commit."""
    if not FROZEN_FILE.is_file():
        raise IsosimError(f"the frozen simfit method is not here ({FROZEN_FILE} is missing: a full checkout has it)")
    doc = json.loads(FROZEN_FILE.read_text())
    if doc["method_label"] != FROZEN or doc["variant"]["name"] != VARIANT:
        raise IsosimError(f"{FROZEN_FILE} freezes {doc['method_label']!r} ({doc['variant']['name']}), not {FROZEN!r}")
    return doc


def prior_and_band(doc: Mapping[str, Any] | None = None) -> tuple[dict[str, tuple[float, float]], float]:
    """The frozen calibration's prior for a new learner and its tie band (of :func:`frozen`)."""
    doc = frozen() if doc is None else doc
    return ({p: tuple(v) for p, v in doc["prior_for_a_new_learner"]["prior"].items()},
            float(doc["settings"]["tie_band_value"]))


def choose_calibrated(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], grid: Sequence[int],
                      budget: float, prior: Mapping[str, tuple[float, float]], free: Sequence[str], band: float,
                      stay: Sequence[int] = ()) -> dict[str, Any]:
    """Runs at the calibration (``rho`` 1 for every n), as the simfit study scored its calibrations:
    :func:`isosim.predict.simfit.fit` of ``free`` to the measured ``points`` ((n, rollouts, value),
    step 0 included) under ``prior``, every n of ``grid`` read at ``budget`` in both readings, and the
    pick: the model's best n, or (``stay``) the best of the measured n that sit within ``band`` of it."""
    res = sf.fit(bank, list(points), prior, free)
    out: dict[str, Any] = {"theta": res["theta"], "v0": res["v0"], "rms": res["rms"], "points": res["points"]}
    for reading in ("best", "final"):
        vals = {int(n): sf.value(bank, res["theta"], n, budget, reading) for n in grid}
        best = sf.pick(bank, res["theta"], grid, budget, reading)
        top = max(vals.values())
        kept = [n for n in stay if n in vals and vals[n] >= top - band]
        out[reading] = {"pick": int(max(kept, key=lambda n: vals[n]) if kept else best), "simulator_best": int(best),
                        "predicted_gain": {str(n): v for n, v in vals.items()},
                        "within_band": sorted(n for n, v in vals.items() if v >= top - band)}
    return out


def at_calibration_pick(bank: Mapping[str, Any], runs: Mapping[int, Mapping[int, Sequence[tuple[float, float]]]],
                        grid: Sequence[int], budget: float) -> dict[str, Any]:
    """One or two measured n whose lr is the calibration's (seed -> curve, every seed's points in one
    fit): one n is the frozen calibration (:data:`FROZEN`), two is :data:`TWO_RUNS` (the exponent
    fitted too); :func:`choose_calibrated`, the measured n kept when in the band. Which n
    were measured and to what rollouts is returned with the pick."""
    if not runs:
        raise IsosimError("no cheap runs to calibrate on")
    if len(runs) > 2:
        raise IsosimError(f"the calibrated simulator takes one or two measured n, got {len(runs)} "
                          f"(n = {', '.join(map(str, sorted(runs)))}): every n is read by isosim.predict.lr_read")
    doc = frozen()
    label = FROZEN if len(runs) == 1 else TWO_RUNS
    prior, band = prior_and_band(doc)
    points = [(int(n), float(r), float(v)) for n, seeds in runs.items() for c in seeds.values() for r, v in c]
    if not any(r > 0 for _, r, _ in points):
        raise IsosimError("the cheap runs have no evaluation after step 0: nothing to calibrate on")
    got = choose_calibrated(bank, points, grid, budget, prior, ONE_FREE if label == FROZEN else EVERY_FREE, band,
                            tuple(sorted(runs)))
    measured = {int(n): max(r for c in seeds.values() for r, _ in c) for n, seeds in runs.items()}
    got.update({"method": label, "frozen": label == FROZEN, "frozen_commit": doc["commit"], "tie_band": band,
                "measured": {str(n): measured[n] for n in sorted(measured)},
                "simulated": [int(n) for n in grid if n not in measured], "budget": float(budget)})
    return got


COMMIT_07A27E7 = "07a27e7"
"""the commit that froze the lr-aware method scored on the constant-lr sweeps (``isosim/predict/simfit_lr.py``
there; its predictions are replayed from it by ``tests/test_frozen_replay.py``)"""
ANCHOR_BATCH_07A27E7 = 1024.0
"""07a27e7 read every run from the lr its rule gives 1,024 rollouts a step, whatever the runs' lr"""
CALIBRATION_07A27E7 = LrCalibration()
"""07a27e7's lr calibration: a = 1, decay prior 0 ± :data:`LEGACY_DECAY_SD` (fixed a priori)"""


def anchor_07a27e7(base_lr: float, lr_ref_batch: float, rule: str) -> Anchor:
    """The anchor of the method frozen at 07a27e7 for runs trained by ``rule`` from ``base_lr`` at
    ``lr_ref_batch``: the lr the rule gives :data:`ANCHOR_BATCH_07A27E7` rollouts a step (so a run's
    ``rho`` is ``(B_p n / 1024) ** (e - 0.5)``: only the rule's exponent ``e`` is read). With
    :data:`CALIBRATION_07A27E7`, the frozen calibration's prior, tie band and cheap run, this model
    is that method pick for pick."""
    from isosim.sim.config import scaled_lr

    return Anchor(scaled_lr(base_lr, ANCHOR_BATCH_07A27E7, lr_ref_batch, rule), ANCHOR_BATCH_07A27E7,
                  f"{COMMIT_07A27E7}: the {rule} rule's lr at 1,024 rollouts a step")
