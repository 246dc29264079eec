"""Figures of the frontier analysis, written as PNG and SVG, never displayed.

Each function takes what ``isosim.frontier.analysis`` returns (or a records table) and a path without
suffix, and writes ``path.png`` and ``path.svg`` through ``save``. Figures are built on
``matplotlib.figure.Figure`` with an Agg canvas, so no GUI backend or global pyplot state is
touched. matplotlib is imported inside the functions; the look is seaborn's whitegrid style
(the sheet matplotlib ships), which spares the seconds that importing seaborn itself costs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.files import atomic_write
from isosim.frontier import analysis
from isosim.frontier.wording import short_budget, spans_grid
from isosim.records import HIST_BINS, HIST_COLUMNS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap, Normalize
    from matplotlib.figure import Figure

STYLE = "seaborn-v0_8-whitegrid"
CMAP = "viridis"


def figure(ncols: int = 1, size: tuple[float, float] = (6.4, 4.4)) -> tuple[Figure, list[Axes]]:
    """A Figure on an Agg canvas with ``ncols`` axes in the seaborn whitegrid style."""
    from matplotlib import style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * ncols, size[1]))
    FigureCanvasAgg(fig)
    with style.context(STYLE):
        axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def n_colors(n_values: Sequence[int]) -> tuple[Colormap, Normalize]:
    """Colour map and norm over log2 n."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    lo, hi = np.log2(min(n_values)), np.log2(max(n_values))
    return colormaps[CMAP], Normalize(lo, hi if hi > lo else lo + 1)


def _n_colorbar(fig: Figure, ax: Axes, n_values: Sequence[int], label: str = "n") -> None:
    from matplotlib.cm import ScalarMappable

    cmap, norm = n_colors(n_values)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=label)
    bar.set_ticks(np.log2(n_values), labels=[str(n) for n in n_values])


def _log2_n_axis(ax: Axes, n_values: Sequence[float] | None = None) -> None:
    """Log2 y axis with plain integer n labels (4, 8, 16, ...). With ``n_values`` (the grid of n
    tried), the axis spans the whole grid plus half an octave either side, so a line at the
    smallest or largest n sits inside the axes, never on their edge."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_yscale("log", base=2)
    lo, hi = ax.get_ylim()
    if n_values:
        lo, hi = float(min(n_values)) / 2**0.5, float(max(n_values)) * 2**0.5
        d_lo, d_hi = ax.dataLim.intervaly
        if np.isfinite(d_lo) and d_lo > 0:
            lo = min(lo, d_lo / 2**0.5)
        if np.isfinite(d_hi) and d_hi > 0:
            hi = max(hi, d_hi * 2**0.5)
    ticks = [2.0**k for k in range(int(np.ceil(np.log2(lo))), int(np.floor(np.log2(hi))) + 1)] or [
        2.0 ** round(np.log2(np.sqrt(lo * hi)))]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_yticklabels([f"{t:g}" for t in ticks])
    ax.set_ylim(lo, hi)


LOG_SUBS = ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0), tuple(float(k) for k in range(1, 10)))
"""mantissas of the labelled ticks of a log compute axis, from widest span to narrowest"""


def log_compute_axis(ax: Axes, axis: str = "x") -> None:
    """A log10 compute axis whose labels never run together: call it once the data are drawn.

    Over 3 decades or more only the decades are labelled; over fewer, ticks at mantissas 1-2-5
    (or finer below one decade, :data:`LOG_SUBS`), so that 3 to 9 labels show whatever the span,
    each written short (2e4, 5e5: :func:`short_budget`); unlabelled minor ticks at every mantissa.
    matplotlib's default labels minor ticks below about 1.5 decades, and there they overlap."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    decades = np.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    subs, shown = LOG_SUBS[0], 3
    if decades < 3 and lo > 0:
        for subs in LOG_SUBS[1:]:
            ticks = [m * 10.0**e for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
                     for m in subs]
            shown = sum(lo <= t <= hi for t in ticks)
            if shown >= 3:
                break
    # under a quarter of a decade even every mantissa gives one or two ticks: evenly spaced ones
    target.set_major_locator(LogLocator(base=10.0, subs=subs, numticks=30) if shown >= 2
                             else MaxNLocator(nbins=4, steps=[1, 2, 5, 10]))
    target.set_major_formatter(FuncFormatter(lambda v, _: short_budget(v)))
    target.set_minor_locator(LogLocator(base=10.0, subs=tuple(float(k) for k in range(2, 10)), numticks=30))
    target.set_minor_formatter(NullFormatter())


