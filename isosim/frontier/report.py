"""From a records table to what a user takes home: frontier.json, figures and a summary table.

Shared by ``isosim explore`` (simulated sweeps), ``isosim analyze`` (any records table or a
folder of runs) and ``isosim validate`` (real runs), so all three read results the same way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isosim import records
from isosim.errors import IsosimError
from isosim.files import remove_stale_tmp

METRIC_ALIASES = {"avg": "val_avg", "best": "val_best", "worst": "val_worst"}


def metric_column(metric: str) -> str:
    """``avg``/``best``/``worst`` or a column name -> the column name."""
    return METRIC_ALIASES.get(metric, metric)


def is_sweep_store(path: str | Path) -> bool:
    """True for an ``isosim explore``/``sweep`` store (a manifest, or a plan with a format number).

    An ``isosim validate`` folder also has a ``plan.json`` (of another kind), beside ``runs/*/``:
    it is read as a folder of runs.
    """
    path = Path(path)
    if (path / "manifest.json").exists():
        return True
    plan = path / "plan.json"
    if not plan.is_file():
        return False
    try:
        return "format" in json.loads(plan.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return True  # unreadable: let the store reader say what is wrong with it


def record_files(path: str | Path) -> list[Path]:
    """The ``records.jsonl`` files of a folder of runs: its own, its runs' (``*/``) and those one
    level deeper (``*/*/``, e.g. an ``isosim validate`` folder's ``runs/*/``)."""
    path = Path(path)
    return sorted(path.glob("records.jsonl")) + sorted(path.glob("*/records.jsonl")) + sorted(
        path.glob("*/*/records.jsonl"))


def _is_run_config(path: Path) -> bool:
    """True for an isosim run's ``config.json`` (it names the run and its n), not a model's."""
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(cfg, dict) and {"run_id", "n"} <= set(cfg)


def runs_without_records(path: str | Path) -> list[str]:
    """The run folders of a folder of runs (at the depths :func:`record_files` reads) that hold no
    record: a run's ``config.json`` without ``records.jsonl``, or a ``records.jsonl`` with no line;
    each named relative to ``path``, with which of the two."""
    path = Path(path)
    if not path.is_dir():
        return []
    out = []
    for depth in ("", "*/", "*/*/"):
        for cfg in sorted(path.glob(depth + "config.json")):
            if not (cfg.parent / "records.jsonl").exists() and _is_run_config(cfg):
                out.append((cfg.parent, "no records.jsonl"))
        for rec in sorted(path.glob(depth + "records.jsonl")):
            if not rec.read_text(encoding="utf-8").strip():
                out.append((rec.parent, "empty records.jsonl"))
    return [f"{(folder.relative_to(path).as_posix() if folder != path else path.name)} ({why})"
            for folder, why in sorted(out)]


def load_records(path: str | Path) -> pd.DataFrame:
    """Records from a sweep store, a folder of runs (``*/records.jsonl``), or a table file."""
    path = Path(path)
    if not path.exists():
        raise IsosimError(f"{path}: no such file or folder")
    if path.is_file():
        return records.read_table(path)
    if is_sweep_store(path):
        from isosim.sweeps.sweep import load_store

        return load_store(path)[1]
    files = record_files(path)
    if not files:
        tables = sorted(p for ext in ("csv", "parquet", "jsonl") for p in path.glob(f"*.{ext}"))
        if len(tables) == 1:
            return records.read_table(tables[0])
        raise IsosimError(f"{path}: no sweep store, no run folders with records.jsonl, "
                          "and not exactly one table file")
    frames = []
    for f in files:
        frames.append(records.read_records_file(f))
    frames = [f for f in frames if len(f)]
    if not frames:
        raise IsosimError(f"{path}: the run folders hold no records yet")
    return records.normalize(pd.concat(frames, ignore_index=True), source=str(path))


def clean_records(df: pd.DataFrame, metric: str, x: str = "rollouts") -> tuple[pd.DataFrame, list[str]]:
    """:func:`isosim.records.clean_rows`: the rows the analysis can use, and a line for each kind left out."""
    return records.clean_rows(df, metric, x)


def measured_by(df: pd.DataFrame, metric: str, budgets: list[float], x: str = "rollouts") -> list[float | None]:
    """Per budget, the highest ``metric`` any run had measured at an evaluation at or below it (None
    where none had): a frontier value above it was read between evaluations, not measured by then."""
    xs = pd.to_numeric(df[x], errors="coerce").to_numpy(float)
    ys = pd.to_numeric(df[metric], errors="coerce").to_numpy(float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    out = []
    for b in budgets:
        by = ys[xs <= b * (1 + 1e-9)]
        out.append(float(by.max()) if len(by) else None)
    return out


def hist_budget(df: pd.DataFrame, x: str = "rollouts") -> float | None:
    """The largest budget at which every n has pass@1 histogram rows on both sides (what
    :func:`isosim.frontier.analysis.hist_at_matched_compute` reads), or None where there is none:
    a run that stopped short moves it down, and never makes it an error about another n."""
    have = df[pd.to_numeric(df[records.HIST_COLUMNS[0]], errors="coerce").notna()]
    if have.empty or have["n"].nunique() < df["n"].nunique():
        return None
    span = pd.to_numeric(have[x], errors="coerce").groupby(have["n"]).agg(["min", "max"])
    top = float(span["max"].min())
    return top if top > 0 and top >= float(span["min"].max()) else None


REPORT_FILES = ("frontier.json", *(f"{stem}{ext}" for stem in ("frontier", "n_star", "metric_split", "pass_hist")
                                   for ext in (".png", ".svg")))
"""every file :func:`build_report` may write into its folder"""


def build_report(df: pd.DataFrame, out_dir: str | Path, *, metric: str = "val_avg", n_boot: int = 200,
                 seed: int = 0, figures: bool = True, tol: float | None = None) -> dict[str, Any]:
    """Analyse ``df``, write ``frontier.json`` (+ figures) into ``out_dir``; return the result.

    The result also holds ``split`` (n* per budget for best@k and worst@k, where those columns
    exist) and ``figures`` (paths written). ``tol`` is the tie tolerance (default
    ``analysis.DEFAULT_TOL`` times the metric's range: half a point of it). Rows left out by :func:`clean_records`
    are named in ``input_notes`` (printed by :func:`print_summary`).
    """
    from isosim.frontier import analysis

    metric = metric_column(metric)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp(out)  # what a writer killed mid-figure left
    df = records.normalize(df, source="records")
    df, input_notes = clean_records(df, metric)
    if not len(df):
        raise IsosimError(f"no row has a number in {metric!r}: " + "; ".join(input_notes))
    result = analysis.analyze(df, metric=metric, n_boot=n_boot, seed=seed, tol=tol)
    result["input_notes"] = input_notes
    result["measured_by"] = measured_by(df, metric, result["budgets"])
    split_metrics = [m for m in ("val_best", "val_worst") if m in df.columns and df[m].notna().any()]
    split = {}
    if len(split_metrics) == 2 and df["n"].nunique() > 1:
        try:
            split = analysis.metric_split(df, metrics=tuple(split_metrics), tol=tol)
        except IsosimError:
            split = {}
    result["split"] = {m: {"budgets": r["budgets"], "n_star": r["n_star"], "n_sat": r["fit"]["n_sat"]}
                       for m, r in split.items()}
    written: list[str] = []
    if figures:
        from isosim.frontier import plots

        written += [str(p) for p in plots.plot_frontier(df, result, out / "frontier")]
        written += [str(p) for p in plots.plot_n_star(result, out / "n_star")]
        if split:
            shown = {metric: result, **split} if metric not in split else split
            written += [str(p) for p in plots.plot_metric_split(shown, out / "metric_split")]
        if all(c in df.columns for c in records.HIST_COLUMNS) and df["n"].nunique() > 1:
            ns = [int(n) for n in sorted(df["n"].unique())]
            top = hist_budget(df)
            if top is None:
                result["input_notes"].append("no budget at which every n has a pass@1 histogram: the pass_hist "
                                             "figure is left out")
            else:
                written += [str(p) for p in plots.plot_hist_evolution(df, ns, [top], out / "pass_hist")]
    result["figures"] = written
    analysis.write_frontier_json(result, out / "frontier.json")
    return result


INTERPOLATED = "*"
"""marks a frontier value read between evaluations: above every evaluation any run had made by that budget"""


def interpolated(result: dict[str, Any]) -> list[bool]:
    """Per budget, whether the frontier value lies above everything measured by then (``measured_by``)."""
    by = result.get("measured_by") or [None] * len(result["budgets"])
    return [v is not None and m is not None and v > m + 1e-12 for v, m in zip(result["reward"], by)]


def summary_rows(result: dict[str, Any], max_rows: int = 12) -> list[tuple[str, ...]]:
    """(budget, n*, tie band, reward, learning) rows for a table, thinned to at most ``max_rows``.

    The tie band is ``n_tol``-``n_tie_hi`` (every n within the tie tolerance of the frontier);
    learning is ``no`` where the frontier is within the seed noise of the base reward; a reward read
    between evaluations, above all that was measured by its budget, carries ``INTERPOLATED``.
    """
    budgets, n_star, reward = result["budgets"], result["n_star"], result["reward"]
    lo, hi = result.get("n_tol"), result.get("n_tie_hi")
    learning = result.get("learning")
    between = interpolated(result)
    keep = np.unique(np.linspace(0, len(budgets) - 1, min(max_rows, len(budgets))).round().astype(int))
    rows = []
    for i in keep:
        band = "" if lo is None else (str(lo[i]) if lo[i] == hi[i] else f"{lo[i]}-{hi[i]}")
        learn = "" if learning is None else ("yes" if learning[i] else "no")
        value = f"{reward[i]:.4f}" + (INTERPOLATED if between[i] else "")
        rows.append((f"{budgets[i]:.3g}", str(n_star[i]), band, value, learn))
    return rows


def level_text(n_sat: float, n_values: list[int]) -> str:
    """A fitted n_sat in words true of the n tried: that n where it is one (within 5 % of an octave),
    else the fitted value and the two n tried it lies between."""
    tried = sorted(int(n) for n in n_values)
    near = min(tried, key=lambda n: abs(math.log2(n_sat / n)))
    if abs(math.log2(n_sat / near)) < 0.05:
        return f"{near}"
    below = [n for n in tried if n < n_sat]
    above = [n for n in tried if n > n_sat]
    if below and above:
        return f"{n_sat:.3g} (fitted; no run at it: between the n tried {below[-1]} and {above[0]})"
    return f"{n_sat:.3g} (fitted; no run at it: the n tried run {tried[0]} to {tried[-1]})"


def _fit_line(name: str, fit: dict[str, Any], ci_label: str, n_values: list[int], ci_note: str = "") -> str:
    if fit.get("n_sat") is None:
        return f"{name}: none ({fit.get('reason') or 'no budget shows learning beyond the seed noise'})"
    ci = fit.get("n_sat_ci")
    ci_txt = f" ({ci_label} {ci[0]:.0f}-{ci[1]:.0f}{ci_note})" if ci else ""
    edge = f"within half an octave of the {{}} n tried ({{}}): saturation is not seen, n_sat may lie {{}}"
    sat = (", not saturated: " + edge.format("smallest", min(n_values), "lower") if fit.get("at_floor")
           else "" if fit.get("saturated", True) else ", not saturated: " + edge.format("largest", max(n_values), "higher"))
    return (f"{name} = {level_text(fit['n_sat'], n_values)}{ci_txt}{sat}, log10 C_mid = {fit['log_c_mid']:.2f}, "
            f"slope = {fit['slope']:.2f}")


def printed_warnings(result: dict[str, Any]) -> list[str]:
    """The result's warnings less those on a fit's level at the edge of the n tried, which the fit
    lines (:func:`_fit_line`) state in words true of the n tried."""
    from isosim.frontier.analysis import FIT_NAMES, level_warning

    n_max = float(max(result["n_values"]))
    said = {level_warning(name, result[key], n_max) for key, name in FIT_NAMES.items() if result.get(key)}
    return [w for w in result.get("warnings", []) if w not in said]


def print_summary(result: dict[str, Any], *, title: str, out_dir: str | Path, console=None) -> None:
    """A rich table of budgets with n*, the tie band and the frontier reward; both fits, warnings, files."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    for note in result.get("input_notes", []):
        console.print("note: " + note, markup=False, highlight=False, style="yellow")
    table = Table(title=title)
    table.add_column("budget (rollouts)", justify="right")
    table.add_column("n*", justify="right")
    tol = result.get("tol")
    table.add_column("ties" if tol is None else f"n within {tol:g}", justify="right")
    table.add_column(result["metric"], justify="right")
    table.add_column("learning", justify="center")
    rows = summary_rows(result)
    for row in rows:
        table.add_row(*row, style="dim" if row[-1] == "no" else None)
    if len(rows) < len(result["budgets"]):
        table.caption = f"{len(rows)} of {len(result['budgets'])} budgets shown, evenly spaced; frontier.json has all"
    console.print(table)
    if any(interpolated(result)):
        console.print(f"{INTERPOLATED} interpolated: read between a run's evaluations, above every evaluation any run "
                      "had made by that budget (not yet measured there)", markup=False, highlight=False)
    ci = result.get("ci", [5, 95])
    ns = result["n_values"]
    console.print(_fit_line("fitted n_sat", result["fit"], f"{ci[1] - ci[0]:g}% interval", ns, ", ties included"),
                  markup=False, highlight=False)
    if result.get("fit_tol"):
        console.print(_fit_line("smallest tied n, n_sat_tol", result["fit_tol"], f"{ci[1] - ci[0]:g}% interval", ns),
                      markup=False, highlight=False)
    for w in printed_warnings(result):
        console.print("warning: " + w, markup=False, highlight=False, style="yellow")
    for m, s in result.get("split", {}).items():
        console.print(f"  {m}: n* at the largest budget = {s['n_star'][-1]}")
    console.print(f"results: {Path(out_dir) / 'frontier.json'}")
    for f in result.get("figures", []):
        if f.endswith(".png"):
            console.print(f"figure:  {f}")
