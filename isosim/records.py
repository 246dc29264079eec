"""The run record: one table, one row per evaluation point, shared by every source.

Simulated runs (``isosim.sim.engine``), real GRPO runs (``llm_runs``) and a user's own logs all
produce this table, and the analysis (``isosim.frontier.analysis``) reads nothing else.

Columns
-------
Identity and allocation (required unless marked optional):

=================  =====================================================================
``run_id``         str, unique per run (optional on input: derived from n, b_p, seed)
``n``              int, rollouts per problem (GRPO group size)
``b_p``            int, problems per batch
``seed``           int, the run's seed
``step``           int, update steps taken when the row was written (optional on input)
``rollouts``       float, rollouts spent so far, C = b_p * n * step (plus any extra
                   rollouts of a decoupled baseline)
``tokens``         float, response tokens spent so far (NaN where unknown)
=================  =====================================================================

Metrics (at least one is required by the analysis):

=====================  =================================================================
``train_reward``       mean pass@1 over the training problems (exact in the simulator,
                       mean reward of the step's rollouts in real runs)
``val_avg``            validation avg@k: mean pass@1
``val_best``           validation best@k: P(at least one of k correct), coverage
``val_worst``          validation worst@k: P(all k correct), sharpening
``k``                  int, the k of best@k / worst@k
``entropy``            mean policy entropy (nats; per response in the simulator)
``kl``                 mean KL(policy || base)
``train_frac_zero``    share of training problems with pass@1 < ``ZERO_THRESHOLD``
``train_frac_solved``  share of training problems with pass@1 > 1 - ``ZERO_THRESHOLD``
``train_hist_0..9``    share of training problems whose pass@1 falls in each tenth of
                       [0, 1] (the last bin includes 1.0): the interference diagnostic
=====================  =================================================================

Per-problem allocation (optional; only runs whose rule is not uniform have them):

=================  =====================================================================
``allocation``     str, the rule of ``isosim.sim.allocation`` that set each problem's n
                   (missing or empty: uniform, every problem gets ``n``); ``n`` is then
                   the mean rollouts per problem, ``b_p * n`` per step as for uniform
``alloc_n_min``    least, mean and largest per-problem n over the groups sampled since
``alloc_n_mean``   the previous row of the run (None on a run's first row)
``alloc_n_max``
=================  =====================================================================

Any other column is a setting of the run (``policy``, ``lr``, ``profile``...) and is carried
along untouched.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from isosim.errors import IsosimError

ID_COLUMNS = ("run_id", "n", "b_p", "seed", "step", "rollouts", "tokens")
METRIC_COLUMNS = ("train_reward", "val_avg", "val_best", "val_worst")
DIAGNOSTIC_COLUMNS = ("entropy", "kl", "train_frac_zero", "train_frac_solved")
HIST_BINS = 10
HIST_COLUMNS = tuple(f"train_hist_{i}" for i in range(HIST_BINS))
ZERO_THRESHOLD = 0.01
REQUIRED_INPUT = ("n", "b_p", "seed", "rollouts")
ALLOCATION_COLUMNS = ("allocation", "alloc_n_min", "alloc_n_mean", "alloc_n_max")
SIMULATED_METRICS = ("train_reward", "train_best", "train_worst", "val_avg", "val_best", "val_worst",
                     *DIAGNOSTIC_COLUMNS, *HIST_COLUMNS)
"""the metric columns of every simulated run's records (``isosim.sim.engine.evaluation.metric_names``,
kept equal by a test; named here so that a command checks a metric without importing the engine)"""
SAMPLED_METRICS = ("val_avg_sampled", "val_best_sampled", "val_worst_sampled")
"""... and those of runs with ``eval_samples`` (avg@k, best@k, worst@k from sampled answers)"""


def pass_histogram(p: np.ndarray) -> np.ndarray:
    """Share of problems whose pass@1 falls in each of ``HIST_BINS`` equal bins of [0, 1]."""
    p = np.asarray(p, dtype=float)
    idx = np.clip((p * HIST_BINS).astype(int), 0, HIST_BINS - 1)
    return np.bincount(idx, minlength=HIST_BINS) / max(len(p), 1)


def allocation_summary(df: pd.DataFrame) -> dict[str, dict] | None:
    """Per allocation rule of a normalised table: its runs and the per-problem n its rows report
    (for uniform, the ``n`` column); None when no row names a rule (every run uniform)."""
    if "allocation" not in df.columns or df["allocation"].isna().all():
        return None
    rule = df["allocation"].where(df["allocation"].notna() & (df["allocation"].astype(str) != ""), "uniform")
    out: dict[str, dict] = {}
    for name, g in df.groupby(rule.astype(str), sort=True):
        entry: dict = {"runs": int(g["run_id"].nunique()), "n": sorted(int(v) for v in g["n"].unique())}
        cols = {c: pd.to_numeric(g[c], errors="coerce") if c in g.columns else pd.Series(dtype=float)
                for c in ALLOCATION_COLUMNS[1:]}
        if name == "uniform" or cols["alloc_n_mean"].isna().all():
            entry.update(n_min=int(g["n"].min()), n_max=int(g["n"].max()), n_mean=float(g["n"].mean()))
        else:
            entry.update(n_min=int(cols["alloc_n_min"].min()), n_max=int(cols["alloc_n_max"].max()),
                         n_mean=float(cols["alloc_n_mean"].mean()))
        out[str(name)] = entry
    return out


def normalize(df: pd.DataFrame, *, source: str = "table") -> pd.DataFrame:
    """Check a records table and fill the optional identity columns.

    Raises ``IsosimError`` naming what is missing; never modifies ``df`` in place.
    """
    if df is None or len(df) == 0:
        raise IsosimError(f"{source}: the records table is empty")
    missing = [c for c in REQUIRED_INPUT if c not in df.columns]
    if missing:
        raise IsosimError(
            f"{source}: missing column(s) {', '.join(missing)} "
            f"(a records table needs {', '.join(REQUIRED_INPUT)} and at least one metric)"
        )
    if not any(c in df.columns for c in METRIC_COLUMNS):
        raise IsosimError(
            f"{source}: no metric column (expected one of {', '.join(METRIC_COLUMNS)})"
        )
    out = df.copy()
    for c in ("n", "b_p", "seed"):
        vals = pd.to_numeric(out[c], errors="coerce")
        if vals.isna().any():
            raise IsosimError(f"{source}: column {c!r} has non-numeric or missing values")
        out[c] = vals.astype(int)
    out["rollouts"] = pd.to_numeric(out["rollouts"], errors="coerce")
    if out["rollouts"].isna().any() or (out["rollouts"] < 0).any():
        raise IsosimError(f"{source}: column 'rollouts' must be non-negative numbers")
    if (out["n"] < 1).any() or (out["b_p"] < 1).any():
        raise IsosimError(f"{source}: n and b_p must be >= 1")
    if "run_id" not in out.columns:
        extra = [c for c in ("data", "profile", "policy", "lr") if c in out.columns]
        key = out[["n", "b_p", "seed", *extra]].astype(str).agg("-".join, axis=1)
        out["run_id"] = "n" + key
    out["run_id"] = out["run_id"].astype(str)
    if "step" not in out.columns:
        out["step"] = (out["rollouts"] / (out["n"] * out["b_p"])).round().astype(int)
    if "tokens" not in out.columns:
        out["tokens"] = np.nan
    return out.sort_values(["run_id", "rollouts"], kind="stable").reset_index(drop=True)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a records table from CSV, Parquet or JSON Lines (by suffix)."""
    path = Path(path)
    if not path.exists():
        raise IsosimError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            df = pd.read_csv(path)
        elif suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        elif suffix in (".jsonl", ".json", ".ndjson"):
            df = pd.read_json(path, lines=suffix != ".json")
        else:
            raise IsosimError(f"{path}: unknown table format {suffix!r} (use .csv, .parquet or .jsonl)")
    except IsosimError:
        raise
    except Exception as exc:  # pandas raises many kinds; the user needs one line
        raise IsosimError(f"{path}: cannot read table ({type(exc).__name__}: {exc})") from None
    return normalize(df, source=str(path))


