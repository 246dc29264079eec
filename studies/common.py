"""Shared plumbing of the studies: the --quick flag, output paths, JSON of key numbers.

Every study is a jupytext percent-format script (``# %%`` cells) that runs top to bottom as
``python studies/<part>/<study>.py [--quick]``. ``--quick`` runs the CI scale (seconds to a minute) and
writes under ``studies/results/quick/`` and ``studies/figures/quick/`` (committed: the findings
quote some quick-scale numbers); the full scale writes ``studies/results/<study>.json`` and
``studies/figures/<study>_*.png|svg``. The environment variable ``ISOSIM_STUDY_OUT`` moves both
trees (``results/`` and ``figures/``) under another folder (the tests use it to leave the
repository untouched).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from isosim import files
from isosim.predict import fidelity as F
from isosim.sim.presets import get_preset

ROOT = Path(__file__).resolve().parent


def setup(study: str, doc: str = "") -> tuple[bool, F.Scale, Path, Path]:
    """Parse ``--quick`` (ignoring notebook kernels' own argv); return (quick, scale, fig_dir, json_path)."""
    parser = argparse.ArgumentParser(description=doc or study)
    parser.add_argument("--quick", action="store_true", help="CI scale: seconds to about a minute")
    args, _ = parser.parse_known_args(sys.argv[1:])
    quick = bool(args.quick)
    scale = F.QUICK if quick else F.FULL
    sub = "quick" if quick else ""
    out = Path(os.environ.get("ISOSIM_STUDY_OUT") or ROOT)
    fig_dir = out / "figures" / sub
    res_dir = out / "results" / sub
    fig_dir.mkdir(parents=True, exist_ok=True)
    res_dir.mkdir(parents=True, exist_ok=True)
    return quick, scale, fig_dir, res_dir / f"{study}.json"


PRESET = {name: f"{name}-distance" for name in ("easy", "very-easy", "hard", "extreme")}
"""the presets the committed studies were measured with: the previous defaults (Adam, KL 1.0 +
entropy .01 on every set, hard problems far), kept under these names. The current defaults (the
paper's per-set recipes) are scored by ``studies/paper/saturation.py``."""

MIX = {**get_preset(PRESET["easy"]), "profile": "hard:0.5,easy:0.5"}
"""the 50/50 mix under the same recipe (a mix preset now takes the hard recipe)"""

HELD_OUT_SEEDS = (100, 101)
"""seeds never used while tuning the presets"""


def seed_scales(quick: bool, quick_scale: F.Scale, full_scale: F.Scale) -> dict[str, F.Scale]:
    """Scales a study runs: the quick scale alone, or the full scale on the tuning seeds and on the
    held-out seeds."""
    if quick:
        return {"tuning seeds": quick_scale}
    return {"tuning seeds": full_scale, "held-out seeds": F.with_seeds(full_scale, HELD_OUT_SEEDS)}


def write_json(path: Path, payload: dict, started: float) -> None:
    """Write the study's key numbers (with its wall time) and print where."""
    payload = {**payload, "wall_seconds": round(time.time() - started, 1)}
    files.write_json(path, payload, indent=1, mkdir=False)
    print(f"wrote {path} ({payload['wall_seconds']} s)")


def figure(ncols: int = 1, size: tuple[float, float] = (5.0, 3.8)):
    """A matplotlib Figure with an Agg canvas (no pyplot state) and its axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] * ncols, size[1]))
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def plot_vs_n(ax, curves, base: float | None, ylabel: str, title: str = "") -> None:
    """Metric against n (log2 axis): ``curves`` is a list of (label, {n: value}, matplotlib kwargs);
    ``base`` draws the base policy's value as a dotted line."""
    for label, curve, kw in curves:
        ax.plot(list(curve), list(curve.values()), label=label, **{"marker": "o", **kw})
    if base is not None:
        ax.axhline(base, color="k", ls=":", label="base")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
