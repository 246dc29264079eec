"""Runs from other trainers into isosim's records table, and an isosim callback for TRL.

* :func:`load_runs` is what ``isosim analyze PATH`` reads: an isosim sweep store, a folder of
  isosim runs (``*/records.jsonl``, also what :class:`isosim.integrations.trl.RecordsCallback`
  writes), a records table, TensorBoard event files (TRL, verl, any Hugging Face Trainer run) or
  CSV files exported from Weights & Biases. It says in one line what it read.
* ``isosim.integrations.tensorboard`` and ``isosim.integrations.wandb`` are the readers;
  ``isosim.integrations.trl`` holds the callback.
* ``isosim.integrations.plan`` and ``plan_files`` write the cheap sweep in TRL, verl or isosim
  settings (``isosim plan``) and the pick's full run (``isosim recommend --runs ... --for``);
  TensorBoard logs of a plan's runs take n and B_p from its ``isosim_runs.csv``.

Importing this package imports neither TensorBoard nor transformers nor TRL: each is imported
when its reader or the callback is used. Tag mappings are documented in docs/integrations.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import pandas as pd

from isosim.errors import IsosimError

if TYPE_CHECKING:
    from isosim.records import PlannedRun, Reach

__all__ = ["load_runs", "load_competing_runs", "default_metric"]

TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl", ".json", ".ndjson")


def _summary(df: pd.DataFrame, source: str) -> str:
    from isosim.records import allocation_summary

    runs = df["run_id"].nunique()
    ns = ", ".join(str(int(v)) for v in sorted(df["n"].unique()))
    text = f"{runs} run{'s' if runs != 1 else ''} from {source}, n = {ns}"
    for rule, a in (allocation_summary(df) or {}).items():  # per-problem n, where a rule set it
        text += (f"; allocation {rule} ({a['runs']} run{'s' if a['runs'] != 1 else ''}): per-problem n "
                 f"{a['n_min']}-{a['n_max']}, mean {a['n_mean']:.3g}")
    return text


def _native(path: Path) -> str | None:
    """What kind of isosim records ``path`` holds, or None."""
    if path.is_file():
        if path.suffix.lower() != ".csv":
            return f"records table {path.name}"
        from isosim.integrations.wandb import looks_like_export

        try:
            header = set(pd.read_csv(path, nrows=0).columns)
        except Exception:
            return f"records table {path.name}"  # read_table gives the one-line error
        from isosim.integrations.wandb import STEP_COLUMNS
        from isosim.records import REQUIRED_INPUT

        if set(REQUIRED_INPUT) <= header:
            return f"records table {path.name}"
        missing = ", ".join(c for c in REQUIRED_INPUT if c not in header)
        if "rollouts" in header:  # an isosim records table with a column missing (W&B exports count steps)
            raise IsosimError(f"{path}: an isosim records table missing column(s) {missing} (a records table needs "
                              f"{', '.join(REQUIRED_INPUT)} and a metric)")
        if looks_like_export(path):
            return None
        missing = ", ".join(c for c in REQUIRED_INPUT if c not in header)
        raise IsosimError(f"{path}: neither an isosim records table (missing column(s) {missing}) nor a "
                          f"W&B export (no step column: expected one of {', '.join(STEP_COLUMNS)})")
    from isosim.frontier.report import is_sweep_store

    if is_sweep_store(path):
        return "an isosim sweep store"
    for pattern in ("records.jsonl", "*/records.jsonl", "*/*/records.jsonl"):
        if any(path.glob(pattern)):
            return "isosim records (records.jsonl)"
    return None


def _unread_event_runs(path: Path) -> str:
    """A note on run folders with TensorBoard logs but no records.jsonl (not read beside records)."""
    if not path.is_dir():
        return ""
    from isosim.integrations.tensorboard import find_event_files, run_root

    with_records = {f.parent for f in path.rglob("records.jsonl")}
    roots = {run_root(f.parent, path) for f in find_event_files(path)}
    left = sorted(r.relative_to(path).as_posix() for r in roots if r not in with_records and r != path)
    if not left:
        return ""
    return (f" (not read: {len(left)} run folder{'s' if len(left) > 1 else ''} with TensorBoard logs but no "
            f"records.jsonl, e.g. {left[0]}; analyze those separately)")


def load_runs(path: str | Path, *, maps: Iterable[str] = (), sets: Iterable[str] = (),
              runs_file: str | Path | None = None) -> tuple[pd.DataFrame, str]:
    """Records of every run at ``path`` and one line saying what was read.

    ``maps`` are ``column=TAG`` items, ``sets`` are ``[RUN:]key=value,...`` items, ``runs_file``
    a CSV (``run`` column) or JSON file of per-run settings; they apply to TensorBoard and W&B
    logs (isosim's own records already carry every column). Raises ``IsosimError`` with one line
    for anything it cannot read.
    """
    from isosim.integrations import _runs

    path = Path(path)
    if not path.exists():
        raise IsosimError(f"{path}: no such file or folder")
    maps, sets = list(maps), list(sets)
    col_map = _runs.parse_maps(maps)
    every, per_run = _runs.parse_sets(sets, runs_file)

    native = _native(path)
    if native is not None:
        if maps or sets or runs_file is not None:
            raise IsosimError(f"{path} holds {native}, which needs no --map, --set or --runs "
                              "(they apply to TensorBoard and W&B logs)")
        from isosim.frontier.report import load_records

        df = load_records(path)
        return df, _summary(df, native) + _unread_event_runs(path)

    if path.is_file():  # a CSV that is not an isosim table: a W&B export
        from isosim.integrations import wandb

        return _runs.to_records(wandb.read_csv(path), source=f"W&B export {path.name}", maps=col_map,
                                every=every, per_run=per_run, where=str(path))

    from isosim.integrations import tensorboard

    if tensorboard.find_event_files(path):
        runs = tensorboard.read_runs(path)
        source = "TensorBoard logs"
        if runs_file is None and not sets:  # runs of an isosim plan: n and B_p from its run table
            from isosim.integrations.plan_files import plan_settings

            per_run = plan_settings(path, [r.name for r in runs])
            source += " (n, B_p from the plan's isosim_runs.csv)" if per_run else ""
        return _runs.to_records(runs, source=source, maps=col_map, every=every,
                                per_run=per_run, where=str(path))
    csvs = sorted(path.glob("*.csv"))
    if csvs:
        from isosim.integrations import wandb

        exports = [p for p in csvs if wandb.looks_like_export(p)]
        others = [p.name for p in csvs if p not in exports]
        if exports:
            where = f"W&B export{'s' if len(exports) > 1 else ''} in {path.name}"
            df, text = _runs.to_records(wandb.read_many(exports), source=where, maps=col_map, every=every,
                                        per_run=per_run, where=str(path))
            if others:
                text += f" (not read: {', '.join(others[:3])}{' ...' if len(others) > 3 else ''}, not W&B exports)"
            return df, text
    tables = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in TABLE_SUFFIXES)
    if len(tables) == 1 and not (maps or sets or runs_file):
        from isosim.records import read_table

        df = read_table(tables[0])
        return df, _summary(df, f"records table {tables[0].name}")
    raise IsosimError(
        f"{path}: found no isosim records (records.jsonl, a sweep store, one table), no TensorBoard "
        "event files and no W&B CSV exports")


def planned_runs(path: str | Path) -> tuple[list["PlannedRun"] | None, str]:
    """The runs a plan lists for the runs at ``path`` (an ``explore`` store's plan.json, or the
    run table of the ``isosim plan`` folder at or above ``path``; None where there is no plan),
    and a clause naming an unfinished ``explore`` store ('' otherwise)."""
    from isosim.frontier.report import is_sweep_store
    from isosim.records import PlannedRun

    path = Path(path)
    if path.is_dir() and is_sweep_store(path):
        from isosim.sweeps.store import _read_plan, store_status

        try:
            plan = _read_plan(path)
            status = store_status(path)
        except IsosimError:
            return None, ""  # the store reader says what is wrong with it
        if plan is None:
            return None, ""
        planned = [PlannedRun(c.run_id, int(c.n), int(c.seed)) for c in plan.configs()]
        text = ""
        if not status["complete"]:
            text = (f"unfinished sweep (killed, or still running): {status['runs_done']} of {status['runs']} planned "
                    "runs finished; the others are not read")
        return planned, text
    from isosim.integrations.plan_files import RUNS_FILE, find_plan

    plan_dir = find_plan(path) if path.is_dir() else None
    if plan_dir is None or not (plan_dir / RUNS_FILE).is_file():
        return None, ""
    try:
        table = pd.read_csv(plan_dir / RUNS_FILE)
        return [PlannedRun(str(r["run"]), int(r["n"]), int(r["seed"])) for r in table.to_dict("records")], ""
    except (OSError, ValueError, KeyError, TypeError):
        return None, ""


def inspect_loaded(path: str | Path, df: pd.DataFrame, metric: str | None = None, cap: float | None = None):
    """:func:`isosim.records.inspect_runs` of the runs at ``path`` as loaded (``df``), with the runs
    its plan lists and its run folders without records: what every reader of a user's runs says."""
    from isosim.frontier.report import runs_without_records
    from isosim.records import inspect_runs

    planned, unfinished = planned_runs(path)
    return inspect_runs(df, metric or default_metric(df), empty=runs_without_records(path), planned=planned,
                        unfinished=unfinished, cap=cap)


def load_inspected(path: str | Path, metric: str | None = None, raw: tuple[pd.DataFrame, str] | None = None, **kwargs):
    """:func:`load_runs` for a reader that compares n (``analyze``, ``recommend --runs``): the runs'
    damage named or refused (:func:`inspect_loaded`); where some run stopped short, every run is cut
    at the budget every run reached. ``raw``: what :func:`load_runs` already returned for ``path``
    (not read again). Returns (rows to compare, the line read with every damage named, the
    :class:`isosim.records.Inspection`)."""
    from isosim.records import at_common_budget

    df, what = raw if raw is not None else load_runs(path, **kwargs)
    insp = inspect_loaded(path, df, metric)
    note = insp.note()
    return at_common_budget(insp.df, insp.reach), what + (f"; {note}" if note else ""), insp


def load_competing_runs(path: str | Path, metric: str | None = None, **kwargs) -> tuple[pd.DataFrame, str, "Reach"]:
    """:func:`load_inspected`, with the runs' reach (for :func:`isosim.records.blamed_on_short_runs`)
    in place of the whole inspection."""
    df, what, insp = load_inspected(path, metric, **kwargs)
    return df, what, insp.reach


def default_metric(df: pd.DataFrame) -> str:
    """``val_avg`` where validation was logged; refused otherwise (never a silent switch to the
    training reward: ``--metric train_reward`` asks for it)."""
    if "val_avg" in df.columns and pd.to_numeric(df["val_avg"], errors="coerce").notna().any():
        return "val_avg"
    have = [c for c in ("train_reward", "val_best", "val_worst")
            if c in df.columns and pd.to_numeric(df[c], errors="coerce").notna().any()]
    raise IsosimError("the runs log no validation (val_avg)" + (f"; they log {', '.join(have)}: read it with "
                      f"--metric {have[0]}" if have else "") + " (or --map val_avg=TAG where validation is "
                      "logged under another tag)")