def save(fig: Figure, path: str | Path) -> list[Path]:
    """Write ``fig`` to ``path.png`` and ``path.svg`` (a suffix on ``path`` is dropped), each through
    the atomic writer: a reader finds the old figure or the new one, whole."""
    path = Path(path)
    if path.suffix.lower() in (".png", ".svg", ".pdf"):
        path = path.with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    out = [path.with_name(path.name + ext) for ext in (".png", ".svg")]
    fig.tight_layout()  # once, not per file as a layout engine would
    for p in out:
        atomic_write(p, lambda fh, fmt=p.suffix[1:]: fig.savefig(fh, format=fmt, dpi=120))
    return out


def plot_frontier(df: pd.DataFrame, result: dict[str, Any], path: str | Path) -> list[Path]:
    """Write :func:`frontier_figure` to ``path``."""
    return save(frontier_figure(df, result), path)


def frontier_figure(df: pd.DataFrame, result: dict[str, Any]) -> Figure:
    """Reward vs compute per n: every evaluation (record-breaking points solid, the others, such as a
    run's points after its peak, faded), the sigmoids on record-breaking points (thin, dashed where they
    read above what was measured), each n's capped curve min(sigmoid, measured), and the frontier.

    ``result`` is an ``analysis.analyze`` result for ``df``. Points and curves are coloured by
    log2 n; the envelope is drawn in black with markers coloured by n*.
    """
    metric, x = result["metric"], result.get("x", "rollouts")
    every = analysis.prepare(df, metric, x)
    pts = (analysis.record_breaking(df, metric, result.get("bin_width", 0.01), x)
           if result.get("use_record_breaking", True) else every)
    n_values = [int(n) for n in result["n_values"]]
    cmap, norm = n_colors(n_values)
    fig, (ax,) = figure()
    b_grid = np.asarray(result["budgets"], dtype=float)
    capped = result.get("per_n_reward") or {}
    for n in n_values:
        color = cmap(norm(np.log2(n)))
        e = every[(every["n"] == n) & (every[x] > 0)]
        ax.scatter(e[x], e[metric], s=8, color=color, alpha=0.18, linewidths=0)  # every evaluation, faded
        p = pts[(pts["n"] == n) & (pts[x] > 0)]
        ax.scatter(p[x], p[metric], s=10, color=color, alpha=0.6, linewidths=0)
        info = result["per_n"][str(n)]
        lo = max(info.get("min_rollouts") or 0.0, float(result["budgets"][0]))
        c = np.geomspace(lo, max(info["max_rollouts"], lo * 1.0001), 200)
        ax.plot(c, analysis.FitResult.from_dict(info).predict(c), color=color, lw=0.8,
                ls="--" if str(n) in capped else "-")
        if str(n) in capped:
            v = np.array([np.nan if w is None else w for w in capped[str(n)]], dtype=float)
            ax.plot(b_grid, v, color=color, lw=1.6)
    b, r = np.asarray(result["budgets"]), np.asarray(result["reward"], dtype=float)
    if result.get("tol"):
        ax.fill_between(b, r - result["tol"], r, color="tab:orange", alpha=0.45, lw=0, zorder=2,
                        label=f"tie band (within {result['tol']:g})")
    _shade_not_learning(ax, result)
    ax.plot(b, r, color="black", lw=2.2, zorder=3, label="frontier")
    ax.scatter(b, r, c=np.log2(result["n_star"]), cmap=cmap, norm=norm, s=36,
               edgecolors="black", zorder=4)
    log_compute_axis(ax)
    ax.set_xlabel(f"compute C ({x})")
    ax.set_ylabel(metric)
    ax.set_title("Compute-optimal frontier (markers coloured by n*)")
    if capped:
        ax.plot([], [], color="grey", lw=1.6, label="each n: min(sigmoid, measured)")
        ax.plot([], [], color="grey", lw=0.8, ls="--", label="sigmoid on record-breaking points")
    ax.legend(loc="upper left")
    _n_colorbar(fig, ax, n_values)
    return fig


