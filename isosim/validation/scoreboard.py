"""The scoreboard: isosim's recommended n against the rules a practitioner would use instead, on
every real sweep we hold.

    python studies/scoring/scoreboard.py            # -> studies/results/scoreboard.json (the notebook)

Sweeps: the organism's Q1 sweeps (``easy-3200`` = ``studies/results/organism/real/easy``,
``hard-1238`` = ``.../real/hard``) and every folder of run folders (``nN_bp16_sS/records.jsonl`` +
``config.json``) under ``studies/results/organism_f8/``, keyed by its folder name (``easy-128``),
with its predictions read from ``studies/results/organism_f8/{prediction,prediction_calibrated}.json``
under the same key.

Predictors (what each picks at a budget C):

- ``isosim_profile``: the profile-only prediction (``organism_prediction.json``; for later sweeps
  ``organism_f8/prediction.json``).
- ``isosim_calibrated``: the prediction from the sweep's cheap part by ``isosim predict``
  (:mod:`isosim.predict.extrapolate`, the method kept by the rule below); for later sweeps the committed
  ``organism_f8/prediction_calibrated.json`` (made before the rest of the sweep ran).
- ``paper``: the paper's saturation points, easy 512 / hard 128, clipped to the sweep's grid.
- ``smallest_n`` / ``largest_n``: the grid's ends.
- ``cheap_best``: the best n among the cheap runs at the cheap budget, taken for every budget.

The isosim predictors pick what ``isosim recommend`` would: the smallest n within the tie
tolerance (.005) of the predicted frontier (``n_tol``), falling back to ``n_star``.

The rules, fixed before any calibrated method was scored (studies/LOG.md, 2026-12-04):

- **Cheap part**: every n of the sweep's grid, every seed, records up to 5 % of a run's full budget
  (``CHEAP_SHARE`` x max_rollouts: 1e4 of a 2e5 run, so 5 % of the sweep's compute), read with
  :func:`isosim.predict.dynamics.read_cheap_runs`, which stops at the first record past the limit.
- **Scores** at each budget of the measured frontier's grid: each run's val avg@4 interpolated in
  log rollouts at the budget (an n that cannot take one step there scores its step-0 value; an n
  whose runs stopped short of the budget is not scored there), seed-mean per n. ``regret`` = best
  n's seed mean minus the picked n's; ``noise`` = pooled seed-to-seed sd at that budget / sqrt(seeds),
  the standard error of a seed mean; ``octaves`` = |log2 pick - log2 n*| with n* the measured
  frontier's (``isosim analyze``). Per-budget statistics are taken over the *scored* budgets:
  learning (the measured frontier's flag) and free (more than one n has taken a step).
- **Choice of the calibrated method**: lowest mean top-budget regret over all sweeps, ties broken by
  the largest octave error over scored budgets, then by mean regret over them.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from isosim import records
from isosim.errors import IsosimError
from isosim.frontier.points import REACH_RTOL
from isosim.frontier.report import record_files
from isosim.predict.dynamics import read_cheap_runs

CHEAP_SHARE = 0.05
"""the cheap part: every n and seed up to this share of a run's full budget"""
PAPER_N = {"easy": 512, "hard": 128}
"""the paper's saturation n* per recipe (PAPER.md: easy 512, hard 128)"""
PREDICTORS = ("isosim_profile", "isosim_calibrated", "paper", "smallest_n", "largest_n", "cheap_best")
BUDGET_RTOL = 1e-6
"""budgets of two files match when they agree within this relative tolerance"""


