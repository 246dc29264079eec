"""Evaluation metrics of the runner: the unbiased avg@k / best@k / worst@k estimators (one definition,
in ``isosim.sim.estimators``) and the training pass@1 histogram columns of the records table."""

from __future__ import annotations

import numpy as np

from isosim.records import ZERO_THRESHOLD, pass_histogram
from isosim.sim.estimators import avg_at_k, best_at_k, summarize, worst_at_k

__all__ = ["avg_at_k", "best_at_k", "worst_at_k", "summarize_eval", "histogram_columns"]


def summarize_eval(correct: np.ndarray, n: int, k: int) -> dict[str, float]:
    """Validation metrics over problems: mean avg@k, best@k, worst@k."""
    out = summarize(correct, n, k)
    out.pop("k")
    return out


def histogram_columns(pass_rates: np.ndarray) -> dict[str, float]:
    """train_hist_0..9, train_frac_zero and train_frac_solved from per-problem pass rates."""
    p = np.asarray(pass_rates, dtype=float)
    if p.size == 0:
        return {}
    out = {f"train_hist_{i}": float(v) for i, v in enumerate(pass_histogram(p))}
    out["train_frac_zero"] = float(np.mean(p < ZERO_THRESHOLD))
    out["train_frac_solved"] = float(np.mean(p > 1 - ZERO_THRESHOLD))
    return out