def clean_rows(df: pd.DataFrame, metric: str, x: str = "rollouts") -> tuple[pd.DataFrame, list[str]]:
    """The rows an analysis can use, and a line for each kind of row left out (for tables no reader of
    a user's runs inspected first: explore's and validate's own; :func:`inspect_runs` names the same
    damage per run).

    Rows whose ``metric`` is not a number (text such as ``abc``, or empty / nan) cannot be fitted
    and are dropped. A run evaluated twice at one budget (same run and ``x``: a re-logged or resumed
    evaluation) keeps its last row in table order, the latest evaluation, instead of a mean of both.
    """
    if metric not in df.columns:
        return df, []
    notes = []
    raw = df[metric]
    num = pd.to_numeric(raw, errors="coerce")
    bad = ~np.isfinite(num.to_numpy(dtype=float))
    if bad.any():
        is_text = bad & raw.notna().to_numpy() & ~raw.map(lambda v: isinstance(v, (int, float, np.number))).to_numpy()
        text = sorted({str(v) for v in raw[is_text]})[:3]
        parts = []
        if is_text.any():
            parts.append(f"{int(is_text.sum())} not a number ({', '.join(repr(t) for t in text)})")
        if (bad & ~is_text).any():
            parts.append(f"{int((bad & ~is_text).sum())} empty, nan or infinite")
        notes.append(f"left out {int(bad.sum())} of {len(df)} rows whose {metric} cannot be fitted: "
                     + "; ".join(parts))
        df = df[~bad]
    if "run_id" in df.columns and x in df.columns and len(df):
        dup = df.duplicated(["run_id", x], keep="last")
        if dup.any():
            runs = sorted(df.loc[dup, "run_id"].astype(str).unique())
            shown = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
            notes.append(f"{len(runs)} run(s) have several evaluations at one budget ({shown}): kept the last of "
                         f"each ({int(dup.sum())} earlier row(s) left out), not their mean")
            df = df[~dup]
    return df, notes