# ---------------------------------------------------------------------------------------------
# Sweeps
# ---------------------------------------------------------------------------------------------
def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def discover(results: Path) -> dict[str, dict]:
    """Sweep key -> {runs: folder, profile / calibrated: prediction entry or None, kind}."""
    org = results / "organism"
    prof, cal = _read_json(results / "organism_prediction.json"), {}
    sweeps: dict[str, dict] = {}
    for split in ("easy", "hard"):
        folder = org / "real" / split
        if folder.is_dir():
            train = int(_first_record(folder)["train_size"])
            sweeps[f"{split}-{train}"] = {"runs": folder, "kind": split, "profile": prof.get(split),
                                         "calibrated": cal.get(split), "prospective": False}
    f8 = results / "organism_f8"
    if f8.is_dir():
        p, c = _read_json(f8 / "prediction.json"), _read_json(f8 / "prediction_calibrated.json")
        for folder in sorted(d for d in f8.iterdir() if d.is_dir() and record_files(d)):
            key = folder.name  # e.g. easy-128 (its runs in */ or runs/*/, as isosim validate writes them)
            kind = "hard" if key.startswith("hard") else "easy"
            sweeps[key] = {"runs": folder, "kind": kind, "profile": p.get(key), "calibrated": c.get(key),
                           "prospective": key in c}
    return sweeps


def _first_record(folder: Path) -> dict:
    f = record_files(folder)[0]
    return json.loads(f.read_text(encoding="utf-8").splitlines()[0])


def load(folder: Path) -> pd.DataFrame:
    rows = []
    for f in record_files(folder):
        rows += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise IsosimError(f"{folder}: no */records.jsonl")
    return records.normalize(pd.DataFrame(rows), source=str(folder))


# ---------------------------------------------------------------------------------------------
# Measured points at a budget
# ---------------------------------------------------------------------------------------------
def values_at(df: pd.DataFrame, budgets: np.ndarray, metric: str = "val_avg", reading: str = "final") -> dict[int, np.ndarray]:
    """n -> (seeds x budgets) array of each run's metric at each budget (NaN where the run stopped
    short of it): interpolated in log rollouts between logged points; below one step, the step-0
    value (a run that cannot take a step is the base model). ``reading`` "best": the larger of
    that and every logged value before the budget (:mod:`isosim.validation.readings`)."""
    out: dict[int, list] = {}
    for (n, b_p, _seed), g in df.groupby(["n", "b_p", "seed"]):
        g = g.sort_values("rollouts")
        x, y = g["rollouts"].to_numpy(float), g[metric].to_numpy(float)
        if not (x == 0).any():
            raise IsosimError(f"run n={n} seed={_seed}: no step-0 record")
        y0 = float(y[x == 0].mean())
        pos = x > 0
        xp, yp = x[pos], y[pos]
        step = float(n) * float(b_p)
        v = np.full(len(budgets), np.nan)
        for i, b in enumerate(budgets):
            if b < step * (1 - REACH_RTOL):
                v[i] = y0
            elif len(xp) and b <= xp.max() * (1 + REACH_RTOL):
                v[i] = float(np.interp(math.log(b), np.log(xp), yp)) if b >= xp.min() else \
                    float(np.interp(b, [0.0, xp.min()], [y0, yp[0]]))
                if reading == "best":
                    v[i] = max([v[i], *yp[xp <= b * (1 + REACH_RTOL)]])
        out.setdefault(int(n), []).append(v)
    return {n: np.asarray(v) for n, v in sorted(out.items())}


def budget_table(df: pd.DataFrame, budgets: np.ndarray, reading: str = "final") -> dict:
    """Seed means per n, the best n, the noise and the free flag at each budget, in ``reading``."""
    vals = values_at(df, budgets, reading=reading)
    b_p = int(df["b_p"].iloc[0])
    ns = sorted(vals)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.array([np.nanmean(vals[n], axis=0) for n in ns])
    seeds = np.array([np.isfinite(vals[n]).sum(axis=0) for n in ns])
    # pooled seed sd over the n with >= 2 seeds at the budget
    var_num = np.zeros(len(budgets))
    dof = np.zeros(len(budgets))
    for n in ns:
        v = vals[n]
        k = np.isfinite(v).sum(axis=0)
        ok = k >= 2
        if ok.any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                var = np.nanvar(v, axis=0, ddof=1)
            var_num += np.where(ok, (k - 1) * np.nan_to_num(var), 0.0)
            dof += np.where(ok, k - 1, 0)
    sd = np.sqrt(np.where(dof > 0, var_num / np.maximum(dof, 1), np.nan))
    n_seeds = np.where(seeds.max(axis=0) > 0, seeds.max(axis=0), np.nan)
    noise = sd / np.sqrt(n_seeds)
    stepped = np.array([[b >= n * b_p * (1 - REACH_RTOL) for b in budgets] for n in ns])
    best = [ns[int(np.nanargmax(mean[:, i]))] if np.isfinite(mean[:, i]).any() else None
            for i in range(len(budgets))]
    return {"n_values": ns, "mean": mean, "noise": noise, "best": best, "free": stepped.sum(axis=0) >= 2,
            "b_p": b_p}


