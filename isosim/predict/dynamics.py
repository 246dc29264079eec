"""Dynamics calibration: fit the simulator's few free dynamical settings to cheap real runs.

``isosim calibrate --dynamics RUNS --profile FILE --n 4,32 --max-rollouts 2e4 --out OUT.json``
(or :func:`calibrate_dynamics`). A difficulty profile fixes the problems; how fast a real learner
moves on them, how much of what it learns on one problem carries to the others and what holds it
back are not in the profile. This module reads a handful of cheap real runs of the same model and
data (a few values of ``n`` at small budgets), simulates the same runs (same ``n``, ``B_p``,
training and validation sizes and number of seeds; one simulated rollout is one real rollout) and
fits a few SimConfig settings so that the simulated validation curves match the real ones:

=================  =================================================================  ========
setting            what it stands for                                                 fitted
=================  =================================================================  ========
``lr``             the step scale: the simulator's base lr that moves the pass rates  always
                   as fast per step as the real lr moves the real model's (the lr
                   mapping; under Adam a feature strength would only rescale it)
``lr_power``       the exponent of the lr's batch-size rule in the simulator: how     runs of two or
                   much faster per step a larger rollout batch moves the real         more B_p * n
                   learner (the real runs' own rule, e.g. square root, need not
                   carry over: a real model at its largest useful lr gains less)
``transfer_frac``  the share of problems that learn through shared skill (the         always
                   ceiling that validation can reach by transfer)
``loading_lo``     the slowest transferring problem's loading (the spread of          always
                   learning speeds), with ``loading_dist`` uniform or log-uniform
                   on [loading_lo, loading_hi]: a discrete choice, both fitted, the
                   lower loss kept (log-uniform: speeds spread over decades, a steady
                   rise rather than a near ceiling)
``hard_loading``   how far problems with base pass@1 < 1/16 sit from the shared       when 10-90 % of the
                   skill (transfer strength of the hard problems)                     profile is < 1/16
``kl`` or ``wd``   the restoring force: the KL pull for recipes with KL, else weight  when the recipe
                   decay for AdamW (or L2) recipes                                    has one
=================  =================================================================  ========

Why these: under Adam the per-step move is about ``lr``, so the step scale and how it grows with
the batch (``lr_power``) decide how far each ``n`` gets per rollout, which is what ``n*`` compares;
the transfer share and the spread of speeds decide whether the curves flatten (where every ``n``
ties and larger ``n`` catch up) or keep rising; the restoring force sets the equilibrium. A feature
strength (``skill``) is not fitted: under Adam it only rescales ``lr``.

The problem-specific interference part (``memorize``) is not fitted: it sends every run down the
simulator's general (per-response) path, about 10x slower than the closed form the linear skill
policy takes (measured 2026-12-03 on the organism's cheap runs: 3.5 s vs 0.34 s an evaluation, so ~12 min
for a fit of 200 evaluations), and the few cheap points do not separate it from ``transfer_frac``.

What is matched is the *gain* of the seed-mean validation avg@k over its value at step 0, at every
logged rollout count of the cheap records (squared error, each ``n`` weighted equally). The gain,
not the level: the level at step 0 is the profile's (a calibration's selection of problems by a
noisy pass rate puts the real validation start above the profile's mean on a hard split), and
``n*`` depends on how the curves of different ``n`` rise, not on where they start.

The search: a coarse grid over ``lr`` x ``transfer_frac`` (one batched simulation), then
Nelder-Mead (:func:`scipy.optimize.minimize`) on log / logit parameters from the best grid point.
Every evaluation simulates all its runs in ONE :func:`isosim.sim.engine.simulate` call with fixed
seeds (common random numbers: the loss is a deterministic function of the parameters).

Only records at or below ``max_rollouts`` are read: each ``records.jsonl`` is read line by line in
step order and reading stops at the first record past the limit, so nothing beyond it (not even
its value) enters the fit.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.sim.presets import hard_share

EVAL_POINTS = 30
"""log-spaced evaluation points of each simulated cheap run (interpolated at the real points)"""
MAX_EVALS = 150
"""default cap on the Nelder-Mead evaluations"""
GRID_LR = tuple(2.0 ** k for k in range(-4, 9))
"""coarse grid: multiples of the preset's lr"""
GRID_TRANSFER = (0.25, 0.5, 0.75, 0.95)
"""coarse grid: transfer_frac values"""

