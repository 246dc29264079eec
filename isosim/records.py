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