# ---------------------------------------------------------------------------------------------
# Picks
# ---------------------------------------------------------------------------------------------
def match_budgets(src: list[float], dst: list[float], rtol: float = BUDGET_RTOL) -> list[int | None]:
    """For each budget of ``dst``, the index of the budget of ``src`` within ``rtol`` of it."""
    out = []
    for b in dst:
        hits = [i for i, s in enumerate(src) if abs(s - b) <= rtol * max(abs(s), abs(b))]
        out.append(hits[0] if hits else None)
    return out


def prediction_picks(pred: dict | None, budgets: list[float]) -> list[int | None]:
    """The n isosim recommends at each budget from a frontier file: n_tol (smallest n within the
    tie tolerance), else n_star; budgets not in the file give None."""
    if not pred:
        return [None] * len(budgets)
    col = pred.get("n_tol") or pred["n_star"]
    idx = match_budgets([float(b) for b in pred["budgets"]], budgets)
    return [None if i is None or col[i] is None else int(col[i]) for i in idx]


def clip_to_grid(n: int, grid: list[int]) -> int:
    """The grid's n nearest to ``n`` in octaves (the paper's 512 on a grid up to 128 is 128)."""
    return min(grid, key=lambda g: (abs(math.log2(g) - math.log2(n)), g))


def cheap_best(folder: Path, max_rollouts: float) -> dict:
    """The best n among the cheap runs at the cheap budget: seed-mean val avg@4 of every n at the
    largest rollout count that every cheap run logged (interpolated in log rollouts), so that
    all n are compared at the same compute."""
    budget = float(max_rollouts * CHEAP_SHARE)
    runs = read_cheap_runs(folder, max_rollouts=budget)
    reach = float(runs.df.groupby("run_id")["rollouts"].max().min())
    tab = budget_table(runs.df, np.array([reach]))
    means = {n: float(m) for n, m in zip(tab["n_values"], tab["mean"][:, 0]) if np.isfinite(m)}
    return {"n": max(means, key=means.get), "budget": budget, "compared_at": reach, "seed_mean": means}


# ---------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------
def coverage(pred: dict | None, budgets: list[float], n_star: list[int], scored: np.ndarray) -> dict | None:
    """How often the prediction's n* interval (``n_star_band``, over resampled seeds) holds the
    measured n*, over the scored budgets, and its mean width in octaves; None without a band."""
    band = (pred or {}).get("n_star_band")
    if not band:
        return None
    idx = match_budgets([float(b) for b in pred["budgets"]], budgets)
    hits, widths = [], []
    for j, i in enumerate(idx):
        if i is None or not scored[j] or not (np.isfinite(band["lo"][i]) and np.isfinite(band["hi"][i])):
            continue
        lo, hi = band["lo"][i], band["hi"][i]
        hits.append(lo * (1 - 1e-9) <= n_star[j] <= hi * (1 + 1e-9))
        widths.append(math.log2(hi) - math.log2(lo))
    if not hits:
        return None
    return {"covered": float(np.mean(hits)), "budgets": len(hits), "mean_width_octaves": float(np.mean(widths))}