STILL_WRITING_S = 120.0
"""a records file changed this recently may still be being written by its run"""


def _seconds_since_written(path: Path) -> float | None:
    import time

    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


def read_records_file(path: str | Path) -> pd.DataFrame:
    """One run's ``records.jsonl``. A last line cut off mid-write (the run was killed while writing
    it) is said as such, in one line, not as a parser's message."""
    import json

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if i == len(lines) and not text.endswith("\n"):
                age = _seconds_since_written(path)
                if age is not None and age < STILL_WRITING_S:
                    raise IsosimError(f"{path}: its last line (line {i}) is cut off and the file changed {age:.0f} s ago: "
                                      "the run may still be writing it; read it again once the run has stopped or "
                                      "written its next line") from None
                raise IsosimError(f"{path}: its last line (line {i}) is cut off: the run was stopped while writing it; "
                                  "resume the run (which rewrites it), or delete that line") from None
            raise IsosimError(f"{path}:{i}: not a records line (not JSON)") from None
        if not isinstance(row, dict):
            raise IsosimError(f"{path}:{i}: not a records line (not a JSON object)")
        rows.append(line)
    if not rows:
        return pd.DataFrame()
    from io import StringIO

    return pd.read_json(StringIO("\n".join(rows)), lines=True)


# ----------------------------------------------------------------------------------------------
# How far each run got: runs that stopped short of their planned budget
# ----------------------------------------------------------------------------------------------
REACH_RTOL = 0.01  # a run "reached" a budget if its last x >= budget * (1 - REACH_RTOL), or (for the
# frontier, ``RunPoints.reaches``) if it stopped at most one update step short of it: runs stop at
# whole steps, so a run planned for C often ends up to a step short (98,304 of 99,840 at 2,048 a step).
SHORT_ADVICE = "resume or rerun the short runs, or leave them out"
"""what a reader refused for short runs tells the user to do"""


@dataclass(frozen=True)
class Reach:
    """Each run's last record (rollouts) against its planned budget, and the runs without records.

    A run is *short* when its last record lies more than one update step (``b_p * n`` rollouts), or
    its own last evaluation interval where that is larger, and ``REACH_RTOL`` below its planned
    budget (:func:`run_reach`): runs stop at whole steps and are recorded at their evaluations, so one
    planned for C may end a step or an evaluation short and still count as whole. ``empty`` names run folders that hold no records at all."""

    ends: dict[str, float]
    planned: dict[str, float]
    short: tuple[str, ...]
    empty: tuple[str, ...] = ()

    @property
    def common(self) -> float:
        """The budget every run reached: the earliest last record."""
        return min(self.ends.values())

    def note(self) -> str:
        """One clause naming every short run and every run without records ('' when none)."""
        parts = []
        if self.short:
            parts.append("run(s) stopped short of their planned budget: " + ", ".join(
                f"{r} at {self.ends[r]:,.0f} of {self.planned[r]:,.0f} rollouts" for r in self.short))
        if self.empty:
            parts.append("run folder(s) without records, not read: " + ", ".join(self.empty))
        return "; ".join(parts)


