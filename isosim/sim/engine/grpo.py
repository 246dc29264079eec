"""GRPO's maths in logit space: advantages (the formula is :mod:`isosim.sim.advantage`'s), the
policy-gradient and KL / entropy gradients, and one update step of a batch of runs through the
general path (softmax over every response) or the linear policy's closed form."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np
import torch

from isosim.sim import advantage as adv
from isosim.sim.engine.policies import (
    linear_backward,
    logits,
    tabular_gradient,
    tabular_logits,
)
from isosim.sim.engine.streams import _rows_np, sample_correct, sample_counts

if TYPE_CHECKING:
    from isosim.sim.engine.state import _Batch


ADV_EPS = adv.SIM_EPS  # GRPO's epsilon in (r - mean) / (std + eps): the simulator's (see isosim.sim.advantage)


# ----------------------------------------------------------------------------------------
# The GRPO update, in logit space
# ----------------------------------------------------------------------------------------
def advantages(correct, mu, n_base, std_norm, var_factor=None):
    """Advantage of every response [R, B, K] in groups whose baseline mean is ``mu`` [R, B].

    ``mu`` is estimated from ``n_base`` draws (the update's own n unless the baseline is
    decoupled). Where ``std_norm`` [R, 1] (or ``True`` for every group) is true (GRPO) the
    advantage is divided by the unbiased sample std of those draws plus ``ADV_EPS``, as TRL does;
    elsewhere it is mean-only (Dr.GRPO). A group whose rewards are all equal gets zero for every response it drew.
    ``var_factor`` may pass the precomputed ``n_base / max(n_base - 1, 1)``. The formula is
    :mod:`isosim.sim.advantage`'s (the 0/1 group's mean and std from its correct draws).
    """
    if std_norm is None:
        return adv.centre(correct, mu[..., None])
    if var_factor is None:
        var_factor = adv.bessel(n_base)
    div = adv.divisor(adv.bernoulli_spread(mu, var_factor), ADV_EPS)
    return adv.advantage(correct, mu[..., None], (div if std_norm is True else torch.where(std_norm, div, 1.0))[..., None])


def logit_gradient(counts, A, pi, decoupled=None):
    """``sum_i A_i d log pi(a_i) / dz = c * A - (sum_i A_i) * pi`` for each group [R, B, K].

    With the group's own mean as baseline the advantages of its draws sum to zero and the
    second term vanishes; it is computed only where ``decoupled`` [R, 1, 1] is true.
    """
    g = counts * A
    if decoupled is not None:
        g = g - decoupled * g.sum(-1, keepdim=True) * pi
    return g


def regulariser_gradient(pi, logpi, logpi0, kl, ent, neg_kl_logpi0=None):
    """Gradient in logit space of ``kl * KL(pi || pi0) - ent * H(pi)`` (exact, per problem).

    With ``f = kl * (log pi - log pi0) + ent * log pi`` the loss is ``sum pi f`` and its logit
    gradient is ``pi * (f - sum pi f)``. ``neg_kl_logpi0`` may pass ``-kl * log pi0``
    precomputed (then ``f = (kl + ent) * log pi - kl * log pi0`` is one fused op).
    """
    if neg_kl_logpi0 is None:
        neg_kl_logpi0 = -kl * logpi0
    klent = kl + ent
    f = torch.addcmul(neg_kl_logpi0, logpi, klent) if torch.is_tensor(klent) else neg_kl_logpi0 + klent * logpi
    pf = pi * f
    return pf.sub_(pi * pf.sum(-1, keepdim=True))


def _baseline_correct(b: _Batch, m, p):
    """Correct draws behind each group's baseline [R, B]: ``m`` itself, plus for runs with a
    decoupled baseline the extra ``n_est - n`` draws at pass rate ``p`` (binomial)."""
    if not b.decoupled:
        return m
    dec = b.decoupled
    p_b = _rows_np(p, dec).clip(0, 1)
    extra = np.zeros(p_b.shape)
    for j, r in enumerate(dec):  # only the run's own b_p groups (its stream must not see the batch's width)
        c = b.cfgs[r]
        extra[j, : c.b_p] = b.streams[r].extra.binomial(c.rollouts_per_step - c.n, p_b[j, : c.b_p])
    m_base = m.clone()
    m_base[dec] += torch.as_tensor(extra, dtype=m.dtype, device=m.device)
    return m_base


def _loss_scales(b: _Batch, m):
    """Groups that enter the loss [R, B] (None: every one) and the factors [R, 1] of the
    policy-gradient and regulariser terms (GRPO's normalisation by the kept rollouts)."""
    v, K_ = b.vec, b.const
    if b.any["zero_var"]:
        keep = v["b_mask"] & (((m > 0) & (m < K_["n"])) | ~v["zero_var"][:, None])
        kept = keep.sum(-1, keepdim=True).clamp(min=1).to(m.dtype)
        return keep, -1.0 / (kept * K_["n"]), 1.0 / kept
    return (v["b_mask"] if b.masked else None), K_["pg_scale"], K_["reg_scale"]


def _general_step(b: _Batch, here, u, idx, flat, pop, linear, U_flat, autograd: bool):
    """Parameter gradients of one step from logits over every response (any policy); also the
    logits, the draws and the policy [R, B, K]."""
    v, K_ = b.vec, b.const
    # ---- forward: logits of the batch problems ----------------------------------------------
    if linear is not None:  # z0 + U h (+ the per-problem tabular part), without autograd
        z = here["logpi0"] + linear.forward(b.params["theta"] * v["scale"], here, flat)
        if "tab" in b.params:
            z = z + tabular_logits(b.params["tab"], v["tab_scale"], pop.n_train, idx)
    else:
        U = (U_flat.index_select(0, flat.view(-1)).view(*idx.shape, *pop.U.shape[-2:])
             if "theta" in b.params else None)
        if autograd:
            for p in b.params.values():
                p.requires_grad_(True)
        z = logits(b.params, v["scale"], v["tab_scale"], pop, v["pop_idx"], idx, U, here["logpi0"])
    with torch.no_grad() if autograd else contextlib.nullcontext():  # (inference mode otherwise)
        logpi = torch.log_softmax(z, -1)
        pi = logpi.exp()
        correct = here["correct"]
        # ---- rollouts: how often each response was drawn --------------------------------------
        pc = pi * correct  # the policy on correct responses
        p = pc.sum(-1)  # pass rate
        counts = sample_counts(pi, u, b.big_counts, b.streams, b.cfgs) if not b.all_co else None
        m = (counts * correct).sum(-1) if counts is not None else None
        if b.any_co:  # their gradient depends on m only: spread it over the responses in proportion to pi
            m = draw_correct(b, p, u, m)
            q = pi.sum(-1) - p
            spread = (torch.addcmul(pc * torch.where(p > 0, m / p, 0.0)[..., None], pi - pc,
                                    torch.where(q > 0, (b.const["n"] - m) / q, 0.0)[..., None]))
            counts = spread if counts is None else torch.where(b.const["co"][..., None], spread, counts)
        m_base = _baseline_correct(b, m, p)
        b.last_m = m  # each group's correct draws (what a pass-rate estimator may observe)
        # ---- advantages and the policy-gradient direction in logit space ----------------------
        A = advantages(correct, adv.bernoulli_baseline(m_base, K_["n_base"]), K_["n_base"], K_["std_norm"],
                       K_["var_factor"])
        g_pg = logit_gradient(counts, A, pi, K_["is_dec"])
        # ---- which groups enter the loss, and the loss gradient -------------------------------
        keep, pg_scale, reg_scale = _loss_scales(b, m)
        grad_z = g_pg.mul_(pg_scale[..., None])
        if b.any_reg:
            reg = regulariser_gradient(pi, logpi, here["logpi0"], K_["kl"], K_["ent"], here["neg_kl_logpi0"])
            grad_z.addcmul_(reg, reg_scale[..., None])
        if keep is not None:
            grad_z *= keep[..., None]
    if autograd:
        names = list(b.params)
        grads = torch.autograd.grad(z, [b.params[k] for k in names], grad_outputs=grad_z, allow_unused=True)
        grads = {k: (g if g is not None else torch.zeros_like(b.params[k])) for k, g in zip(names, grads)}
        for p in b.params.values():
            p.requires_grad_(False)
    elif linear is not None:
        grads = {"theta": linear.backward(grad_z, here) * v["scale"]}
        if "tab" in b.params:
            grads["tab"] = tabular_gradient(b.params["tab"], grad_z, idx, v["tab_scale"])
    else:
        grads = linear_backward(b.params, grad_z, U, idx, v["scale"], v["tab_scale"])
    return grads, z.detach(), counts, pi


def _closed_step(b: _Batch, here, u, has_len: bool):
    """:func:`_general_step` for the linear policy in closed form (:meth:`LinearFeatures._closed_form`).

    A problem's policy is fixed by ``y = a_p h_c``; its feature gradient is ``a_p`` times the
    logit gradient summed over its correct responses, which has a closed form: with ``m`` of
    the ``n`` draws correct and baseline mean ``mu``, the policy-gradient part is
    ``m (1 - mu) / sd`` (minus ``(m - n mu) p / sd`` for a decoupled baseline) and the KL /
    entropy part ``p (1 - p) ((kl + ent) y + ent (m_c - m_i))``. Correct-only runs draw ``m``
    from ``p`` (:func:`draw_correct`); per-response counts (runs with a length model) go through
    the policy's CDF ``(1 - p) / B cdf_inc + p / A cdf_cor`` (the base CDF's incorrect and
    correct parts, rescaled).
    """
    v, K_ = b.vec, b.const
    a, logit0, inv_a, inv_b, d = here["closed"].unbind(-1)  # per problem, see _closed_form
    R, B = a.shape
    cluster = here["skill_c"].view(R, B)
    y = a * (b.params["theta"] * v["scale"]).gather(1, cluster)
    t = y + logit0
    p = torch.sigmoid(t)  # pass rate
    q = torch.sigmoid(t.neg_())  # fail rate (not 1 - p: no cancellation)
    pi = counts = m = None
    if not b.all_co:  # per-response counts (a length model): through the policy's CDF over the K responses
        # pi / pi0 is q / B on incorrect responses and p / A on correct ones
        cdf = torch.addcmul(here["cdf_inc"] * (q * inv_b)[..., None], here["cdf_cor"], (p * inv_a)[..., None])
        cdf[..., -1] = 1.0
        pi = torch.diff(cdf, dim=-1, prepend=cdf.new_zeros(R, B, 1)).clamp_(min=0.0) if has_len else None
        counts = sample_counts(pi, u, b.big_counts, b.streams, b.cfgs, cdf=cdf)
        m = (counts * here["correct"]).sum(-1)
    if b.any_co:  # (their counts, if any, stay 0: no length model, no tokens)
        m = draw_correct(b, p, u, m)
    b.last_m = m  # each group's correct draws (what a pass-rate estimator may observe)
    mu = adv.bernoulli_baseline(_baseline_correct(b, m, p), K_["n_base"])
    pg = m * adv.centre(1.0, mu)  # sum of the correct draws' centred rewards (isosim.sim.advantage)
    if b.decoupled:  # the baseline is not the group's own mean: the draws' advantages do not sum to 0
        pg -= K_["is_dec_g"] * (m - K_["n"] * mu) * p
    if K_["std_norm"] is not None:
        div = adv.divisor(adv.bernoulli_spread(mu, K_["var_factor"]), ADV_EPS)
        pg = adv.normalise(pg, div if K_["std_norm"] is True else torch.where(K_["std_norm"], div, 1.0))
    keep, pg_scale, reg_scale = _loss_scales(b, m)
    w = pg.mul_(pg_scale)
    if b.any_reg:
        reg = torch.addcmul(K_["kl_ent_g"] * y, K_["ent_g"], d)
        w.addcmul_(reg.mul_(p * q), reg_scale)
    if keep is not None:
        w *= keep
    g = torch.zeros_like(b.params["theta"]).scatter_add_(1, cluster, w.mul_(a))
    z = torch.addcmul(here["logpi0"], here["correct"], y[..., None]) if b.any["trust"] else None
    return {"theta": g.mul_(v["scale"])}, z, counts, pi


def draw_correct(b: _Batch, p, u, m=None):
    """Correct draws [R, B] of a batch's correct-only runs, ``Binomial(n, p)`` from the pass rates
    ``p`` [R, B]: the count of a group's uniforms ``u`` [R, B, n_max] below ``p`` (padding 2.0
    never is; sorted or not), one numpy binomial per group for large n. ``m`` holds the other
    runs' counts (None when every run is correct-only)."""
    m_co = torch.lt(u, p[..., None]).sum(-1, dtype=p.dtype) if u is not None else None  # (None: all large n)
    if b.big_correct:
        m_co = sample_correct(p, b.big_correct, b.streams, b.cfgs, m_co)
    if m is None or b.all_co:
        return m_co
    return torch.where(b.const["co"], m_co, m)
