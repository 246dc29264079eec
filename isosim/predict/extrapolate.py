"""Predict a real sweep's frontier from its cheap part, by extrapolating the cheap curves.

``isosim predict --runs DIR --max-rollouts 1e4 --budget 2e5 --key easy-128 --out FILE`` (or
:func:`predict_from_cheap`). ``DIR`` is any input ``isosim analyze`` reads: the sweep's run folders
(``*/records.jsonl`` with ``config.json`` beside, as ``isosim validate`` and ``llm_runs`` write
them; :func:`isosim.predict.dynamics.read_cheap_runs` stops reading each file at the first record
past ``--max-rollouts``), a sweep store, TensorBoard logs, a W&B export or a records table
(:func:`read_cheap_table`, through analyze's reader). Only records at or below
``--max-rollouts`` are used; every ``n`` and seed found is used.

Each run's validation curve (val avg@k against rollouts) is fitted by the saturating curve the
frontier analysis reads real sweeps with, R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), with R0
the run's own step-0 value; the fitted curves are then read out to the full budget at the runs'
own log-spaced evaluation schedule (one seed each, as the real runs would log them) and analysed
with :func:`isosim.frontier.analysis.analyze` exactly as the measured sweep will be. So the prediction
carries the measured files' schema (budgets, n_star, n_tol, n_tie_hi, learning, n_sat, n_sat_ci,
saturated, ...) plus ``final_val_avg`` per n and ``seed_sd``.

Methods (``--method``), all fitted by least squares on each seed's cheap points of every n:

``shift``        one ceiling A and one steepness B shared by every n, a C_mid per n: the curves of
                 different n are the same curve shifted in log compute. Its ceiling is what the
                 cheap part pins down best (all n share it); it never lets the curves cross, so
                 its n* is the n that is furthest along at the cheap budget.
``free``         B shared, A and C_mid per n: each n may saturate at its own level (curves can
                 cross), which the cheap points determine poorly for the large n (few points).
``independent``  A, B and C_mid per n.

What the cheap part cannot see is not invented: a ceiling that only shows past the cheap budget
is outside every method.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isosim.errors import IsosimError

METHODS = ("shift", "free", "independent")
DEFAULT_METHOD = "shift"
EVAL_POINTS = 12
"""log-spaced evaluation steps of each read-out run (as the organism's runs log them)"""
B_BOUNDS = (0.1, 5.0)
LOG_CMID_BOUNDS = (0.0, math.log(1e9))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _model(r0: float, a: np.ndarray, b: np.ndarray, log_cmid: np.ndarray, log_c: np.ndarray) -> np.ndarray:
    return r0 + (a - r0) * _sigmoid(b * (log_c - log_cmid))


def _layout(method: str, ns: list[int]) -> list[tuple[str, int | None]]:
    """Parameter names, each shared (None) or per n (its index)."""
    k = range(len(ns))
    if method == "shift":
        return [("a", None), ("b", None)] + [("c", i) for i in k]
    if method == "free":
        return [("b", None)] + [p for i in k for p in (("a", i), ("c", i))]
    if method == "independent":
        return [p for i in k for p in (("a", i), ("b", i), ("c", i))]
    raise IsosimError(f"--method {method!r}: one of {', '.join(METHODS)}")


def fit_seed(points: dict[int, tuple[np.ndarray, np.ndarray]], r0: float, method: str) -> dict[int, dict]:
    """Fit one seed's cheap curves (n -> (rollouts > 0, val)) under ``method``; n -> {a, b, c_mid}."""
    from scipy.optimize import least_squares

    ns = sorted(points)
    lay = _layout(method, ns)
    top = max(float(np.max(y)) for _, y in points.values())
    lo = np.array([{"a": r0, "b": B_BOUNDS[0], "c": LOG_CMID_BOUNDS[0]}[p] for p, _ in lay])
    hi = np.array([{"a": 1.0, "b": B_BOUNDS[1], "c": LOG_CMID_BOUNDS[1]}[p] for p, _ in lay])
    start_c = {n: math.log(float(np.median(points[n][0]))) for n in ns}
    x0 = np.array([{"a": min(max(top + 0.05, r0 + 1e-3), 1.0 - 1e-6), "b": 1.0}.get(p, 0.0) if p != "c"
                   else start_c[ns[i]] + 1.0 for p, i in lay])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)

    def unpack(theta: np.ndarray) -> dict[int, dict]:
        out = {n: {} for n in ns}
        for (p, i), v in zip(lay, theta):
            for j, n in enumerate(ns):
                if i is None or i == j:
                    out[n][p] = float(v)
        return out

    def resid(theta: np.ndarray) -> np.ndarray:
        pars = unpack(theta)
        res = []
        for n in ns:
            x, y = points[n]
            q = pars[n]
            res.append((_model(r0, q["a"], q["b"], q["c"], np.log(x)) - y) / math.sqrt(len(x)))
        return np.concatenate(res)

    best = None
    for shift in (0.0, 2.0, 4.0):  # a few starting C_mid: further out = a later, higher ceiling
        start = x0.copy()
        for k, (p, _) in enumerate(lay):
            if p == "c":
                start[k] = min(start[k] + shift, hi[k] - 1e-9)
        r = least_squares(resid, start, bounds=(lo, hi), method="trf")
        if best is None or r.cost < best.cost:
            best = r
    pars = unpack(best.x)
    return {n: {"a": q["a"], "b": q["b"], "c_mid": math.exp(q["c"]), "cost": float(best.cost)}
            for n, q in pars.items()}


