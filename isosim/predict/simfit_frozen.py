"""The calibrated simulator as a method: the simfit calibrations, the frozen one, and the pick from
one or two cheap runs.

:mod:`isosim.predict.simfit` holds the model (a bank of simulated curves over the step size, a
three-number fit). ``studies/scoring/simfit.py`` scored twelve calibrations of it on the nine
organism sweeps and froze one (``studies/results/simfit_method.json``, commit named there):

    simfit (no gap) n=8 @5% wide, stay: one cheap run of n = 8 to 5 % of the budget C; the step
    size and the ceiling fitted under a prior made from the other learners' full fits (the step
    size's sd widened to 1.5); every n of the grid read at C from the bank; the pick is the
    measured n unless the simulator puts it more than the tie band below the best n.

This module is that method as a library, for two callers: the plane
(:mod:`isosim.validation.plane_methods` registers every calibration of :data:`CALIBRATIONS`,
scored leave-one-sweep-out, with :func:`bank_of` and :func:`full_fits`) and ``isosim recommend --runs`` with a partial cheap set (one or two n
measured, the rest simulated). Nothing here changes the frozen code: the model is
:mod:`isosim.predict.simfit`, unchanged since the freeze, and :data:`CALIBRATIONS` is the study's
table (a test checks they are equal).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.predict import simfit as sf

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "studies" / "results"
FROZEN_FILE = RESULTS / "simfit_method.json"
VARIANT = "clusters64"
"""the bank variant the method was frozen with (64 skill directions on the ``hard-flat`` recipe)"""
SCORES_FILE = RESULTS / f"simfit_{VARIANT}.json"
"""the study's scores of every calibration on the variant's banks, with each sweep's full fits"""
BANK_FILE = RESULTS / f"simfit_bank_{VARIANT}.json"
_HARD_128 = (RESULTS / "organism_hard" / f"simfit_bank_{VARIANT}.json", "hard-t0.6-128")
EXTRA_BANKS = {"organism_hard/hard-128": _HARD_128, "organism_hard_const/hard-128": _HARD_128}
"""banks of sweeps outside the nine (a sweep name -> bank file and key); the second learner's sweep at
one lr for every n shares its sqrt-rule sweep's bank (the same setting: a bank simulates every step
size, no lr rule)"""
PRIOR_FLOOR = {"log_lr": 0.5, "power": 0.15, "log_h": 0.3, "log_gap": 0.5, "log_d0": 1.0}
"""smallest prior sd of each number (``studies/scoring/simfit.py``, fixed before any scoring)"""
WIDE_LR = 1.5
MODELS = {"simfit": sf.PARAMS, "simfit (no gap)": ("log_lr", "power", "log_h")}
_CAL = {"prior": ({}, ()), "n=8 @5%": ({8: 0.05}, ("log_lr", "log_h")), "n=32 @5%": ({32: 0.05}, ("log_lr", "log_h")),
        "n=2+32 @2.5%": ({2: 0.025, 32: 0.025}, ("log_lr", "power", "log_h"))}
CALIBRATIONS: dict[str, dict[str, Any]] = {
    f"{model} {cal}": {"cheap": dict(cheap), "free": free, "model": model, "wide": False, "stay": False}
    for model in MODELS for cal, (cheap, free) in _CAL.items()}
for _cal in ("n=8 @5%", "n=2+32 @2.5%"):
    for _stay in (False, True):
        CALIBRATIONS[f"simfit (no gap) {_cal} wide" + (", stay" if _stay else "")] = {
            "cheap": dict(_CAL[_cal][0]), "free": _CAL[_cal][1], "model": "simfit (no gap)", "wide": True, "stay": _stay}
FROZEN = "simfit (no gap) n=8 @5% wide, stay"
TWO_RUNS = "simfit (no gap) n=2+32 @2.5% wide, stay"
"""the calibration for two measured n (all three numbers fitted; scored, not frozen)"""