def score_picks(picks: list[int | None], tab: dict, n_star: list[int], scored: np.ndarray) -> dict:
    """Per budget: regret, noise, octaves; and the top-budget and scored-budget summaries."""
    ns = tab["n_values"]
    regret, octv = [], []
    for i, p in enumerate(picks):
        col = tab["mean"][:, i]
        if p is None or not np.isfinite(col).any():
            regret.append(None)
            octv.append(None)
            continue
        q = p if p in ns else clip_to_grid(p, ns)
        v = col[ns.index(q)]
        regret.append(None if not np.isfinite(v) else float(np.nanmax(col) - v))
        octv.append(abs(math.log2(q) - math.log2(n_star[i])))
    sc = [i for i in range(len(picks)) if scored[i] and regret[i] is not None]
    top = len(picks) - 1
    noise = [None if not np.isfinite(x) else float(x) for x in tab["noise"]]
    return {
        "n_pick": picks[top], "regret": regret[top], "noise": noise[top],
        "regret_over_noise": None if regret[top] is None or not noise[top] else regret[top] / noise[top],
        "octaves_top": octv[top],
        "per_budget": {"n_pick": picks, "regret": regret, "noise": noise, "octaves": octv},
        "scored_budgets": len(sc),
        "octaves_max": max((octv[i] for i in sc), default=None),
        "octaves_median": None if not sc else float(np.median([octv[i] for i in sc])),
        "regret_mean": None if not sc else float(np.mean([regret[i] for i in sc])),
        "regret_max": None if not sc else float(np.max([regret[i] for i in sc])),
        "budgets_within_2_noise": None if not sc else int(sum(regret[i] <= 2 * noise[i] for i in sc)),
    }


def attainable(tab: dict, n_star: list[int], octaves: float = 1.0, times_noise: float = 2.0) -> dict:
    """Which picks at the top budget could meet both acceptance bars at once: regret at most
    ``times_noise`` x the seed noise, and at most ``octaves`` from the measured n*. The regret bar
    is read against the best seed mean, the octave bar against the measured frontier's n*; where
    the two disagree by more than the bars allow (``both`` empty), no predictor can pass on this
    sweep, whatever it predicts."""
    ns = tab["n_values"]
    col, noise, top = tab["mean"][:, -1], float(tab["noise"][-1]), n_star[-1]
    best = float(np.nanmax(col))
    within_noise = [n for j, n in enumerate(ns) if np.isfinite(col[j]) and best - col[j] <= times_noise * noise]
    within_oct = [n for n in ns if abs(math.log2(n) - math.log2(top)) <= octaves]
    return {"within_2_noise": within_noise, "within_1_octave": within_oct,
            "both": [n for n in within_noise if n in within_oct], "n_star_measured": top,
            "n_best_raw": ns[int(np.nanargmax(col))], "noise": noise}


def measured_frontier(df: pd.DataFrame) -> dict:
    """The measured frontier (n*, tie band, learning flags) as ``isosim analyze`` reads the sweep."""
    from isosim.frontier import analysis

    return analysis.frontier_summary(analysis.analyze(df, metric="val_avg", n_boot=0, seed=0))


