"""Ways of choosing n that read only a sweep's allowed data, and how to put a new one on the plane.

A :class:`Method` is a name, the cheap runs it may read (which n, to what share of the budget C,
from the replayed seed or from every seed) and a function ``pick(allowed)`` that returns an n (the
same for both readings), a ``{"best": n, "final": n}`` mapping, or None (not scored at this
replay). ``allowed`` (:class:`Allowed`) is everything the method may see at one replay of
:mod:`isosim.validation.plane`: the sweep's settings (its grid, B_p, kind, one run's config), the
base model's profile, the budget, and the declared runs revealed up to ``share`` x C. Nothing else
of the scored sweep reaches the function, so a registered method is leave-one-sweep-out by
construction. A method that learns from measured records declares ``fit``: it is called with the
other sweeps' full records only (the scored sweep and its twin, the same runs continued in a long
sweep, left out), and its result reaches ``pick`` as ``allowed.fitted``.

Registering a method (a simulator calibrated on one cheap run of n = 8 to 2.5 % of C)::

    from isosim.validation import plane_methods as pm

    def simfit_pick(a: pm.Allowed) -> int | None:
        curve = a.runs[a.seed][8]          # the one cheap run: [(rollouts, val avg@4), ...]
        ...                                 # calibrate, simulate every n of a.grid to a.budget
        return n                            # or {"best": n_best, "final": n_final}

    pm.register(pm.Method("simfit @0.025", simfit_pick, runs=(8,), share=0.025,
                          note="base profile + one cheap run of n = 8; simulator calibrated on it"))

placed at the end of this module (``pick`` may live in :mod:`isosim.predict` or :mod:`isosim.sim`,
which this part may import), then ``python studies/scoring/plane.py``: the method is scored on
every sweep, per sweep, overall and held out, in both readings, its overhead the declared runs'
rollouts (every seed's with ``pool_seeds``) less the chosen run's own, in full runs of C. The base
profile of the organism's F8 and long sweeps is ``organism_f8/profile_t06.json`` (their training
set is ``settings["data"]`` limited to ``settings["max_train_problems"]``); the real easy / hard
sweeps' is ``organism/profile.json`` (the T 1.0 pool; ``settings["data"]`` names the split).

Constants (a fixed n, no runs: overhead 0) and the paper's n (:data:`PAPER_N`, the nearest grid n)
are registered here; a constant whose n is not in a replay's grid is not scored there. So is every
calibration of the simulator (:mod:`isosim.predict.simfit`) fitted to cheap runs that
``studies/scoring/simfit.py`` scored (:data:`CALIBRATIONS`, kind ``simfit``; the one it froze is
:data:`isosim.predict.lr_read.FROZEN`): its bank is the sweep's committed one (a simulation of its
setting, no record: :func:`bank_of`), its prior and tie band come from the other sweeps
(:func:`simfit_fit`). The method frozen at 07a27e7 (:data:`SIMFIT_LR`: the frozen calibration read
by :mod:`isosim.predict.lr_read` at 07a27e7's parameters, the anchor at 1,024 rollouts a step and
no measured decay) is registered beside it: the same prior, band and cheap run; under the sqrt rule
every sweep here but one was run at, the same picks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.predict.lr_read import SCORES_FILE, VARIANT
from isosim.validation import readings as rd
from isosim.validation.adaptive import reveal, spent

Curve = list[tuple[float, float]]
PAPER_N = {"easy": 512, "hard": 128}
"""the paper's saturation n* per recipe (PAPER.md finding 2: Qwen2.5-7B easy 512, hard 128)"""
CONSTANTS = (2, 4, 8, 16)
"""fixed n put on the plane: 2 (2-GRPO), 4, 8 (TRL's default ``num_generations``), 16"""
TWINS = {"organism_long/hard-128-long": "organism_f8/hard-128", "organism_long/hard-512-long": "organism_f8/hard-512",
         "organism_long/hard-1238-long": "organism_f8/hard-1238-t06"}
"""a long sweep -> the 2e5 sweep whose runs it continues (the same first 2e5 rollouts)"""


@dataclass(frozen=True)
class Allowed:
    """What a method may read at one replay (one sweep, budget and seed)."""

    sweep: str
    kind: str
    grid: tuple[int, ...]
    """the n a replay at this budget may choose (each can take enough update steps at C)"""
    full_grid: tuple[int, ...]
    """every n the sweep ran"""
    b_p: int
    eval_samples: int | None
    settings: Mapping[str, Any]
    profile: Path | None
    budget: float
    seed: int
    runs: Mapping[int, Mapping[int, Curve]]
    """seed -> n -> the declared runs revealed up to share x budget (the replayed seed only unless
    the method pools seeds)"""
    fitted: Any = None