# name: (transform, low, high); bounds are clipped in the transformed space
PARAMS: dict[str, tuple[str, float, float]] = {
    "lr": ("log", 1e-5, 1e4),
    "lr_power": ("lin", -0.5, 1.5),
    "transfer_frac": ("logit", 0.01, 0.999),
    "loading_lo": ("log", 1e-3, 1.0),
    "hard_loading": ("log", 1e-3, 10.0),
    "kl": ("log", 1e-5, 1e2),
    "wd": ("log", 1e-6, 10.0),
}
# settings that the calibrated profile does not carry: the problems and each run's allocation/size
NOT_CARRIED = ("profile", "val_profile", "n", "b_p", "budget", "steps", "seed", "data_seed", "n_train", "n_val",
               "name", "extra", "eval_points", "eval_samples")


# ---------------------------------------------------------------------------------------------
# The cheap real runs
# ---------------------------------------------------------------------------------------------
@dataclass
class CheapRuns:
    """Records of real runs at or below ``max_rollouts`` and what the simulation must copy."""

    folder: str
    df: pd.DataFrame
    """records (isosim.records columns) with ``rollouts <= max_rollouts``, the chosen n only"""
    max_rollouts: float | None
    groups: list[tuple[int, int]]
    """(n, b_p) of the runs used"""
    seeds: list[int]
    train_size: int
    val_size: int
    recipe: str | None
    warmup: int | None
    """the runs' warm-up steps (config.json ``warmup_steps``), copied into the simulation"""
    run_ids: list[str]
    cut: int
    """runs used that had records past the limit (reading stopped there)"""


def _read_records(path: Path, limit: float) -> tuple[list[dict], bool]:
    """Records of one ``records.jsonl`` up to ``limit`` rollouts; stops at the first one past it."""
    rows: list[dict] = []
    last = -math.inf
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                rollouts = float(row["rollouts"])
            except (ValueError, KeyError, TypeError):
                if not line.endswith("\n") and not fh.read():  # the last line, cut off mid-write
                    raise IsosimError(f"{path}: its last line (line {i}) is cut off: the run was stopped while "
                                      "writing it; resume the run (which rewrites it), or delete that line") from None
                raise IsosimError(f"{path}:{i}: not a records line with a 'rollouts' value") from None
            if rollouts < last:
                raise IsosimError(f"{path}:{i}: records are not in step order (rollouts {rollouts:g} after {last:g})")
            if rollouts > limit * (1 + 1e-12):
                return rows, True  # nothing past the limit is read
            last = rollouts
            rows.append(row)
    return rows, False


def _first(df: pd.DataFrame, cols: Sequence[str]) -> Any:
    for c in cols:
        if c in df.columns:
            vals = pd.to_numeric(df[c], errors="coerce").dropna().unique()
            if len(vals) == 1:
                return vals[0]
            if len(vals) > 1:
                raise IsosimError(f"the runs differ in {c} ({', '.join(f'{v:g}' for v in sorted(vals))}); "
                                  "calibrate on runs of one training and validation set")
    return None