def frozen() -> dict[str, Any]:
    """``studies/results/simfit_method.json``: the frozen method's settings, prior and tie band."""
    if not FROZEN_FILE.is_file():
        raise IsosimError(f"the frozen simfit method is not here ({FROZEN_FILE} is missing: a full checkout has it)")
    doc = json.loads(FROZEN_FILE.read_text())
    if doc["method_label"] != FROZEN or doc["variant"]["name"] != VARIANT:
        raise IsosimError(f"{FROZEN_FILE} freezes {doc['method_label']!r} ({doc['variant']['name']}), not {FROZEN!r}")
    return doc


def prior_from(fits: Iterable[Mapping[str, float]], model: str, wide: bool) -> dict[str, tuple[float, float]]:
    """Mean and sd (at least :data:`PRIOR_FLOOR`) of each number of ``model`` over full fits; the
    step size's sd at least :data:`WIDE_LR` when ``wide``."""
    thetas = list(fits)
    if not thetas:
        raise IsosimError("a simfit prior needs at least one other learner's full fit")
    prior = {}
    for p in MODELS[model]:
        vals = np.array([t[p] for t in thetas], float)
        prior[p] = (float(vals.mean()), float(max(vals.std(ddof=1) if len(vals) > 1 else 0.0, PRIOR_FLOOR[p])))
    if wide:
        prior["log_lr"] = (prior["log_lr"][0], max(prior["log_lr"][1], WIDE_LR))
    return prior


def choose(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], grid: Sequence[int], budget: float,
           prior: Mapping[str, tuple[float, float]], free: Sequence[str], band: float,
           stay: Sequence[int] = ()) -> dict[str, Any]:
    """Fit ``free`` to the measured ``points`` ((n, rollouts, value), step 0 included) under
    ``prior``, read every n of ``grid`` at ``budget`` in both readings, and pick: the simulator's
    best n, or (``stay``) the best of the measured n that sit within ``band`` of it."""
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


@lru_cache(maxsize=None)
def _scores() -> dict[str, Any]:
    if not SCORES_FILE.is_file():
        raise IsosimError(f"{SCORES_FILE} is missing")
    doc = json.loads(SCORES_FILE.read_text())
    return {"groups": doc["groups"], "fits": {"simfit": doc["full_fits"], "simfit (no gap)": doc["full_fits_no_gap"]}}


@lru_cache(maxsize=None)
def _bank_file(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())["banks"]


def full_fits(model: str) -> dict[str, Any]:
    """Each of the nine organism sweeps' numbers of ``model`` fitted to all its runs (the study's,
    recomputed by its test): the material of the leave-one-sweep-out priors."""
    return _scores()["fits"][model]


def bank_of(sweep: str) -> dict[str, Any] | None:
    """The committed bank of a scored sweep (the nine organism sweeps', or :data:`EXTRA_BANKS`), or None."""
    if sweep in EXTRA_BANKS:
        path, key = EXTRA_BANKS[sweep]
    else:
        key = _scores()["groups"].get(sweep)
        path = BANK_FILE
    if key is None or not Path(path).is_file():
        return None
    bank = dict(_bank_file(str(path)).get(key) or {})
    if not bank:
        return None
    bank.setdefault("n_train", bank["setting"]["n_train"])
    return bank


def user_setting(b_p: int, n_train: int, n_val: int, warmup: int) -> dict[str, Any]:
    """The setting a bank is simulated on for a user's cheap runs (checked here, simulated by
    :func:`user_bank`)."""
    for what, v in (("B_p", b_p), ("training-set size", n_train), ("validation-set size", n_val)):
        if v < 1:
            raise IsosimError(f"the cheap runs' {what} must be positive, got {v}")
    return {"b_p": int(b_p), "n_train": int(n_train), "n_val": int(n_val), "warmup": int(max(warmup, 0))}