@dataclass(frozen=True)
class Method:
    """A way of choosing n from a sweep's allowed data (see the module docstring)."""

    name: str
    pick: Callable[[Allowed], int | Mapping[str, int] | None]
    runs: tuple[int, ...] | Callable[[tuple[int, ...]], tuple[int, ...]] = ()
    share: float = 0.0
    pool_seeds: bool = False
    fit: Callable[[Mapping[str, Mapping[str, Any]]], Any] | None = None
    kind: str = "cheap"
    note: str = ""
    reads: dict[str, Any] = field(default_factory=dict)

    def declared(self, grid: Sequence[int]) -> tuple[int, ...]:
        return tuple(self.runs(tuple(grid))) if callable(self.runs) else tuple(self.runs)


REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Put ``method`` on the plane (a name already taken is an error)."""
    if method.name in REGISTRY:
        raise IsosimError(f"a plane method named {method.name!r} is already registered")
    if not 0 <= method.share <= 1:
        raise IsosimError(f"{method.name}: share must be in [0, 1], got {method.share}")
    REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def constant(n: int) -> Method:
    return Method(f"fixed n = {n}", lambda a: n if n in a.grid else None, kind="constant",
                  note=f"n = {n} at every budget, no runs before it; not scored where {n} is not in the replay's grid")


def nearest_in_grid(n: int, grid: Sequence[int]) -> int:
    """The grid's n nearest to ``n`` in octaves, ties to the smaller."""
    return min(grid, key=lambda g: (abs(math.log2(g) - math.log2(n)), g))


def paper_n(kind: str, grid: Sequence[int]) -> int:
    """The paper's n for a sweep of this recipe, as the nearest n of the sweep's full grid."""
    return nearest_in_grid(PAPER_N[kind], grid)


def _paper_pick(a: Allowed) -> int | None:
    n = paper_n(a.kind, a.full_grid)
    return n if n in a.grid else None


PAPER = Method("paper's n", _paper_pick, kind="constant",
               note="the paper's saturation n (easy 512, hard 128) as the nearest n of the sweep's full grid; "
                    "not scored where that n is not in the replay's grid")


for _n in CONSTANTS:
    register(constant(_n))
register(PAPER)


def loso_training(name: str, sweeps: Mapping[str, Any]) -> dict[str, Any]:
    """The sweeps a method scored on ``name`` may learn from: every other one, less its twin."""
    twin = TWINS.get(name) or {v: k for k, v in TWINS.items()}.get(name)
    return {k: v for k, v in sweeps.items() if k not in (name, twin)}


def picks_at(methods: Mapping[str, Method], ctx: Mapping[str, Any], budget: float, grid: list[int], seed: int,
             fitted: Mapping[str, Any]) -> dict[str, tuple[dict[str, int], float]]:
    """Each method's pick per reading and its overhead (full runs) at one replay; methods that
    decline (None, or a pick outside the grid) are left out."""
    sweep, out = ctx["sweep"], {}
    for name, m in methods.items():
        declared = [n for n in m.declared(grid)]
        seeds = sweep["seeds"] if m.pool_seeds else [seed]
        if any(n not in sweep["runs"] or any(s not in sweep["runs"][n] for s in seeds) for n in declared):
            continue
        runs = {s: {n: reveal(sweep["runs"][n][s], m.share * budget) for n in declared} for s in seeds}
        allowed = Allowed(ctx["name"], ctx["kind"], tuple(grid), tuple(sorted(sweep["runs"])), int(sweep["b_p"]),
                          sweep.get("eval_samples"), ctx["settings"], ctx["profile"], float(budget), int(seed), runs,
                          fitted.get(name))
        got = m.pick(allowed)
        if got is None:
            continue
        per = {r: int(got) for r in rd.READINGS} if not isinstance(got, Mapping) else {r: int(got[r]) for r in rd.READINGS}
        if any(v not in grid for v in per.values()):
            continue
        used = sum(spent(c) for s, cs in runs.items() for n, c in cs.items() if not (s == seed and n == per[rd.HEADLINE]))
        out[name] = (per, float(used / budget))
    return out


