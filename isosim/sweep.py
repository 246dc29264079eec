"""Sweeps: grids of simulated runs for the paper's three questions, run into a resumable store.

A sweep is two things:

1. A **plan** (:class:`SweepPlan`): plain data naming every run. It stores the shared settings
   (the base config, as a dict) and the grid of cells ``(n, b_p, budget)`` times seeds;
   :meth:`SweepPlan.configs` turns it into :class:`~isosim.config.SimConfig` objects. Builders:

   - :func:`plan_q1` (Q1, fixed ``B_p``, vary ``n``, every run to the budget: ``M = C / (B_p n)``),
   - :func:`plan_q2` (Q2, fixed rollout batch ``B = B_p n``, vary the split ``B_p = B / n``;
     ``M`` varies along each run: every evaluation row is one ``M``),
   - :func:`plan_q3` (Q3, ``n`` and ``B_p`` both free),
   - :func:`plan_for_preset` (any of the three from a named preset, full or ``quick``).

   Cells that cannot run (``B_p`` above the training set, a budget below one step, ``B_p * n``
   above the hardware cap ``b_max``, any other invalid config) are dropped and listed in
   ``plan.dropped``; a plan with no cell left raises :class:`~isosim.errors.IsosimError`.

2. A **store** (:func:`run_sweep`, :func:`load_store`): a folder that fills up chunk by chunk::

       out_dir/
         plan.json                    the plan (SweepPlan.to_json), written once
         manifest.json                {"format", "plan_id", "chunks": [{"file", "run_ids",
                                       "rows", "device", "seconds"}]}: the only list of
                                       finished work
         records/chunk-00000.parquet  records of the runs of one chunk (isosim.records columns)
         records/chunk-00001.parquet
         .lock                        held (flock) while a process runs the sweep

   Every file is written to a temporary name, fsynced, renamed over its final name with
   ``os.replace`` and the folder fsynced, so a reader sees either the old file or the new one.
   A chunk counts as finished only once ``manifest.json`` lists it. Killing the sweep at any
   moment and rerunning the same command resumes: runs listed in the manifest are not rerun;
   a leftover temporary file, or a chunk file the manifest does not list (a kill between the
   chunk's rename and the manifest's), is deleted and its runs are simulated again (the engine is
   deterministic, so redoing is always safe).

``n`` / ``B_p`` / ``M`` follow PAPER.md: ``C = B_p * n * M`` rollouts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from isosim.config import SimConfig
from isosim.errors import IsosimError
from isosim.files import atomic_write, atomic_write_text, dumps_json, is_tmp_name
from isosim.records import normalize

QUESTIONS = ("q1", "q2", "q3")
PLAN_FORMAT = 1
STORE_FORMAT = 1

# Fields of SimConfig that a plan's grid sets; the stored base config leaves them out, so two
# bases that differ only there give the same plan (and the same plan_id).
GRID_FIELDS = ("n", "b_p", "budget", "steps", "seed")

# --- defaults of the preset-based plans ---------------------------------------------------
FULL_N = (8, 2048)
"""n grid of a full sweep: powers of two in this range (PAPER.md sweep grid)"""
FULL_B_P = (32, 1024)
"""B_p grid of a full Q3 sweep (cells above n_train are dropped)"""
FULL_Q1_B_P = 32
"""fixed B_p of a full Q1 sweep (small enough that n = 2048 fits b_max = 65,536)"""
FULL_Q2_BATCH = 8192
"""fixed rollout batch B = B_p * n of a full Q2 sweep"""
FULL_BUDGET = 1e7
"""budget in rollouts of a full sweep (each run records its curve on the way)"""
B_MAX_EASY = 65536
"""hardware cap on B_p * n for easy profiles (PAPER.md)"""
B_MAX_HARD = 16384
"""hardware cap on B_p * n for profiles named hard or extreme (PAPER.md)"""
QUICK = {
    "n_values": (4, 16, 64),
    "q1_b_p": 16,
    "q2_batch": 256,
    "q3_b_p": (8, 32),
    "budget": 2e5,
    "b_max": 4096,
    "n_train": 128,
    "n_val": 128,
    "seeds": 2,
}
"""grid of ``quick=True``: a few runs that finish in seconds on a CPU"""

# --- chunking of the store -----------------------------------------------------------------
# A chunk is one engine call and the unit of loss on a kill. Its wall time is at least its
# longest run's and grows with the run-steps it holds (sum over runs of their steps), so the
# default cuts on runs and run-steps: the engine's step costs about 1-2 ms on CPU whatever the
# number of runs in the batch (up to a few dozen), so big chunks are cheap.
CHUNK_MAX_RUNS = {"cpu": 32, "cuda": 128}
"""most runs in one chunk by default, per device kind"""
CHUNK_MAX_RUN_STEPS = {"cpu": 1_000_000, "cuda": 4_000_000}
"""most run-steps (summed over the chunk's runs) in one chunk by default, per device kind: a
chunk batches well (one step of many runs costs little more than one) and a kill loses at most
one chunk (about a minute or two on 2 CPU cores)"""

_CHUNK_RE = re.compile(r"^chunk-(\d{5,})\.parquet$")


# ===========================================================================================
# Plans
# ===========================================================================================


def powers_of_two(lo: int, hi: int) -> list[int]:
    """All powers of two ``p`` with ``lo <= p <= hi`` (ascending)."""
    if int(lo) != lo or int(hi) != hi or lo < 1 or hi < lo:
        raise IsosimError(f"powers_of_two: need integers 1 <= lo <= hi (got lo={lo}, hi={hi})")
    out, p = [], 1
    while p <= hi:
        if p >= lo:
            out.append(p)
        p *= 2
    if not out:
        raise IsosimError(f"powers_of_two: no power of two in [{lo}, {hi}]")
    return out


@dataclass(frozen=True)
class Cell:
    """One allocation of the grid: ``seeds`` runs of ``n`` rollouts x ``b_p`` problems to ``budget``."""

    n: int
    """rollouts per problem"""
    b_p: int
    """problems per batch"""
    budget: float
    """sampling budget in rollouts (each run takes floor(budget / (b_p * n)) steps)"""

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return {"n": self.n, "b_p": self.b_p, "budget": self.budget}


@dataclass(frozen=True)
class SweepPlan:
    """Every run of a sweep, as plain data: shared settings, a grid of cells, seeds.

    Build one with :func:`plan_q1`, :func:`plan_q2`, :func:`plan_q3` or
    :func:`plan_for_preset` rather than by hand. ``plan_id`` hashes what decides the runs
    (question, base, cells, seeds); ``label`` and ``dropped`` are notes and do not enter it.
    """

    question: str
    """which question of PAPER.md the grid answers: q1, q2 or q3"""
    base: dict
    """SimConfig fields shared by every run (JSON values; the grid fields n/b_p/budget/steps/seed left out)"""
    cells: tuple[Cell, ...]
    """the allocations to run"""
    seeds: int = 1
    """runs per cell"""
    seed: int = 0
    """seed of the first run of each cell (runs use seed, seed + 1, ..., seed + seeds - 1)"""
    dropped: tuple[str, ...] = ()
    """why the cells that were asked for but cannot run were left out"""
    label: str = ""
    """free-form note (e.g. the preset); not part of plan_id"""

    def __post_init__(self) -> None:
        if self.question not in QUESTIONS:
            raise IsosimError(f"unknown question {self.question!r} (use {', '.join(QUESTIONS)})")
        if int(self.seeds) != self.seeds or self.seeds < 1:
            raise IsosimError(f"seeds (how many runs per cell) must be an integer >= 1 (got {self.seeds!r})")
        if not self.cells:
            raise IsosimError("a sweep plan needs at least one cell")
        object.__setattr__(self, "cells", tuple(self.cells))
        object.__setattr__(self, "dropped", tuple(self.dropped))
        object.__setattr__(self, "base", _jsonable_base(self.base))

    def __hash__(self) -> int:  # the dict field is not hashable; the id says it all
        return hash(self.plan_id)

    # --- identity -----------------------------------------------------------------------
    @property
    def plan_id(self) -> str:
        """Stable 12-hex-digit hash of what decides the runs (same on every machine and Python)."""
        core = {
            "format": PLAN_FORMAT,
            "question": self.question,
            "base": self.base,
            "cells": [c.to_dict() for c in self.cells],
            "seeds": int(self.seeds),
            "seed": int(self.seed),
        }
        text = json.dumps(core, sort_keys=True, separators=(",", ":"))
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    # --- the runs -----------------------------------------------------------------------
    def configs(self) -> list[SimConfig]:
        """One SimConfig per (cell, seed), cells in plan order, seeds innermost.

        Each is the base with the cell's ``n``, ``b_p``, ``budget`` and the seed set (built
        directly, not via ``base.replace``: the base alone need not be valid for every cell).
        The base's ``data_seed`` is kept; when it is None each seed also draws its own problems.
        """
        out = []
        for cell in self.cells:
            for s in range(self.seeds):
                out.append(_make_config(self.base, cell, self.seed + s))
        return out

    @property
    def n_runs(self) -> int:
        """Number of runs (cells x seeds)."""
        return len(self.cells) * self.seeds

    @property
    def total_rollouts(self) -> float:
        """Rollouts that all runs together spend."""
        return float(sum(_run_rollouts(c) for c in self.configs()))

    def summary(self) -> str:
        """One line for logs: question, cells, runs, rollouts, dropped cells."""
        return (f"plan {self.plan_id} ({self.question}{', ' + self.label if self.label else ''}): "
                f"{len(self.cells)} cells x {self.seeds} seeds = {self.n_runs} runs, "
                f"{self.total_rollouts:.3g} rollouts, {len(self.dropped)} cells dropped")

    # --- serialisation ------------------------------------------------------------------
    def to_json(self) -> str:
        """The plan as a JSON document (with its plan_id, checked by :meth:`from_json`)."""
        doc = {
            "format": PLAN_FORMAT,
            "plan_id": self.plan_id,
            "question": self.question,
            "label": self.label,
            "seeds": int(self.seeds),
            "seed": int(self.seed),
            "base": self.base,
            "cells": [c.to_dict() for c in self.cells],
            "dropped": list(self.dropped),
        }
        return json.dumps(doc, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, *, source: str = "plan") -> "SweepPlan":
        """Read a plan written by :meth:`to_json`; raises IsosimError if it is not one."""
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            if doc.get("format") != PLAN_FORMAT:
                raise ValueError(f"unknown plan format {doc.get('format')!r} (this isosim reads {PLAN_FORMAT})")
            cells = tuple(Cell(n=int(c["n"]), b_p=int(c["b_p"]), budget=float(c["budget"]))
                          for c in doc["cells"])
            plan = cls(question=doc["question"], base=doc["base"], cells=cells,
                       seeds=int(doc["seeds"]), seed=int(doc["seed"]),
                       dropped=tuple(doc.get("dropped", ())), label=doc.get("label", ""))
        except IsosimError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise IsosimError(f"{source}: not a sweep plan ({type(exc).__name__}: {exc})") from None
        stored = doc.get("plan_id")
        if stored is not None and stored != plan.plan_id:
            raise IsosimError(
                f"{source}: stored plan_id {stored} does not match its content ({plan.plan_id}); "
                "the file was edited or written by an incompatible isosim version"
            )
        return plan


def _jsonable_base(base: dict | SimConfig) -> dict:
    """The base settings as JSON values, grid fields removed; the plan keeps exactly this."""
    if isinstance(base, SimConfig):
        base = dataclasses.asdict(base)
    if not isinstance(base, dict):
        raise IsosimError(f"a plan's base must be a SimConfig or a dict of its fields (got {type(base).__name__})")
    known = {f.name for f in dataclasses.fields(SimConfig)}
    unknown = sorted(set(base) - known)
    if unknown:
        raise IsosimError(f"unknown SimConfig field(s) in the plan's base: {', '.join(unknown)}")
    d = {k: v for k, v in base.items() if k not in GRID_FIELDS}
    try:
        return json.loads(json.dumps(d, sort_keys=True))
    except (TypeError, ValueError) as exc:
        raise IsosimError(f"a plan's base settings must be JSON values ({exc})") from None


def _make_config(base: dict, cell: Cell, seed: int) -> SimConfig:
    """The SimConfig of one run (validated by SimConfig)."""
    return SimConfig(**base, n=cell.n, b_p=cell.b_p, budget=float(cell.budget), steps=None, seed=seed)


def _run_rollouts(cfg: SimConfig) -> float:
    """Rollouts one run spends to its last step."""
    return float(cfg.total_steps * cfg.b_p * cfg.rollouts_per_step)


def _build_plan(
    question: str,
    base: SimConfig,
    wanted: Iterable[tuple[int, int, float]],
    *,
    seeds: int,
    seed: int | None,
    b_max: int | None,
    label: str,
    dropped: Sequence[str] = (),
) -> SweepPlan:
    """Keep the cells of ``wanted`` that can run, note why the others cannot, build the plan."""
    if int(seeds) != seeds or seeds < 1:
        raise IsosimError(f"seeds (how many runs per cell) must be an integer >= 1 (got {seeds!r})")
    if b_max is not None and b_max < 1:
        raise IsosimError(f"b_max (cap on B_p * n) must be >= 1 (got {b_max})")
    seed = base.seed if seed is None else int(seed)
    base_d = _jsonable_base(base)
    keep: list[Cell] = []
    drop = list(dropped)
    seen: set[tuple[int, int, float]] = set()
    for n, b_p, budget in wanted:
        key = (int(n), int(b_p), float(budget))
        if key in seen:
            continue
        seen.add(key)
        reason = _cell_problem(base_d, Cell(*key), seed, b_max)
        if reason:
            drop.append(f"n={key[0]}, b_p={key[1]}: {reason}")
        else:
            keep.append(Cell(*key))
    if not keep:
        shown = "; ".join(drop[:4]) + ("; ..." if len(drop) > 4 else "")
        raise IsosimError(f"{question}: no cell of the grid can run ({shown})")
    return SweepPlan(question=question, base=base_d, cells=tuple(keep), seeds=int(seeds), seed=seed,
                     dropped=tuple(drop), label=label)


def _cell_problem(base: dict, cell: Cell, seed: int, b_max: int | None) -> str:
    """Why a cell cannot run ("" if it can)."""
    if int(cell.n) != cell.n or cell.n < 1 or int(cell.b_p) != cell.b_p or cell.b_p < 1:
        return "n and b_p must be integers >= 1"
    n_train = base.get("n_train", SimConfig.n_train)
    if cell.b_p > n_train:
        return f"b_p exceeds the training set ({n_train} problems)"
    per_problem = max(cell.n, base.get("n_est") or 0)
    if b_max is not None and cell.b_p * per_problem > b_max:
        return f"b_p * n = {cell.b_p * per_problem} exceeds b_max = {b_max}"
    if cell.budget < cell.b_p * per_problem:
        return f"budget {cell.budget:g} is below one step ({cell.b_p * per_problem} rollouts)"
    try:
        _make_config(base, cell, seed)
    except IsosimError as exc:
        return str(exc)
    return ""


def _values(values: Iterable[int] | None, default: list[int], what: str) -> list[int]:
    vals = list(default if values is None else values)
    if not vals:
        raise IsosimError(f"{what}: empty list of values")
    return vals


def plan_q1(
    base: SimConfig,
    n_values: Iterable[int] | None = None,
    b_p: int | None = None,
    budget: float | None = None,
    seeds: int = 1,
    *,
    seed: int | None = None,
    b_max: int | None = None,
    label: str = "",
) -> SweepPlan:
    """Q1: which ``n`` is compute-optimal at each budget? Fixed ``B_p``, vary ``n``.

    Every run goes to ``budget`` rollouts (``M = budget / (B_p n)`` steps) and records its curve
    on the way, so one run per ``n`` answers every budget below. Defaults: ``n`` in powers of two
    8..2048, ``b_p`` and ``budget`` from ``base``, seeds ``base.seed ..``.
    """
    b_p = base.b_p if b_p is None else b_p
    budget = _budget(base, budget)
    ns = _values(n_values, powers_of_two(*FULL_N), "plan_q1 n_values")
    return _build_plan("q1", base, ((n, b_p, budget) for n in ns),
                       seeds=seeds, seed=seed, b_max=b_max, label=label)


def plan_q2(
    base: SimConfig,
    total_batch: int,
    n_values: Iterable[int] | None = None,
    budget: float | None = None,
    seeds: int = 1,
    *,
    seed: int | None = None,
    b_max: int | None = None,
    label: str = "",
) -> SweepPlan:
    """Q2: at a fixed rollout batch ``B = B_p n`` (hardware bound), how to split it, given ``M``?

    Each ``n`` gets ``B_p = total_batch / n`` (``n`` must divide it) and runs to ``budget``, i.e.
    ``M = budget / B`` steps; every evaluation row of a run is one ``M`` (at rollouts / B), so
    ``n*(M)`` is read along the runs. Defaults: ``n`` in powers of two 8..2048.
    """
    if int(total_batch) != total_batch or total_batch < 1:
        raise IsosimError(f"plan_q2: total_batch (B = B_p * n) must be an integer >= 1 (got {total_batch!r})")
    total_batch = int(total_batch)
    if b_max is not None and total_batch > b_max:
        raise IsosimError(f"plan_q2: total_batch {total_batch} exceeds b_max = {b_max}")
    budget = _budget(base, budget)
    ns = _values(n_values, powers_of_two(*FULL_N), "plan_q2 n_values")
    wanted, dropped = [], []
    for n in ns:
        if total_batch % n:
            dropped.append(f"n={n}: does not divide total_batch = {total_batch}")
        else:
            wanted.append((n, total_batch // n, budget))
    return _build_plan("q2", base, wanted, seeds=seeds, seed=seed, b_max=b_max, label=label,
                       dropped=dropped)


def plan_q3(
    base: SimConfig,
    n_values: Iterable[int] | None = None,
    b_p_values: Iterable[int] | None = None,
    budget: float | None = None,
    seeds: int = 1,
    b_max: int | None = None,
    *,
    seed: int | None = None,
    label: str = "",
) -> SweepPlan:
    """Q3: ``n``, ``B_p`` and ``M`` all free: the full grid ``n x B_p`` with ``B_p n <= b_max``.

    Every run goes to ``budget``. Defaults: ``n`` in powers of two 8..2048, ``B_p`` 32..1024.
    """
    budget = _budget(base, budget)
    ns = _values(n_values, powers_of_two(*FULL_N), "plan_q3 n_values")
    bps = _values(b_p_values, powers_of_two(*FULL_B_P), "plan_q3 b_p_values")
    return _build_plan("q3", base, ((n, bp, budget) for n in ns for bp in bps),
                       seeds=seeds, seed=seed, b_max=b_max, label=label)


def _budget(base: SimConfig, budget: float | None) -> float:
    if budget is None:
        if base.budget is None:
            raise IsosimError("the sweep needs a budget in rollouts (the base config sets steps instead)")
        budget = base.budget
    if not budget > 0:
        raise IsosimError(f"budget must be a positive number of rollouts (got {budget!r})")
    return float(budget)


def _get_preset(name: str) -> dict:
    """The preset's SimConfig fields (``{"profile": name}`` until isosim.presets exists)."""
    try:
        from isosim.presets import get_preset
    except ModuleNotFoundError as exc:
        if exc.name not in ("isosim.presets",):
            raise
        return {"profile": name}
    return dict(get_preset(name))


