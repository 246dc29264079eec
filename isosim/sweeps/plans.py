"""Sweep plans: plain data naming every run of a sweep, and the builders for the paper's three
questions (:func:`plan_q1`, :func:`plan_q2`, :func:`plan_q3`, :func:`plan_for_preset`); see
:mod:`isosim.sweeps.sweep`."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from isosim.errors import IsosimError
from isosim.sim.config import ADDED_FIELD_DEFAULTS, SimConfig
from isosim.sim.presets import get_preset

QUESTIONS = ("q1", "q2", "q3")
PLAN_FORMAT = 1

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
        return float(sum(run_rollouts(c) for c in self.configs()))

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
    for key, default in ADDED_FIELD_DEFAULTS:  # at their defaults they leave plan ids as they were
        if key in d and d[key] == default:
            del d[key]
    try:
        return json.loads(json.dumps(d, sort_keys=True))
    except (TypeError, ValueError) as exc:
        raise IsosimError(f"a plan's base settings must be JSON values ({exc})") from None


def _make_config(base: dict, cell: Cell, seed: int) -> SimConfig:
    """The SimConfig of one run (validated by SimConfig)."""
    return SimConfig(**base, n=cell.n, b_p=cell.b_p, budget=float(cell.budget), steps=None, seed=seed)


def run_rollouts(cfg: SimConfig) -> float:
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


def profile_dynamics(spec: Any) -> dict:
    """The SimConfig overrides of a profile file's ``dynamics`` block ({} for any other profile)."""
    if spec is None:
        return {}
    from isosim.sim.profiles import get_profile

    block = get_profile(str(spec)).dynamics
    if not block:
        return {}
    fields = {f.name for f in dataclasses.fields(SimConfig)}
    bad = sorted(k for k in block["overrides"] if k not in fields or k in GRID_FIELDS or k == "profile")
    if bad:
        raise IsosimError(f"profile {spec}: its dynamics block sets {', '.join(bad)}, which are not "
                          f"SimConfig settings a profile may override")
    return dict(block["overrides"])


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
    """A plan for one question on a named preset (``isosim.sim.presets``), full or quick.

    ``overrides`` are SimConfig fields (``n_train=256``, ``lr=1.0``...) or grid settings of the
    question: ``n_values``, ``b_max`` and ``b_p`` (q1), ``total_batch`` (q2), ``b_p_values`` (q3).
    ``budget_max`` is the budget every run goes to (its curve covers all smaller budgets).

    Full defaults follow PAPER.md: ``n`` and ``B_p`` powers of two (8..2048, 32..1024),
    ``b_max`` 65,536 (16,384 for hard/extreme profiles), budget 1e7 rollouts. ``quick=True``:
    ``n`` in {4, 16, 64}, at most 2 seeds, budget 2e5, 128 train and validation problems.

    A ``profile`` override naming a profile file with a ``dynamics`` block (``isosim calibrate
    --dynamics``) applies the block's SimConfig overrides on top of the preset; the caller's own
    overrides still win. A profile without the block changes nothing but the problems.
    """
    question = str(question).lower()
    if question not in QUESTIONS:
        raise IsosimError(f"unknown question {question!r} (use {', '.join(QUESTIONS)})")
    preset = dict(get_preset(preset_name))
    fields = {f.name for f in dataclasses.fields(SimConfig)}
    grid_keys = _GRID_KEYS[question]
    settings: dict[str, Any] = {}
    grid: dict[str, Any] = {}
    quick_settings = {"n_train": QUICK["n_train"], "n_val": QUICK["n_val"]} if quick else {}
    if quick:
        seeds = min(seeds, QUICK["seeds"])
    dynamics = profile_dynamics(overrides.get("profile"))
    # later sources win: preset < a profile's fitted dynamics < quick sizes < the caller's overrides
    for source, items in (("preset " + repr(preset_name), preset), ("dynamics", dynamics),
                          ("quick", quick_settings), ("override", overrides)):
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
    label = f"{preset_name}{' quick' if quick else ''}{' + fitted dynamics' if dynamics else ''}"
    common = dict(seeds=seeds, seed=seed, b_max=grid["b_max"], label=label)
    n_values = grid.get("n_values")
    if question == "q1":
        return plan_q1(base, n_values, grid.get("b_p", defaults["b_p"]), budget, **common)
    if question == "q2":
        return plan_q2(base, grid.get("total_batch", defaults["total_batch"]), n_values, budget, **common)
    return plan_q3(base, n_values, grid.get("b_p_values", defaults["b_p_values"]), budget, **common)
