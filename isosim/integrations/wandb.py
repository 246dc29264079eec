"""Read runs from CSV files exported from Weights & Biases (no W&B package or account needed).

Two shapes are read:

* a chart's "Export panel data" CSV: a ``Step`` column and one column per run and metric,
  named ``<run name> - <metric>`` (the ``__MIN`` / ``__MAX`` columns of smoothed charts are ignored);
* a history table: a step column (``train/global_step`` where the Hugging Face Trainer logged it,
  else ``Step``, ``step`` or ``_step``), optionally
  a run column (``name``, ``Name``, ``run``, ``run_name``, ``run_id``), and one column per metric.
  Columns that hold one value per run and are named like the trainer's settings
  (``num_generations``, ``generation_batch_size``, ``seed``, ...) or ``n`` / ``b_p`` are read as
  that run's configuration.

Several CSV files in one folder (one per chart, say) are merged run by run and step by step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.integrations._runs import LoggedRun

# The trainer's own step first: W&B's ``_step`` counts log calls, which for the Hugging Face
# Trainer (and so TRL) is not the optimizer step; it logs that as ``train/global_step``.
STEP_COLUMNS = ("train/global_step", "trainer/global_step", "training/global_step", "global_step", "Step",
                "step", "_step")
SKIP_COLUMNS = ("_runtime", "_timestamp", "_wandb")
RUN_COLUMNS = ("name", "Name", "run", "run_name", "run_id", "Run", "display_name")
CONFIG_COLUMNS = ("num_generations", "generation_batch_size", "steps_per_generation", "num_iterations",
                  "gradient_accumulation_steps", "per_device_train_batch_size", "seed", "learning_rate")
SETTING_COLUMNS = ("n", "b_p")
SEP = " - "


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except Exception as exc:  # pandas raises many kinds; one line for the user
        raise IsosimError(f"{path}: cannot read CSV ({type(exc).__name__}: {exc})") from None


def _step_column(df: pd.DataFrame, path: Path) -> str:
    for c in STEP_COLUMNS:
        if c in df.columns:
            return c
    raise IsosimError(f"{path}: no step column (expected one of {', '.join(STEP_COLUMNS)}); "
                      "export the chart or run history with its steps")


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    return df.apply(pd.to_numeric, errors="coerce")


def _by_step(table: pd.DataFrame, step: str) -> pd.DataFrame:
    table = table[pd.to_numeric(table[step], errors="coerce").notna()].copy()
    table[step] = pd.to_numeric(table[step]).astype(int)
    out = _numeric(table.drop(columns=[step])).groupby(table[step]).last().sort_index()
    out.index.name = "step"
    return out.dropna(axis=1, how="all")


def read_csv(path: str | Path) -> list[LoggedRun]:
    """The runs of one exported CSV file."""
    path = Path(path)
    df = _read(path)
    if len(df) == 0:
        raise IsosimError(f"{path}: the CSV file is empty")
    step = _step_column(df, path)
    wide = [c for c in df.columns if c != step and SEP in str(c)]
    runs: list[LoggedRun] = []
    if wide:
        per: dict[str, dict[str, str]] = {}
        for c in wide:
            run, _, tag = str(c).rpartition(SEP)
            if tag.endswith(("__MIN", "__MAX")):
                continue
            per.setdefault(run.strip(), {})[c] = tag.strip()
        for run, cols in per.items():
            table = _by_step(df[[step, *cols]].rename(columns=cols), step)
            runs.append(LoggedRun(name=run, scalars=table, origin=str(path)))
        return runs
    run_col = next((c for c in RUN_COLUMNS if c in df.columns), None)
    groups = df.groupby(df[run_col].astype(str), sort=True) if run_col else [(path.stem, df)]
    for name, g in groups:
        config, settings = {}, {}
        for c in [*CONFIG_COLUMNS, *SETTING_COLUMNS]:
            if c in g.columns:
                vals = pd.to_numeric(g[c], errors="coerce").dropna().unique()
                if len(vals) == 1:
                    (settings if c in SETTING_COLUMNS else config)[c] = float(vals[0])
        drop = [c for c in (run_col, *CONFIG_COLUMNS, *SETTING_COLUMNS, *STEP_COLUMNS, *SKIP_COLUMNS)
                if c and c != step and c in g.columns]
        table = _by_step(g.drop(columns=drop), step)
        runs.append(LoggedRun(name=str(name), scalars=table, config=config, origin=str(path),
                              settings={k: int(v) for k, v in settings.items() if v == int(v) and v >= 1}))
    return runs


def read_many(paths: Sequence[Path]) -> list[LoggedRun]:
    """Runs of several CSV files, merged by run name (tables joined on step)."""
    merged: dict[str, LoggedRun] = {}
    for p in paths:
        for run in read_csv(p):
            if run.name not in merged:
                merged[run.name] = run
                continue
            old = merged[run.name]
            table = old.scalars.combine_first(run.scalars)
            merged[run.name] = LoggedRun(name=run.name, scalars=table, config={**old.config, **run.config},
                                         origin=f"{old.origin}, {run.origin}",
                                         settings={**old.settings, **run.settings})
    return [merged[k] for k in sorted(merged)]


def looks_like_export(path: Path) -> bool:
    """Whether ``path``'s header has a step column (without reading the whole file)."""
    try:
        header = pd.read_csv(path, nrows=0).columns
    except Exception:
        return False
    return any(c in header for c in STEP_COLUMNS) and not np.all([c in header for c in ("n", "b_p", "rollouts")])