def read_out(fits: dict[tuple[int, int], dict], r0: dict[int, float], b_p: dict[int, int], budget: float,
             eval_points: int = EVAL_POINTS) -> pd.DataFrame:
    """Records of the fitted runs to ``budget``: step 0 and ``eval_points`` log-spaced steps."""
    rows = []
    for (n, seed), q in sorted(fits.items()):
        step_cost = n * b_p[n]
        last = int(budget // step_cost)
        if last < 1:
            continue
        steps = np.unique(np.round(np.geomspace(1, last, eval_points)).astype(int))
        rows.append({"run_id": f"n{n}_bp{b_p[n]}_s{seed}", "n": n, "b_p": b_p[n], "seed": seed, "step": 0,
                     "rollouts": 0.0, "val_avg": r0[seed], "budget": budget})
        for s in steps:
            c = float(s * step_cost)
            v = float(_model(r0[seed], q["a"], q["b"], math.log(q["c_mid"]), np.array([math.log(c)]))[0])
            rows.append({"run_id": f"n{n}_bp{b_p[n]}_s{seed}", "n": n, "b_p": b_p[n], "seed": seed,
                         "step": int(s), "rollouts": c, "val_avg": v, "budget": budget})
    return pd.DataFrame(rows)


def check_cheap_reach(path: str | Path, max_rollouts: float | None, n_values: list[int] | None = None,
                      **load: Any) -> str:
    """The runs' damage as every reader names it (:func:`isosim.integrations.inspect_loaded` on
    val_avg, the curve fitted), for a reader that reads the records again by itself (``predict``,
    ``calibrate --dynamics``): refused (one line) where runs stopped short of their planned budget
    before the cheap part's end (:func:`isosim.records.run_reach`, capped at ``max_rollouts``; None:
    every record is read: their cheap curves would be compared with longer ones) or where values
    would be read that are not what was measured (infinite values, disagreeing evaluations of one
    run at one budget). Returns the note naming the rest ('' if none)."""
    from isosim.integrations import inspect_loaded, load_runs
    from isosim.records import SHORT_ADVICE

    df, _ = load_runs(path, **load)
    if n_values:
        df = df[df["n"].isin(list(n_values))]
    if not len(df):
        return ""
    insp = inspect_loaded(path, df, "val_avg", cap=max_rollouts)
    reach = insp.reach
    if reach.short:
        upto = "every record is read" if max_rollouts is None else f"the cheap part reaches {max_rollouts:,.0f} rollouts"
        raise IsosimError(f"{reach.note()}: {upto}, past where they stopped (give --max-rollouts {reach.common:.0f}, "
                          f"the budget every run reached, or {SHORT_ADVICE})")
    if insp.altered:
        raise IsosimError(f"{'; '.join(insp.altered)}: the curves are fitted to the records as written; fix those "
                          "records (or move those runs out of the folder)")
    return insp.note()


def read_cheap_table(path: str | Path, *, max_rollouts: float, n_values: list[int] | None = None,
                     maps: Sequence[str] = (), sets: Sequence[str] = (), runs_file: str | Path | None = None):
    """The cheap part of any runs ``isosim analyze`` reads (a folder of run folders, a sweep store,
    TensorBoard logs, a W&B export, a CSV/Parquet/JSONL records table; ``maps`` / ``sets`` /
    ``runs_file`` as analyze's ``--map`` / ``--set`` / ``--runs``): a
    :class:`~isosim.predict.dynamics.CheapRuns` of the records at or below ``max_rollouts``.

    A plain folder of isosim run folders (``*/records.jsonl``) is read by
    :func:`~isosim.predict.dynamics.read_cheap_runs`, which stops reading each file at the limit;
    anything else through :func:`isosim.integrations.load_runs`, analyze's reader."""
    from isosim.frontier.report import is_sweep_store, record_files
    from isosim.integrations import load_runs
    from isosim.predict.dynamics import CheapRuns, read_cheap_runs

    path = Path(path)
    if not max_rollouts > 0:
        raise IsosimError(f"--max-rollouts must be positive (got {max_rollouts:g})")
    if (path.is_dir() and not is_sweep_store(path) and record_files(path) and not maps and not sets
            and runs_file is None):
        return read_cheap_runs(path, max_rollouts=max_rollouts, n_values=n_values)
    df, _ = load_runs(path, maps=maps, sets=sets, runs_file=runs_file)
    available = sorted(int(v) for v in df["n"].unique())
    unknown = [n for n in (n_values or []) if n not in available]
    if unknown:
        raise IsosimError(f"--n {unknown[0]}: no runs with n = {unknown[0]} in {path} "
                          f"(n = {', '.join(map(str, available))})")
    if n_values:
        df = df[df["n"].isin(list(n_values))]
    if "val_avg" not in df.columns or pd.to_numeric(df["val_avg"], errors="coerce").isna().all():
        raise IsosimError(f"{path}: the records hold no val_avg (the validation curve is what is fitted; "
                          "TensorBoard / W&B logs: --map val_avg=TAG)")
    past = df.groupby("run_id")["rollouts"].transform("max") > max_rollouts * (1 + 1e-12)
    cut = int(df.loc[past, "run_id"].nunique())
    df = df[df["rollouts"] <= max_rollouts * (1 + 1e-12)]
    df = df.assign(val_avg=pd.to_numeric(df["val_avg"], errors="coerce")).dropna(subset=["val_avg"])
    if df.empty:
        raise IsosimError(f"{path}: no records at or below {max_rollouts:g} rollouts")
    groups = sorted({(int(n), int(b)) for n, b in zip(df["n"], df["b_p"])})
    for n, b in groups:
        g = df[(df["n"] == n) & (df["b_p"] == b)]
        if not (g["rollouts"] == 0).any():
            raise IsosimError(f"{path}: the runs with n = {n} have no step-0 evaluation (the gain is measured from it)")
    sizes = {c: (int(v[0]) if len(v := pd.to_numeric(df[c], errors="coerce").dropna().unique()) == 1 else None)
             for c in ("train_size", "val_size", "n_train", "n_val") if c in df.columns}
    return CheapRuns(folder=str(path), df=df.reset_index(drop=True), max_rollouts=max_rollouts, groups=groups,
                     seeds=sorted(int(s) for s in df["seed"].unique()),
                     train_size=sizes.get("train_size", sizes.get("n_train")),
                     val_size=sizes.get("val_size", sizes.get("n_val")), recipe=None, warmup=None,
                     run_ids=sorted(df["run_id"].astype(str).unique().tolist()), cut=cut)


def predict_from_cheap(folder: str | Path, *, max_rollouts: float, budget: float, method: str = DEFAULT_METHOD,
                       n_values: list[int] | None = None, n_boot: int = 200, seed: int = 0,
                       log: Callable[[str], None] | None = None, maps: Sequence[str] = (),
                       sets: Sequence[str] = (), runs_file: str | Path | None = None) -> dict[str, Any]:
    """A prediction entry (the organism frontier schema) for the runs at ``folder`` (any input of
    :func:`read_cheap_table`) from their cheap part: records at or below ``max_rollouts``,
    extrapolated to ``budget`` under ``method``."""
    from isosim.frontier import analysis

    log = log or (lambda s: None)
    if method not in METHODS:
        raise IsosimError(f"--method {method!r}: one of {', '.join(METHODS)}")
    if not budget > 0 or not max_rollouts > 0:
        raise IsosimError("--budget and --max-rollouts must be positive")
    if budget < max_rollouts:
        raise IsosimError(f"--budget {budget:g} is below the cheap part's --max-rollouts {max_rollouts:g}")
    runs = read_cheap_table(folder, max_rollouts=max_rollouts, n_values=n_values, maps=maps, sets=sets,
                            runs_file=runs_file)
    df = runs.df
    b_p = {int(n): int(b) for n, b in runs.groups}
    if len(b_p) != len(runs.groups):
        raise IsosimError(f"{folder}: runs of one n with several B_p; predict one B_p at a time")
    r0 = {int(s): float(g.loc[g["rollouts"] == 0, "val_avg"].mean()) for s, g in df.groupby("seed")}
    fits: dict[tuple[int, int], dict] = {}
    for s, g in df.groupby("seed"):
        pts = {}
        for n, gn in g[g["rollouts"] > 0].groupby("n"):
            gn = gn.sort_values("rollouts")
            pts[int(n)] = (gn["rollouts"].to_numpy(float), gn["val_avg"].to_numpy(float))
        if not pts:
            continue
        for n, q in fit_seed(pts, r0[int(s)], method).items():
            fits[(n, int(s))] = q
    if not fits:
        raise IsosimError(f"{folder}: no cheap records after step 0 at or below {max_rollouts:g} rollouts")
    synth = read_out(fits, r0, b_p, budget)
    res = analysis.analyze(synth, metric="val_avg", n_boot=n_boot, seed=seed)
    entry = analysis.frontier_summary(res)
    last = synth.sort_values("step").groupby("run_id").tail(1)
    finals = last.groupby(["n", "seed"])["val_avg"].mean().unstack("seed")
    entry.update(
        n_values=sorted(b_p), seeds=sorted(int(s) for s in df["seed"].unique()), max_rollouts=float(budget),
        b_p=sorted(set(b_p.values())),
        final_val_avg={str(int(n)): float(v) for n, v in finals.mean(axis=1).items()},
        seed_sd=float(finals.std(axis=1, ddof=1).mean()) if finals.shape[1] > 1 else None,
        method=f"extrapolate:{method}",
        cheap={"runs": str(folder), "max_rollouts": float(max_rollouts), "records_used": int(len(df)),
               "run_ids": runs.run_ids, "runs_cut_at_limit": runs.cut, "train_size": runs.train_size,
               "val_size": runs.val_size},
        fitted={f"n={n},seed={s}": q for (n, s), q in sorted(fits.items())},
    )
    log(f"{folder}: {len(runs.run_ids)} runs, {len(df)} records <= {max_rollouts:g} rollouts; {method}: "
        f"n* at {budget:g} = {entry['n_star'][-1]} (tie band {entry['n_tol'][-1]}-{entry['n_tie_hi'][-1]})")
    return entry


def _entries(out: Path, key: str) -> dict[str, Any]:
    """The entries of the prediction file ``out``, read to add ``key`` to it."""
    import json

    try:
        doc = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IsosimError(f"{out}: cannot read the prediction file to add {key!r} ({exc})") from None
    if not isinstance(doc, dict):
        raise IsosimError(f"{out}: not a file of predictions keyed by sweep")
    return doc


def check_entry(out: str | Path, key: str | None, force: bool = False) -> None:
    """Refuse, before any work, a prediction that would overwrite what ``out`` holds: the whole
    file (no ``key``) or the entry ``key`` already there; ``force`` overwrites it. A new key is added
    to the other keys (:func:`write_entry`)."""
    out = Path(out)
    if force or not out.is_file():
        return
    if key is None:
        raise IsosimError(f"--out {out} exists: pass --key NAME to add this prediction to it, --out NEW_FILE, or "
                          "--force to overwrite the whole file")
    if key in _entries(out, key):
        raise IsosimError(f"--out {out} already holds --key {key}: another --key, or --force to replace that entry")


def write_entry(out: str | Path, key: str | None, entry: dict[str, Any]) -> Path:
    """Write ``entry`` to ``out``: under ``key`` in a file of entries keyed by sweep (other keys
    kept), or as the whole file when ``key`` is None."""
    from isosim.files import write_json

    out = Path(out)
    doc = _entries(out, key) if key is not None and out.is_file() else {}
    return write_json(out, {**doc, key: entry} if key is not None else entry, indent=1)