_GRID_KEYS = {
    "q1": ("n_values", "b_p", "b_max"),
    "q2": ("n_values", "total_batch", "b_max"),
    "q3": ("n_values", "b_p_values", "b_max"),
}


def plan_for_preset(
    preset_name: str,
    question: str,
    quick: bool = False,
    seeds: int = 3,
    seed: int = 0,
    budget_max: float | None = None,
    **overrides: Any,
) -> SweepPlan:
    """A plan for one question on a named preset (``isosim.presets``), full or quick.

    ``overrides`` are SimConfig fields (``n_train=256``, ``lr=1.0``...) or grid settings of the
    question: ``n_values``, ``b_max`` and ``b_p`` (q1), ``total_batch`` (q2), ``b_p_values`` (q3).
    ``budget_max`` is the budget every run goes to (its curve covers all smaller budgets).

    Full defaults follow PAPER.md: ``n`` and ``B_p`` powers of two (8..2048, 32..1024),
    ``b_max`` 65,536 (16,384 for hard/extreme profiles), budget 1e7 rollouts. ``quick=True``:
    ``n`` in {4, 16, 64}, at most 2 seeds, budget 2e5, 128 train and validation problems.
    """
    question = str(question).lower()
    if question not in QUESTIONS:
        raise IsosimError(f"unknown question {question!r} (use {', '.join(QUESTIONS)})")
    preset = _get_preset(preset_name)
    fields = {f.name for f in dataclasses.fields(SimConfig)}
    grid_keys = _GRID_KEYS[question]
    settings: dict[str, Any] = {}
    grid: dict[str, Any] = {}
    quick_settings = {"n_train": QUICK["n_train"], "n_val": QUICK["n_val"]} if quick else {}
    if quick:
        seeds = min(seeds, QUICK["seeds"])
    # later sources win: preset < quick sizes < the caller's overrides
    for source, items in (("preset " + repr(preset_name), preset), ("quick", quick_settings),
                          ("override", overrides)):
        for key, value in items.items():
            if key == "budget":
                if source == "override" and budget_max is None:
                    budget_max = value
                continue
            if key in grid_keys:
                grid[key] = value
            elif key in fields and key not in GRID_FIELDS:
                settings[key] = value
            elif source == "override":
                raise IsosimError(
                    f"unknown setting {key!r} for {question} (a SimConfig field other than "
                    f"{', '.join(GRID_FIELDS)}, or one of {', '.join(grid_keys)})"
                )
            # a preset may carry grid settings of other questions: ignore them
    profile = str(settings.get("profile", SimConfig.profile))
    hardish = any(w in profile for w in ("hard", "extreme"))
    if quick:
        budget = QUICK["budget"] if budget_max is None else budget_max
        grid.setdefault("n_values", QUICK["n_values"])
        grid.setdefault("b_max", QUICK["b_max"])
        defaults = {"b_p": QUICK["q1_b_p"], "total_batch": QUICK["q2_batch"], "b_p_values": QUICK["q3_b_p"]}
    else:
        budget = FULL_BUDGET if budget_max is None else budget_max
        grid.setdefault("b_max", B_MAX_HARD if hardish else B_MAX_EASY)
        defaults = {"b_p": FULL_Q1_B_P, "total_batch": min(FULL_Q2_BATCH, grid["b_max"]),
                    "b_p_values": powers_of_two(*FULL_B_P)}
    # n = b_p = 1 only make the base valid on its own; every run gets its cell's n and b_p
    base = SimConfig(**settings, n=1, b_p=1, budget=float(budget), seed=int(seed))
    label = f"{preset_name}{' quick' if quick else ''}"
    common = dict(seeds=seeds, seed=seed, b_max=grid["b_max"], label=label)
    n_values = grid.get("n_values")
    if question == "q1":
        return plan_q1(base, n_values, grid.get("b_p", defaults["b_p"]), budget, **common)
    if question == "q2":
        return plan_q2(base, grid.get("total_batch", defaults["total_batch"]), n_values, budget, **common)
    return plan_q3(base, n_values, grid.get("b_p_values", defaults["b_p_values"]), budget, **common)