def _last_gap(rollouts: pd.Series) -> float:
    """The rollouts between a run's last two records: a run is recorded at its evaluations only, so
    its last record may lie up to this far below where it stopped training."""
    r = rollouts.dropna().sort_values().to_numpy(float)
    return float(r[-1] - r[-2]) if r.size > 1 else 0.0


def run_reach(df: pd.DataFrame, empty: Sequence[str] = (), cap: float | None = None) -> Reach:
    """The :class:`Reach` of a records table: each run's planned budget is its ``budget`` column
    (what its config.json planned) where the records carry one, else the longest run's last record;
    where no run reached its planned budget (a cheap part: every run paused early), the longest
    run's last record. A run is short when its last record, plus one update step or its own last
    evaluation interval (whichever is larger: its next evaluation would have come after it
    stopped), is still below that goal. With ``cap`` (a reader that reads only that far), a run is
    short only if it stopped before both."""
    rollouts = pd.to_numeric(df["rollouts"], errors="coerce")
    by_run = df.assign(rollouts=rollouts).groupby(df["run_id"].astype(str), sort=True)
    ends = by_run["rollouts"].max()
    step = (pd.to_numeric(by_run["n"].first()) * pd.to_numeric(by_run["b_p"].first())).astype(float)
    gap = by_run["rollouts"].apply(_last_gap).reindex(ends.index)
    longest = float(ends.max())
    planned = pd.Series(longest, index=ends.index)
    if "budget" in df.columns:
        given = pd.to_numeric(df["budget"], errors="coerce").groupby(df["run_id"].astype(str)).max()
        planned = given.where(given > 0).reindex(ends.index).fillna(planned)
    slack = pd.concat([step, gap], axis=1).max(axis=1)
    if not any(ends[r] + slack[r] >= planned[r] * (1 - REACH_RTOL) for r in ends.index):
        planned = planned.clip(upper=longest)  # a cheap part (every run paused early): the longest run is the goal
    goal = planned if cap is None else planned.clip(upper=cap)
    short = tuple(r for r in ends.index if ends[r] + slack[r] < goal[r] * (1 - REACH_RTOL))
    return Reach(ends={str(k): float(v) for k, v in ends.items()},
                 planned={str(k): float(v) for k, v in planned.items()}, short=short, empty=tuple(empty))


def at_common_budget(df: pd.DataFrame, reach: Reach) -> pd.DataFrame:
    """The records at or below the budget every run reached, where some run stopped short (else
    ``df`` as it is): every n is then read where every run still competes. Refused (``IsosimError``
    naming the short runs) where that budget is below one update step of some n: there it cannot
    compete at all."""
    if not reach.short:
        return df
    steps = (pd.to_numeric(df["n"]) * pd.to_numeric(df["b_p"])).groupby(df["n"]).max()
    beyond = [int(n) for n, cost in steps.items() if cost > reach.common * (1 + 1e-9)]
    if beyond:
        raise IsosimError(f"{reach.note()}: at {reach.common:,.0f} rollouts, the budget every run reached, "
                          f"n = {', '.join(map(str, beyond))} cannot take one update step: not every n can be "
                          f"compared there ({SHORT_ADVICE})")
    return df[pd.to_numeric(df["rollouts"], errors="coerce") <= reach.common * (1 + 1e-9)]


def common_budget_note(reach: Reach) -> str:
    """What a reader says about ``reach``: the runs it names and where it reads ('' when all is whole)."""
    note = reach.note()
    if reach.short:
        note += f"; every n is read at {reach.common:,.0f} rollouts, the budget every run reached"
    return note


@contextmanager
def blamed_on_short_runs(reach: Reach | None) -> Iterator[None]:
    """Inside, an ``IsosimError`` is re-raised with the short runs named first: what fails at the
    budget every run reached fails because of them, not because of another n."""
    try:
        yield
    except IsosimError as exc:
        if reach is None or not reach.short:
            raise
        raise IsosimError(f"{reach.note()}; read at {reach.common:,.0f} rollouts, the budget every run "
                          f"reached: {exc} ({SHORT_ADVICE})") from None


# ----------------------------------------------------------------------------------------------
# What a reader found wrong with the runs: one inspection for every reader of a user's runs
# (analyze, recommend --runs, predict, calibrate --dynamics), so that each says the same things
# about the same runs
# ----------------------------------------------------------------------------------------------
DEFAULT_EVAL_SAMPLES = 2400
"""evaluation answers (prompts x samples per prompt) assumed where the records do not say"""


