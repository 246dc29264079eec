"""The answer bank: ``isosim recommend --budget`` on a built-in preset, read in a second instead of simulated.

A cold ``recommend --budget 1e6`` simulates the (n, B_p) grid to the budget (tens of seconds on two
cores; the runs of the smallest n take the most update steps, and steps are sequential) and reads it
with the frontier analysis (about 2 s of fits and bootstrap). For the built-in presets at
``recommend``'s defaults both are done once, ahead of time, at the budgets of ``BUDGETS`` (1, 2 and 5
per decade from 1e4 to the simulation cap): each budget's sweep is simulated exactly as ``recommend``
would simulate it, read by the same :func:`isosim.predict.choice.read_grid`, and the read (every
cell's value, the noise, each B_p's analysis) is shipped in ``presimulated/bank-<preset>.json.gz``
(``scripts/presimulate.py`` writes them; ``tests/test_bank.py`` re-simulates and compares).

Reading it:

- a budget of the grid, or any budget at or past the cap (read at the cap, as before), is the shipped
  read itself: the same pick, tie band, regret and fits as a fresh simulation on the machine that
  wrote the bank;
- a budget between two grid budgets ``C_lo < C < C_hi`` reads each cell's value at ``C`` on the read
  of the sweep to ``C_hi``: its n's capped fitted curve there (the runs to ``C_hi`` pass through ``C``;
  :func:`read_at`), falling back to a linear interpolation in ``log C`` between the two reads for a
  cell whose curve does not reach ``C``; the seed noise is interpolated, and the pick is made by the
  same criterion (:func:`isosim.predict.choice.pick_cell`). The frontier analysis behind n_sat, the
  n* interval and the predicted curve is the nearer read's (nearer in ``log C``), and the
  recommendation names both budgets. How close this comes to a fresh simulation at ``C`` is
  measured and tested on budgets between the grid's (``tests/test_bank.py``).

Anything else (a profile, a training-set size, a max batch, a metric other than ``val_avg``,
``--quick``, other seeds, a mix of presets) simulates as before.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

BANK_FORMAT = 1
BUDGETS = (1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7)
"""the budgets read ahead of time (1, 2, 5 per decade to ``SIM_BUDGET_CAP``): any other budget lies within
a factor 2.5 of two of them"""
PRESETS = ("easy", "very-easy", "hard", "extreme")
"""the built-in presets the bank holds"""
METRIC = "val_avg"
N_BOOT = 100
"""the bootstrap resamples of recommend's full read"""
B_MAX = 65536
SEEDS = 2
FOLDER = Path(__file__).resolve().parent / "presimulated"


def path(preset: str) -> Path:
    """The bank file of a preset."""
    return FOLDER / f"bank-{preset}.json.gz"


def applies(preset: str | None, profile: str | None, b_max: int, problems: int | None, metric: str, quick: bool,
            seeds: int) -> bool:
    """Whether a request is one the bank answers: a built-in preset at recommend's defaults."""
    return (preset in PRESETS and profile is None and problems is None and int(b_max) == B_MAX and metric == METRIC
            and not quick and seeds == SEEDS)


def encode_read(read: dict[str, Any]) -> dict[str, Any]:
    """A :func:`isosim.predict.choice.read_grid` result as JSON-ready data (cells keyed ``"n,b_p"``)."""
    from isosim.files import jsonable

    return jsonable({"top": read["top"], "noise": read["noise"], "skipped": read["skipped"],
                     "cells": {f"{n},{bp}": v for (n, bp), v in read["cells"].items()},
                     "analyses": {str(bp): a for bp, a in read["analyses"].items()}})


