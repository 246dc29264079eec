"""Evaluation: exact avg@k / best@k / worst@k, entropy and KL of every problem from the runs'
policies (general and closed form), sampled estimates, and when a run is evaluated."""

from __future__ import annotations

import numpy as np
import torch

from isosim import records
from isosim.sim.config import SimConfig
from isosim.sim.engine.policies import LinearFeatures, logits
from isosim.sim.estimators import exact_best_worst as unbiased_best_worst
from isosim.sim.problems import Population

FEW_POPULATIONS = 4  # evaluation loops over populations up to this many, gathers above it
EVAL_BLOCK = 1 << 23  # elements of gathered features per block of runs in an evaluation


# ----------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------
def all_logits(params, scale, tab_scale, pop: Population, pop_idx, linear: LinearFeatures | None = None
               ) -> torch.Tensor:
    """Logits of every problem [R, P, K] (training problems first)."""
    S, P, K = pop.z0.shape
    if "w2" in params:
        idx = torch.arange(P, device=pop.z0.device).expand(len(pop_idx), P)
        return logits(params, scale, tab_scale, pop, pop_idx, idx)
    groups = _by_population(pop_idx)
    h = params["theta"] * scale if "theta" in params else None
    if h is not None and linear is not None and linear.n_skill and not linear.n_dense:
        # skill features only: z = z0 + w * h[cluster], one fused pass, no matrix product
        W, C = linear.tables["skill_w"].view(S, P, K), linear.tables["skill_c"].view(S, P)
        if len(groups) == 1:
            s = groups[0][0]
            hc = h.gather(1, C[s].expand(len(pop_idx), P))
            z = torch.addcmul(pop.z0[s], W[s], hc[..., None])
        else:
            hc = h.gather(1, _rows(C, pop_idx))
            z = torch.addcmul(_rows(pop.z0, pop_idx), _rows(W, pop_idx), hc[..., None])
    elif len(groups) > FEW_POPULATIONS:  # many populations: batched products over blocks of runs
        R, D = len(pop_idx), pop.U.shape[-1]
        z = _rows(pop.z0, pop_idx).clone()
        if h is not None:
            block = max(1, EVAL_BLOCK // (P * K * D))
            for i in range(0, R, block):
                Ub = _rows(pop.U, pop_idx[i: i + block], offset=i).view(-1, P * K, D)
                z[i: i + block] += torch.bmm(h[i: i + block, None, :], Ub.transpose(1, 2)).view(-1, P, K)
    else:  # a few populations: one matrix product each, no gather of [R, P, K, D]
        parts = []
        for s, sel in groups:
            if h is not None:
                zs = (h[sel] @ pop.U[s].view(P * K, -1).T).view(-1, P, K)
                zs += pop.z0[s]
            else:
                zs = pop.z0[s].expand(len(sel), P, K).clone()
            parts.append(zs)
        if len(groups) == 1:
            z = parts[0]
        else:
            z = torch.empty(len(pop_idx), P, K, dtype=pop.z0.dtype, device=pop.z0.device)
            for (_, sel), zs in zip(groups, parts):
                z[sel] = zs
    if "tab" in params:
        z[:, : pop.n_train] += tab_scale[:, None, None] * params["tab"]
    return z


def _rows(x, pop_idx, offset: int = 0):
    """``x[pop_idx]`` along the population axis: a view when runs ``offset ..`` own populations
    ``offset ..`` in order (each run its own population), a gathered copy otherwise."""
    n = len(pop_idx)
    if bool((pop_idx == torch.arange(offset, offset + n, device=pop_idx.device)).all()):
        return x[offset: offset + n]
    return x.index_select(0, pop_idx)


def _by_population(pop_idx) -> list[tuple[int, torch.Tensor]]:
    """(population, runs of it) pairs; one pair covering every run when they share one."""
    ids = pop_idx.tolist()
    if len(set(ids)) == 1:
        return [(ids[0], torch.arange(len(ids), device=pop_idx.device))]
    return [(s, (pop_idx == s).nonzero().squeeze(-1)) for s in dict.fromkeys(ids)]


def evaluate(z, pop: Population, pop_idx, logpi0_all, k: int) -> tuple[dict[str, np.ndarray], torch.Tensor]:
    """Metrics of several runs at once from their logits ``z`` [R, P, K] (overwritten), with the
    exact pass rates ``p`` [R, P] they come from; each metric is an array over runs.

    One exponential per logit: with ``e = exp(z - max z)`` and ``S = sum e``, ``p = sum_correct e
    / S``, entropy ``log S - sum pi (z - max z)`` and ``KL = -H - sum pi log pi0``.
    """
    n_train = pop.n_train
    zs = z.sub_(z.amax(-1, keepdim=True))
    e = zs.exp()
    S = e.sum(-1)
    e_t, S_t = e[:, :n_train], S[:, :n_train]  # sums over pi = e / S are sums over e, divided once
    groups = _by_population(pop_idx)
    if len(groups) > FEW_POPULATIONS:
        p = (e * _rows(pop.correct, pop_idx)).sum(-1) / S
        cross = (e_t * _rows(logpi0_all, pop_idx)[:, :n_train]).sum(-1)
    elif len(groups) == 1:  # every run on one population: no indexing by run
        s = groups[0][0]
        p = (e * pop.correct[s]).sum(-1) / S
        cross = (e_t * logpi0_all[s, :n_train]).sum(-1)
    else:
        p = torch.empty_like(S)
        cross = torch.empty_like(S_t)
        for s, sel in groups:
            p[sel] = (e[sel] * pop.correct[s]).sum(-1) / S[sel]
            cross[sel] = (e_t[sel] * logpi0_all[s, :n_train]).sum(-1)
    ent_row = S_t.log() - (e_t * zs[:, :n_train]).sum(-1) / S_t
    ent, cross = ent_row.mean(-1), (cross / S_t).mean(-1)
    return summarise(p, n_train, k, ent, -ent - cross), p


def evaluate_closed(h, linear: LinearFeatures, pop: Population, pop_idx, k: int
                    ) -> tuple[dict[str, np.ndarray], torch.Tensor]:
    """:func:`evaluate` for a linear policy in closed form (:meth:`LinearFeatures._closed_form`):
    the same metrics from the runs' feature weights ``h`` [R, D], at the cost of a few operations
    per problem rather than per response."""
    S, P = pop.z0.shape[:2]
    n_train = pop.n_train
    consts = linear.consts.view(S, P, -1)
    cluster = linear.tables["skill_c"].view(S, P)
    groups = _by_population(pop_idx)
    if len(groups) == 1:
        s = groups[0][0]
        c, hc = consts[s], h.gather(1, cluster[s].expand(len(pop_idx), P))
    else:
        c, hc = _rows(consts, pop_idx), h.gather(1, _rows(cluster, pop_idx))
    y = c[..., 0] * hc  # [R, P]
    t = y + c[..., 1]  # the pass rate's log-odds
    p = torch.sigmoid(t)
    c_t, y_t, p_t = c[..., :n_train, :], y[:, :n_train], p[:, :n_train]
    log_s = torch.logaddexp(c_t[..., 5] + y_t, c_t[..., 6])  # log(A e^y + B)
    q_t = torch.sigmoid(-t[:, :n_train])
    kl = (y_t * p_t - log_s).mean(-1)
    cross_row = p_t * c_t[..., 7] + q_t * c_t[..., 8]  # sum pi log pi0
    return summarise(p, n_train, k, -kl - cross_row.mean(-1), kl), p


def summarise(p, n_train: int, k: int, ent, kl) -> dict[str, np.ndarray]:
    """The record's metrics of runs with pass rates ``p`` [R, P] (training problems first) and
    mean entropy / KL over training problems ``ent``, ``kl`` [R]; each an array over runs."""
    train, val = p[:, :n_train], p[:, n_train:]
    bins = (train * records.HIST_BINS).long().clamp_(0, records.HIST_BINS - 1)
    hist = p.new_zeros(len(p), records.HIST_BINS).scatter_add_(1, bins, torch.ones_like(train)).div_(n_train)
    out = {
        "train_reward": train.mean(-1),
        "train_best": 1 - _ipow(1 - train, k).mean(-1),
        "train_worst": _ipow(train, k).mean(-1),
        "val_avg": val.mean(-1),
        "val_best": 1 - _ipow(1 - val, k).mean(-1),
        "val_worst": _ipow(val, k).mean(-1),
        "entropy": ent,
        "kl": kl,
        "train_frac_zero": (train < records.ZERO_THRESHOLD).to(p.dtype).mean(-1),
        "train_frac_solved": (train > 1 - records.ZERO_THRESHOLD).to(p.dtype).mean(-1),
    }
    out.update({col: hist[:, i] for i, col in enumerate(records.HIST_COLUMNS)})
    return {key: val.cpu().numpy() for key, val in out.items()}


def metric_names(sampled: bool = False) -> tuple[str, ...]:
    """The metric columns a simulated run's records hold (those of :func:`summarise`, and the
    sampled estimates of :func:`sampled_metrics` when runs have ``eval_samples``), in order."""
    one = torch.full((1, 2), 0.5, dtype=torch.float64)
    names = tuple(summarise(one, 1, 1, one[:, 0], one[:, 0]))
    if sampled:
        names += tuple(sampled_metrics(np.full(1, 0.5), 2, 1, np.random.default_rng(0)))
    return names


def _ipow(x: torch.Tensor, k: int) -> torch.Tensor:
    """``x ** k`` for an integer k >= 1 by repeated squaring (torch's generic pow is slow)."""
    out, base = None, x
    while True:
        if k & 1:
            out = base if out is None else out * base
        k >>= 1
        if not k:
            return out
        base = base * base


def sampled_metrics(val: np.ndarray, N: int, k: int, rng: np.random.Generator) -> dict:
    """avg@k, best@k, worst@k estimated from N sampled answers per validation problem."""
    c = rng.binomial(N, np.clip(val, 0, 1))
    best, worst = unbiased_best_worst(c, N, k)
    return {"val_avg_sampled": (c / N).mean(), "val_best_sampled": best.mean(), "val_worst_sampled": worst.mean()}


def eval_steps(cfg: SimConfig) -> list[int]:
    """Steps after which a run is evaluated: 0, log-spaced points, and its last step."""
    M = cfg.total_steps
    pts = np.unique(np.round(np.geomspace(1, M, cfg.eval_points)).astype(int))
    return sorted({0, M, *pts.tolist()})