def hindsight(replays: Sequence[Mapping[str, Any]], reading: str) -> dict[str, Any] | None:
    """For reference, not a method: the fixed n with the lowest mean regret over ``replays`` (each
    with its ``truth`` per reading), among the n every replay can score, chosen after seeing every
    outcome."""
    if not replays:
        return None
    common = set.intersection(*(set(map(int, r["truth"][reading]["mean"])) for r in replays))
    if not common:
        return None
    mean = {n: float(np.mean([rd.regret(r["truth"][reading], n)["regret"] for r in replays])) for n in sorted(common)}
    best = min(mean, key=lambda n: (round(mean[n], 12), n))
    return {"n": best, "mean_regret": mean[best], "replays": len(replays), "per_n": {str(n): v for n, v in mean.items()},
            "note": "chosen after seeing every outcome: a reference line, not a method"}


# ------------------------------------------------------------------------------------------------
# the simfit calibrations: the study's table (``studies/scoring/simfit.py``, a test checks they are
# equal), the committed banks and full fits they are scored with

RESULTS = Path(__file__).resolve().parents[2] / "studies" / "results"
SIMFIT_VARIANT = VARIANT
"""the bank variant the calibrations were scored on (the frozen calibration's)"""
SIMFIT_SCORES_FILE = SCORES_FILE
"""the study's scores of every calibration on the variant's banks, with each sweep's full fits"""
SIMFIT_BANK_FILE = RESULTS / f"simfit_bank_{SIMFIT_VARIANT}.json"
_HARD_128 = (RESULTS / "organism_hard" / f"simfit_bank_{SIMFIT_VARIANT}.json", "hard-t0.6-128")
EXTRA_BANKS = {"organism_hard/hard-128": _HARD_128, "organism_hard_const/hard-128": _HARD_128,
               "organism_const8/hard-256": (RESULTS / "organism_const8" / f"simfit_bank_{SIMFIT_VARIANT}.json",
                                            "hard-t0.6-256")}
"""banks of sweeps outside the nine (a sweep name -> bank file and key); the second learner's sweep at
one lr for every n shares its sqrt-rule sweep's bank (the same setting: a bank simulates every step
size, no lr rule); the first learner's at one lr set for n = 8 has its own (committed with its
predictions)"""
PRIOR_FLOOR = {"log_lr": 0.5, "power": 0.15, "log_h": 0.3, "log_gap": 0.5, "log_d0": 1.0}
"""smallest prior sd of each number (``studies/scoring/simfit.py``, fixed before any scoring)"""
WIDE_LR = 1.5
SIMFIT_MODELS = {"simfit": ("log_lr", "power", "log_h", "log_gap", "log_d0"), "simfit (no gap)": ("log_lr", "power", "log_h")}
_CAL = {"prior": ({}, ()), "n=8 @5%": ({8: 0.05}, ("log_lr", "log_h")), "n=32 @5%": ({32: 0.05}, ("log_lr", "log_h")),
        "n=2+32 @2.5%": ({2: 0.025, 32: 0.025}, ("log_lr", "power", "log_h"))}
CALIBRATIONS: dict[str, dict[str, Any]] = {
    f"{model} {cal}": {"cheap": dict(cheap), "free": free, "model": model, "wide": False, "stay": False}
    for model in SIMFIT_MODELS for cal, (cheap, free) in _CAL.items()}
for _cal in ("n=8 @5%", "n=2+32 @2.5%"):
    for _stay in (False, True):
        CALIBRATIONS[f"simfit (no gap) {_cal} wide" + (", stay" if _stay else "")] = {
            "cheap": dict(_CAL[_cal][0]), "free": _CAL[_cal][1], "model": "simfit (no gap)", "wide": True, "stay": _stay}


def prior_from(fits: Any, model: str, wide: bool) -> dict[str, tuple[float, float]]:
    """Mean and sd (at least :data:`PRIOR_FLOOR`) of each number of ``model`` over full fits; the
    step size's sd at least :data:`WIDE_LR` when ``wide``."""
    thetas = list(fits)
    if not thetas:
        raise IsosimError("a simfit prior needs at least one other learner's full fit")
    prior = {}
    for p in SIMFIT_MODELS[model]:
        vals = np.array([t[p] for t in thetas], float)
        prior[p] = (float(vals.mean()), float(max(vals.std(ddof=1) if len(vals) > 1 else 0.0, PRIOR_FLOOR[p])))
    if wide:
        prior["log_lr"] = (prior["log_lr"][0], max(prior["log_lr"][1], WIDE_LR))
    return prior