def _rel(path: Path, root: Path | None = None) -> str:
    path = Path(path).resolve()
    root = Path.cwd().resolve() if root is None else Path(root).resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def score_sweep(key: str, spec: dict, calibrated: dict | None = None) -> dict:
    df = load(spec["runs"])
    meas = measured_frontier(df)
    budgets = [float(b) for b in meas["budgets"]]
    tab = budget_table(df, np.asarray(budgets))
    tab_best = budget_table(df, np.asarray(budgets), reading="best")
    scored = np.asarray(meas["learning"], bool) & tab["free"]
    grid = tab["n_values"]
    max_rollouts = float(df["budget"].max()) if "budget" in df else float(df["rollouts"].max())
    cheap = cheap_best(spec["runs"], max_rollouts)
    cal = calibrated if calibrated is not None else spec.get("calibrated")
    picks = {
        "isosim_profile": prediction_picks(spec.get("profile"), budgets),
        "isosim_calibrated": prediction_picks(cal, budgets),
        "paper": [clip_to_grid(PAPER_N[spec["kind"]], grid)] * len(budgets),
        "smallest_n": [min(grid)] * len(budgets),
        "largest_n": [max(grid)] * len(budgets),
        "cheap_best": [cheap["n"]] * len(budgets),
    }
    return {
        "runs": _rel(spec["runs"], spec.get("root")),
        "kind": spec["kind"], "prospective": bool(spec.get("prospective")),
        "n_values": grid, "seeds": sorted(int(s) for s in df["seed"].unique()), "max_rollouts": max_rollouts,
        "cheap": {"max_rollouts": max_rollouts * CHEAP_SHARE, "n_values": grid, "share": CHEAP_SHARE,
                  "best_n": cheap["n"], "compared_at": cheap["compared_at"],
                  "seed_mean": cheap["seed_mean"]},
        "budgets": budgets, "learning": meas["learning"], "free": tab["free"].tolist(),
        "scored": scored.tolist(), "n_star_measured": meas["n_star"], "n_tie_hi_measured": meas.get("n_tie_hi"),
        "n_best_raw": tab["best"], "noise": [None if not np.isfinite(x) else float(x) for x in tab["noise"]],
        "seed_mean": {str(n): [None if not np.isfinite(v) else float(v) for v in tab["mean"][j]]
                      for j, n in enumerate(grid)},
        "regret_reading": "final (value at C); predictors_best: the best validated value up to C",
        "predictors": {name: score_picks(p, tab, meas["n_star"], scored) for name, p in picks.items()},
        "predictors_best": {name: score_picks(p, tab_best, meas["n_star"], scored) for name, p in picks.items()},
        "attainable_top": attainable(tab, meas["n_star"]),
        "n_star_coverage": {name: coverage(pred, budgets, meas["n_star"], scored)
                            for name, pred in (("isosim_profile", spec.get("profile")), ("isosim_calibrated", cal))},
    }


def summary(sweeps: dict[str, dict], names: tuple[str, ...] = PREDICTORS) -> dict:
    """Per predictor over the sweeps: mean top-budget regret, worst regret/noise, worst octaves."""
    out = {}
    for name in names:
        rows = [s["predictors"][name] for s in sweeps.values() if s["predictors"][name]["regret"] is not None]
        if not rows:
            out[name] = None
            continue
        out[name] = {
            "sweeps": len(rows),
            "mean_regret_top": float(np.mean([r["regret"] for r in rows])),
            "max_regret_over_noise_top": max((r["regret_over_noise"] or 0.0) for r in rows),
            "within_2_noise_top_all": all(r["regret"] <= 2 * r["noise"] for r in rows),
            "octaves_max_scored": max((r["octaves_max"] or 0.0) for r in rows),
            "mean_regret_scored": float(np.mean([r["regret_mean"] for r in rows if r["regret_mean"] is not None])),
        }
    return out


def method_predictions(specs: dict[str, dict], extra: dict[str, Path],
                       f8_extra: dict[str, Path] | None = None) -> dict[str, dict[str, dict]]:
    """Method -> sweep key -> prediction entry from the sweep's cheap part (the rule above)."""
    from isosim.predict.extrapolate import METHODS, predict_from_cheap

    out: dict[str, dict[str, dict]] = {}
    for key, spec in specs.items():
        df = load(spec["runs"])
        top = float(df["budget"].max()) if "budget" in df else float(df["rollouts"].max())
        for m in METHODS:
            out.setdefault(f"extrapolate:{m}", {})[key] = predict_from_cheap(
                spec["runs"], max_rollouts=top * CHEAP_SHARE, budget=top, method=m, n_boot=0)
    for name, path in extra.items():  # files keyed by organism split (easy / hard)
        doc = _read_json(path)
        for key, spec in specs.items():
            if spec["runs"].parent.name == "real" and spec["kind"] in doc:
                out.setdefault(name, {})[key] = doc[spec["kind"]]
    for name, path in (f8_extra or {}).items():  # files keyed by sweep (hard-128, ...)
        doc = _read_json(path)
        for key, spec in specs.items():
            if spec["runs"].parent.name == "organism_f8" and key in doc:
                out.setdefault(name, {})[key] = doc[key]
    return out