def decode_read(doc: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`encode_read` (NaN written as null stays None)."""
    cells = {}
    for key, v in doc["cells"].items():
        n, bp = key.split(",")
        cells[(int(n), int(bp))] = float(v)
    return {"top": float(doc["top"]), "noise": float(doc["noise"]), "skipped": {int(k): v for k, v in doc["skipped"].items()},
            "cells": cells, "analyses": {int(bp): a for bp, a in doc["analyses"].items()}}


def load(preset: str, folder: Path | None = None) -> dict[str, Any] | None:
    """The bank of a preset (None when none ships or it cannot be read)."""
    p = path(preset) if folder is None else Path(folder) / f"bank-{preset}.json.gz"
    try:
        with gzip.open(p, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != BANK_FORMAT:
        return None
    return doc


def lookup(preset: str, budget: float, plan_id_of, cap: float, folder: Path | None = None) -> dict[str, Any] | None:
    """The bank's read for ``budget`` (see the module docstring), or None where the bank cannot answer:
    no bank, or the shipped entries are not the plans recommend would simulate now (``plan_id_of(C)``:
    the plan id of the sweep to C; a changed preset changes it).

    Returns ``{"read", "entries", "weight", "analysis_from"}``: the read to use, the bank entries it
    comes from (one, or the two around the budget), the weight of the upper one, and the budget whose
    frontier analysis it carries."""
    doc = load(preset, folder)
    if doc is None:
        return None
    entries = {float(e["budget"]): e for e in doc["entries"]}
    target = min(float(budget), cap)
    exact = next((c for c in entries if abs(c - target) <= 1e-9 * target), None)
    if exact is not None:
        chosen = [exact]
    else:
        lo = max((c for c in entries if c < target), default=None)
        hi = min((c for c in entries if c > target), default=None)
        if lo is None or hi is None:
            return None
        chosen = [lo, hi]
    for c in chosen:
        if entries[c]["plan_id"] != plan_id_of(c):
            return None
    if len(chosen) == 1:
        e = entries[chosen[0]]
        return {"read": decode_read(e["read"]), "entries": [e], "weight": 0.0, "analysis_from": chosen[0]}
    lo, hi = chosen
    a, b = decode_read(entries[lo]["read"]), decode_read(entries[hi]["read"])
    t = math.log(target / lo) / math.log(hi / lo)
    cells = {c: (1 - t) * a["cells"][c] + t * b["cells"][c] for c in a["cells"] if c in b["cells"]}
    cells.update(read_at(b, target))
    near = a if t <= 0.5 else b
    read = {"top": math.exp((1 - t) * math.log(a["top"]) + t * math.log(b["top"])),
            "noise": (1 - t) * a["noise"] + t * b["noise"], "cells": cells, "analyses": near["analyses"],
            "skipped": near["skipped"]}
    return {"read": read, "entries": [entries[lo], entries[hi]], "weight": t, "analysis_from": lo if t <= 0.5 else hi}


def read_at(read: dict[str, Any], budget: float) -> dict[tuple[int, int], float]:
    """Each cell's value at ``budget`` on a read of a sweep to a larger budget: its n's capped fitted curve
    (``per_n_reward``: the sigmoid fitted to the runs, capped by their measured best up to each budget of
    the analysis' grid), interpolated in log C between the two grid budgets around ``budget``. Cells whose
    curve has no value on both sides of it (runs that had not reached it) are left out."""
    import numpy as np

    x = math.log(budget)
    cells = {}
    for bp, res in read["analyses"].items():
        grid = np.log(np.asarray(res["budgets"], dtype=float))
        for n, vals in res["per_n_reward"].items():
            v = np.array([np.nan if y is None else y for y in vals], dtype=float)
            ok = np.isfinite(v)
            if ok.any() and grid[ok][0] <= x <= grid[ok][-1]:
                cells[(int(n), int(bp))] = float(np.interp(x, grid[ok], v[ok]))
    return cells


def describe(got: dict[str, Any], budget: float) -> str:
    """Where a bank read comes from, in one sentence."""
    from isosim.frontier.wording import short_budget

    where = path(got["entries"][0]["preset"]).name
    if len(got["entries"]) == 1:
        c = float(got["entries"][0]["budget"])
        return (f"read from the shipped bank {where}: the sweep to C = {short_budget(c)} simulated ahead of time "
                "exactly as recommend simulates it, and its frontier read")
    lo, hi = (float(e["budget"]) for e in got["entries"])
    return (f"read from the shipped bank {where}, not simulated at C = {budget:.3g}: each cell's value is its n's "
            f"capped fitted curve in the sweep to {short_budget(hi)} read at C (interpolated in log C between the "
            f"sweeps to {short_budget(lo)} and {short_budget(hi)} where that curve does not reach C), the seed noise "
            f"interpolated (weight {got['weight']:.2f} on {short_budget(hi)}); n_sat, the n* interval and the predicted "
            f"frontier are those of the sweep to {short_budget(got['analysis_from'])}")


def explore_plan():
    """The plan of ``isosim explore --preset easy`` at its defaults, whose sweep ships (``presimulated/<plan_id>``)."""
    from isosim.sweeps.plans import plan_for_preset

    return plan_for_preset("easy", "q1", quick=False, seeds=3, seed=0, budget_max=None)


def seed_store(plan_id: str, out_dir: str | Path, folder: Path | None = None) -> bool:
    """Copy the shipped sweep ``plan_id`` (plan, manifest, records) into ``out_dir`` when one ships and
    ``out_dir`` holds none of its names (absent, empty, or a folder of other files); then
    :func:`isosim.sweeps.sweep.run_sweep` finds every run done and simulates nothing. True when it copied."""
    import shutil

    shipped = (FOLDER if folder is None else Path(folder)) / plan_id
    out = Path(out_dir)
    if not (shipped / "manifest.json").is_file():
        return False  # nothing ships
    if out.exists() and any((out / p.name).exists() for p in shipped.iterdir()):
        return False  # a sweep (or a file of that name) is already there: never overwritten, resumed as it is
    shutil.copytree(shipped, out, dirs_exist_ok=True)
    return True


def write(preset: str, entries: list[dict[str, Any]], folder: Path | None = None) -> Path:
    """Write a preset's bank (gzip with no timestamp: the same entries give the same bytes)."""
    from isosim.files import dumps_json

    doc = {"format": BANK_FORMAT, "preset": preset, "metric": METRIC, "n_boot": N_BOOT,
           "budgets": [e["budget"] for e in entries], "entries": entries}
    p = path(preset) if folder is None else Path(folder) / f"bank-{preset}.json.gz"
    p.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(p, "wb", mtime=0) as fh:
        fh.write(dumps_json(doc, separators=(",", ":")).encode("utf-8"))
    return p