@dataclass(frozen=True)
class PlannedRun:
    """A run a plan lists (``isosim plan``'s run table, ``explore``'s plan.json)."""

    name: str
    n: int
    seed: int


@dataclass(frozen=True)
class Inspection:
    """The runs as a reader may compare them, and every damage it found, in words.

    ``df``: the rows left after the damage was taken out (non-finite values of the metric, runs
    without the metric, the earlier of two disagreeing evaluations); ``reach``: each run's reach on
    those rows; ``notes``: one clause per damage; ``unjudged``: the n no usable run measured."""

    df: pd.DataFrame
    reach: Reach
    notes: tuple[str, ...]
    unjudged: tuple[int, ...]
    metric: str
    eval_samples: int | None
    eval_from: str
    seeds: int
    altered: tuple[str, ...] = ()
    """damage that changes the values a reader would read (infinite values, disagreeing evaluations
    of one run at one budget; named in ``notes`` as every analysis names them): a reader that reads
    the records again by itself refuses these"""

    def note(self) -> str:
        parts = list(self.notes)
        short = common_budget_note(self.reach)
        if short:
            parts.insert(0, short)
        if self.unjudged:
            parts.append(f"n = {', '.join(map(str, self.unjudged))} cannot be judged: no usable run measured it")
        return "; ".join(parts)

    @property
    def changed(self) -> bool:
        """True where the rows a reader should read differ from the rows as loaded."""
        return bool(self.notes) or bool(self.reach.short)


def _names(runs: Sequence[str], most: int = 4) -> str:
    runs = list(runs)
    return ", ".join(runs[:most]) + (f" and {len(runs) - most} more" if len(runs) > most else "")


def eval_size(df: pd.DataFrame) -> tuple[int | None, str]:
    """Answers behind one evaluation (validation prompts x samples per prompt, ``val_size`` x
    ``eval_n``) where the records say, and how it was read; (None, what is assumed) otherwise."""
    if "val_size" in df.columns and "eval_n" in df.columns:
        v = pd.to_numeric(df["val_size"], errors="coerce")
        k = pd.to_numeric(df["eval_n"], errors="coerce")
        ok = v.notna() & k.notna()
        if ok.any():
            sizes = sorted({(int(a), int(b)) for a, b in zip(v[ok], k[ok])})
            a, b = min(sizes, key=lambda s: s[0] * s[1])
            more = f" (the smallest of {len(sizes)} sizes)" if len(sizes) > 1 else ""
            return a * b, f"{a} prompts x {b} samples = {a * b:,} answers per evaluation (records){more}"
    return None, (f"not recorded: assumed {DEFAULT_EVAL_SAMPLES:,} answers per evaluation "
                  "(give the true one with --set val_size=PROMPTS,eval_n=SAMPLES on logs)")


def eval_se(value: float, samples: int | None) -> float:
    """Sampling se of one evaluation of pass rate ``value`` over ``samples`` answers
    (``DEFAULT_EVAL_SAMPLES`` where unknown)."""
    k = samples or DEFAULT_EVAL_SAMPLES
    v = min(max(float(value), 1e-3), 1 - 1e-3)
    return float(np.sqrt(v * (1 - v) / k))


def seed_line(seeds: int, value: float, samples: int | None) -> str:
    """What the se of a difference between two n rests on: the seed count and the evaluation size
    (``samples``; ``DEFAULT_EVAL_SAMPLES`` where None), at a pass rate ``value``."""
    diff = float(np.sqrt(2.0 / max(seeds, 1))) * eval_se(value, samples)
    answers = f"{samples or DEFAULT_EVAL_SAMPLES:,} answers{'' if samples else ' (assumed)'}"
    if seeds <= 1:
        return (f"one seed per n: no run-to-run spread is measured; the se of a difference between two n is the "
                f"evaluation noise alone, {diff:.4f} at {value:.3f} ({answers} per evaluation); a second seed per n "
                "would measure the spread")
    return (f"{seeds} seeds per n; the evaluation noise alone puts the se of a difference between two n at "
            f"{diff:.4f} at {value:.3f} ({answers} per evaluation)")