ELIGIBLE = ("extrapolate:shift", "extrapolate:free", "extrapolate:independent", "dynamics:whole-grid")
"""methods that read the rule's cheap part (every n and seed up to 5 %), in the order they were written"""


def choose(method_scores: dict[str, dict], n_sweeps: int) -> str:
    """The rule: lowest mean top-budget regret over all sweeps, then the smallest worst octave error
    over scored budgets, then the lowest mean regret over them (eligible methods scored on every
    sweep only; a full tie keeps the one written first)."""
    full = {m: s for m, s in method_scores.items() if m in ELIGIBLE and s and s["sweeps"] == n_sweeps}
    return min(full, key=lambda m: (round(full[m]["mean_regret_top"], 12), full[m]["octaves_max_scored"],
                                    full[m]["mean_regret_scored"]))


EXTRA_METHODS = {
    # isosim calibrate --dynamics on every n, <= 1e4 (hard preset; easy-distance for easy: the
    # fast-path preset), then llm_runs.organism.predict --dynamics (studies/LOG.md, 2026-12-04)
    "dynamics:whole-grid": "organism/prediction_dynamics_grid.json",
    "dynamics:n4,32<=2e4": "organism_prediction_calibrated.json",
    "dynamics:n4,32<=2e4,distance": "organism_prediction_calibrated_distance.json"}
"""other calibrations of the organism sweeps, scored beside the methods (not eligible: they cover
the organism sweeps only, and the last two read n 4 and 32 up to 2e4, not the rule's cheap part)"""

F8_EXTRA_METHODS = {
    # the same whole-grid dynamics calibration made on a set-size sweep's cheap part and committed
    # before the rest of it ran (llm_runs.organism.f8 predict --dynamics; keyed by sweep)
    "dynamics:whole-grid": "organism_f8/prediction_dynamics.json"}


def _with_band(method: str, spec: dict, entry: dict) -> dict:
    """The kept method's prediction rerun with the bootstrap (for its n* interval); the picks are
    the point estimate's, the same as without it."""
    from isosim.predict.extrapolate import predict_from_cheap

    if not method.startswith("extrapolate:"):
        return entry
    top = entry["max_rollouts"]
    return predict_from_cheap(spec["runs"], max_rollouts=top * CHEAP_SHARE, budget=top,
                              method=method.split(":", 1)[1], n_boot=200)


def unfinished(folder: Path) -> list[str]:
    """Runs that have not reached their budget (within one step): such a sweep is not scored yet."""
    df = load(folder)
    out = []
    for rid, g in df.groupby("run_id"):
        step = float(g["n"].iloc[0]) * float(g["b_p"].iloc[0])
        budget = float(g["budget"].max()) if "budget" in g else float(g["rollouts"].max())
        if float(g["rollouts"].max()) < budget - step * (1 + 1e-9):
            out.append(str(rid))
    return out