@lru_cache(maxsize=None)
def _simfit_scores() -> dict[str, Any]:
    if not SIMFIT_SCORES_FILE.is_file():
        raise IsosimError(f"{SIMFIT_SCORES_FILE} is missing")
    doc = json.loads(SIMFIT_SCORES_FILE.read_text())
    return {"groups": doc["groups"], "fits": {"simfit": doc["full_fits"], "simfit (no gap)": doc["full_fits_no_gap"]}}


@lru_cache(maxsize=None)
def _bank_file(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())["banks"]


def full_fits(model: str) -> dict[str, Any]:
    """Each of the nine organism sweeps' numbers of ``model`` fitted to all its runs (the study's,
    recomputed by its test): the material of the leave-one-sweep-out priors."""
    return _simfit_scores()["fits"][model]


def bank_of(sweep: str) -> dict[str, Any] | None:
    """The committed bank of a scored sweep (the nine organism sweeps', or :data:`EXTRA_BANKS`), or None."""
    if sweep in EXTRA_BANKS:
        path, key = EXTRA_BANKS[sweep]
    else:
        key = _simfit_scores()["groups"].get(sweep)
        path = SIMFIT_BANK_FILE
    if key is None or not Path(path).is_file():
        return None
    bank = dict(_bank_file(str(path)).get(key) or {})
    if not bank:
        return None
    bank.setdefault("n_train", bank["setting"]["n_train"])
    return bank


def simfit_fit(model: str, wide: bool, training: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What a simfit calibration scored on a sweep learns from the other sweeps (``training``): the
    prior from their full fits (those of the nine calibration sweeps among them) and the tie band,
    2 x their mean seed se at their top budget."""
    fits = full_fits(model)
    names = sorted(k for k in training if k in fits)
    ses = [rd.truth_at(training[k]["runs"], training[k]["max_budget"], "best")["seed_se"] for k in names]
    return {"prior": prior_from((fits[k]["theta"] for k in names), model, wide), "band": 2 * float(np.mean(ses)),
            "trained_on": names}


SIMFIT_LR = "simfit lr-aware (frozen, read under the runs' lr rule)"
"""the method frozen at 07a27e7: the frozen calibration read by :mod:`isosim.predict.lr_read` at
07a27e7's parameters (:func:`isosim.predict.lr_read.anchor_07a27e7`,
:data:`isosim.predict.lr_read.CALIBRATION_07A27E7`)"""


def lr_rule(settings: Mapping[str, Any]) -> str:
    """The lr rule a sweep's runs were trained with: their config's ``lr_rule`` (every organism
    sweep records it; a run from before the field existed was trained at the sqrt rule)."""
    from isosim.sim.config import check_lr_rule

    return check_lr_rule(str(settings.get("lr_rule") or "sqrt"))


def simfit_pick(label: str, a: Allowed, read_rule: bool = False) -> dict[str, int] | None:
    """A simfit calibration's picks at one replay (None where the sweep has no committed bank); with
    ``read_rule``, the method frozen at 07a27e7 (:data:`SIMFIT_LR`: under the sqrt rule, the same
    picks)."""
    from isosim.predict import lr_read as lrr

    spec = CALIBRATIONS[label]
    bank = bank_of(a.sweep)
    if bank is None or a.fitted is None:
        return None
    points = [(int(n), float(r), float(v)) for n, c in a.runs[a.seed].items() for r, v in c]
    stay = tuple(spec["cheap"]) if spec["stay"] else ()
    if read_rule:
        lrs, _ = runs_lr(a.settings, sorted(set(a.grid) | set(a.runs[a.seed])))
        base, ref, _ = lr_setting(a.settings)
        anchor = lrr.anchor_07a27e7(base, ref, lr_rule(a.settings))
        got = lrr.choose(bank, points, a.grid, a.budget, lrr.rhos(lrs, a.b_p, anchor), a.fitted["prior"],
                         spec["free"], a.fitted["band"], stay, lrr.CALIBRATION_07A27E7)
    else:
        got = lrr.choose_calibrated(bank, points, a.grid, a.budget, a.fitted["prior"], spec["free"], a.fitted["band"],
                                    stay)
    return {r: got[r]["pick"] for r in rd.READINGS}


def _simfit_methods() -> None:
    """The simulator calibrated on the sweep's cheap runs: every calibration the simfit study scored
    (:data:`CALIBRATIONS`), its prior and tie band fitted on the other sweeps; and the method frozen
    at 07a27e7 (:data:`SIMFIT_LR`)."""
    from functools import partial

    from isosim.predict.lr_read import FROZEN

    def method(name: str, label: str, note: str, read_rule: bool = False) -> Method:
        spec = CALIBRATIONS[label]
        return Method(name, partial(simfit_pick, label, read_rule=read_rule), runs=tuple(spec["cheap"]),
                      share=max(spec["cheap"].values(), default=0.0),
                      fit=partial(simfit_fit, spec["model"], spec["wide"]), kind="simfit", note=note)

    for label, spec in CALIBRATIONS.items():
        cheap = ", ".join(f"n = {n} to {s:g} C" for n, s in spec["cheap"].items()) or "no run"
        note = (f"simulator ({SIMFIT_VARIANT} bank of the sweep's setting) calibrated on {cheap}; prior and tie band from "
                "the other sweeps' full fits" + ("; keeps the measured n when it is in the simulated tie band"
                                                 if spec["stay"] else "")
                + ("; the method frozen before the second learner" if label == FROZEN else ""))
        register(method(label, label, note))
    register(method(SIMFIT_LR, FROZEN, "the frozen calibration (" + FROZEN + ") read under the runs' lr rule "
                    "(config.json lr_rule): the step's exponent shifted by the rule's, a decay for the walk beyond the "
                    "sqrt rule fitted to the same cheap run; under the sqrt rule, the frozen calibration itself",
                    read_rule=True))


LR_READ_ONE = "lr-read n=8 @5%"
LR_READ_EVERY = "lr-read every n @5%"
"""the simfit model read at each run's lr (:mod:`isosim.predict.lr_read`): one cheap run of n = 8
(the frozen calibration's), or every n's cheap curves"""


def lr_setting(settings: Mapping[str, Any]) -> tuple[float, float, int]:
    """``base_lr``, ``lr_ref_batch`` and B_p of a sweep's config (every organism sweep records them;
    a run from before the fields existed: 3e-4 at 1,024)."""
    return (float(settings.get("base_lr") or 3e-4), float(settings.get("lr_ref_batch") or 1024),
            int(settings.get("b_p") or 16))


def runs_lr(settings: Mapping[str, Any], grid: Sequence[int]) -> tuple[dict[int, float], Any]:
    """Each grid n's lr, as the sweep's config derives it (``base_lr`` by ``lr_rule`` from
    ``lr_ref_batch``), and the anchor: ``base_lr`` at ``lr_ref_batch``, where the runs' lr was set."""
    from isosim.predict import lr_read as lrr

    base, ref, b_p = lr_setting(settings)
    return (lrr.lrs_by_rule(grid, b_p, base, ref, lr_rule(settings)),
            lrr.Anchor(base, ref, "config.json base_lr at lr_ref_batch"))


