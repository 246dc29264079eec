"""Unbiased pass@k-style estimators from N samples per problem (numpy only).

For a problem with ``c`` correct samples out of ``N`` and ``k <= N``:

* avg@k   = c / N                          (mean pass@1; unbiased for any k)
* best@k  = 1 - C(N - c, k) / C(N, k)      (P(at least one of k drawn without replacement is correct))
* worst@k = C(c, k) / C(N, k)              (P(all k drawn are correct))

The binomial ratios are computed as products, ``prod_{i<k} (N - c - i) / (N - i)``, which neither
overflows nor loses precision for the N (up to a few thousand) used here.
"""

from __future__ import annotations

import numpy as np

from isosim.records import ZERO_THRESHOLD, pass_histogram


def _ratio(top: np.ndarray, n: int, k: int) -> np.ndarray:
    """C(top, k) / C(n, k) for an array of ``top`` values (0 where top < k)."""
    top = np.asarray(top, dtype=float)
    out = np.ones_like(top)
    for i in range(k):
        out *= np.clip(top - i, 0.0, None) / (n - i)
    return out


def best_at_k(correct: np.ndarray, n: int, k: int) -> np.ndarray:
    """Per-problem unbiased best@k (pass@k): 1 - C(N - c, k) / C(N, k)."""
    _check(correct, n, k)
    return 1.0 - _ratio(n - np.asarray(correct), n, k)


def worst_at_k(correct: np.ndarray, n: int, k: int) -> np.ndarray:
    """Per-problem unbiased worst@k: C(c, k) / C(N, k)."""
    _check(correct, n, k)
    return _ratio(np.asarray(correct), n, k)


def avg_at_k(correct: np.ndarray, n: int) -> np.ndarray:
    """Per-problem mean pass@1, c / N."""
    return np.asarray(correct, dtype=float) / n


def _check(correct: np.ndarray, n: int, k: int) -> None:
    c = np.asarray(correct)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= N, got k={k}, N={n}")
    if c.size and (c.min() < 0 or c.max() > n):
        raise ValueError("correct counts must lie in [0, N]")


def summarize_eval(correct: np.ndarray, n: int, k: int) -> dict[str, float]:
    """Validation metrics over problems: mean avg@k, best@k, worst@k."""
    correct = np.asarray(correct)
    return {
        "val_avg": float(avg_at_k(correct, n).mean()),
        "val_best": float(best_at_k(correct, n, k).mean()),
        "val_worst": float(worst_at_k(correct, n, k).mean()),
    }


def histogram_columns(pass_rates: np.ndarray) -> dict[str, float]:
    """train_hist_0..9, train_frac_zero and train_frac_solved from per-problem pass rates."""
    p = np.asarray(pass_rates, dtype=float)
    if p.size == 0:
        return {}
    out = {f"train_hist_{i}": float(v) for i, v in enumerate(pass_histogram(p))}
    out["train_frac_zero"] = float(np.mean(p < ZERO_THRESHOLD))
    out["train_frac_solved"] = float(np.mean(p > 1 - ZERO_THRESHOLD))
    return out