def plot_n_star(result: dict[str, Any], path: str | Path) -> list[Path]:
    """Write :func:`n_star_figure` to ``path``."""
    return save(n_star_figure(result), path)


def n_star_figure(result: dict[str, Any]) -> Figure:
    """n*(C) as steps, the tie band (n_tol to n_tie_hi), the fitted sigmoid, the bootstrap band and
    n_sat, on log-log axes spanning the grid of n; budgets without learning are greyed. An n_sat
    interval that spans the whole grid carries no information: it is named in the legend, not drawn."""
    b, n_star = np.asarray(result["budgets"]), np.asarray(result["n_star"], dtype=float)
    grid = [int(n) for n in result.get("n_values") or []]
    fit = result["fit"]
    fig, (ax,) = figure(size=(8.6, 4.4))  # room for the legend beside the axes
    band = result.get("n_star_band")
    if band:
        ax.fill_between(b, band["lo"], band["hi"], step="mid", alpha=0.25, color="C0",
                        label=f"bootstrap {result['ci'][0]:g}-{result['ci'][1]:g}%")
    if result.get("n_tol") is not None:
        ax.fill_between(b, result["n_tol"], result["n_tie_hi"], step="mid", alpha=0.25, color="C2",
                        hatch="//", label=f"tied n (within {result.get('tol', 0):g})")
        ax.step(b, result["n_tol"], where="mid", color="C2", lw=1.5, label="n_tol(C): smallest tied n")
    ax.step(b, n_star, where="mid", color="C0", lw=2, label="n*(C)")
    _shade_not_learning(ax, result)
    if fit.get("n_sat") is not None:
        _draw_n_star_fit(ax, b, fit, color="C3")
        if fit.get("n_sat_ci"):
            lo, hi = fit["n_sat_ci"]
            width = f"{result.get('ci', [5, 95])[1] - result.get('ci', [5, 95])[0]:g}%"
            if spans_grid((lo, hi), grid):
                ax.plot([], [], ls="none", label=f"n_sat {width} interval ({lo:.0f}-{hi:.0f}) spans the\n"
                                                 "whole grid: no information, not drawn")
            else:
                ax.axhspan(lo, hi, color="C3", alpha=0.1, label=f"n_sat {width} interval ({lo:.0f}-{hi:.0f})")
    log_compute_axis(ax)
    _log2_n_axis(ax, grid)
    ax.set_xlabel(f"compute C ({result.get('x', 'rollouts')})")
    ax.set_ylabel("compute-optimal n*")
    ax.set_title(f"n*(C), {result['metric']}")
    # the legend beside the axes, never over the curves
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")
    return fig


def _shade_not_learning(ax: Axes, result: dict[str, Any]) -> None:
    """Grey spans over the budgets where the frontier is within the seed noise of the base reward."""
    learning = result.get("learning")
    if not learning or all(learning):
        return
    b = np.asarray(result["budgets"], dtype=float)
    edges = np.sqrt(b[1:] * b[:-1]) if len(b) > 1 else np.array([])
    lo_e = np.concatenate([[b[0]], edges])
    hi_e = np.concatenate([edges, [b[-1]]])
    first = True
    for i, ok in enumerate(learning):
        if not ok:
            ax.axvspan(lo_e[i], hi_e[i], color="0.6", alpha=0.2, lw=0,
                       label="no learning beyond noise" if first else None)
            first = False


def _draw_n_star_fit(
    ax: Axes, budgets: np.ndarray, fit: dict[str, Any], color: str, label: str = ""
) -> None:
    """Fitted sigmoid of log2 n* and a dashed n_sat line."""
    nfit = analysis.NStarFit(lo=float(np.log2(fit["n_low"])), hi=float(np.log2(fit["n_sat"])),
                             log_c_mid=fit["log_c_mid"], slope=fit["slope"], loss=fit.get("loss", 0.0))
    c = np.geomspace(budgets[0], budgets[-1], 300)
    ax.plot(c, nfit.predict(c), color=color, lw=1.2, ls="--", label=f"{label}sigmoid fit")
    ax.axhline(fit["n_sat"], color=color, ls=":", lw=1.2, label=f"{label}n_sat = {fit['n_sat']:.0f}")