def top_value(df: pd.DataFrame, metric: str) -> float | None:
    """The highest seed mean over n of each run's last ``metric`` after step 0 (the cheap leader's
    level, the value ``recommend --runs``'s default reader quotes its se at): the value the se of a
    difference between two n is quoted at."""
    if metric not in df.columns or df.empty:
        return None
    v = pd.to_numeric(df[metric], errors="coerce")
    d = df.assign(_v=v).dropna(subset=["_v"])
    d = d[pd.to_numeric(d["rollouts"]) > 0].sort_values("rollouts", kind="stable")
    last = d.groupby(["n", "run_id"])["_v"].last()
    return float(last.groupby(level="n").mean().max()) if len(last) else None


def _check_plausible(df: pd.DataFrame, metric: str) -> None:
    """Refuse a metric value no share, percentage or reward near the others takes (1e30 in a column
    of shares): beyond 100 times the larger of 1 and the 90th percentile of its magnitudes. (A reward
    may be negative or above 1, so nothing nearer is refused.)"""
    if metric not in df.columns:
        return
    vals = pd.to_numeric(df[metric], errors="coerce")
    fin = vals[np.isfinite(vals.to_numpy(float))]
    if fin.empty:
        return
    bound = 100.0 * max(float(fin.abs().quantile(0.9)), 1.0)
    bad = fin.abs() > bound
    if bad.any():
        i = bad[bad].index[0]
        run = str(df.loc[i, "run_id"]) if "run_id" in df.columns else "?"
        where = f" at {float(df.loc[i, 'rollouts']):,.0f} rollouts" if "rollouts" in df.columns else ""
        raise IsosimError(f"run {run}: {metric} = {float(fin[i]):g}{where} is not a share, a percentage or a value "
                          f"near the others (|value| <= {bound:g}): a damaged record ({int(bad.sum())} such "
                          f"value{'s' if bad.sum() > 1 else ''}); fix or delete it")


def seeds_lacking(df: pd.DataFrame) -> dict[int, list[int]]:
    """Each seed that some n of ``df`` (rows with ``n`` and ``seed``) has no run of -> those n, sorted;
    {} where every n has every seed."""
    if df.empty:
        return {}
    seeds_by_n = df.groupby("n")["seed"].apply(lambda s: {int(v) for v in s})
    return {s: lacking for s in sorted(set.union(*seeds_by_n))
            if (lacking := sorted(int(n) for n, seeds in seeds_by_n.items() if s not in seeds))}


def check_lrs(df: pd.DataFrame) -> None:
    """Refuse runs of one n (and B_p) at several learning rates: they are not seeds of one n. Each
    run's lr is its first logged one (as :func:`isosim.integrations.lr.run_lrs` reads it: a logged
    schedule does not make a run two lrs)."""
    if "lr" not in df.columns:
        return
    d = df.assign(lr=pd.to_numeric(df["lr"], errors="coerce")).dropna(subset=["lr"])
    first = d.groupby(d["run_id"].astype(str), sort=True).agg(n=("n", "first"), b_p=("b_p", "first"), lr=("lr", "first"))
    for (n, b_p), g in first.groupby(["n", "b_p"]):
        per = {lr: sorted(g.index[g["lr"] == lr]) for lr in sorted(g["lr"].unique())}
        if len(per) > 1:
            shown = "; ".join(f"lr {v:g}: {_names(r, 2)}" for v, r in per.items())
            raise IsosimError(f"n = {int(n)} (B_p {int(b_p)}) was run at {len(per)} learning rates ({shown}): "
                              "those are not seeds of one n, and which to compare is not isosim's to choose; "
                              "read one lr at a time (move the others out of the folder)")


