"""``isosim recommend --runs``: choose n for a budget from a folder of cheap runs.

The runs (isosim records, TRL / verl TensorBoard logs, W&B CSV exports: whatever ``isosim analyze``
reads, :func:`isosim.integrations.load_runs`) are every n of a grid at one B_p, each run for a
small share of the budget, one or more seeds. A reader of :mod:`isosim.predict.stepcurve` carries
each n's curve to the budget and :func:`isosim.predict.stepcurve.predict` reports the pick, the tie
band and each n's expected regret in the reading asked for. The default reader is the one with the
best measured trade-off on the plane (``studies/results/plane.json``): ``DEFAULT_METHOD``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from isosim.errors import IsosimError
from isosim.predict import sbi, stepcurve
from isosim.validation.readings import HEADLINE, check_reading

BANK = Path(__file__).resolve().parents[2] / "studies" / "results" / "sbi_bank.json"
"""the bank of simulated sweeps the ``sbi`` readers learn from (``studies/scoring/sbi_bank.py``)"""
DEFAULT_METHOD = "level"
"""the cheap runs' leader: on the plane's 84 replays (best reading, every n run to 5 % of C) mean
regret .0074 at overhead .19, against .0076 at .20 for the ``steps`` reader (studies/LOG.md)"""


def cheap_curves(df: pd.DataFrame, metric: str = "val_avg") -> tuple[dict[int, dict[int, list]], int, int | None]:
    """``by_seed[seed][n]`` curves (rollouts, value) of a records table, its B_p and its
    validation size (V x N) where the records carry it."""
    for col in ("n", "b_p", "seed", "rollouts", metric):
        if col not in df.columns:
            raise IsosimError(f"the runs have no {col!r} column (records need n, b_p, seed, rollouts and {metric})")
    d = df[pd.to_numeric(df[metric], errors="coerce").notna()]
    if d.empty:
        raise IsosimError(f"the runs hold no {metric} values")
    b_ps = sorted({int(b) for b in d["b_p"].dropna()})
    if len(b_ps) != 1:
        raise IsosimError(f"the runs use several B_p {b_ps}; choosing n compares runs at one B_p")
    by_seed: dict[int, dict[int, list]] = {}
    for (n, seed), g in d.groupby(["n", "seed"]):
        g = g.sort_values("rollouts")
        by_seed.setdefault(int(seed), {})[int(n)] = [(float(r), float(v)) for r, v in zip(g["rollouts"], g[metric])]
    samples = None
    if "val_size" in d.columns and "eval_n" in d.columns:
        vs = pd.to_numeric(d["val_size"], errors="coerce") * pd.to_numeric(d["eval_n"], errors="coerce")
        samples = int(vs.min()) if vs.notna().any() else None
    return by_seed, b_ps[0], samples


def recommend_from_runs(path: str | Path, budget: float, method: str = DEFAULT_METHOD, reading: str = HEADLINE,
                        metric: str | None = None, bank: str | Path | None = None) -> dict[str, Any]:
    """The prediction JSON for the cheap runs at ``path`` and a budget in rollouts."""
    from isosim.integrations import default_metric, load_runs

    check_reading(reading)
    if method not in stepcurve.METHODS + tuple(sbi.BANDS):
        raise IsosimError(f"--method must be one of {', '.join(stepcurve.METHODS + tuple(sbi.BANDS))}, got {method!r}")
    if not (budget and math.isfinite(budget) and budget > 0):
        raise IsosimError(f"--budget must be a positive number of rollouts, got {budget}")
    df, what = load_runs(path)
    metric = metric or default_metric(df)
    by_seed, b_p, samples = cheap_curves(df, metric)
    seeds_of = {n for runs in by_seed.values() for n in runs}
    by_seed = {s: runs for s, runs in by_seed.items() if set(runs) == seeds_of}
    if not by_seed:
        raise IsosimError("no seed has a run of every n; give every n the same seeds")
    cheap = max(r for runs in by_seed.values() for c in runs.values() for r, _ in c)
    if cheap >= budget:
        raise IsosimError(f"the runs already reach {cheap:.3g} rollouts, at or past the budget {budget:.3g}")
    read = None
    if method in sbi.BANDS:  # the simulation-trained reader, for cheap parts of this share
        rdr = sbi.reader(bank or BANK, cheap / budget)

        def read(curves):
            return rdr.read(curves, b_p, budget, sbi.BANDS[method], samples)
    out = stepcurve.predict(by_seed, b_p, budget, method, reading, samples, read)
    if read is not None:
        out["units"] = "value: minus the expected regret as a share of the best n's gain from step 0"
        k = len(out["seeds"])
        for v in out["n"].values():  # n outside the cheap leader's band: the penalty that ranked them last is taken off
            outside = round(v["expected_regret"] / sbi.OUT_OF_BAND * k)  # seeds where it was outside
            v["in_cheap_band"] = outside == 0
            v["expected_regret"] -= outside * sbi.OUT_OF_BAND / k
            v["value"] += outside * sbi.OUT_OF_BAND / k
    out.update({"runs": str(path), "read": what, "metric": metric, "cheap_rollouts": float(cheap),
                "cheap_share": float(cheap / budget),
                "note": ("expected regret: the pick's predicted value at the budget minus each n's, in the "
                         f"{reading} reading ({'best validated value up to C' if reading == 'best' else 'value at C'})")})
    return out