def lr_read_pick(every: bool, a: Allowed) -> dict[str, int] | None:
    """The lr-read model's picks at one replay (None where the sweep has no committed bank)."""
    from isosim.predict import lr_read as lrr

    bank = bank_of(a.sweep)
    if bank is None or a.fitted is None:
        return None
    lrs, anchor = runs_lr(a.settings, sorted(set(a.grid) | set(a.runs[a.seed])))
    runs = {int(n): {a.seed: c} for n, c in a.runs[a.seed].items()}
    got = lrr.read_runs(bank, runs, list(a.grid), a.budget, lrs, anchor, a.fitted["prior"],
                        a.fitted["band"], lrr.learner_calibration(), every=every)
    return {r: got[r]["pick"] for r in rd.READINGS}


def _lr_read_methods() -> None:
    from functools import partial

    from isosim.predict.lr_read import FROZEN

    fit = partial(simfit_fit, "simfit (no gap)", True)
    register(Method(LR_READ_ONE, partial(lr_read_pick, False), runs=(8,), share=0.05, fit=fit, kind="simfit",
                    note="the frozen calibration (" + FROZEN + ") with each run read at its lr over the sqrt "
                    "rule's from where the runs' lr was set, and the learner's over-stepping decay (lr grid)"))
    register(Method(LR_READ_EVERY, partial(lr_read_pick, True), runs=lambda g: tuple(g), share=0.05, fit=fit,
                    kind="simfit", note="the same model fitted to every n's cheap curve (step, exponent, ceiling); "
                    "keeps the cheap leader when it is in the model's tie band"))


_simfit_methods()
_lr_read_methods()