# ===========================================================================================
# The store
# ===========================================================================================

SimulateFn = Callable[..., pd.DataFrame]


@contextlib.contextmanager
def _store_lock(out_dir: Path) -> Iterator[None]:
    """Hold ``out_dir/.lock`` (flock) so that two processes never fill one store at once.

    The kernel drops the lock when its holder dies, SIGKILL included.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; one process per store is on the user
        yield
        return
    fh = open(out_dir / ".lock", "a+b")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise IsosimError(f"folder {out_dir} is in use by another running sweep; "
                              "wait for it or use a new --out") from None
        yield
    finally:
        fh.close()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise IsosimError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None


def _read_plan(out_dir: Path) -> SweepPlan | None:
    path = out_dir / "plan.json"
    if not path.exists():
        return None
    try:
        text = path.read_text()
    except OSError as exc:
        raise IsosimError(f"{path}: cannot read ({exc})") from None
    return SweepPlan.from_json(text, source=str(path))


def _empty_manifest(plan_id: str) -> dict:
    return {"format": STORE_FORMAT, "plan_id": plan_id, "chunks": []}


def _read_manifest(out_dir: Path, plan_id: str) -> dict:
    path = out_dir / "manifest.json"
    if not path.exists():
        return _empty_manifest(plan_id)
    man = _read_json(path)
    if not isinstance(man, dict) or not isinstance(man.get("chunks"), list):
        raise IsosimError(f"{path}: not a sweep manifest")
    if man.get("format") != STORE_FORMAT:
        raise IsosimError(f"{path}: unknown store format {man.get('format')!r} (this isosim reads {STORE_FORMAT})")
    if man.get("plan_id") != plan_id:
        raise IsosimError(f"{path}: belongs to plan {man.get('plan_id')}, but plan.json is plan {plan_id}")
    return man


def _open_store(out_dir: Path, plan: SweepPlan) -> dict:
    """Create the store or check that it holds ``plan``; return its manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "records").mkdir(exist_ok=True)
    held = _read_plan(out_dir)
    if held is None:
        if (out_dir / "manifest.json").exists():
            raise IsosimError(f"folder {out_dir} has a manifest.json but no plan.json; "
                              "it is damaged or not a sweep: use a new --out")
        atomic_write_text(out_dir / "plan.json", plan.to_json())
    elif held.plan_id != plan.plan_id:
        raise IsosimError(f"folder {out_dir} holds a sweep of another plan (id {held.plan_id}, "
                          f"this one is {plan.plan_id}); use a new --out")
    return _read_manifest(out_dir, plan.plan_id)


