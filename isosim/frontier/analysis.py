"""Frontier analysis: from a records table to the compute-optimal n*(C), the paper's way.

The workflow (PAPER.md, "How they read a sweep"), one function per move:

1. ``record_breaking``  keep the points where a run's bucketed metric sets a new record.
2. ``fit_saturating``   monotone sigmoid in log compute, R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B),
                        fitted per ``n`` on the record-breaking points of all its seeds (``fit_per_n``).
3. ``frontier``         upper envelope over ``n`` of the fitted curves on a budget grid; ``n*(C)``
                        is the ``n`` that attains it. A curve is only read where its runs reached.
4. ``fit_n_star``       log2 n*(C) as a sigmoid of log10 C; its upper level gives ``n_sat``.
5. ``analyze``          all of the above plus a bootstrap over runs (seeds) within each ``n``;
                        returns the JSON-ready result that ``write_frontier_json`` stores.

Where they live: input checks and record-breaking points in :mod:`isosim.frontier.points`, the sigmoid
fits in :mod:`isosim.frontier.fits`, the envelope in :mod:`isosim.frontier.envelope`, ties and noise in
:mod:`isosim.frontier.ties`, ``analyze`` here, the side analyses in :mod:`isosim.frontier.side_analyses`; every
name is importable from this module.

Side analyses: ``metric_split`` (coverage vs sharpening), ``bp_sensitivity`` (B_p vs n spread),
``q2_split`` (n*(M) at a fixed total batch), ``hist_at_matched_compute`` (interference).

Every function reads a records table (``isosim.records``) and raises ``IsosimError`` with one
sentence on bad input. Only numpy, scipy and pandas are imported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.files import jsonable, write_json
from isosim.frontier.envelope import READINGS, Frontier, frontier, measured_caps, point_frontier, upper_envelope
from isosim.frontier.fits import (
    LN10,
    FitResult,
    NStarFit,
    RunPoints,
    collect_runs,
    fit_n_star,
    fit_per_n,
    fit_saturating,
)
from isosim.frontier.points import (
    REACH_RTOL,
    check_budgets,
    default_budgets,
    metric_scale,
    prepare,
    record_breaking,
    step_slack,
)
MIN_N_FOR_SAT = 3
"""n_sat is fitted only on at least this many distinct n: with one or two, the upper level of the n*
sigmoid is whichever n was tried last, not a saturation."""
from isosim.frontier.ties import (
    DEFAULT_TOL,
    LEARN_Z,
    SAT_MARGIN_OCTAVES,
    learning_budgets,
    seed_noise,
    tie_band,
)


def _nstar_summary(nfit: NStarFit | None, boot: list[NStarFit], n_max: float, ci: tuple[float, float],
                   used: int, n_min: float | None = None) -> dict[str, Any]:
    """The JSON block of one n*(C) fit (``fit`` or ``fit_tol``) with its bootstrap intervals."""

    def interval(vals: list[float]) -> list[float] | None:
        return [float(v) for v in np.percentile(vals, ci)] if vals else None

    if nfit is None:
        return {"n_sat": None, "n_sat_ci": None, "n_low": None, "log_c_mid": None, "log_c_mid_ci": None,
                "slope": None, "slope_ci": None, "loss": None, "flat": None, "saturated": None,
                "at_floor": None, "at_bound": [], "budgets_used": used}
    hi_ci = interval([f.hi for f in boot])
    # the upper level on the smallest n tried: n* never left the grid's floor, so no saturation is
    # seen either (it may lie lower); flagged like a top hit
    at_floor = bool(n_min is not None and n_min < n_max and nfit.hi < math.log2(n_min) + SAT_MARGIN_OCTAVES)
    return {
        "n_sat": nfit.n_sat,
        "n_sat_ci": None if hi_ci is None else [2.0**v for v in hi_ci],
        "n_low": 2.0**nfit.lo,
        "log_c_mid": nfit.log_c_mid,
        "log_c_mid_ci": interval([f.log_c_mid for f in boot]),
        "slope": nfit.slope,
        "slope_ci": interval([f.slope for f in boot]),
        "loss": nfit.loss,
        "flat": nfit.flat,
        "saturated": bool(nfit.hi < math.log2(n_max) - SAT_MARGIN_OCTAVES) and not at_floor,
        "at_floor": at_floor,
        "at_bound": list(nfit.at_bound),
        "budgets_used": used,
    }


def _fit_learning(grid: np.ndarray, n_curve: np.ndarray, learning: np.ndarray,
                  n_bounds: tuple[float, float] | None, **kw: Any) -> NStarFit | None:
    """``fit_n_star`` on the learning budgets only; None when none is left."""
    keep = learning & np.isfinite(n_curve)
    if not keep.any():
        return None
    return fit_n_star(grid[keep], n_curve[keep], n_bounds=n_bounds, **kw)


FIT_NAMES = {"fit": "argmax n*(C) fit", "fit_tol": "n_tol(C) fit"}
"""the names the warnings give the two n*(C) fits (the result's ``fit`` and ``fit_tol`` blocks)"""


def level_warning(name: str, block: dict[str, Any], n_max: float) -> str | None:
    """The warning (kept in frontier.json) that a fit's upper level lies at the edge of the n tried,
    or None; ``isosim.frontier.report`` prints the fit's level in its own words instead."""
    if block["n_sat"] is None:
        return None
    if block.get("at_floor"):
        return (f"{name}: the fitted upper level ({block['n_sat']:.0f}) sits at the smallest n tried: n* never "
                "leaves the grid's floor, saturation is not seen, n_sat may lie lower")
    if not block["saturated"]:
        return (f"{name}: the fitted upper level ({block['n_sat']:.0f}) reaches the largest n tried "
                f"({n_max:.0f}): saturation is not seen, n_sat may lie higher")
    return None


NOISE_WORDS = {"seeds": "the seed noise",
               "residuals": "the run-to-run noise (read from each run's scatter around its fitted curve: one seed per n)",
               "none": "the noise (none could be read: one run per n and no fitted curve)"}
"""how :func:`isosim.frontier.ties.seed_noise` measured the noise, in the words a reason uses"""


def _fit_warnings(name: str, block: dict[str, Any], n_max: float, noise_from: str = "seeds") -> list[str]:
    if block["n_sat"] is None:
        return [f"{name}: no budget shows learning beyond {NOISE_WORDS.get(noise_from, 'the noise')}; no n*(C) fit"]
    out = [w for w in [level_warning(name, block, n_max)] if w]
    values = {"n_low": block["n_low"], "n_sat": block["n_sat"], "log_c_mid": block["log_c_mid"],
              "slope": block["slope"]}
    # n_sat / n_low on a bound = the largest / smallest n tried: said by `saturated` and the band
    bound = [f"{k} = {values[k]:.2f}" for k in block["at_bound"] if k in ("log_c_mid", "slope")]
    if bound:
        out.append(f"{name}: parameter(s) on a bound of the fit ({', '.join(bound)}): not determined by the data")
    return out


def analyze(
    df: pd.DataFrame,
    metric: str = "val_avg",
    budgets: Sequence[float] | np.ndarray | None = None,
    n_boot: int = 200,
    seed: int = 0,
    *,
    x: str = "rollouts",
    use_record_breaking: bool = True,
    bin_width: float = 0.01,
    n_budgets: int = 25,
    f_scale: float | None = None,
    ci: tuple[float, float] = (5.0, 95.0),
    tol: float | None = None,
    reading: str = "best",
) -> dict[str, Any]:
    """Frontier, n*(C) and its sigmoid fits, with bootstrap intervals; a JSON-ready dict.

    The frontier never reads above what was measured: each n's sigmoid (the paper's monotone fit
    on record-breaking points, ``fit_saturating``) is read at each budget as min(sigmoid, measured),
    the measured value being the seed mean of its runs' best evaluation up to the budget
    (``reading`` "best") or their last evaluation up to it ("final"); n* and every tie below come
    from these capped values (``per_n_reward``). Runs that stop at most one update step short of a
    budget compete at it.

    Ties and noise: per budget, ``n_tol`` is the smallest n whose fitted curve is within ``tol``
    of the frontier (``n_tie_hi`` the largest); ``fit_tol`` fits n_tol(C) the way ``fit`` fits
    the argmax n*(C). A budget is *learning* when some n has gained over its own step-0 rows by
    more than the run-to-run noise allows (``learning_budgets``, ``seed_noise``); other budgets
    are kept in the lists but left out of both fits. A fit whose upper level reaches the largest n
    tried (within ``SAT_MARGIN_OCTAVES``) is marked ``saturated: false``.

    The bootstrap resamples runs with replacement within each n (an n with a single run
    resamples that run's fit points instead), with ``numpy.random.default_rng(seed)``, refits
    every curve and both n* sigmoids (warm-started from the point estimate), and reports the
    ``ci`` percentiles. ``fit.n_sat_ci`` spans both fits' intervals (every n in it ties with the
    frontier in some resample), ``fit.n_sat_ci_argmax`` is the argmax fit's alone; the per-budget
    band ``n_star_band`` runs from the resampled ``n_tol`` to the resampled ``n_tie_hi``.
    ``n_boot = 0`` skips it (intervals None). The keys are documented in ``write_frontier_json``.
    """
    if n_boot < 0:
        raise IsosimError(f"n_boot must be >= 0, got {n_boot}")
    if tol is not None and not (math.isfinite(tol) and tol >= 0):
        raise IsosimError(f"tol must be a non-negative number, got {tol}")
    if reading not in READINGS:
        raise IsosimError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
    data = prepare(df, metric, x)
    xs = data[x].to_numpy(float)
    grid = default_budgets(xs, n_budgets) if budgets is None else check_budgets(budgets, xs, step_slack(data, x))
    runs = collect_runs(data, metric, x, ("n",), use_record_breaking, bin_width)
    n_values = sorted(runs.groups)
    scale = metric_scale(data[metric].to_numpy(float))
    tol_note = None
    if tol is None:  # half a point of the metric's own range: .005 of a share, .5 of a percentage
        tol = DEFAULT_TOL * scale
        if scale != 1.0:
            tol_note = (f"{metric} is not a share in [0, 1] (values {data[metric].min():.4g} to "
                        f"{data[metric].max():.4g}): the tie tolerance is {DEFAULT_TOL:g} x {scale:g} = {tol:g}")
    n_max = float(max(n_values))
    n_bounds = (float(min(n_values)), n_max) if len(n_values) > 1 else None

    # ---- point estimate
    fits, span, rewards, n_star, reward = point_frontier(runs, grid, f_scale, reading)
    caps = measured_caps(runs, grid, reading)
    per_run_cap = {r: runs.measured_run(r, grid, reading) for ids in runs.groups.values() for r in ids}
    n_tol, n_tie_hi = tie_band(rewards, n_values, reward, tol)
    noise, noise_from = seed_noise(data, metric, x, fits)
    learning, base = learning_budgets(data, metric, x, grid, noise, runs)
    few_n = len(n_values) < MIN_N_FOR_SAT
    if few_n:  # no n*(C) sigmoid, so no n_sat: its upper level would be the grid's edge
        learning_fit = np.zeros(len(grid), bool)
    else:
        learning_fit = learning
    nfit = _fit_learning(grid, n_star, learning_fit, n_bounds)
    tfit = _fit_learning(grid, n_tol, learning_fit, n_bounds)

    # ---- bootstrap: resample runs within each n, refit curves, envelope and both n* sigmoids
    rng = np.random.default_rng(seed)
    boot_lo = np.full((n_boot, len(grid)), np.nan)
    boot_hi = np.full((n_boot, len(grid)), np.nan)
    boot_fit: list[NStarFit] = []
    boot_tol: list[NStarFit] = []
    nstar_cache: dict[tuple, NStarFit | None] = {}

    def cached_fit(curve: np.ndarray, start_fit: NStarFit | None) -> NStarFit | None:
        key = tuple(np.nan_to_num(curve, nan=-1.0))
        if key not in nstar_cache:
            kw = {"starts": [start_fit.params], "n_polish": 1} if start_fit is not None else {}
            nstar_cache[key] = _fit_learning(grid, curve, learning_fit, n_bounds, **kw)
        return nstar_cache[key]

    for i in range(n_boot):
        b_fits, b_span, b_caps = {}, {}, {}
        for n, ids in runs.groups.items():
            if len(ids) > 1:
                pick = [ids[j] for j in rng.integers(0, len(ids), size=len(ids))]
                b_fits[n] = runs.fit(n, pick, f_scale, starts=[fits[n].params], n_polish=1)
                vals = np.array([per_run_cap[r] for r in pick])
                k = np.isfinite(vals).sum(axis=0)
                b_caps[n] = np.where(k > 0, np.nansum(vals, axis=0) / np.maximum(k, 1), np.nan)
            else:  # one run: resample its fit points (its measured cap is what it is)
                px, py = runs.xy[ids[0]]
                j = rng.integers(0, len(px), size=len(px))
                b_fits[n] = fit_saturating(px[j], py[j], f_scale=f_scale, starts=[fits[n].params], n_polish=1)
                b_caps[n] = caps[n]
            b_span[n] = runs.span(ids)
        b_rewards, b_star, b_reward = upper_envelope(b_fits, b_span, grid, b_caps)
        boot_lo[i], boot_hi[i] = tie_band(b_rewards, n_values, b_reward, tol)
        for curve, start_fit, sink in ((b_star, nfit, boot_fit), (boot_lo[i], tfit, boot_tol)):
            if np.isfinite(curve).any():
                f = cached_fit(curve, start_fit)
                if f is not None:
                    sink.append(f)

    n_min = float(min(n_values))
    fit_block = _nstar_summary(nfit, boot_fit, n_max, ci, int(learning_fit.sum()), n_min)
    tol_block = _nstar_summary(tfit, boot_tol, n_max, ci, int(learning_fit.sum()), n_min)
    fit_block["n_sat_ci_argmax"] = fit_block["n_sat_ci"]
    cis = [c for c in (fit_block["n_sat_ci"], tol_block["n_sat_ci"]) if c]
    if cis:
        fit_block["n_sat_ci"] = [min(c[0] for c in cis), max(c[1] for c in cis)]
    band = None
    if n_boot > 0:
        band = {
            "lo": 2.0 ** np.nanpercentile(np.log2(boot_lo), ci[0], axis=0, method="lower"),
            "hi": 2.0 ** np.nanpercentile(np.log2(boot_hi), ci[1], axis=0, method="higher"),
        }
    for block in (fit_block, tol_block):
        if block["n_sat"] is None:
            block["reason"] = (f"only {len(n_values)} distinct n: saturation needs at least {MIN_N_FOR_SAT}" if few_n
                               else f"no budget shows learning beyond {NOISE_WORDS.get(noise_from, 'the noise')}")
    if few_n:
        warnings = [f"only {len(n_values)} distinct n ({', '.join(map(str, n_values))}): saturation needs at least "
                    f"{MIN_N_FOR_SAT}, so no n*(C) sigmoid and no n_sat are fitted (n* per budget is still read)"]
    else:
        warnings = _fit_warnings(FIT_NAMES["fit"], fit_block, n_max, noise_from)
        warnings += [w for w in _fit_warnings(FIT_NAMES["fit_tol"], tol_block, n_max, noise_from) if "no budget" not in w]
    if tol_note:
        warnings.append(tol_note)
    if base is None:
        warnings.append("no step-0 rows: the base reward is unknown, every budget counted as learning")
    elif not learning.all():
        warnings.append(f"{int((~learning).sum())} of {len(grid)} budget(s) show no gain over the base reward "
                        f"({base:.4f}) beyond the run-to-run noise ({noise:.4f}); left out of the n*(C) fits")
    sig = np.array([fits[n].predict(grid) for n in n_values])
    cap_arr = np.array([caps[n] for n in n_values])
    with np.errstate(invalid="ignore"):
        over = np.isfinite(cap_arr) & (sig > cap_arr + max(noise, 1e-12))
    if over.any():
        i, j = np.unravel_index(np.argmax(np.where(over, sig - cap_arr, -np.inf)), over.shape)
        warnings.append(
            f"the sigmoid on record-breaking points reads above what was measured for n = "
            f"{', '.join(str(n) for n, o in zip(n_values, over.any(axis=1)) if o)} (most: n = {n_values[i]} at "
            f"{grid[j]:.3g}, sigmoid {sig[i, j]:.4f} against a measured {reading} of {cap_arr[i, j]:.4f}); the "
            f"frontier reads min(sigmoid, measured) there")
    n_runs = {n: len(ids) for n, ids in runs.groups.items()}
    result = {
        "metric": metric,
        "x": x,
        "budgets": grid,
        "n_star": n_star.astype(int),
        "reward": reward,
        "n_star_band": band,
        "n_tol": n_tol.astype(int),
        "n_tie_hi": n_tie_hi.astype(int),
        "tol": tol,
        "metric_scale": scale,
        "learning": learning,
        "base_reward": base,
        "noise": noise,
        "noise_from": noise_from,
        "fit": fit_block,
        "fit_tol": tol_block,
        "warnings": warnings,
        "reading": reading,
        "frontier_reading": (f"per n, min(sigmoid on record-breaking points, measured {reading} up to C, "
                             "seed mean): a fit may smooth, never read above the runs"),
        "per_n": {
            str(n): {**fits[n].to_dict(), "min_rollouts": span[n][0], "max_rollouts": span[n][1],
                     "n_runs": n_runs[n], "reach_slack": max(runs.step_cost[r] for r in runs.groups[n])}
            for n in n_values
        },
        "per_n_reward": {str(n): rewards[i] for i, n in enumerate(n_values)},
        "per_n_measured": {str(n): caps[n] for n in n_values},
        "per_n_sigmoid": {str(n): np.where(np.isfinite(rewards[i]), sig[i], np.nan) for i, n in enumerate(n_values)},
        "n_values": n_values,
        "n_runs": int(sum(n_runs.values())),
        "b_p_values": sorted(int(v) for v in data["b_p"].unique()),
        "n_boot": n_boot,
        "seed": seed,
        "ci": list(ci),
        "use_record_breaking": use_record_breaking,
        "bin_width": bin_width,
    }
    return jsonable(result)


def write_frontier_json(result: dict[str, Any], path: str | Path) -> Path:
    """Write an ``analyze`` result as ``frontier.json`` (creating folders); returns the path.

    Schema (units of compute are those of ``x``, rollouts by default):

    ========================  ==================================================================
    ``metric``                str, the metric read (``val_avg``, ``val_best``, ...)
    ``x``                     str, the compute column (``rollouts``)
    ``budgets``               list[float], the budget grid C, ascending
    ``n_star``                list[int], compute-optimal n at each budget
    ``reward``                list[float], frontier reward at each budget
    ``n_star_band``           {``lo``, ``hi``}: lists, bootstrap band per budget from the resampled
                              n_tol (lo) to the resampled n_tie_hi (hi), or null
    ``n_tol``                 list[int], smallest n within ``tol`` of the frontier at each budget
    ``n_tie_hi``              list[int], largest n within ``tol`` of the frontier at each budget
    ``tol``                   float, the tie tolerance (units of the metric; by default 0.005 x
                              ``metric_scale``: half a point of a share, .5 of a percentage)
    ``metric_scale``          float, 1 for a metric in [0, 1], 100 for one in [0, 100], else its spread
    ``reading``               str, ``best`` or ``final``: what caps each n's sigmoid (see ``per_n_reward``)
    ``frontier_reading``      str, the frontier's reading in words
    ``per_n_reward``          {str(n): list}, each n's value on the frontier per budget:
                              min(sigmoid, measured), null where it does not compete; ``n_star``,
                              ``reward`` and the tie band are read from these
    ``per_n_measured``        {str(n): list}, the cap: seed mean of each run's best evaluation up to C
                              (``best``) or its value at C (``final``, interpolated in log x), null
                              where no run of n reached C within one update step
    ``per_n_sigmoid``         {str(n): list}, the uncapped sigmoid on record-breaking points (the
                              paper's reading), null where n does not compete
    ``learning``              list[bool], some n gained over its step-0 rows beyond the noise
                              (``learning_budgets``)
    ``base_reward``           float, mean metric of the step-0 rows, or null (none in the data)
    ``noise``, ``noise_from``  run-to-run standard deviation and how it was measured
                              (``seeds``, ``residuals`` or ``none``; see ``seed_noise``)
    ``fit.n_sat``             float, saturation n* = 2 ** (upper level of the n* sigmoid), fitted on
                              the learning budgets; null when no budget is learning (so are the
                              other numbers of ``fit``)
    ``fit.n_sat_ci``          [lo, hi] bootstrap interval of n_sat widened to ``fit_tol``'s
                              interval (ties), or null; ``fit.n_sat_ci_argmax``: the argmax fit's alone
    ``fit.saturated``         bool, false when the upper level reaches the largest n tried (within
                              half an octave): saturation not seen, n_sat may lie higher; false as
                              well when it sits on the smallest n tried (``at_floor``)
    ``fit.at_floor``          bool, the upper level is within half an octave of the smallest n tried:
                              n* never left the grid's floor, n_sat may lie lower
    ``fit.at_bound``          list[str], parameters (n_low, n_sat, log_c_mid, slope) on a fit bound
    ``fit.budgets_used``      int, learning budgets the fit used
    ``fit_tol``               the same block (without n_sat_ci_argmax) for the fit of n_tol(C)
    ``warnings``              list[str], what a reader must know (not saturated, bounds, no learning)
    ``fit.n_low``             float, n* at small budgets (2 ** lower level)
    ``fit.log_c_mid``         float, log10 of the budget halfway up the n* sigmoid
    ``fit.log_c_mid_ci``      [lo, hi] or null
    ``fit.slope``             float, steepness per decade of compute (0 when n* is constant)
    ``fit.slope_ci``          [lo, hi] or null
    ``fit.loss``, ``fit.flat``  robust loss per point (octaves^2); true when n* is constant
    ``per_n``                 {str(n): {r0, a, c_mid, log_c_mid, b, loss, n_points, flat, at_bound,
                              min_rollouts, max_rollouts, n_runs}}: each n's fitted curve and
                              the budgets it competes on (one step's cost to furthest reach; a run
                              stopped up to ``reach_slack``, one update step, short of C competes at C)
    ``n_values``              list[int], the n in the data
    ``n_runs``                int, runs in all
    ``b_p_values``            list[int], the b_p in the data
    ``n_boot``, ``seed``, ``ci``  bootstrap size, its seed, percentiles of the intervals
    ``use_record_breaking``, ``bin_width``  how the fit points were chosen
    ========================  ==================================================================
    """
    missing = [k for k in ("metric", "budgets", "n_star", "reward", "fit") if k not in result]
    if missing:
        raise IsosimError(f"not an analyze result: missing {', '.join(missing)}")
    return write_json(path, result, indent=2)


def frontier_summary(res: dict[str, Any]) -> dict[str, Any]:
    """The schema shared by predictions and measurements of a frontier (the organism files), from an
    ``analyze`` result: budgets, n_star, n_tol, n_tie_hi, learning, n_sat, n_sat_ci, saturated,
    at_floor, the warnings and, with a bootstrap, ``n_star_band`` (the distribution of n* per budget:
    its 5th and 95th percentiles over resampled seeds, ``lo`` from n_tol and ``hi`` from n_tie_hi)."""
    fit = res.get("fit") or {}
    return {
        "budgets": [float(b) for b in res["budgets"]],
        "n_star": [int(v) for v in res["n_star"]],
        "n_tol": [None if v is None else int(v) for v in res.get("n_tol", [])],
        "n_tie_hi": [None if v is None else int(v) for v in res.get("n_tie_hi", [])],
        "learning": res.get("learning"),
        "n_sat": fit.get("n_sat"), "n_sat_ci": fit.get("n_sat_ci"),
        **({"n_sat_reason": fit["reason"]} if fit.get("n_sat") is None and fit.get("reason") else {}),
        "saturated": fit.get("saturated"), "at_floor": fit.get("at_floor"),
        "warnings": list(res.get("warnings", [])),
        **({"n_star_band": {k: [float(v) for v in res["n_star_band"][k]] for k in ("lo", "hi")}}
           if res.get("n_star_band") else {}),
    }


# ----------------------------------------------------------------------------------------------
# Side analyses (the others are in isosim.frontier.side_analyses)
# ----------------------------------------------------------------------------------------------
def metric_split(
    df: pd.DataFrame,
    metrics: Sequence[str] = ("val_best", "val_worst"),
    budgets: Sequence[float] | np.ndarray | None = None,
    n_boot: int = 0,
    seed: int = 0,
    **kwargs: Any,
) -> dict[str, dict[str, Any]]:
    """n*(C) for each metric on one shared budget grid (coverage best@k vs sharpening worst@k).

    Returns metric -> ``analyze`` result (no bootstrap unless ``n_boot`` > 0); ``kwargs`` go
    to ``analyze``.
    """
    if not metrics:
        raise IsosimError("metric_split needs at least one metric")
    x = kwargs.get("x", "rollouts")
    if budgets is None:
        data = prepare(df, metrics[0], x)
        budgets = default_budgets(data[x].to_numpy(float), kwargs.pop("n_budgets", 25))
    return {m: analyze(df, m, budgets, n_boot=n_boot, seed=seed, **kwargs) for m in metrics}


from isosim.frontier.side_analyses import (
    bp_sensitivity,
    hist_at_matched_compute,
    q2_split,
)

__all__ = [  # (the pieces live in points, fits, envelope, ties and side_analyses; this module names them all)
    "DEFAULT_TOL", "FIT_NAMES", "LEARN_Z", "LN10", "MIN_N_FOR_SAT", "READINGS", "REACH_RTOL", "SAT_MARGIN_OCTAVES", "FitResult", "Frontier", "NStarFit",
    "RunPoints", "analyze", "bp_sensitivity", "level_warning", "check_budgets", "collect_runs", "default_budgets", "fit_n_star",
    "fit_per_n", "fit_saturating", "frontier", "frontier_summary", "hist_at_matched_compute", "jsonable", "learning_budgets",
    "metric_split", "point_frontier", "prepare", "q2_split", "record_breaking", "seed_noise", "tie_band",
    "upper_envelope", "write_frontier_json",
]