def inspect_runs(df: pd.DataFrame, metric: str, *, empty: Sequence[str] = (),
                 planned: Sequence[PlannedRun] | None = None, unfinished: str = "",
                 cap: float | None = None) -> Inspection:
    """Every damage of a normalised records table for ``metric``, named or refused.

    Refused (``IsosimError``, one line): a value no share or reward takes (:func:`_check_plausible`),
    runs of one n at several lrs (:func:`check_lrs`). Named, and taken out of the rows a reader
    compares: values of the metric that are not finite numbers (a run whose last values are NaN, inf
    or empty is read to its last number and is then short), runs with no value of the metric at all,
    the earlier of two disagreeing evaluations of one run at one budget. Named only: runs the plan
    lists that have no records (``planned``, ``empty``), a seed only some n have, an unfinished
    sweep (``unfinished``: the reader's words for it). Short runs: :func:`run_reach` on the rows
    left (``cap``: a reader that reads only that far)."""
    _check_plausible(df, metric)
    check_lrs(df)
    notes: list[str] = []
    if unfinished:
        notes.append(unfinished)
    ids = df["run_id"].astype(str)
    all_runs = sorted(ids.unique())
    vals = pd.to_numeric(df[metric], errors="coerce") if metric in df.columns else pd.Series(np.nan, index=df.index)
    finite = pd.Series(np.isfinite(vals.to_numpy(float)), index=df.index)
    # runs with no number of the metric at all
    without = sorted(set(all_runs) - set(ids[finite]))
    if without:
        notes.append(f"run(s) with no {metric} value (no such column, or every value empty, NaN or inf), not read: "
                     + _names(without))
    # rows whose value is not a number, and runs evaluated twice at one budget: as every analysis names them
    notes += clean_rows(df[~ids.isin(without).to_numpy()], metric)[1]
    altered: list[str] = []
    infinite = np.isinf(vals.to_numpy(float)) & ~ids.isin(without).to_numpy()
    if infinite.any():
        altered.append(f"{int(infinite.sum())} {metric} value(s) infinite (run(s) {_names(sorted(set(ids[infinite])))})")
    # runs whose last values of the metric are not numbers: read to their last number
    tails = []
    for run, g in df[finite.to_numpy()].groupby(ids[finite]):
        last_ok = float(pd.to_numeric(g["rollouts"]).max())
        after = df[(ids == run).to_numpy() & (pd.to_numeric(df["rollouts"]) > last_ok).to_numpy()]
        if len(after):
            r = pd.to_numeric(g["rollouts"]).sort_values().to_numpy(float)
            gap = r[-1] - r[-2] if r.size > 1 else 0.0
            if float(pd.to_numeric(after["rollouts"]).max()) - last_ok >= max(gap, 1.0) * (1 - REACH_RTOL):
                tails.append(f"{run} (after {last_ok:,.0f} rollouts)")
    if tails:
        notes.append(f"run(s) whose last {metric} values are empty, NaN or inf, read only to their last number: "
                     + _names(tails))
    kept = df[finite.to_numpy()]
    # two evaluations of one run at one budget that disagree: the last is read
    dup = kept.duplicated(["run_id", "rollouts"], keep=False)
    if dup.any():
        clash = []
        for (run, r), g in kept[dup].groupby(["run_id", "rollouts"]):
            v = pd.to_numeric(g[metric]).to_numpy(float)
            if np.ptp(v) > 1e-12:
                clash.append(f"{run} at {float(r):,.0f} rollouts ({', '.join(f'{x:.4g}' for x in v)})")
        if clash:
            altered.append(f"disagreeing evaluations of one run at one budget: {_names(clash, 3)}")
        kept = kept.drop_duplicates(["run_id", "rollouts"], keep="last")
    # runs the plan lists without records
    read_names = {r.split("/")[-1] for r in all_runs} | set(all_runs)
    missing = [p for p in (planned or ()) if p.name not in read_names and p.name.split("/")[-1] not in read_names]
    empty_names = {e.split(" (")[0].split("/")[-1] for e in empty}
    missing_only = [p for p in missing if p.name.split("/")[-1] not in empty_names]
    if missing_only:
        notes.append("planned run(s) without records (not started, crashed, or elsewhere): "
                     + _names([f"{p.name} (n = {p.n}, seed {p.seed})" for p in missing_only]))
    # a seed only some n have
    ns = sorted({int(n) for n in kept["n"]})
    for s, lacking in seeds_lacking(kept).items():
        notes.append(f"seed {s} is run for n = {', '.join(str(n) for n in ns if n not in lacking)} only, not n = "
                     f"{', '.join(map(str, lacking))}")
    if kept.empty:
        raise IsosimError(f"no run holds a {metric} value: " + "; ".join(notes))
    reach = run_reach(kept, [*empty], cap=cap)
    measured = {int(n) for n in kept["n"]}
    known = {int(n) for n in df["n"]} | {p.n for p in (planned or ())}
    samples, eval_from = eval_size(df)
    n_seeds = int(kept.groupby("n")["seed"].nunique().min())
    return Inspection(df=kept.reset_index(drop=True), reach=reach, notes=tuple(notes),
                      unjudged=tuple(sorted(known - measured)), metric=metric, eval_samples=samples,
                      eval_from=eval_from, seeds=n_seeds, altered=tuple(altered))