def read_cheap_runs(folder: str | Path, *, max_rollouts: float | None = None,
                    n_values: Sequence[int] | None = None) -> CheapRuns:
    """The cheap part of a folder of real runs (``*/records.jsonl`` as ``isosim validate`` and
    ``llm_runs`` write them, with ``config.json`` beside): records at or below ``max_rollouts``
    of the runs whose ``n`` is in ``n_values`` (default: every ``n``)."""
    from isosim import records
    from isosim.frontier.report import record_files

    folder = Path(folder)
    if not folder.is_dir():
        raise IsosimError(f"{folder}: no such folder of runs")
    if max_rollouts is not None and not max_rollouts > 0:
        raise IsosimError(f"--max-rollouts must be positive (got {max_rollouts:g})")
    files = record_files(folder)
    if not files:
        raise IsosimError(f"{folder}: no run folders with records.jsonl")
    limit = math.inf if max_rollouts is None else float(max_rollouts)
    frames, cut, warmups, recipes, skipped = [], 0, set(), set(), set()
    for f in files:
        cfg: dict = {}
        cfg_path = f.parent / "config.json"
        if cfg_path.is_file():
            try:
                cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise IsosimError(f"{cfg_path}: cannot read ({exc})") from None
            cfg = cfg if isinstance(cfg, dict) else {}
        if n_values and isinstance(cfg.get("n"), int) and cfg["n"] not in n_values:
            skipped.add(cfg["n"])  # a run of another n: its records are not read at all
            continue
        rows, was_cut = _read_records(f, limit)
        cut += was_cut
        if not rows:
            continue
        frame = pd.DataFrame(rows)
        if cfg.get("warmup_steps") is not None:
            frame["warmup"] = int(cfg["warmup_steps"])
        if cfg.get("recipe") and "recipe" not in frame:
            frame["recipe"] = cfg["recipe"]
        frames.append(frame)
    if not frames and skipped:
        raise IsosimError(f"--n {n_values[0]}: no runs with n = {n_values[0]} in {folder} "
                          f"(n = {', '.join(map(str, sorted(skipped)))})")
    if not frames:
        raise IsosimError(f"{folder}: no records at or below {limit:g} rollouts")
    df = records.normalize(pd.concat(frames, ignore_index=True), source=str(folder))
    available = sorted({int(v) for v in df["n"].unique()} | skipped)
    if n_values:
        unknown = [n for n in n_values if n not in available]
        if unknown:
            raise IsosimError(f"--n {unknown[0]}: no runs with n = {unknown[0]} in {folder} "
                              f"(n = {', '.join(map(str, available))})")
        df = df[df["n"].isin(list(n_values))]
    if "val_avg" not in df.columns or pd.to_numeric(df["val_avg"], errors="coerce").isna().all():
        raise IsosimError(f"{folder}: the records hold no val_avg (the validation curve is what is fitted)")
    df = df.assign(val_avg=pd.to_numeric(df["val_avg"], errors="coerce")).dropna(subset=["val_avg"])
    groups = sorted({(int(n), int(b)) for n, b in zip(df["n"], df["b_p"])})
    for n, b in groups:
        g = df[(df["n"] == n) & (df["b_p"] == b)]
        if not (g["rollouts"] == 0).any():
            raise IsosimError(f"{folder}: the runs with n = {n} have no step-0 evaluation (the gain is "
                              "measured from it)")
        if (g["rollouts"] > 0).sum() < 1:
            raise IsosimError(f"{folder}: the runs with n = {n} have no evaluation after step 0 at or below "
                              f"{limit:g} rollouts; raise --max-rollouts")
    train = _first(df, ("train_size", "n_train"))
    val = _first(df, ("val_size", "n_val"))
    if train is None or val is None:
        raise IsosimError(f"{folder}: the records do not say the training and validation sizes "
                          "(train_size / val_size, or n_train / n_val)")
    if "warmup" in df:
        warmups = {int(v) for v in df["warmup"].dropna().unique()}
    if "recipe" in df:
        recipes = {str(v) for v in df["recipe"].dropna().unique()}
    return CheapRuns(
        folder=str(folder), df=df.reset_index(drop=True), max_rollouts=max_rollouts, groups=groups,
        seeds=sorted(int(s) for s in df["seed"].unique()), train_size=int(train), val_size=int(val),
        recipe=recipes.pop() if len(recipes) == 1 else None,
        warmup=warmups.pop() if len(warmups) == 1 else None,
        run_ids=sorted(df["run_id"].unique().tolist()), cut=cut)