def _tidy_records(out_dir: Path, manifest: dict) -> dict:
    """Delete what the manifest does not vouch for; drop manifest entries whose file is gone.

    Only called with the store's lock held, so no other process is writing here.
    """
    rec = out_dir / "records"
    listed = {Path(c["file"]).name for c in manifest["chunks"]}
    for p in rec.iterdir():
        if is_tmp_name(p):
            p.unlink()  # a write that a kill interrupted
        elif _CHUNK_RE.match(p.name) and p.name not in listed:
            p.unlink()  # finished but never listed: its runs are redone
    for p in out_dir.iterdir():
        if is_tmp_name(p):
            p.unlink()
    kept = [c for c in manifest["chunks"] if (out_dir / c["file"]).exists()]
    if len(kept) != len(manifest["chunks"]):
        manifest = {**manifest, "chunks": kept}
        atomic_write_text(out_dir / "manifest.json", dumps_json(manifest, indent=1))
    return manifest


def plan_chunks(
    configs: Sequence[SimConfig],
    chunk_size: int | None = None,
    *,
    device: str = "cpu",
) -> list[list[SimConfig]]:
    """Split runs into chunks that the engine can batch, one engine call each.

    Runs are grouped by ``cfg.batch_key`` (groups in order of first appearance), sorted inside
    a group by length (steps) so that a chunk's runs finish together, then cut greedily: at
    most ``chunk_size`` runs per chunk, or by default at most ``CHUNK_MAX_RUNS`` runs and
    ``CHUNK_MAX_RUN_STEPS`` run-steps for the device kind (a run longer than that is a chunk of
    its own). Cutting is prefix-stable: once the first k chunks are done, the remaining runs are
    cut into the same chunks as before, so a resumed sweep batches runs as an uninterrupted one.
    """
    if chunk_size is not None and (int(chunk_size) != chunk_size or chunk_size < 1):
        raise IsosimError(f"chunk_size must be an integer >= 1 (got {chunk_size!r})")
    kind = "cpu" if str(device).startswith("cpu") else "cuda"
    max_runs = int(chunk_size) if chunk_size is not None else CHUNK_MAX_RUNS[kind]
    max_steps = float("inf") if chunk_size is not None else CHUNK_MAX_RUN_STEPS[kind]
    groups: dict[tuple, list[SimConfig]] = {}
    for cfg in configs:
        groups.setdefault(cfg.batch_key, []).append(cfg)
    chunks: list[list[SimConfig]] = []
    for group in groups.values():
        group = sorted(group, key=lambda c: (c.total_steps, c.b_p * c.n, c.n, c.run_id))
        cur: list[SimConfig] = []
        cur_steps = 0
        for cfg in group:
            if cur and (len(cur) >= max_runs or cur_steps + cfg.total_steps > max_steps):
                chunks.append(cur)
                cur, cur_steps = [], 0
            cur.append(cfg)
            cur_steps += cfg.total_steps
        if cur:
            chunks.append(cur)
    return chunks


