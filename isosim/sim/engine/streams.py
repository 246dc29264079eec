"""Per-run random streams and the draws the engine makes from them: each run's problem order
(epoch by epoch), its rollout uniforms and the count / correct-draw samplers built on them."""

from __future__ import annotations

import numpy as np
import torch

from isosim.sim.allocation import candidates_per_step
from isosim.sim.config import SimConfig
from isosim.sim.epochs import EpochSampler

DIRECT_MAX = 64  # largest n sampled from uniforms (above it: numpy multinomial per run)
CORRECT_ONLY = True  # runs that need only their correct draws draw only those (False: per-response counts)


class RunStreams:
    """A run's own random streams; draws come in chunks but the sequence does not depend on them."""

    def __init__(self, cfg: SimConfig):
        ss = np.random.SeedSequence([cfg.seed, 0x6_2B0])
        order, draws, extra, big, evals = ss.spawn(5)
        self.order = np.random.default_rng(order)
        self.draws = np.random.default_rng(draws)
        self.extra = np.random.default_rng(extra)
        self.big = np.random.default_rng(big)
        self.evals = np.random.default_rng(evals)
        self.cfg = cfg
        self.epochs = EpochSampler.from_generator(cfg.n_train, self.order)
        # a rule's tie-breaks (a further child: the five above are what they were without it)
        self.alloc = np.random.default_rng(ss.spawn(1)[0]) if cfg.allocation != "uniform" else None

    def problems(self, steps: int) -> np.ndarray:
        """The next ``steps`` batches of problem indices, epoch by epoch, [steps, b_p]."""
        return self.epochs.next(steps * self.cfg.b_p).reshape(steps, self.cfg.b_p)

    def candidates(self, steps: int) -> np.ndarray:
        """The next ``steps`` sets of candidate problems of an allocation rule, epoch by epoch,
        [steps, candidates_per_step] (``b_p`` of them for the rules that do not select)."""
        width = candidates_per_step(self.cfg.allocation, self.cfg.b_p)
        return self.epochs.next(steps * width).reshape(steps, width)

    def uniforms(self, steps: int) -> np.ndarray:
        """Uniforms for the direct count sampler, [steps, b_p, n]."""
        return self.draws.random((steps, self.cfg.b_p, self.cfg.n))


def draw_bins(cdf, u_sorted):
    """Response drawn by each uniform [R, B, n_max]: ``cdf`` [R, B, K] holds ``cdf_1, ..., cdf_K
    = 1`` and response k takes the uniforms in ``[cdf_k, cdf_{k+1})`` (``cdf_0 = 0``), so a
    uniform's response is the number of ``cdf_j`` (j >= 1) at or below it; padding uniforms of 2.0
    land in bin K, which is no response."""
    return torch.searchsorted(cdf, u_sorted, right=True)


def bin_counts(bins, K: int, dtype) -> torch.Tensor:
    """How many uniforms each response received [R, B, K] (bin K, the padding, dropped)."""
    R, B, _ = bins.shape
    counts = torch.zeros(R, B, K + 1, dtype=dtype, device=bins.device)
    return counts.scatter_add_(-1, bins, torch.ones(bins.shape, dtype=dtype, device=bins.device))[..., :K]


def _rows_np(x, runs) -> np.ndarray:
    """The rows ``runs`` of ``x`` [R, ...] as float64 numpy (no index when they are every row)."""
    return (x if len(runs) == x.shape[0] else x[runs]).cpu().numpy().astype(np.float64, copy=False)


def _rows_back(drawn: np.ndarray, runs, like, out=None):
    """Per-run draws ``drawn`` (numpy, one row per run in ``runs``) as a tensor shaped like
    ``like`` [R, ...]: written into the rows ``runs`` of ``out`` (zeros when None), or returned
    as they are when they are every run's."""
    drawn = torch.from_numpy(drawn).to(device=like.device, dtype=like.dtype)
    if out is None:
        if len(runs) == like.shape[0]:
            return drawn
        out = torch.zeros(like.shape, dtype=like.dtype, device=like.device)
    out[runs] = drawn
    return out


def sample_counts(pi, u_sorted, big_runs, streams, cfgs, cdf=None):
    """Multinomial(n, pi) counts [R, B, K]. Small n: inverse CDF of n uniforms per group
    ``u_sorted`` [R, B, n_max] (sorted, padded with 2.0; see :func:`draw_bins`). Large n: numpy's
    multinomial. ``cdf`` [R, B, K] may pass the CDF ``cdf_1, ..., cdf_K = 1`` of ``pi``, and then
    ``pi`` may be None (large-n runs take its differences)."""
    like = pi if pi is not None else cdf
    R, _, K = like.shape
    counts = None
    if u_sorted is not None:
        if cdf is None:
            cdf = torch.cumsum(pi, -1)
            cdf[..., -1] = 1.0
        counts = bin_counts(draw_bins(cdf, u_sorted), K, like.dtype)
    if big_runs:
        if pi is not None:
            p_np = _rows_np(pi, big_runs)
        else:  # the CDF's differences (numpy's own diff with a prepended 0 is slow on small arrays)
            c_np = _rows_np(cdf, big_runs)
            p_np = np.empty_like(c_np)
            p_np[..., 0] = c_np[..., 0]
            np.subtract(c_np[..., 1:], c_np[..., :-1], out=p_np[..., 1:])
            np.maximum(p_np, 0.0, out=p_np)
        if like.dtype != torch.float64:  # numpy wants probabilities summing to 1 within 1e-12
            p_np /= p_np.sum(-1, keepdims=True)
        drawn = np.zeros(p_np.shape)
        for j, r in enumerate(big_runs):
            c = cfgs[r]
            drawn[j, : c.b_p] = streams[r].big.multinomial(c.n, p_np[j, : c.b_p])
        counts = _rows_back(drawn, big_runs, like, counts)  # (no small-n runs: the others stay 0)
    return counts


def sample_correct(p, big_runs, streams, cfgs, m=None):
    """Correct draws [R, B] of the large-n runs ``big_runs``, ``Binomial(n, p)`` per group from
    the pass rates ``p`` [R, B] (numpy's binomial, each run from its own stream), written into
    ``m`` (the other runs' counts; None: zeros) as :func:`_rows_back` does."""
    p_np = _rows_np(p, big_runs)
    drawn = np.zeros(p_np.shape)
    for j, r in enumerate(big_runs):
        c = cfgs[r]
        drawn[j, : c.b_p] = streams[r].big.binomial(c.n, p_np[j, : c.b_p])
    return _rows_back(drawn, big_runs, p, m)


def correct_only(c: SimConfig) -> bool:
    """Whether a run needs only its number of correct draws: the linear policy with skill
    features alone (each problem's features ``a_p`` on its correct responses, so the gradient
    sees the draws only through ``m``) and no response-length model (no tokens to count)."""
    return (CORRECT_ONLY and c.policy == "linear" and c.typicality == 0 and c.memorize == 0
            and c.tabular == 0 and c.mean_len is None)