def real_curves(runs: CheapRuns) -> dict[tuple[int, int], pd.DataFrame]:
    """Per (n, b_p): the seed-mean val_avg at each logged rollout count > 0 and its gain over step 0."""
    out = {}
    for n, b in runs.groups:
        g = runs.df[(runs.df["n"] == n) & (runs.df["b_p"] == b)]
        base = float(g.loc[g["rollouts"] == 0, "val_avg"].mean())
        curve = g[g["rollouts"] > 0].groupby("rollouts")["val_avg"].mean().reset_index()
        curve["gain"] = curve["val_avg"] - base
        out[(n, b)] = curve
    return out


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------
def _to_x(name: str, value: float) -> float:
    kind, lo, hi = PARAMS[name]
    v = min(max(value, lo), hi)
    if kind == "lin":
        return v
    return math.log(v) if kind == "log" else math.log(v / (1 - v))


def _from_x(name: str, x: float) -> float:
    kind, lo, hi = PARAMS[name]
    v = x if kind == "lin" else math.exp(x) if kind == "log" else 1.0 / (1.0 + math.exp(-x))
    return float(min(max(v, lo), hi))


def free_parameters(settings: dict, profile: str, batches: int = 2) -> list[str]:
    """Which settings are fitted for this recipe and profile (see the module docstring);
    ``batches`` is the number of distinct rollout batches ``B_p * n`` among the cheap runs."""
    names = ["lr", "lr_power", "transfer_frac", "loading_lo"] if batches >= 2 else ["lr", "transfer_frac", "loading_lo"]
    if 0.1 <= hard_share(profile) <= 0.9:
        names.append("hard_loading")
    if float(settings.get("kl", 0.0)) > 0:
        names.append("kl")
    elif float(settings.get("wd", 0.0)) > 0 or settings.get("optimizer") == "adamw":
        names.append("wd")
    return names


def _start(settings: dict, name: str) -> float:
    from isosim.sim.config import LR_POWER, SimConfig

    if name == "lr_power" and settings.get("lr_power") is None:  # start from the recipe's lr rule
        return LR_POWER[settings.get("lr_rule", SimConfig.lr_rule)]
    value = float(settings.get(name, getattr(SimConfig, name)))
    if name == "wd" and value <= 0:
        value = 1e-2
    return value


# ---------------------------------------------------------------------------------------------
# The fit
# ---------------------------------------------------------------------------------------------
@dataclass
class _Problem:
    settings: dict
    runs: CheapRuns
    curves: dict
    seeds: list[int]
    names: list[str]
    evals: int = 0
    history: list = field(default_factory=list)

    def configs(self, points: Sequence[dict], tag: int = 0) -> list:
        from isosim.sim.config import SimConfig

        cfgs = []
        for i, point in enumerate(points):
            for n, b in self.runs.groups:
                budget = float(self.curves[(n, b)]["rollouts"].max())
                for s in self.seeds:
                    cfgs.append(SimConfig(**{**self.settings, **point}, n=n, b_p=b, budget=budget, seed=s,
                                          eval_points=EVAL_POINTS, name=f"p{tag + i}"))
        return cfgs

    def simulated(self, points: Sequence[dict]) -> list[dict[tuple[int, int], np.ndarray]]:
        """Simulated seed-mean gains at the real rollout counts, per point, all in one simulate call."""
        from isosim.sim.engine import simulate

        df = simulate(self.configs(points))
        self.evals += len(points)
        out = []
        for i in range(len(points)):
            sub = df[df["name"] == f"p{i}"]
            curves = {}
            for (n, b), real in self.curves.items():
                g = sub[(sub["n"] == n) & (sub["b_p"] == b)]
                mean = g.groupby("rollouts")["val_avg"].mean()
                base = float(mean.loc[0.0])
                xs = mean.index.to_numpy(float)
                keep = xs > 0
                curves[(n, b)] = np.interp(np.log(real["rollouts"].to_numpy(float)), np.log(xs[keep]),
                                           mean.to_numpy(float)[keep] - base)
            out.append(curves)
        return out

    def losses(self, points: Sequence[dict]) -> list[float]:
        res = []
        for curves in self.simulated(points):
            per = [float(np.mean((curves[k] - self.curves[k]["gain"].to_numpy(float)) ** 2)) for k in self.curves]
            res.append(float(np.mean(per)))
        return res