SPLIT_STYLES = ((5.0, "-", 0.45), (3.0, "-", 0.9), (1.5, (0, (4, 2)), 1.0), (1.0, ":", 1.0))
"""(width, dash, alpha) of the n*(C) lines of the 1st, 2nd, ... metric: each later line is narrower
and drawn on top, so where two metrics share n* both stay visible"""


def plot_metric_split(split: dict[str, dict[str, Any]], path: str | Path) -> list[Path]:
    """Write :func:`metric_split_figure` to ``path``."""
    return save(metric_split_figure(split), path)


def metric_split_figure(split: dict[str, dict[str, Any]]) -> Figure:
    """n*(C) of each metric (e.g. avg@k, best@k: coverage, worst@k: sharpening) on shared axes.

    Lines are drawn in the order given, each narrower than the one before and above it
    (``SPLIT_STYLES``), so equal n* of two metrics show as a line inside a line."""
    if not split:
        raise IsosimError("plot_metric_split needs at least one metric")
    fig, (ax,) = figure()
    grid: set[int] = set()
    for i, (metric, res) in enumerate(split.items()):
        b = np.asarray(res["budgets"])
        lw, dash, alpha = SPLIT_STYLES[min(i, len(SPLIT_STYLES) - 1)]
        ax.step(b, res["n_star"], where="mid", color=f"C{i}", lw=lw, ls=dash, alpha=alpha, zorder=3 + i,
                label=f"{metric}: n*")
        if res["fit"].get("n_sat") is not None:
            _draw_n_star_fit(ax, b, res["fit"], color=f"C{i}", label=f"{metric}: ")
        grid.update(int(n) for n in res.get("n_values") or [])
    log_compute_axis(ax)
    _log2_n_axis(ax, sorted(grid))
    ax.set_xlabel("compute C (rollouts)")
    ax.set_ylabel("compute-optimal n*")
    ax.set_title("n*(C) per metric")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def plot_hist_evolution(
    df: pd.DataFrame, n_values: Sequence[int], budgets: Sequence[float], path: str | Path
) -> list[Path]:
    """Write :func:`hist_figure` to ``path``."""
    return save(hist_figure(df, n_values, budgets), path)


def hist_figure(df: pd.DataFrame, n_values: Sequence[int], budgets: Sequence[float]) -> Figure:
    """Training pass@1 histograms of each n at matched compute, one panel per budget.

    Bars are the seed-mean share of training problems per pass@1 bin (from ``train_hist_*``),
    side by side for each n: the interference diagnostic of PAPER finding 6. One title: a single
    panel carries it; several panels share a figure title and name their budget each.
    """
    if not budgets:
        raise IsosimError("plot_hist_evolution needs at least one budget")
    n_values = [int(n) for n in n_values]
    cmap, norm = n_colors(n_values)
    fig, axes = figure(len(budgets), size=(4.8, 3.8))
    edges = np.arange(HIST_BINS) / HIST_BINS
    width = 1.0 / HIST_BINS / (len(n_values) + 0.5)
    for ax, budget in zip(axes, budgets):
        rows = analysis.hist_at_matched_compute(df, n_values, float(budget))
        for j, n in enumerate(n_values):
            share = rows.loc[rows["n"] == n, list(HIST_COLUMNS)].mean().to_numpy()
            ax.bar(edges + (j + 0.25) * width, share, width=width, align="edge",
                   color=cmap(norm(np.log2(n))), label=f"n = {n}")
        ax.set_xlim(0, 1)
        ax.set_xlabel("training pass@1")
        if len(budgets) > 1:
            ax.set_title(f"after C = {short_budget(budget)} rollouts per run", fontsize="medium")
    axes[0].set_ylabel("share of training problems")
    axes[0].legend(ncols=2 if len(n_values) > 4 else 1, fontsize="small")
    if len(budgets) > 1:
        fig.suptitle("training pass@1 of each n at equal compute", fontsize="medium")
    else:
        axes[0].set_title(f"training pass@1 of each n after C = {short_budget(budgets[0])} rollouts per run",
                          fontsize="medium")
    return fig
