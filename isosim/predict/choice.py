"""How ``isosim recommend`` reads its simulated grid: every (n, B_p) cell's value at the budget on the
capped frontier, one criterion for the pick and the tie band, and whether n matters at all.

The grid (:func:`sim_grid`): n in powers of two from ``N_FLOOR`` to ``N_CEIL``, B_p in ``SIM_B_P``
(with ``SMALL_B_P`` added where the hardware batch leaves fewer than three n at the smallest of them),
each cell with B_p * n within the max batch. Each B_p's runs are read by the frontier analysis
(:func:`isosim.frontier.analysis.analyze`): each n's sigmoid capped by its measured best up to the
budget, so a cell's value is never above what its runs reached.

One criterion (:func:`pick_cell`): the tie band is every cell whose value is within ``Z_BAND``
standard errors of the best cell's, the standard error being that of the difference of two seed
means (sqrt(2) x run-to-run sd / sqrt(seeds)); the pick is the band's cell with the most update
steps at the budget (the smallest rollout batch B_p x n: M = C / (B_p n)), the better value breaking
a tie. Within the band every cell is as good by the prediction, and more sequential updates for the
same value is the paper's finding; the pick's expected regret (the best value minus its own, never
negative) is at most ``Z_BAND`` se, and ``pick_reason`` says so in words. The se covers seed noise only, not the simulator's
error against a real learner.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from isosim.errors import IsosimError

if TYPE_CHECKING:  # imported where used: the answer bank reads a grid without pandas
    import pandas as pd

N_FLOOR, N_CEIL = 2, 2048
"""the smallest and largest n simulated (powers of two between): n outside cannot be picked"""
SIM_B_P = (32, 128)
"""B_p simulated (the paper: B_p matters little from 32 up; both are simulated and compared)"""
SMALL_B_P = 8
"""added to the B_p simulated where the max batch leaves fewer than three n at B_p 32 (below 256)"""
QUICK_N, QUICK_B_P = (2, 8, 32), (8, 32)
"""the grid of ``--quick`` (seconds)"""
Z_BAND = 2.0
"""the tie band: cells within this many standard errors (of a difference of seed means) of the best"""


def sim_grid(b_max: int, quick: bool = False) -> tuple[list[int], list[int]]:
    """(n values, B_p values) simulated for a max batch ``b_max``; cells over it are dropped by the plan."""
    if quick:
        return list(QUICK_N), list(QUICK_B_P)
    ns = [2**k for k in range(int(math.log2(N_FLOOR)), int(math.log2(N_CEIL)) + 1)]
    bps = list(SIM_B_P)
    if sum(SIM_B_P[0] * n <= b_max for n in ns) < 3:
        bps = [SMALL_B_P] + bps
    return ns, bps


def grid_text(ns: list[int], bps: list[int], cells: list[tuple[int, int]]) -> str:
    """The grid in words: its floor and ceiling of n and the B_p simulated."""
    got = sorted({n for n, _ in cells})
    txt = (f"n simulated: powers of two from {min(ns)} (the floor) to {max(ns)} (the ceiling); no n outside can be "
           f"picked; B_p simulated: {', '.join(map(str, bps))}")
    if got and (min(got) > min(ns) or max(got) < max(ns)):
        txt += f"; n competing at the budget: {min(got)} to {max(got)} (the others do not fit the max batch or the budget)"
    return txt


def read_grid(df: pd.DataFrame, metric: str, n_boot: int, seed: int = 0) -> dict[str, Any]:
    """Each B_p's frontier analysis on one budget grid ending where the runs stopped, and every cell's
    value (capped frontier reading) at that top budget."""
    import pandas as pd

    from isosim.sim import workers

    top = float(pd.to_numeric(df["rollouts"], errors="coerce").max())
    analyses: dict[int, dict[str, Any]] = {}
    skipped: dict[int, str] = {}
    groups = [(int(b_p), g) for b_p, g in df.groupby("b_p")]
    # each B_p's analysis is its own: half of them in the engine's helper process where a simulation left
    # one running (the same numbers in either process), the rest here meanwhile
    got = workers.beside("isosim.predict.choice:analyze_b_p", [(g, metric, top, n_boot, seed) for _, g in groups])
    for (b_p, _), (kind, value) in zip(groups, got):
        (analyses if kind == "analysis" else skipped)[b_p] = value
    if not analyses:
        raise IsosimError("no B_p simulated reaches the budget: " + "; ".join(skipped.values()))
    cells: dict[tuple[int, int], float] = {}
    for b_p, res in analyses.items():
        for key, vals in res["per_n_reward"].items():
            v = vals[-1]
            if v is not None and math.isfinite(v):
                cells[(int(key), b_p)] = float(v)
    noises = [float(r.get("noise") or 0.0) for r in analyses.values()]
    return {"top": top, "analyses": analyses, "cells": cells, "skipped": skipped,
            "noise": float(math.sqrt(np.mean(np.square(noises)))) if noises else 0.0}


def analyze_b_p(g: pd.DataFrame, metric: str, top: float, n_boot: int, seed: int) -> tuple[str, Any]:
    """:func:`read_grid`'s analysis of one B_p's runs ``g`` on its budget grid up to ``top``:
    ``("analysis", result)``, or ``("skipped", why)`` where it cannot be read (e.g. no n of this B_p
    reaches the top budget within a step)."""
    import pandas as pd

    from isosim.frontier import analysis

    pos = pd.to_numeric(g["rollouts"], errors="coerce")
    lo = float(pos[pos > 0].min())
    grid = np.geomspace(lo, top, 25) if lo < top else np.array([top])
    try:
        return "analysis", analysis.analyze(g, metric=metric, budgets=grid, n_boot=n_boot, seed=seed)
    except IsosimError as exc:
        return "skipped", str(exc)


def pick_cell(cells: dict[tuple[int, int], float], se_diff: float) -> dict[str, Any]:
    """The pick and the tie band by one criterion (see the module docstring). ``cells``: (n, B_p) ->
    value at the budget; ``se_diff``: the standard error of a difference of two seed means."""
    if not cells:
        raise IsosimError("no simulated cell reaches the budget")
    best_cell = max(cells, key=lambda c: (cells[c], -c[0], -c[1]))
    best = cells[best_cell]
    margin = Z_BAND * se_diff + 1e-12
    band = sorted(c for c, v in cells.items() if best - v <= margin)
    pick = min(band, key=lambda c: (c[0] * c[1], -cells[c], c[0]))  # the most update steps, then the best value
    regret = {c: max(0.0, best - v) for c, v in cells.items()}
    return {"pick": pick, "best": best_cell, "band": band, "regret": regret, "margin": margin}


def pick_reason(pick: tuple[int, int], best: tuple[int, int], band: list[tuple[int, int]],
                budget: float) -> str:
    """Why the pick, in words that are true of it: the band's cell with the most update steps at
    ``budget`` (:func:`pick_cell`), with its steps against the best cell's."""
    def steps(c: tuple[int, int]) -> int:
        return int(budget // (c[0] * c[1]))
    if pick == best:
        return (f"the pick, n = {pick[0]} at B_p {pick[1]}, is the best cell itself and leaves the most update steps "
                f"in the band (M = {steps(pick)})" if len(band) > 1 else
                f"the pick is the best cell, n = {pick[0]} at B_p {pick[1]} (M = {steps(pick)}), alone in the band")
    return (f"the pick is the cell of the band with the most update steps, n = {pick[0]} at B_p {pick[1]} "
            f"(M = {steps(pick)}, against {steps(best)} for the best cell): within the band every cell is as good "
            "by this prediction, and more sequential updates for the same value is the paper's tie-break")


def per_n_regret(regret: dict[tuple[int, int], float]) -> dict[int, float]:
    """Each n's expected regret at its best B_p."""
    out: dict[int, float] = {}
    for (n, _), r in regret.items():
        out[n] = min(out.get(n, math.inf), r)
    return dict(sorted(out.items()))


def set_text(values: list[int]) -> str:
    """A set of n as a set, never as a range: ``{2, 16}``."""
    return "{" + ", ".join(str(int(v)) for v in sorted(set(values))) + "}"


def regime(budgets: list[float], n_star: list[int], learning: list[bool] | None) -> dict[str, Any]:
    """Which regime n*(C) shows over the last decade of budgets: ``rising`` (n* at C at least one
    octave above n* a decade before), ``saturated low`` (n* at C at most 8 and not rising),
    ``saturated`` (not rising, n* above 8) or ``no learning``."""
    b = np.asarray(budgets, dtype=float)
    if learning is not None and not learning[-1]:
        return {"regime": "no learning", "text": f"no learning by C = {b[-1]:.3g}: the choice of n cannot show"}
    i = int(np.searchsorted(b, b[-1] / 10.0))
    i = min(i, len(b) - 1)
    lo, hi = int(n_star[i]), int(n_star[-1])
    octaves = math.log2(hi / lo)
    if octaves >= 1:
        name = "rising"
        txt = f"n* rising with budget (n* {lo} at {b[i]:.3g}, {hi} at {b[-1]:.3g}: {octaves:+.0f} octaves)"
    else:
        name = "saturated low" if hi <= 8 else "saturated"
        txt = (f"n* not rising over the last decade (n* {lo} at {b[i]:.3g}, {hi} at {b[-1]:.3g}; read per budget, "
               "not a fitted n_sat)")
    return {"regime": name, "text": txt, "n_before": lo, "n_at": hi, "budget_before": float(b[i])}


def matters_line(regret_n: dict[int, float], band_n: list[int], se_diff: float, budget: float,
                 regime_text: str, source: str) -> dict[str, Any]:
    """"Does n matter here?" in one line: the worst n in the tie band and the worst n of the grid
    against the noise, and the regime the evidence points to. ``source`` names whose view it is."""
    se = se_diff if se_diff > 0 else float("nan")
    in_band = {n: r for n, r in regret_n.items() if n in band_n}
    worst_in = max(in_band, key=in_band.get) if in_band else None
    worst_all = max(regret_n, key=regret_n.get)
    matters = regret_n[worst_all] > Z_BAND * se_diff + 1e-12
    parts = []
    if matters:
        parts.append(f"yes: n = {worst_all} loses {regret_n[worst_all]:.4f} ({regret_n[worst_all] / se:.1f} se)")
    else:
        parts.append(f"little: every n compared is within {Z_BAND:g} se of the best (worst n = {worst_all}, "
                     f"{regret_n[worst_all]:.4f}, {regret_n[worst_all] / se:.1f} se)")
    if worst_in is not None and matters:
        parts.append(f"inside the tie band {set_text(band_n)} the worst, n = {worst_in}, loses "
                     f"{in_band[worst_in]:.4f} ({in_band[worst_in] / se:.1f} se)")
    line = (f"does n matter at C = {budget:.3g}? " + "; ".join(parts) + f" (se {se_diff:.4f}, seed noise only). "
            f"Regime: {regime_text}. {source}")
    return {"matters": bool(matters), "worst_n": int(worst_all), "worst_regret": float(regret_n[worst_all]),
            "worst_in_band": None if worst_in is None else int(worst_in),
            "worst_in_band_regret": None if worst_in is None else float(in_band[worst_in]),
            "se": float(se_diff), "line": line}


def cheap_regime(by_seed: dict[int, dict[int, list]], cheap: float, reading: str = "best") -> dict[str, Any]:
    """The regime the cheap runs themselves show: their measured leader (seed mean, ``reading``) a decade
    before the end of the cheap part and at its end; n* rising if the leader moved up at least one octave."""
    def value(curve: list, c: float) -> float:
        pts = [(r, v) for r, v in curve if r > 0 and math.isfinite(v)]
        if not pts or pts[0][0] > c * (1 + 1e-9):
            return float("nan")
        x = np.log([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        v = float(np.interp(math.log(c), x, y))
        if reading == "best":
            v = max([v] + [p[1] for p in pts if p[0] <= c * (1 + 1e-9)])
        return v

    ns = sorted(set.intersection(*(set(r) for r in by_seed.values())))
    lead = {}
    for c in (cheap / 10.0, cheap):
        means = {n: [v for v in (value(by_seed[s][n], c) for s in by_seed) if math.isfinite(v)] for n in ns}
        means = {n: float(np.mean(v)) for n, v in means.items() if v}  # an n with no value by c is left out
        lead[c] = max(means, key=lambda n: (means[n], -n)) if means else None
    lo, hi = lead[cheap / 10.0], lead[cheap]
    if lo is None or hi is None:
        return {"regime": "unknown", "text": "the cheap runs are too short to show a regime"}
    octaves = math.log2(hi / lo)
    name = "rising" if octaves >= 1 else ("saturated low" if hi <= 8 else "saturated")
    verb = "moved up" if octaves >= 1 else ("moved down" if octaves <= -1 else "stayed")
    return {"regime": name, "n_before": int(lo), "n_at": int(hi),
            "text": (f"{'n* rising with budget' if name == 'rising' else 'no sign of n* rising (' + name + ')'}: "
                     f"the cheap runs' measured leader {verb} from n = {lo} at {cheap / 10:.3g} to n = {hi} at "
                     f"{cheap:.3g} rollouts")}


def seed_warning(df: Any, read: Sequence[int]) -> str | None:
    """Where a seed is missing for some n, the reader compares the n on the seeds every n has: the runs
    of the other seeds are not read at all. Said in one line, with the runs left out (None: every run read)."""
    from isosim.records import seeds_lacking

    runs = df.drop_duplicates("run_id")[["run_id", "n", "seed"]]
    left = runs[~runs["seed"].astype(int).isin(set(read))]
    if left.empty:
        return None
    gone = sorted({int(s) for s in left["seed"]})
    why = "; ".join(f"seed {s} has no run of n = {', '.join(map(str, ns))}" for s, ns in seeds_lacking(runs).items()
                    if s in gone)
    return (f"warning: {len(left)} of {len(runs)} runs are not read ({why}): every n is compared on seed"
            f"{'s' if len(read) > 1 else ''} {', '.join(map(str, read))} alone, the seeds every n has, so the pick "
            f"and its se can differ from what all runs give; run the missing ones, or remove seed"
            f"{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))} to say so")


def runs_matters_line(out: dict[str, Any], regime_text: str) -> dict[str, Any]:
    """"Does n matter here?" for ``recommend --runs``: each n's expected regret against its own se."""
    regret = {int(n): float(v["expected_regret"]) for n, v in out["n"].items()}
    se = {int(n): float(v["expected_regret_se"]) for n, v in out["n"].items()}
    band = [int(n) for n in out["tie_band"]]
    z = {n: (regret[n] / se[n] if se[n] > 0 else float("inf") if regret[n] > 0 else 0.0) for n in regret}
    worst_all = max(regret, key=lambda n: (regret[n], n))
    outside = [n for n in regret if n not in band]
    in_band = [n for n in band if n != out["pick"]]
    worst_in = max(in_band, key=lambda n: (regret[n], n)) if in_band else None
    if outside:
        txt = f"yes: n = {worst_all} loses {regret[worst_all]:.4f} ({z[worst_all]:.1f} se)"
        if worst_in is not None:
            txt += (f"; inside the tie band {set_text(band)} the worst, n = {worst_in}, loses {regret[worst_in]:.4f} "
                    f"({z[worst_in]:.1f} se)")
    else:
        txt = (f"little: every n is in the tie band {set_text(band)} (worst n = {worst_all}, {regret[worst_all]:.4f}, "
               f"{z[worst_all]:.1f} se)")
    noise = ("evaluation noise only (one seed per n: no seed spread measured)" if len(out.get("seeds", ())) == 1
             else "seed (and evaluation) noise only")
    line = (f"does n matter at C = {out['budget']:.3g}? {txt}. Regime: {regime_text}. Read from the cheap runs by the "
            f"{out['method']} reader: the se is {noise}, not the error of carrying the cheap curves to C.")
    return {"matters": bool(outside), "worst_n": int(worst_all), "worst_regret": regret[worst_all],
            "worst_in_band": worst_in, "worst_in_band_regret": None if worst_in is None else regret[worst_in],
            "line": line}


def check_past_step_0(df: pd.DataFrame, metric: str) -> None:
    """Refuse runs whose ``metric`` holds no number after step 0: no curve to carry to a budget."""
    import pandas as pd

    if metric in df.columns:
        have = pd.to_numeric(df[metric], errors="coerce").notna() & (pd.to_numeric(df["rollouts"]) > 0)
        if have.any():
            return
    raise IsosimError(f"the runs hold no {metric} value after step 0 (every later one is empty or not a number): "
                      "no curve to carry to the budget")


@contextmanager
def runs_as_read(path, df: pd.DataFrame, reach, as_table: bool = False) -> Iterator[Any]:
    """``path`` itself where every run is whole, else (or ``as_table``: logs read through ``--map`` /
    ``--set``) the runs as read, cut at the budget every run reached, as a records table in a
    temporary folder: the frozen reader (:mod:`isosim.predict.from_runs`, left untouched) reads
    them from there."""
    if not reach.short and not as_table:
        yield path
        return
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "runs_at_common_budget.csv"
        df.to_csv(table, index=False)
        yield table


READER_WORDS = {"level": "each n's last cheap value carried flat to C, in either reading; --method best-level reads its best",
                "best-level": "each n's best cheap value, carried flat to C in either reading"}
"""what the flat readers of :mod:`isosim.predict.stepcurve` read, in the words ``recommend --runs`` prints
beside their name (kept here: stepcurve's file is the plane's frozen code)"""
MIN_CHEAP_SHARE = 0.01
"""the least share of C the cheap runs must reach for a pick. The readers were scored on the plane
with cheap parts of 2.5 % to 20 % of C (``isosim.validation.plane.SHARES``); below 1 %, a cheap part
2.5 times smaller than the least scored one, a pick would carry the curves further than anything
measured, and is refused"""
SCORED_SHARE = 0.025
"""the least share of C the readers were scored at on the plane: between :data:`MIN_CHEAP_SHARE` and
this, a pick is given and said to rest on a cheaper part than any scored"""


def recommend_runs(path, budget: float, method: str | None = None, reading: str = "best",
                   maps: tuple[str, ...] | list[str] = (), sets: tuple[str, ...] | list[str] = (),
                   metric: str | None = None, loaded: tuple | None = None) -> dict[str, Any]:
    """``recommend --runs``: the cheap runs' reader (:func:`isosim.predict.from_runs.recommend_from_runs`,
    frozen as the plane's method and left untouched) on the runs as every reader reads them
    (:func:`isosim.integrations.load_inspected`: damage named or refused, short runs named and every
    run cut at the budget every run reached) and what is said around its pick: an expected
    regret below 0 (an n outside the cheap leader's band valued above the pick) clipped at 0 with its raw
    value kept, the regime the cheap runs show and whether n matters. The pick and the band are the
    reader's own. ``maps``, ``sets``: ``--map`` and ``--set`` for TensorBoard and W&B logs (as analyze's);
    ``metric``: the records column read (default ``val_avg``; never a silent switch to another);
    ``loaded``: what :func:`isosim.integrations.load_inspected` already returned for ``path``. Refused where the cheap part reaches less than ``MIN_CHEAP_SHARE`` of the budget."""
    import pandas as pd

    from isosim.integrations import load_inspected
    from isosim.predict import from_runs
    from isosim.predict.partial import measured_n
    from isosim.records import blamed_on_short_runs

    df, what, insp = loaded if loaded is not None else load_inspected(path, metric, maps=maps, sets=sets)
    metric = insp.metric
    ns = measured_n(df, metric)
    if len(ns) == 1:
        raise IsosimError(f"the runs hold one n (n = {ns[0]}) with {metric}: nothing to compare it with; give --profile "
                          "FILE (the base model's pass-rate profile from isosim calibrate) so that the other n are simulated"
                          + (f" ({insp.note()})" if insp.note() else ""))
    check_past_step_0(df, metric)
    cheap = float(pd.to_numeric(df["rollouts"]).max())
    if cheap >= budget:
        from isosim.predict.partial import finished_runs

        raise IsosimError(finished_runs(path, cheap, budget))
    if cheap < MIN_CHEAP_SHARE * budget:
        raise IsosimError(f"the cheap runs reach {cheap:,.0f} rollouts, {cheap / budget:.2g} of C = {budget:.3g}: a pick "
                          f"needs a cheap part of at least {MIN_CHEAP_SHARE:.0%} of C (the readers were scored at 2.5 % to "
                          f"20 %): run every n to {MIN_CHEAP_SHARE * budget:,.0f} rollouts, or give a budget of at most "
                          f"{cheap / MIN_CHEAP_SHARE:.3g}")
    with blamed_on_short_runs(insp.reach), runs_as_read(path, df, insp.reach,
                                                        as_table=bool(maps or sets) or insp.changed) as readable:
        out = from_runs.recommend_from_runs(readable, budget, method or from_runs.DEFAULT_METHOD, reading, metric=metric)
    out.update(runs=str(path), read=what, unjudged=list(insp.unjudged), eval_samples_from=insp.eval_from,
               seeds_per_n=insp.seeds, damage=list(insp.notes))
    out["cheap_caveat"] = (f"caveat: the cheap part is {cheap / budget:.1%} of C, below the {SCORED_SHARE:.1%} the "
                           f"readers were scored at (2.5 % to 20 %): this pick carries the cheap curves further than "
                           f"any scored one; running every n to {SCORED_SHARE * budget:,.0f} rollouts reads it as scored"
                           if cheap < SCORED_SHARE * budget * (1 - 1e-9) else None)
    out["seed_warning"] = seed_warning(df, [int(x) for x in out["seeds"]])
    for v in out["n"].values():
        if v["expected_regret"] < 0:
            v["expected_regret_raw"], v["expected_regret"], v["clipped"] = v["expected_regret"], 0.0, True
    by_seed, _, _ = from_runs.cheap_curves(df, out["metric"])
    by_seed = {s: runs for s, runs in by_seed.items() if s in {int(x) for x in out["seeds"]}}
    reg = cheap_regime(by_seed, out["cheap_rollouts"], reading)
    out["n_matters"] = {**runs_matters_line(out, reg["text"]), "regime": reg}
    out["note"] += ("; never below 0 (an n outside the cheap leader's band valued above the pick is clipped at 0, "
                    "its raw value in expected_regret_raw); expected_regret_se is "
                    + ("evaluation noise only (one seed per n)" if len(out["seeds"]) == 1 else "seed and evaluation noise only")
                    + ", not the error of carrying the cheap curves to C")
    if metric != "val_avg":
        out["note"] = out["note"].replace("best validated value up to C", f"best {metric} up to C")
    return out