def _fit_once(prob: _Problem, max_evals: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Coarse grid over lr x transfer_frac (one batched simulation), then Nelder-Mead."""
    from scipy.optimize import minimize

    names, settings = prob.names, prob.settings
    start = {p: _start(settings, p) for p in names}
    grid_axes = {"lr": [start["lr"] * m for m in GRID_LR] if "lr" in names else [None],
                 "transfer_frac": list(GRID_TRANSFER) if "transfer_frac" in names else [None]}
    grid = [{**start, **{k: v for k, v in (("lr", lr), ("transfer_frac", tf)) if v is not None}}
            for lr in grid_axes["lr"] for tf in grid_axes["transfer_frac"]]
    grid_loss = prob.losses(grid)
    best = int(np.argmin(grid_loss))
    log(f"calibrate --dynamics: grid of {len(grid)} points over lr x transfer_frac, best loss "
        f"{grid_loss[best]:.3g} at " + ", ".join(f"{k} {v:.3g}" for k, v in grid[best].items()))
    x0 = np.array([_to_x(p, grid[best][p]) for p in names])

    def point(x: np.ndarray) -> dict:
        return {p: _from_x(p, float(v)) for p, v in zip(names, x)}

    cache: dict[tuple, float] = {}

    def objective(x: np.ndarray) -> float:
        key = tuple(np.round(x, 12))
        if key not in cache:
            cache[key] = prob.losses([point(x)])[0]
        return cache[key]

    x_best = x0
    if names:
        steps = {"lr": math.log(2.0), "lr_power": 0.25, "transfer_frac": 0.7, "loading_lo": math.log(3.0),
                 "hard_loading": math.log(3.0), "kl": math.log(3.0), "wd": math.log(3.0)}
        simplex = [x0] + [x0 + np.eye(len(names))[i] * steps[p] for i, p in enumerate(names)]
        res = minimize(objective, x0, method="Nelder-Mead",
                       options={"maxfev": max_evals, "initial_simplex": np.array(simplex), "xatol": 0.02,
                                "fatol": 1e-7})
        if res.fun <= objective(x0):
            x_best = res.x
    fitted = point(x_best)
    loss = objective(x_best) if names else prob.losses([{}])[0]
    return {"prob": prob, "fitted": fitted, "loss": loss, "start": start, "start_loss": prob.losses([start])[0],
            "grid_points": len(grid)}


def calibrate_dynamics(runs: CheapRuns, profile: str | Path, *, preset: str | None = None, seeds: int | None = None,
                       seed: int = 0, max_evals: int = MAX_EVALS, fixed: dict | None = None,
                       params: Sequence[str] | None = None,
                       log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fit the free settings (:func:`free_parameters`) to ``runs``; return the ``dynamics`` and
    ``fit`` blocks of the calibrated profile. ``fixed`` pins settings (a control: a fitted name
    given here is held at its value, not fitted)."""
    from isosim.sim.presets import get_preset
    from isosim.sim.profiles import read_profile

    t0 = time.perf_counter()
    log = log or (lambda s: None)
    profile = str(profile)
    read_profile(profile)
    preset = preset or runs.recipe
    if preset is None:
        raise IsosimError(f"{runs.folder}: the runs name no recipe; give --preset (the simulator preset to start from)")
    if max_evals < 1:
        raise IsosimError(f"--max-evals must be >= 1 (got {max_evals})")
    seeds = len(runs.seeds) if seeds is None else int(seeds)
    if seeds < 1:
        raise IsosimError(f"--seeds must be >= 1 (got {seeds})")
    settings = {k: v for k, v in get_preset(preset).items() if k not in ("n", "b_p", "budget", "steps", "seed")}
    settings.update(profile=profile, n_train=runs.train_size, n_val=runs.val_size)
    if runs.warmup is not None:
        settings["warmup"] = runs.warmup
    if max(b for _, b in runs.groups) > runs.train_size:
        raise IsosimError(f"{runs.folder}: B_p exceeds the training set ({runs.train_size} problems)")
    fixed = dict(fixed or {})
    settings.update(fixed)
    if params is not None:
        bad = [p for p in params if p not in PARAMS]
        if bad:
            raise IsosimError(f"--fit {bad[0]}: not a fittable setting (one of {', '.join(PARAMS)})")
    batches = len({n * b for n, b in runs.groups})
    names = [p for p in (free_parameters(settings, profile, batches) if params is None else params)
             if p not in fixed]
    curves = real_curves(runs)
    sim_seeds = list(range(seed, seed + seeds))
    # the loading distribution is a discrete choice: fit under each, keep the lower loss
    dists = (["uniform", "loguniform"] if "loading_lo" in names and "loading_dist" not in fixed
             else [settings.get("loading_dist", "uniform")])
    tried = {}
    for dist in dists:
        prob = _Problem({**settings, "loading_dist": dist}, runs, curves, sim_seeds, names)
        tried[dist] = _fit_once(prob, max_evals, log)
        if len(dists) > 1:
            log(f"calibrate --dynamics: loading_dist {dist}: loss {tried[dist]['loss']:.3g}")
    choice = min(tried, key=lambda d: tried[d]["loss"])
    best = tried[choice]
    prob, fitted, loss, start, start_loss = (best[k] for k in ("prob", "fitted", "loss", "start", "start_loss"))
    settings = prob.settings
    sim = prob.simulated([fitted])[0]
    seconds = time.perf_counter() - t0
    log(f"calibrate --dynamics: loss {loss:.3g} (preset's settings: {start_loss:.3g}) in {seconds:.0f} s"
        + (f", loading_dist {choice}" if len(dists) > 1 else "") + "; "
        + ", ".join(f"{k} {v:.4g}" for k, v in fitted.items()))

    overrides = {k: v for k, v in {**settings, **fitted}.items() if k not in NOT_CARRIED}
    curve_points = {}
    for (n, b), real in prob.curves.items():
        curve_points[f"n={n},b_p={b}"] = {
            "rollouts": real["rollouts"].tolist(), "real_val_avg": real["val_avg"].tolist(),
            "real_gain": real["gain"].tolist(), "simulated_gain": sim[(n, b)].tolist()}
    dynamics = {"preset": preset, "overrides": overrides, "fitted": fitted}
    fit = {
        "loss": loss, "rmse": math.sqrt(loss), "loss_preset": start_loss, "parameters": fitted, "start": start,
        "fixed": fixed, "fitted_names": names, "target": "gain of the seed-mean val_avg over step 0",
        "runs": runs.folder, "run_ids": runs.run_ids, "n_values": sorted({n for n, _ in runs.groups}),
        "b_p": sorted({b for _, b in runs.groups}), "real_seeds": runs.seeds, "simulated_seeds": prob.seeds,
        "max_rollouts": runs.max_rollouts, "records_used": int(len(runs.df)),
        "runs_cut_at_limit": runs.cut, "train_size": runs.train_size, "val_size": runs.val_size,
        "copied_from_runs": {"warmup": runs.warmup} if runs.warmup is not None else {},
        "loading_dist": settings.get("loading_dist", "uniform"),
        "alternatives": {d: {"loss": r["loss"], "parameters": r["fitted"]} for d, r in tried.items()},
        "grid_points": best["grid_points"], "evaluations": sum(r["prob"].evals for r in tried.values()),
        "seconds": seconds, "curves": curve_points,
    }
    return {"dynamics": dynamics, "fit": fit}


def write_dynamics_profile(out: str | Path, profile: str | Path, result: dict) -> Path:
    """The calibrated profile: the input profile's rates (and provenance) plus ``dynamics`` and ``fit``."""
    from isosim.files import write_json

    try:
        doc = json.loads(Path(profile).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IsosimError(f"{profile}: cannot read the profile ({exc})") from None
    doc = {k: v for k, v in doc.items() if k not in ("dynamics", "fit", "every_n")}
    doc.update(dynamics=result["dynamics"], fit={**result["fit"], "profile": str(profile)})
    if "every_n" in result:  # calibrate --dynamics --budget: every n simulated to the budget
        doc["every_n"] = result["every_n"]
    return write_json(out, doc, indent=1)

