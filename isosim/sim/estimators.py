"""Unbiased avg@k / best@k / worst@k from N samples per problem (numpy only).

For a problem with ``c`` correct samples out of ``N`` and ``1 <= k <= N``:

* avg@k   = c / N                          (mean pass@1; unbiased for any k)
* best@k  = 1 - C(N - c, k) / C(N, k)      (P(at least one of k drawn without replacement is correct))
* worst@k = C(c, k) / C(N, k)              (P(all k drawn are correct))

The binomial ratios are products, ``prod_{i<k} (top - i) / (N - i)``, which neither overflow nor
lose precision for N up to a few thousand. :func:`exact_best_worst` computes best@k and worst@k
from exact integer binomials instead (the simulator's sampled evaluation, whose stored records were
made with it); the two agree to rounding (~1e-16). The one definition used by the GRPO runner
(``llm_runs.training.metrics``) and the TRL callback (``isosim.integrations.trl``); importable anywhere
without torch or transformers.
"""

from __future__ import annotations

import math

import numpy as np


def _check(correct: np.ndarray, n: int, k: int) -> np.ndarray:
    c = np.asarray(correct, dtype=float)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= N, got k={k}, N={n}")
    if c.size and (np.nanmin(c) < 0 or np.nanmax(c) > n):
        raise ValueError("correct counts must lie in [0, N]")
    return c


def _ratio(top: np.ndarray, n: int, k: int) -> np.ndarray:
    """C(top, k) / C(n, k) for an array of ``top`` values (0 where top < k)."""
    out = np.ones_like(top, dtype=float)
    for i in range(k):
        out *= np.clip(top - i, 0.0, None) / (n - i)
    return out


def avg_at_k(correct: np.ndarray, n: int) -> np.ndarray:
    """Per-problem mean pass@1, c / N."""
    return _check(correct, n, 1) / n


def best_at_k(correct: np.ndarray, n: int, k: int) -> np.ndarray:
    """Per-problem unbiased best@k (pass@k): 1 - C(N - c, k) / C(N, k)."""
    c = _check(correct, n, k)
    return 1.0 - _ratio(n - c, n, k)


def worst_at_k(correct: np.ndarray, n: int, k: int) -> np.ndarray:
    """Per-problem unbiased worst@k: C(c, k) / C(N, k)."""
    return _ratio(_check(correct, n, k), n, k)


def summarize(correct: np.ndarray, n: int, k: int) -> dict[str, float]:
    """``val_avg``, ``val_best``, ``val_worst`` (means over problems) and ``k``."""
    correct = np.asarray(correct)
    if correct.size == 0:
        raise ValueError("no problems to summarise")
    return {
        "val_avg": float(avg_at_k(correct, n).mean()),
        "val_best": float(best_at_k(correct, n, k).mean()),
        "val_worst": float(worst_at_k(correct, n, k).mean()),
        "k": int(k),
    }


def exact_best_worst(correct: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem best@k and worst@k from exact integer binomials, ``1 - C(N - c, k) / C(N, k)``
    and ``C(c, k) / C(N, k)``: :func:`best_at_k` and :func:`worst_at_k` to rounding, in the form
    the simulator's sampled evaluation uses (``isosim.sim.engine``)."""
    c = _check(correct, n, k)
    total = math.comb(n, k)
    best = 1.0 - np.array([math.comb(n - int(x), k) for x in c]) / total
    worst = np.array([math.comb(int(x), k) for x in c]) / total
    return best, worst