def build(results: Path, root: Path | None = None) -> dict:
    """The scoreboard of every sweep under ``results`` (see the module docstring); ``root``: paths
    in the output are relative to it."""
    specs = discover(results)
    for spec in specs.values():
        spec["root"] = root
    pending = {k: unfinished(v["runs"]) for k, v in specs.items()}
    pending = {k: v for k, v in pending.items() if v}
    specs = {k: v for k, v in specs.items() if k not in pending}
    extra = {k: Path(results) / v for k, v in EXTRA_METHODS.items() if (Path(results) / v).is_file()}
    f8_extra = {k: Path(results) / v for k, v in F8_EXTRA_METHODS.items() if (Path(results) / v).is_file()}
    preds = method_predictions(specs, extra, f8_extra)
    method_rows = {m: {key: score_sweep(key, specs[key], p[key])["predictors"]["isosim_calibrated"]
                       for key in p} for m, p in preds.items()}
    method_scores = {m: summary({k: {"predictors": {"isosim_calibrated": r}} for k, r in rows.items()},
                                ("isosim_calibrated",))["isosim_calibrated"] for m, rows in method_rows.items()}
    kept = choose(method_scores, len(specs))
    sweeps = {}
    for key, spec in specs.items():
        cal = spec.get("calibrated") if spec["prospective"] else _with_band(kept, spec, preds[kept][key])
        sweeps[key] = score_sweep(key, spec, cal)
        sweeps[key]["calibrated_source"] = ("committed prediction_calibrated.json (made from the cheap part "
                                            "before the rest ran)" if spec["prospective"]
                                            else f"{kept} on the cheap part, rerun here (a retrodiction)")
    return {"rules": __doc__.split("The rules, fixed")[1].strip(), "kept_method": kept,
            "summary": summary(sweeps), "reading": "final (value at C); summary_best: best validated value up to C",
            "summary_best": summary({k: {"predictors": v["predictors_best"]} for k, v in sweeps.items()}),
            "methods": method_scores,
            "attainable_on_every_sweep": all(v["attainable_top"]["both"] for v in sweeps.values()),
            "not_scored_yet": {k: f"{len(v)} run(s) short of their budget" for k, v in pending.items()},
            "method_sweeps": {m: {k: {x: r[x] for x in ("n_pick", "regret", "noise", "octaves_max", "regret_mean")}
                                  for k, r in rows.items()} for m, rows in method_rows.items()},
            "sweeps": sweeps}


def method_table(doc: dict) -> str:
    lines = ["| method | sweeps | mean regret at top | worst regret / noise at top | worst octaves, scored | "
             "mean regret, scored |", "|---|---|---|---|---|---|"]
    for m, s in doc["methods"].items():
        tag = " (kept)" if m == doc["kept_method"] else "" if m in ELIGIBLE else " (not the rule's cheap part)"
        lines.append(f"| {m}{tag} | {s['sweeps']} | "
                     f"{s['mean_regret_top']:.4f} | {s['max_regret_over_noise_top']:.2f} | "
                     f"{s['octaves_max_scored']:g} | {s['mean_regret_scored']:.4f} |")
    return "\n".join(lines)


def attainable_table(doc: dict) -> str:
    """Per sweep: the picks at the top budget within 2x noise of the best seed mean, those within
    1 octave of the measured n*, and those that are both (none: no predictor can pass there)."""
    lines = ["| sweep | measured n* (raw best) at top | within 2x noise | within 1 octave of n* | both |",
             "|---|---|---|---|---|"]
    for key, s in doc["sweeps"].items():
        a = s["attainable_top"]
        lines.append(f"| {key} | {a['n_star_measured']} ({a['n_best_raw']}) | {a['within_2_noise']} | "
                     f"{a['within_1_octave']} | {a['both'] or 'none'} |")
    return "\n".join(lines)


def table(doc: dict) -> str:
    """A markdown table: per sweep and predictor, the top-budget pick, regret and noise, and the
    worst octave error over the scored budgets."""
    lines = ["| sweep | predictor | n at top budget | regret at top (noise) | max octaves, scored budgets | "
             "mean regret, scored budgets |", "|---|---|---|---|---|---|"]
    for key, s in doc["sweeps"].items():
        for name in PREDICTORS:
            r = s["predictors"][name]
            if r["regret"] is None:
                lines.append(f"| {key} | {name} | - | - | - | - |")
                continue
            lines.append(f"| {key} | {name} | {r['n_pick']} | {r['regret']:.4f} ({r['noise']:.4f}) | "
                         f"{r['octaves_max']:g} | {r['regret_mean']:.4f} |")
    return "\n".join(lines)