def _next_index(manifest: dict) -> int:
    idx = [int(m.group(1)) for c in manifest["chunks"] if (m := _CHUNK_RE.match(Path(c["file"]).name))]
    return max(idx, default=-1) + 1


def _default_simulate() -> SimulateFn:
    try:
        from isosim.engine import simulate
    except ImportError as exc:
        raise IsosimError(f"the simulator engine is not available ({exc})") from None
    return simulate


def _check_chunk(df: Any, chunk: Sequence[SimConfig], where: str) -> pd.DataFrame:
    """The engine's records for one chunk, validated: every run there, no stranger."""
    if not isinstance(df, pd.DataFrame):
        raise RuntimeError(f"{where}: the engine returned {type(df).__name__}, not a DataFrame")
    df = normalize(df, source=where)
    want = {c.run_id for c in chunk}
    got = set(df["run_id"].unique())
    if got != want:
        missing, extra = sorted(want - got), sorted(got - want)
        raise RuntimeError(f"{where}: the engine's records do not match the chunk's runs "
                           f"(missing {missing[:3]}, unexpected {extra[:3]})")
    return df


class _Bar:
    """A rich progress bar in rollouts (spent / total, ETA), or nothing when disabled."""

    def __init__(self, enabled: bool, total: float, done: float, description: str) -> None:
        self.progress = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        console = Console(stderr=True)
        if not console.is_terminal and not console.is_jupyter:
            return
        self.progress = Progress(
            TextColumn("[progress.description]{task.description}"), BarColumn(),
            TextColumn("{task.completed:.3g}/{task.total:.3g} rollouts"),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.task = self.progress.add_task(description, total=total, completed=done)

    def __enter__(self) -> "_Bar":
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    @property
    def callback(self) -> Callable[[float], None] | None:
        if self.progress is None:
            return None
        return lambda x: self.progress.advance(self.task, float(x))

    def set(self, done: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=done)


def run_sweep(
    plan: SweepPlan,
    out_dir: str | Path,
    *,
    device: str = "cpu",
    chunk_size: int | None = None,
    progress: bool = True,
    simulate_fn: SimulateFn | None = None,
) -> pd.DataFrame:
    """Run every run of ``plan`` not yet in the store ``out_dir``; return all its records.

    Resumable: kill it at any moment and call it again with the same plan and folder; finished
    chunks are kept, unfinished ones redone (see the module docstring for the layout and the
    guarantees). ``chunk_size`` caps the runs per engine call (default: see
    :func:`plan_chunks`). ``simulate_fn`` replaces
    ``isosim.engine.simulate`` (tests inject a fake). Raises IsosimError when ``out_dir`` holds
    another plan or another process is filling it.
    """
    out_dir = Path(out_dir)
    simulate = simulate_fn if simulate_fn is not None else _default_simulate()
    configs = plan.configs()
    ids = [c.run_id for c in configs]
    if len(set(ids)) != len(ids):
        raise IsosimError(f"plan {plan.plan_id} names some run twice (duplicate run_id)")
    out_dir.mkdir(parents=True, exist_ok=True)
    with _store_lock(out_dir):
        manifest = _open_store(out_dir, plan)
        manifest = _tidy_records(out_dir, manifest)
        done = {rid for c in manifest["chunks"] for rid in c["run_ids"]}
        todo = [c for c in configs if c.run_id not in done]
        total = sum(_run_rollouts(c) for c in configs)
        spent = total - sum(_run_rollouts(c) for c in todo)
        chunks = plan_chunks(todo, chunk_size, device=device)
        index = _next_index(manifest)
        with _Bar(progress, total, spent, f"sweep {plan.plan_id}") as bar:
            for chunk in chunks:
                name = f"chunk-{index:05d}.parquet"
                t0 = time.perf_counter()
                df = simulate(list(chunk), device=device, progress=bar.callback)
                df = _check_chunk(df, chunk, f"{out_dir}/records/{name}")
                atomic_write(out_dir / "records" / name, lambda fh: df.to_parquet(fh, index=False))
                manifest["chunks"].append({
                    "file": f"records/{name}",
                    "run_ids": [c.run_id for c in chunk],
                    "rows": int(len(df)),
                    "device": device,
                    "seconds": round(time.perf_counter() - t0, 3),
                })
                atomic_write_text(out_dir / "manifest.json", dumps_json(manifest, indent=1))
                spent += sum(_run_rollouts(c) for c in chunk)
                bar.set(spent)
                index += 1
        if not (out_dir / "manifest.json").exists():  # nothing to run and no manifest yet
            atomic_write_text(out_dir / "manifest.json", dumps_json(manifest, indent=1))
    _, records = load_store(out_dir)
    return records


def store_status(out_dir: str | Path) -> dict:
    """What a store holds: plan_id, runs finished and planned, chunks written."""
    out_dir = Path(out_dir)
    plan = _read_plan(out_dir)
    if plan is None:
        raise IsosimError(f"folder {out_dir} holds no sweep (no plan.json)")
    manifest = _read_manifest(out_dir, plan.plan_id)
    done = {rid for c in manifest["chunks"] for rid in c["run_ids"]}
    return {"plan_id": plan.plan_id, "runs_done": len(done), "runs": plan.n_runs,
            "chunks": len(manifest["chunks"]), "complete": len(done) >= plan.n_runs}


def load_store(out_dir: str | Path) -> tuple[SweepPlan, pd.DataFrame]:
    """The plan and every finished record of the store ``out_dir``.

    Reads only the chunks that ``manifest.json`` lists, checks each against its entry (run_ids
    and row count), drops duplicate ``(run_id, step)`` rows defensively and validates the table
    with ``records.normalize`` (sorted by run_id, rollouts). A store with no finished run yet
    raises IsosimError.
    """
    out_dir = Path(out_dir)
    plan = _read_plan(out_dir)
    if plan is None:
        raise IsosimError(f"folder {out_dir} holds no sweep (no plan.json)")
    manifest = _read_manifest(out_dir, plan.plan_id)
    frames = []
    for entry in manifest["chunks"]:
        path = out_dir / entry["file"]
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises many kinds; the user needs one line
            raise IsosimError(f"{path}: cannot read a chunk the manifest lists "
                              f"({type(exc).__name__}: {exc})") from None
        if len(df) != entry["rows"] or set(df["run_id"].astype(str)) != set(entry["run_ids"]):
            raise IsosimError(f"{path}: does not match its manifest entry (rows or run_ids differ)")
        frames.append(df)
    if not frames:
        raise IsosimError(f"folder {out_dir} holds no finished run yet")
    records = pd.concat(frames, ignore_index=True)
    records = normalize(records, source=str(out_dir))
    records = records.drop_duplicates(["run_id", "step"], keep="first").reset_index(drop=True)
    return plan, records