def user_bank(profile: str | Path, setting: Mapping[str, Any], n_values: Sequence[int], budget: float,
              seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """A bank of the frozen recipe and variant on the user's setting (every n of ``n_values`` at
    every step size of the grid, to ``budget``): a few seconds to two minutes on one core."""
    from isosim.sim.presets import get_preset

    doc = frozen()
    settings = {**get_preset(doc["settings"]["recipe"]), **doc["variant"]["changes"], "profile": str(profile),
                "n_train": int(setting["n_train"]), "n_val": int(setting["n_val"]), "b_p": int(setting["b_p"]),
                "warmup": int(setting["warmup"])}
    bank = sf.build_bank(settings, sorted(set(int(n) for n in n_values)), float(budget),
                         tuple(doc["variant"]["bank_seeds"]) if seeds is None else tuple(seeds))
    bank["setting"] = dict(setting)
    return bank


def user_pick(bank: Mapping[str, Any], runs: Mapping[int, Mapping[int, Sequence[tuple[float, float]]]],
              grid: Sequence[int], budget: float, lr_rule: str = "sqrt") -> dict[str, Any]:
    """The calibrated simulator's answer for a user's cheap runs (seed -> ... pooled: every seed's
    points enter one fit): one measured n -> the frozen method; two -> :data:`TWO_RUNS`, the same
    with the exponent fitted too (scored on the nine sweeps, not frozen). Which n were measured and
    to what rollouts is returned with the pick. The runs' ``lr_rule`` is read by
    :mod:`isosim.predict.simfit_lr` (under the sqrt rule, the method as frozen)."""
    from isosim.predict import simfit_lr as slr

    if not runs:
        raise IsosimError("no cheap runs to calibrate on")
    if len(runs) > 2:
        raise IsosimError(f"the calibrated simulator takes one or two measured n, got {len(runs)} "
                          f"(n = {', '.join(map(str, sorted(runs)))}): every n is read by isosim.predict.lr_read")
    doc = frozen()
    label = FROZEN if len(runs) == 1 else TWO_RUNS
    spec = CALIBRATIONS[label]
    prior = {p: tuple(v) for p, v in doc["prior_for_a_new_learner"]["prior"].items()}
    band = float(doc["settings"]["tie_band_value"])
    points = [(int(n), float(r), float(v)) for n, seeds in runs.items() for c in seeds.values() for r, v in c]
    if not any(r > 0 for _, r, _ in points):
        raise IsosimError("the cheap runs have no evaluation after step 0: nothing to calibrate on")
    got = slr.choose(bank, points, grid, budget, prior, spec["free"], band, tuple(sorted(runs)), lr_rule)
    measured = {int(n): max(r for c in seeds.values() for r, _ in c) for n, seeds in runs.items()}
    got.update({"method": label, "frozen": label == FROZEN, "frozen_commit": doc["commit"], "tie_band": band,
                "measured": {str(n): measured[n] for n in sorted(measured)},
                "simulated": [int(n) for n in grid if n not in measured], "budget": float(budget),
                "scores_nine_sweeps": _nine_scores(label)})
    return got


def _nine_scores(label: str) -> dict[str, Any] | None:
    if not SCORES_FILE.is_file():
        return None
    o = json.loads(SCORES_FILE.read_text())["overall"]
    if label not in o:
        return None
    return {"replays": o[label]["replays"], "overhead": o[label]["mean_overhead"],
            **{r: o[label][r]["mean_regret"] for r in ("best", "final")},
            "fixed n = 8": {r: o["fixed n = 8"][r]["mean_regret"] for r in ("best", "final")}}


def grid_for(budget: float, b_p: int, n_values: Sequence[int] = (2, 4, 8, 16, 32, 64, 128, 256)) -> list[int]:
    """The n a budget affords at least 20 update steps of (the plane's grid rule)."""
    from isosim.predict.sbi import MIN_STEPS

    grid = sorted(int(n) for n in n_values if budget // (b_p * n) >= MIN_STEPS)
    if not grid:
        raise IsosimError(f"--budget {budget:g} affords fewer than {MIN_STEPS} update steps of n = {min(n_values)} at B_p {b_p}")
    return grid
