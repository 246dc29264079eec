"""The playbook as a function: a budget and a difficulty profile in, an allocation out.

``recommend`` simulates (or reuses a cached) Q1 sweep for the user's profile up to the user's
budget, reads ``n*`` at that budget with the frontier analysis, and fills in the rest the way
the IsoCompute study recommends (PAPER.md, finding 5 and the "healthy recipe"):

1. ``n`` and ``B_p``: a grid of n from 2 to 2048 (powers of two) at B_p 32 and 128 (8 added for a small
   max batch) is simulated; each cell's value at the budget is read on the capped frontier (never above
   what its runs reached), and one criterion picks: the tie band is every cell within 2 standard errors
   of the best, the pick its cell with the most update steps (:mod:`isosim.predict.choice`).
2. (``B_p`` is the pick's.)
3. ``M``: the rest of the budget, ``floor(C / (B_p * n))``.
4. ``lr``: ``1e-6 * sqrt(B_p * n / 1024)`` (the sqrt rule from the paper's base, as ``isosim plan``
   writes it by default: :mod:`isosim.integrations.lr`).
5. KL and entropy: what the prediction was simulated with (``recipe``, with the SimConfig
   behind it in ``simulated_config``): a prediction only speaks for the recipe it simulated.
   The paper advises KL + entropy for easy sets and neither for hard sets ("hard" = at least
   half the problems with base pass@1 below 1/16, measured on the profile, never read from its
   name); where that advice differs from the simulated recipe, ``recipe_mismatch`` says so.

Every choice comes with a one-line reason. Simulated budgets are counted in the simulator's
rollouts; how they map onto a real model's rollouts is what ``isosim validate`` checks.

On a built-in preset at the defaults the read comes from the shipped answer bank (:mod:`isosim.predict.bank`:
the same sweeps simulated and read ahead of time at 1, 2 and 5 per decade; a budget between two is read on
the upper one's curves and says so), in a second or two instead of minutes.

The simulated sweep stops at ``SIM_BUDGET_CAP`` rollouts (the paper's full budget): a budget above
it reads ``n`` at the cap (every larger budget shares that one cached sweep) and says so, while
``B_p`` and ``M`` are still chosen for the budget asked.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from isosim.errors import IsosimError
from isosim.predict import choice
from isosim.sim.config import LR_REF_BATCH, MAX_BUDGET, scaled_lr
from isosim.sim.presets import hard_share

BASE_LR = 1e-6
"""the lr at the reference batch: the paper's base, and TRL's default learning_rate"""
B_REF = LR_REF_BATCH
SIM_BUDGET_CAP = 1e7
"""largest budget simulated (the paper's full sweep; a sweep to it takes about 25 s on one core)"""


@dataclass
class Recommendation:
    """What to run, and why."""

    budget: float
    n: int
    b_p: int
    m: int
    lr: float
    kl: bool
    entropy: bool
    recipe: str
    n_sat: float | None
    """the fitted saturation n, only where n*(C) has saturated by the budget (``saturated_by_budget``);
    otherwise None and ``n_sat_reason`` says why"""
    n_sat_ci: list | None
    metric: str
    predicted: dict  # budgets, n_star, reward, n_tol, n_tie_hi, learning of the simulated frontier
    reasons: dict = field(default_factory=dict)
    sweep_dir: str = ""
    hard_share: float = 0.0
    """share of problems with base pass@1 < 1/16 in the profile"""
    advised_recipe: str = ""
    """the paper's recipe for that share: hard (>= half hard problems) or easy"""
    recipe_mismatch: bool = False
    """the simulated recipe (``recipe``) differs from the advised one"""
    simulated_config: dict = field(default_factory=dict)
    """the SimConfig fields of the simulated sweep behind the prediction (all runs share them)"""
    train_size: int | None = None
    """the training-set size simulated (given, or the preset's default)"""
    train_size_source: str = ""
    """``given`` or ``preset default``"""
    saturated_by_budget: bool | None = None
    """n*(C) has reached its fitted plateau a decade before the budget (n_sat is then reported);
    False: not saturated by the budget (n_sat would only be where the simulated grid stops)"""
    n_interval: list | None = None
    """[lo, hi] of n* at the budget over the bootstrap of simulated seeds (from the tie band)"""
    expected_regret: float | None = None
    """simulated frontier reward at the budget minus the recommended n's (the cost of the choice)"""
    noise_se: float | None = None
    """standard error of a seed mean of the simulated metric (run-to-run sd / sqrt(seeds))"""
    indistinguishable: list = field(default_factory=list)
    """n whose simulated reward at the budget is within 2 noise_se of the recommended n's"""
    calibrated: dict | None = None
    """the profile's dynamics calibration (preset, fitted settings, cheap runs) when it has one"""
    track_record: list = field(default_factory=list)
    """what uncalibrated (profile-only) predictions scored on real sweeps (studies/results/scoreboard.json)"""
    n_sat_reason: str | None = None
    """why ``n_sat`` is None (not saturated by the budget, or no learning simulated); None when it is given"""
    fitted_upper_n: float | None = None
    """the upper level of the sigmoid fitted to the simulated n*(C), whether or not it is a saturation
    point (None without learning); ``isosim validate`` centres its runs on it"""
    regret_reason: str | None = None
    """why ``expected_regret`` is None (no learning simulated, or a single n simulated)"""
    simulated_budget: float | None = None
    """the budget the simulated sweep ran to: the budget asked, or ``SIM_BUDGET_CAP`` above it"""
    allocation: dict = field(default_factory=dict)
    """whether per-problem allocation is predicted to pay here (:func:`isosim.predict.allocation.advice`;
    empty when not asked)"""
    tie_band: list = field(default_factory=list)
    """the cells (``n``, ``b_p``, ``expected_regret``) within 2 se of the best cell at the budget"""
    band_se: float | None = None
    """standard error of the difference of two seed means (sqrt(2) x noise_se): the unit of the band
    and of every ``+-``; it covers seed noise only, not the simulator's error against a real learner"""
    grid: dict = field(default_factory=dict)
    """the simulated grid: ``n_values``, ``b_p_values``, ``n_floor``, ``n_ceiling``, ``cells`` and ``text``"""
    n_matters: dict = field(default_factory=dict)
    """does n matter at this budget (:func:`isosim.predict.choice.matters_line`) and the regime"""
    bank: str = ""
    """where the read came from when the shipped answer bank gave it (:mod:`isosim.predict.bank`); empty when
    the sweep was simulated (or read from the cache)"""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


ADVICE = {"easy": "KL to base + entropy bonus: without them entropy collapses",
          "hard": "no KL and no entropy bonus: with them entropy and length explode"}


def simulated_recipe(config: dict[str, Any]) -> str:
    """The recipe a simulated config trains with: ``easy`` (KL and entropy bonus on), ``hard``
    (both off) or ``kl-only`` / ``entropy-only``."""
    kl, ent = float(config.get("kl", 0.0)) > 0, float(config.get("entropy", 0.0)) > 0
    return {(True, True): "easy", (False, False): "hard", (True, False): "kl-only", (False, True): "entropy-only"}[
        (kl, ent)]


def cache_dir() -> Path:
    """Where simulated sweeps for recommendations are kept (``ISOSIM_CACHE`` overrides)."""
    from isosim.files import cache_root

    return cache_root() / "recommend"


def saturated_by(result: dict[str, Any], budget: float) -> bool | None:
    """Whether the fitted n*(C) reached its plateau a decade before ``budget``: n*(C / 10) within
    half an octave of n_sat, and the fit saturated. Otherwise the fitted n_sat is only where the
    simulated budgets stop (it grows with the budget asked), not a property of model and data."""
    from isosim.frontier.fits import NStarFit

    fit = result["fit"]
    if fit.get("n_sat") is None:
        return None
    if not fit.get("saturated"):
        return False
    f = NStarFit(lo=math.log2(fit["n_low"]), hi=math.log2(fit["n_sat"]), log_c_mid=fit["log_c_mid"],
                 slope=fit["slope"], loss=0.0)
    return bool(abs(math.log2(float(f.predict(budget / 10.0))) - f.hi) <= 0.5)


def _n_sat_text(result: dict[str, Any]) -> str:
    fit = result["fit"]
    if fit["n_sat"] is None:
        return f"no fitted saturation n_sat ({fit.get('reason') or 'no simulated budget shows learning beyond the noise'})"
    budget = float(result["budgets"][-1])
    if not saturated_by(result, budget):
        return (f"n* is not saturated by C = {budget:.3g} (no plateau inside the simulated grid a decade before "
                f"it; the fitted upper level {fit['n_sat']:.0f} is not a saturation point)")
    txt = f"fitted saturation n_sat = {fit['n_sat']:.0f}"
    if fit.get("at_floor"):
        txt += " (not saturated: the fit sits at the smallest n simulated)"
    elif fit.get("saturated") is False:
        txt += " (not saturated: the fit reaches the largest n simulated)"
    tol = result.get("fit_tol") or {}
    if tol.get("n_sat") is not None:
        txt += f"; smallest tied n saturates at {tol['n_sat']:.0f}"
    return txt


PRESIMULATED_PRESETS = ("easy", "hard")
"""the presets whose sweep to the cap ships as records (``bank=False`` reads them; the answer bank of
:mod:`isosim.predict.bank` holds every built-in preset's read at the cap, very-easy and extreme included)"""
PRESIMULATED = Path(__file__).resolve().parent / "presimulated"
"""the built-in presets' sweeps to the cap at recommend's defaults (``scripts/presimulate.py`` writes
them; a test re-simulates part of each and compares): copied into the cache on first use, so a budget
past the cap is answered in seconds on a fresh install"""


def sweep_plan(budget: float, *, preset: str = "easy", profile: str | None = None, b_max: int = 65536,
               problems: int | None = None, quick: bool = False, seeds: int = 2) -> tuple[Any, dict[str, Any]]:
    """The sweep plan ``recommend`` simulates for these settings (the (n, B_p) grid of
    :func:`isosim.predict.choice.sim_grid` to the budget, at most ``SIM_BUDGET_CAP``), and the preset's
    settings with the overrides applied."""
    from isosim.sim.presets import get_preset
    from isosim.sweeps.plans import plan_for_preset

    overrides: dict[str, Any] = {}
    if profile is not None:
        from isosim.sim.profiles import read_profile

        read_profile(profile)
        overrides["profile"] = str(Path(profile).resolve())
    if problems is not None:
        overrides["n_train"] = int(max(problems, 32))
    settings = {**get_preset(preset), **overrides}
    ns, bps = choice.sim_grid(b_max, quick)
    plan = plan_for_preset(preset, "q3", quick=quick, seeds=seeds, budget_max=min(float(budget), SIM_BUDGET_CAP),
                                 n_values=ns, b_p_values=bps, b_max=b_max, **overrides)
    return plan, settings


def check_request(budget: float, b_max: int, problems: int | None, quick: bool = False) -> None:
    """Refuse in one sentence what no simulated cell can answer: a budget that is not a positive number,
    an implausible one (``MAX_BUDGET``), a max batch below the smallest step simulated, a budget below it."""
    if not (isinstance(budget, (int, float)) and math.isfinite(budget)) or budget <= 0:
        raise IsosimError(f"budget must be a positive number of rollouts (got {budget!r})")
    if budget > MAX_BUDGET:
        raise IsosimError(f"budget {budget:.3g} rollouts is beyond any plausible run (at most {MAX_BUDGET:.0e}: "
                          f"a million times the paper's largest sweep, 30 years at 10,000 rollouts a second); "
                          "is it in rollouts (not tokens)?")
    if b_max < 1:
        raise IsosimError(f"max batch must be >= 1 (got {b_max})")
    if problems is not None and problems < 1:
        raise IsosimError(f"problems must be >= 1 (got {problems})")
    ns, bps = choice.sim_grid(b_max, quick)
    smallest = min(bps) * min(ns)
    if smallest > b_max:
        raise IsosimError(f"max batch {b_max} rollouts a step is below the smallest step recommend simulates "
                          f"(B_p {min(bps)} x n {min(ns)} = {smallest}); raise --max-batch")
    if budget < smallest:
        raise IsosimError(f"budget {budget:g} rollouts is below one step of the smallest allocation simulated "
                          f"(B_p {min(bps)} x n {min(ns)} = {smallest})")


def recommend(budget: float, *, preset: str | None = None, profile: str | None = None, b_max: int = 65536,
              problems: int | None = None, metric: str = "val_avg", quick: bool = False, seeds: int = 2,
              progress: bool = False, allocation: bool = True, bank: bool = True,
              log: Callable[[str], None] | None = None) -> Recommendation:
    """Simulate the (n, B_p) grid for this profile up to ``budget`` and derive the allocation; with
    ``allocation``, also whether a per-problem allocation rule is predicted to pay (at the
    recommended n and B_p: :func:`isosim.predict.allocation.advice`). With ``bank``, a built-in preset
    at the defaults is read from the shipped answer bank instead (:mod:`isosim.predict.bank`).
    ``progress`` shows a bar on stderr; otherwise ``log`` (if given) receives one line per stage."""
    from isosim.predict import bank as answer_bank

    check_request(budget, b_max, problems, quick)
    name = preset or "easy"
    plan, settings = sweep_plan(budget, preset=name, profile=profile, b_max=b_max, problems=problems, quick=quick,
                                seeds=seeds)
    sim_budget = max(c.budget for c in plan.cells)
    store: Path | str = ""
    got = None
    if bank and answer_bank.applies(name, profile, b_max, problems, metric, quick, seeds):
        got = answer_bank.lookup(name, budget, lambda c: sweep_plan(c, preset=name)[0].plan_id, SIM_BUDGET_CAP)
    if got is not None:
        read = got["read"]
    else:
        store, read = _simulate_and_read(plan, metric, 10 if quick else 100, progress, log)
    top = read["top"]
    sure = certainty(read, seeds)
    n, b_p = sure.pop("pick")
    result = read["analyses"][b_p]
    best_n, best_b_p = sure.pop("best")
    ns, bps = choice.sim_grid(b_max, quick)
    grid = {"n_values": sorted({c.n for c in plan.cells}), "b_p_values": sorted({c.b_p for c in plan.cells}),
            "n_floor": min(ns), "n_ceiling": max(ns), "cells": sorted(read["cells"]),
            "text": choice.grid_text(ns, sorted({c.b_p for c in plan.cells}), sorted(read["cells"]))}
    band_n = sorted({c["n"] for c in sure["tie_band"]})
    if sure["expected_regret"] is None:
        why_n = (f"simulated at {_read_at(budget, top, sim_budget)}: {sure['regret_reason']}; the pick is the "
                 f"smallest n competing, {n}; ")
    else:
        band_cells = [(c["n"], c["b_p"]) for c in sure["tie_band"]]
        why_n = (f"simulated at {_read_at(budget, top, sim_budget)}, the best cell is n = {best_n} at B_p "
                 f"{best_b_p} ({metric}, each n's fitted curve capped by its measured best); the tie band "
                 f"(within {choice.Z_BAND:g} se of it) holds n in {choice.set_text(band_n)}; "
                 f"{choice.pick_reason((n, b_p), (best_n, best_b_p), band_cells, budget)}; ")
    reasons = {"n": why_n + _n_sat_text(result),
               "b_p": (f"the best B_p simulated for n = {n} (B_p in {choice.set_text(grid['b_p_values'])} were "
                       f"simulated, each with B_p x n <= max batch {b_max})")}
    m = int(budget // (b_p * n))
    reasons["m"] = f"the rest of the budget goes to sequential steps: floor({budget:g} / ({b_p} x {n})) = {m}"
    lr = scaled_lr(BASE_LR, b_p * n, B_REF, "sqrt")
    reasons["lr"] = lr_reason(b_p, n, settings.get("lr_rule", "sqrt"))
    share = hard_share(settings.get("profile", name))
    simulated = {k: v for k, v in plan.base.items()}
    kl, entropy = float(simulated.get("kl", 0.0)), float(simulated.get("entropy", 0.0))
    recipe = simulated_recipe(simulated)
    advised = "hard" if share >= 0.5 else "easy"
    mismatch = recipe != advised
    reasons["kl"] = (f"the prediction was simulated with KL {kl:g} and entropy bonus {entropy:g} (the {recipe} "
                     f"recipe), so it speaks for that recipe; {share:.0%} of problems have base pass@1 < 1/16, "
                     f"for which the paper advises the {advised} recipe"
                     + (" (" + ADVICE[advised] + ")" if not mismatch else "")
                     + (f": MISMATCH, a run on the {advised} recipe is not what was simulated" if mismatch else "")
                     + ("; these are the simulator's coefficients, not a trainer's settings: TRL's beta and "
                        "entropy_coef (verl's kl_loss_coef and entropy_coeff) are on other scales, and what carries "
                        "over is whether each is on" if kl or entropy else ""))
    fit_upper = None if result["fit"]["n_sat"] is None else float(result["fit"]["n_sat"])
    saturated = saturated_by(result, top)
    if fit_upper is None:
        n_sat_reason = ("no n*(C) fit: " + "; ".join(w for w in result["warnings"] if "distinct n" in w)
                        if any("distinct n" in w for w in result["warnings"]) else
                        "no learning simulated: no simulated budget gains beyond the seed noise")
    elif not saturated:
        why = (f"the fitted upper level {fit_upper:.0f} sits at the grid's floor" if result["fit"].get("at_floor") else
               f"the fitted upper level {fit_upper:.0f} is where the grid stops" if not result["fit"].get("saturated") else
               f"the fitted n*(C) does not reach its upper level, {fit_upper:.0f}, by C / 10")
        n_sat_reason = (f"not saturated by C = {top:.3g}: n* reached no plateau inside the simulated grid a decade "
                        f"before it ({why}: not a saturation point)")
    else:
        n_sat_reason = None
    if sure["expected_regret"] is not None:
        reg = choice.regime(result["budgets"], result["n_star"], result.get("learning"))
        matters = choice.matters_line(choice.per_n_regret(sure.pop("regret")), band_n, sure["band_se"], top,
                                      reg["text"], "This is the simulator's view (uncalibrated unless said), "
                                      "not a measurement.")
        matters["regime"] = reg
    else:
        sure.pop("regret", None)
        matters = {}
    alloc = {}
    shipped_alloc = [e["allocation"] for e in (got or {}).get("entries", ())
                     if e.get("allocation") and e["allocation_n"] == n and e["allocation_b_p"] == b_p]
    if allocation and shipped_alloc:  # the advice the bank computed at this n (its source names its budget)
        alloc = shipped_alloc[0]
    elif allocation:
        from isosim.predict import allocation as A

        size = int(plan.base.get("n_train", settings.get("n_train")))
        if log is not None and not progress:
            log(f"allocation rules: reading or simulating their advice at n = {n}")
        alloc = A.advice({**simulated, "b_p": min(b_p, size), "n_train": size}, n, float(budget),
                         preset=name if profile is None else None, train_size=size, cache=cache_dir(),
                         simulate=_on_two_cores)
    return Recommendation(
        budget=float(budget), n=n, b_p=b_p, m=m, lr=lr, kl=kl > 0, entropy=entropy > 0, recipe=recipe,
        n_sat=fit_upper if n_sat_reason is None else None,
        n_sat_ci=result["fit"].get("n_sat_ci") if n_sat_reason is None else None, metric=metric,
        predicted={k: result[k] for k in ("budgets", "n_star", "reward", "n_tol", "n_tie_hi", "learning")},
        reasons=reasons, sweep_dir=str(store), hard_share=share, advised_recipe=advised, recipe_mismatch=mismatch,
        simulated_config=simulated, train_size=int(plan.base.get("n_train", settings.get("n_train", 0)) or 0) or None,
        train_size_source="given" if problems is not None else "preset default",
        saturated_by_budget=saturated, **sure,
        calibrated=_calibration(profile), track_record=[] if _calibration(profile) else track_record(),
        n_sat_reason=n_sat_reason, fitted_upper_n=fit_upper, simulated_budget=sim_budget,
        allocation=alloc, grid=grid, n_matters=matters,
        bank="" if got is None else answer_bank.describe(got, float(budget)),
    )


def _simulate_and_read(plan: Any, metric: str, n_boot: int, progress: bool,
                       log: Callable[[str], None] | None) -> tuple[Path, dict[str, Any]]:
    """Simulate (or read from the cache, or copy from the shipped sweeps to the cap) the plan's sweep, and
    read it (:func:`isosim.predict.choice.read_grid`): the store and the read."""
    from isosim.sweeps import sweep

    from isosim.predict.bank import seed_store

    store = cache_dir() / plan.plan_id
    seed_store(plan.plan_id, store, PRESIMULATED)  # a preset's sweep to the cap, shipped
    # the cache is shared: a second process asking for the same sweep waits for the first, then reads it
    # a bar on a terminal; elsewhere (with log) a start line and a line every 10 s
    # one engine call for the whole sweep, its batches on two cores where there are two (the records do not
    # depend on either: a run's computation is its own)
    from isosim.sim import workers

    workers.warm_after("isosim.frontier.analysis")  # the read below sends the helper half of it
    df = sweep.run_sweep(plan, store, progress=progress or log is not None, wait=True, log=log,
                         chunk_size=max(plan.n_runs, 1), workers=_workers())
    if progress:
        from rich.console import Console

        with Console(stderr=True).status("fitting the frontier of the simulated sweep"):
            return store, choice.read_grid(df, metric, n_boot)
    if log is not None:
        log(f"fitting the frontier of the simulated sweep ({n_boot} bootstrap resamples)")
    return store, choice.read_grid(df, metric, n_boot)


def _workers() -> int:
    """The engine's workers for recommend's own simulations: two where there are two cores."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _on_two_cores(cfgs: list) -> Any:
    """:func:`isosim.sim.engine.simulate` with :func:`_workers` (imported only when called)."""
    from isosim.sim.engine import simulate

    return simulate(cfgs, workers=_workers())


def lr_reason(b_p: int, n: int, simulated_rule: str) -> str:
    """Why the pick's lr: the sqrt rule from the paper's base at the reference batch, and the rule the
    simulation assumed."""
    return (f"the sqrt rule: {BASE_LR:g} x sqrt({b_p * n} / {B_REF}) (the paper's base at a {B_REF}-rollout step; "
            f"linear was unstable at B = 8192); the simulation assumed the {simulated_rule} rule; at one lr for every "
            "n, small n fell behind on the measured learner (isosim plan --lr-rule says more)")


FIXED_N8 = ("on every real learner measured (the organism's nine sweeps and the second learner, "
            "studies/results/plane.json), a fixed n = 8 did as well as such profile-only predictions")
"""what uncalibrated predictions are worth against TRL's default n on the real learners (issue 48)"""


def cheap_sweep_line(budget: float) -> str:
    """The profile-only caveat: a fixed n = 8 did as well on the real learners, and the cheap sweep
    that checks it on the user's own model."""
    return (f"caveat: {FIXED_N8}; check it on your model with the cheap sweep: isosim plan --for trl|verl "
            f"--budget {budget:.3g} --out SWEEP, run it, then isosim recommend --runs SWEEP/runs --budget {budget:.3g}")


def _short(c: float) -> str:
    from isosim.frontier.wording import short_budget

    return short_budget(c)


def _read_at(budget: float, top: float, sim_budget: float) -> str:
    """Where n was read, against the budget asked: the same C, or the largest simulated budget
    below it (a capped sweep, or runs whose whole steps stop short of C)."""
    if sim_budget < budget:
        return (f"C = {_short(top)} rollouts (not at the budget asked, C = {budget:.3g}: the simulated sweep stops "
                f"at {_short(SIM_BUDGET_CAP)}, beyond which a sweep would take hours)")
    if top < 0.95 * budget:
        return (f"C = {top:.3g} rollouts (the furthest a simulated run reached in whole steps; runs that stopped "
                f"within one step of it compete there; the budget asked is {budget:.3g})")
    return f"C = {budget:.3g} rollouts"


def certainty(read: dict[str, Any], seeds: int) -> dict[str, Any]:
    """The pick and how sure it is at the top budget, from :func:`isosim.predict.choice.read_grid`:
    the tie band and the pick by one criterion (:func:`isosim.predict.choice.pick_cell`), the pick's
    expected regret (best cell minus its own, never negative), the n of the band, the bootstrap
    interval of n* at the pick's B_p. Without learning at the top budget, or with a single cell, there
    is no regret to state: ``regret_reason`` says which (the pick is then the smallest n competing)."""
    cells = read["cells"]
    top = float(read["top"])
    se = float(read.get("noise") or 0.0) / math.sqrt(max(seeds, 1))
    se_diff = math.sqrt(2.0) * se
    got = choice.pick_cell(cells, se_diff)
    b_p = got["pick"][1]
    result = read["analyses"][b_p]
    band = result.get("n_star_band")
    interval = None if not band else [float(band["lo"][-1]), float(band["hi"][-1])]
    tie = [{"n": n, "b_p": bp, "expected_regret": got["regret"][(n, bp)]} for n, bp in got["band"]]
    base = {"pick": got["pick"], "best": got["best"], "noise_se": se, "band_se": se_diff, "tie_band": tie,
            "regret": got["regret"]}
    learning = result.get("learning")
    if learning is not None and not learning[-1]:
        smallest = min(cells, key=lambda c: (c[0], -cells[c]))
        return {**base, "pick": smallest, "n_interval": None, "expected_regret": None, "indistinguishable": [],
                "tie_band": [], "regret_reason": (f"no learning simulated by C = {top:.3g} (no n gains beyond the "
                                                  "seed noise), so the choice of n has no simulated cost to measure")}
    if len(cells) < 2:
        only = ", ".join(f"n = {n} at B_p {bp}" for n, bp in cells)
        return {**base, "n_interval": None, "expected_regret": None, "indistinguishable": [], "tie_band": [],
                "regret_reason": f"only {only} was simulated to C = {top:.3g}: nothing to compare it with"}
    close = sorted({n for n, _ in got["band"] if n != got["pick"][0]})
    return {**base, "n_interval": interval, "expected_regret": float(got["regret"][got["pick"]]),
            "indistinguishable": close, "regret_reason": None}


def _calibration(profile: str | None) -> dict[str, Any] | None:
    """The dynamics block and the cheap runs of a calibrated profile (None for a rates-only one)."""
    if profile is None:
        return None
    import json

    try:
        doc = json.loads(Path(profile).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("dynamics"), dict):
        return None
    fit = doc.get("fit") or {}
    return {"preset": doc["dynamics"].get("preset"), "fitted": doc["dynamics"].get("fitted"),
            "runs": fit.get("runs"), "n_values": fit.get("n_values"), "max_rollouts": fit.get("max_rollouts"),
            "rmse": fit.get("rmse")}


SCOREBOARD = Path(__file__).resolve().parents[2] / "studies" / "results" / "scoreboard.json"


def track_record(path: Path = SCOREBOARD) -> list[dict[str, Any]]:
    """What the uncalibrated (profile-only) predictions scored on the real sweeps of the scoreboard:
    per sweep, the n picked at the top budget, its regret and the seed noise. Empty without one."""
    import json

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for key, sweep in (doc.get("sweeps") or {}).items():
        r = (sweep.get("predictors") or {}).get("isosim_profile") or {}
        if r.get("regret") is None:
            continue
        b = (sweep.get("predictors_best") or {}).get("isosim_profile") or {}
        best = sweep.get("n_best_raw") or [None]
        out.append({"sweep": key, "n_pick": r["n_pick"], "n_best": best[-1], "regret": r["regret"],
                    "noise": r["noise"], "octaves_max": r.get("octaves_max"),
                    "regret_best": b.get("regret"), "noise_best": b.get("noise")})
    return out


def track_record_lines(records: list[dict[str, Any]]) -> list[str]:
    """One line per real sweep: the profile-only pick's regret in both readings, each named."""
    lines = []
    for t in records:
        best = ("" if t.get("regret_best") is None else
                f"regret {t['regret_best']:.4f} in the best reading (seed noise {t['noise_best']:.4f}), ")
        lines.append(f"  on the real sweep {t['sweep']}, profile-only picked n = {t['n_pick']} at the top budget: "
                     f"{best}{t['regret']:.4f} in the final reading (seed noise {t['noise']:.4f}; "
                     f"the final reading's best n: {t['n_best']})")
    return lines


def certainty_lines(r: Recommendation) -> list[str]:
    """What the recommendation rests on and how sure it is, as lines for the terminal."""
    lines = [f"training-set size simulated: {r.train_size} ({r.train_size_source})"]
    if r.simulated_budget is not None and r.simulated_budget < r.budget:
        lines.append(f"simulated to {_short(r.simulated_budget)} rollouts, not to C = {r.budget:.3g}: the simulated "
                     f"sweep stops at {_short(SIM_BUDGET_CAP)} (a sweep to C would take hours); n is read there"
                     + (", where n*(C) has saturated, so it holds beyond" if r.saturated_by_budget else
                        ", where n*(C) has not saturated: at C a larger n may do better, which the simulation "
                        "cannot say"))
    if r.n_sat is None:
        lines.append(f"predicted n_sat: none ({r.n_sat_reason})")
    else:
        ci = f" ({r.n_sat_ci[0]:.0f}-{r.n_sat_ci[1]:.0f})" if r.n_sat_ci else ""
        lines.append(f"predicted n_sat = {r.n_sat:.0f}{ci}")
    if r.grid:
        lines.append(f"grid: {r.grid['text']}")
    if r.n_interval:
        lines.append(f"n* at C over the simulated seeds' bootstrap (at B_p {r.b_p}): "
                     f"{r.n_interval[0]:.0f} to {r.n_interval[1]:.0f}")
    if r.expected_regret is not None:
        lines.append(f"expected regret of n = {r.n} at B_p {r.b_p}: {r.expected_regret:.4f} {r.metric} below the best "
                     f"simulated cell (se {r.band_se:.4f}: seed noise of a difference of two seed means only, "
                     "not the simulator's error against a real learner)")
    elif r.regret_reason:
        lines.append(f"expected regret: none to state ({r.regret_reason})")
    if r.tie_band:
        cells = ", ".join(f"n {c['n']} B_p {c['b_p']} ({c['expected_regret']:.4f})" for c in r.tie_band)
        lines.append(f"tie band: n in {choice.set_text([c['n'] for c in r.tie_band])}, the cells within "
                     f"{choice.Z_BAND:g} x {r.band_se:.4f} of the best ({cells}): any of them is as good by this "
                     "prediction; the pick is the one with the most update steps")
    if r.n_matters:
        lines.append(r.n_matters["line"])
    if r.calibrated:
        c = r.calibrated
        lines.append(f"calibrated: dynamics fitted to real runs {c.get('runs')} (n {c.get('n_values')}, records "
                     f"<= {c.get('max_rollouts')} rollouts, rmse {c.get('rmse') or float('nan'):.3g}) on the "
                     f"{c.get('preset')} preset")
    else:
        lines.append("uncalibrated: this is the simulator's preset dynamics, fitted to no run of yours (a profile gives "
                     "only pass rates); "
                     "calibrate on cheap real runs (isosim calibrate --dynamics, isosim predict) before trusting it")
        lines.append(cheap_sweep_line(r.budget))
        lines.extend(track_record_lines(r.track_record))
        if not r.track_record:
            lines.append("  (no scoreboard of real sweeps found: studies/results/scoreboard.json)")
    from isosim.predict.allocation import advice_lines

    lines.extend(advice_lines(r.allocation))
    lines.append(r.bank or f"simulated sweep in {r.sweep_dir}")
    return lines


def bank_entry(preset: str, budget: float) -> dict[str, Any]:
    """One entry of a preset's answer bank (:mod:`isosim.predict.bank`), computed as :func:`recommend`
    computes it: the sweep to ``budget`` (simulated into the cache, or read from it), its read, and the
    recommendation's pick and allocation advice."""
    from isosim.predict import bank
    from isosim.sweeps import sweep

    plan, _ = sweep_plan(budget, preset=preset)
    r = recommend(budget, preset=preset, bank=False)
    read = choice.read_grid(sweep.load_store(cache_dir() / plan.plan_id)[1], bank.METRIC, bank.N_BOOT)
    return {"budget": float(budget), "preset": preset, "plan_id": plan.plan_id,
            "sim_budget": max(c.budget for c in plan.cells), "pick": [r.n, r.b_p],
            "allocation_n": r.n, "allocation_b_p": r.b_p, "allocation": r.allocation, "read": bank.encode_read(read)}
