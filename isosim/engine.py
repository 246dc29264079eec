"""The simulator engine: count-based GRPO on bandit problems, many runs as one computation.

A run trains a softmax policy over K responses per problem. Each step it takes the next ``b_p``
problems of its own shuffled epoch order, draws ``n`` responses for each, scores them (1 if
correct) and applies a GRPO update. All runs handed to :func:`simulate` that share a
``SimConfig.batch_key`` advance together: their parameters carry a leading run axis, differing
``n`` and ``b_p`` are padded and masked, and a run that has spent its budget leaves the batch.

Where this departs from a per-rollout GRPO implementation (and why it is the same in law):

* Rewards are 0/1 and a group's policy gradient depends on its draws only through how often
  each response was drawn, so the engine draws the *counts* ``c ~ Multinomial(n, pi)`` and
  uses ``sum_i A_i grad log pi(a_i) = sum_k c_k A_k e_k - (sum_i A_i) pi`` (gradient with
  respect to the logits). A step's cost does not grow with ``n``.
* Counts for ``n <= DIRECT_MAX`` come from ``n`` uniforms per problem (inverse CDF), above it
  from numpy's multinomial; both are exact draws. A run whose policy is the default linear one
  with skill features only and no response-length model (:func:`correct_only`) needs only the
  number of correct draws ``m ~ Binomial(n, p)``: the engine draws it as the count of the
  group's ``n`` uniforms below its pass rate ``p`` (the inverse CDF with the correct responses
  ordered first), above ``DIRECT_MAX`` as one numpy binomial. The same law as counting correct
  responses among multinomial counts, without touching the K responses, and the same draws
  whichever path (closed form or general) the run's batch takes.
* The default linear policy (skill features only, each problem loading ``a_p`` on its correct
  responses) is a one-parameter family per problem: ``pass rate = sigmoid(y + log-odds of the
  base)`` with ``y = a_p h_c``. The engine then computes the update and the evaluation in closed
  form per problem (:meth:`LinearFeatures._closed_form`); only the draws look at every response.
  Same results as the general path (softmax over responses) to rounding; any other policy, a
  typicality or memorisation part, or a tabular part takes the general path.
* Every run owns its random streams (numpy ``Generator`` seeded from its ``seed``): problem
  order, rollout draws, the extra draws of a decoupled baseline and sampled evaluations, each
  drawn for the run's own ``b_p`` groups only. A run's result therefore does not depend on which
  other runs share its batch: bit for bit when the batch takes the run's own path, to rounding
  (~1e-15) when another run's settings send the batch down the general path.
* KL and entropy terms are exact expectations over the K responses (a real trainer estimates
  them from sampled tokens, e.g. with the k3 estimator; the expectation is the same).
* Evaluation is exact: avg@k = mean p, best@k = mean 1-(1-p)^k, worst@k = mean p^k, with
  optional sampled estimates (``eval_samples``).
* The loss is normalised by the number of rollouts in the (kept) groups, as in GRPO with
  sequence-level averaging; there are no tokens, so there is no length normalisation question.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from isosim import advantage as adv
from isosim import records
from isosim.config import SimConfig
from isosim.epochs import EpochSampler
from isosim.errors import IsosimError
from isosim.problems import Population, build, stack

DIRECT_MAX = 64  # largest n sampled from uniforms (above it: numpy multinomial per run)
CORRECT_ONLY = True  # runs that need only their correct draws draw only those (False: per-response counts)
CHUNK = 64  # most steps of problem order and uniforms drawn per refill
CHUNK_ROWS = 1 << 14  # ... and at most about this many (run, problem) rows per refill (cache-sized gathers)
ADV_EPS = adv.SIM_EPS  # GRPO's epsilon in (r - mean) / (std + eps): the simulator's (see isosim.advantage)
ADAM_EPS = 1e-8
FEW_POPULATIONS = 4  # evaluation loops over populations up to this many, gathers above it
EVAL_BLOCK = 1 << 23  # elements of gathered features per block of runs in an evaluation


# ----------------------------------------------------------------------------------------
# Per-run randomness
# ----------------------------------------------------------------------------------------
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

    def problems(self, steps: int) -> np.ndarray:
        """The next ``steps`` batches of problem indices, epoch by epoch, [steps, b_p]."""
        return self.epochs.next(steps * self.cfg.b_p).reshape(steps, self.cfg.b_p)

    def uniforms(self, steps: int) -> np.ndarray:
        """Uniforms for the direct count sampler, [steps, b_p, n]."""
        return self.draws.random((steps, self.cfg.b_p, self.cfg.n))


# ----------------------------------------------------------------------------------------
# Policies: logits of a batch of (run, problem) pairs from the runs' parameters
# ----------------------------------------------------------------------------------------
def init_params(cfgs: Sequence[SimConfig], pop: Population, device, dtype) -> dict[str, torch.Tensor]:
    """Parameters with a leading run axis; every policy starts exactly at the base policy."""
    R, D, kind = len(cfgs), pop.U.shape[-1], cfgs[0].policy
    params = {}
    if kind in ("linear", "mlp"):
        params["theta"] = torch.zeros(R, D, device=device, dtype=dtype)
    if kind == "tabular" or any(c.tabular > 0 for c in cfgs):
        params["tab"] = torch.zeros(R, pop.n_train, pop.z0.shape[-1], device=device, dtype=dtype)
    if kind == "mlp":
        E, H = pop.emb.shape[-1], cfgs[0].hidden
        gen = torch.Generator(device="cpu")
        w1 = []
        for c in cfgs:  # each run's own init, independent of the batch
            gen.manual_seed(int(np.random.SeedSequence([c.seed, 0x3_1A1]).generate_state(1)[0]))
            w1.append(torch.randn(E, H, generator=gen, dtype=torch.float64) / math.sqrt(E))
        params["w1"] = torch.stack(w1).to(device=device, dtype=dtype)
        params["b1"] = torch.zeros(R, H, device=device, dtype=dtype)
        params["w2"] = torch.zeros(R, H, D, device=device, dtype=dtype)  # zero head: base policy at step 0
    return params


def feature_scale(cfgs: Sequence[SimConfig], pop: Population, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-run strength of each feature dimension [R, D] and of the tabular part [R]."""
    D = pop.U.shape[-1]
    dims = pop.dims
    scale = torch.zeros(len(cfgs), D, dtype=dtype)
    tab = torch.zeros(len(cfgs), dtype=dtype)
    for r, c in enumerate(cfgs):
        if c.policy == "tabular":
            tab[r] = c.tabular if c.tabular > 0 else 1.0
            continue
        scale[r, dims["skill"]] = c.skill
        scale[r, dims["typicality"]] = c.typicality
        scale[r, dims["memorize"]] = c.memorize
        tab[r] = c.tabular
    return scale.to(device), tab.to(device)


def logits(params, scale, tab_scale, pop: Population, pop_idx, idx, U=None, z0=None) -> torch.Tensor:
    """Logits [R, B, K] for problems ``idx`` [R, B] of populations ``pop_idx`` [R].

    ``U`` and ``z0`` may pass the already gathered ``pop.U[pop_idx, idx]`` [R, B, K, D] and
    ``pop.z0[pop_idx, idx]`` [R, B, K].
    """
    rows = pop_idx[:, None]
    z = pop.z0[rows, idx] if z0 is None else z0
    if "theta" in params:
        U = pop.U[rows, idx] if U is None else U
        if "w2" in params:  # mlp: a problem-dependent direction h(e_p) in feature space
            e = pop.emb[rows, idx]  # [R, B, E]
            hid = torch.tanh(torch.einsum("rbe,reh->rbh", e, params["w1"]) + params["b1"][:, None, :])
            h = params["theta"][:, None, :] + torch.einsum("rbh,rhd->rbd", hid, params["w2"])
            z = z + torch.einsum("rbkd,rbd->rbk", U, h * scale[:, None, :])
        else:
            R, B, K, D = U.shape
            h = (params["theta"] * scale).view(R, 1, D)
            z = z + torch.bmm(h, U.reshape(R, B * K, D).transpose(1, 2)).view(R, B, K)  # h U^T: faster than U h here
    if "tab" in params:
        z = z + tabular_logits(params["tab"], tab_scale, pop.n_train, idx)
    return z


def tabular_logits(tab, tab_scale, n_train: int, idx) -> torch.Tensor:
    """The per-problem tabular part of the logits [R, B, K] for problems ``idx`` [R, B]; it
    exists for training problems only (zero for validation rows)."""
    t = torch.gather(tab, 1, idx.clamp(max=n_train - 1)[..., None].expand(-1, -1, tab.shape[-1]))
    return tab_scale[:, None, None] * t * (idx < n_train)[..., None]


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
    :mod:`isosim.advantage`'s (the 0/1 group's mean and std from its correct draws).
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


def draw_correct(b: "_Batch", p, u, m=None):
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


def linear_backward(params, grad_z, U, idx, scale, tab_scale):
    """Parameter gradients of the linear/tabular policy from the logit gradient (no autograd)."""
    grads = {}
    if "theta" in params:
        R, D = scale.shape
        grads["theta"] = torch.bmm(grad_z.reshape(R, 1, -1), U.reshape(R, -1, D)).view(R, D) * scale
    if "tab" in params:
        grads["tab"] = tabular_gradient(params["tab"], grad_z, idx, tab_scale)
    return grads


def tabular_gradient(tab, grad_z, idx, tab_scale) -> torch.Tensor:
    """Gradient of the tabular part from the logit gradient of problems ``idx`` (no autograd)."""
    out = torch.zeros_like(tab)
    out.scatter_add_(1, idx[..., None].expand(-1, -1, grad_z.shape[-1]), grad_z * tab_scale[:, None, None])
    return out


class LinearFeatures:
    """The linear policy's feature term ``U h`` of a step's problems, and its backward.

    The skill part of the features has one non-zero direction per problem (its cluster) by
    construction, so it is kept as a cluster index and a weight per response and costs a gather
    of ``h`` rather than of ``U``; the dense parts (typicality, memorisation) are gathered per
    step. When the skill block is not one-hot per problem, every column counts as dense.
    """

    def __init__(self, U: torch.Tensor, n_skill: int, correct: torch.Tensor | None = None,
                 logpi0: torch.Tensor | None = None):
        """``correct`` and ``logpi0`` [S, P, K] allow the closed form (when the features have its
        shape); pass them only when no other term (a tabular part) enters the logits."""
        S, P, K, D = U.shape
        Usk = U[..., :n_skill]
        nz = (Usk != 0).any(2)  # [S, P, C]: columns a problem loads on
        self.closed = False
        if n_skill and bool((nz.sum(-1) <= 1).all()):
            self.n_skill = n_skill
            cluster = nz.to(U.dtype).argmax(-1)  # [S, P] (0 where the problem loads on nothing)
            weight = Usk.gather(-1, cluster[..., None, None].expand(S, P, K, 1)).squeeze(-1)
            self.tables = {"skill_w": weight.reshape(S * P, K), "skill_c": cluster.reshape(S * P, 1)}
        else:
            self.n_skill = 0
            self.tables = {}
        self.dense = U[..., self.n_skill:].reshape(S * P, -1)  # [S * P, K * D_dense]
        self.n_dense = D - self.n_skill
        self.K = K
        if self.n_skill and not self.n_dense and correct is not None and logpi0 is not None:
            self._closed_form(weight, correct, logpi0)

    def _closed_form(self, weight, correct, logpi0) -> None:
        """Skill features only, each problem's weight ``a_p`` on its correct responses and 0 on the
        others (how :func:`isosim.problems.build` makes them): then a problem's policy depends on
        one number, ``y = a_p h_c``. With base pass rate ``A`` and fail mass ``B = 1 - A``,
        ``S = A e^y + B``, ``pi = pi0 e^(y [correct]) / S``, pass rate ``p = A e^y / S =
        sigmoid(y + log A/B)``, KL to the base ``y p - log S`` and ``sum pi log pi0 = p m_c +
        (1 - p) m_i`` (``m``: the pi0-weighted mean log pi0 over correct / incorrect
        responses). Used when the weights have exactly that form and every problem has a correct
        and an incorrect response; then the engine steps with :func:`_closed_step` and evaluates
        with :func:`evaluate_closed`, and the tables hold what those need (not the skill weights
        :meth:`forward` / :meth:`backward` use)."""
        a = weight.amax(-1)  # [S, P]
        pi0 = logpi0.exp()
        A = (pi0 * correct).sum(-1)
        B = (pi0 * (1 - correct)).sum(-1)
        if not (bool((weight == a[..., None] * correct).all()) and bool((B > 0).all()) and bool((A > 0).all())):
            return
        m_c = (pi0 * logpi0 * correct).sum(-1) / A
        m_i = (pi0 * logpi0 * (1 - correct)).sum(-1) / B
        self.closed = True
        S, P, K = pi0.shape
        lA, lB = A.log(), B.log()
        # per problem: a, base log-odds, 1/A, 1/B, m_c - m_i (the step's), log A, log B, m_c, m_i
        self.consts = torch.stack([a, lA - lB, 1 / A, 1 / B, m_c - m_i, lA, lB, m_c, m_i], -1).view(S * P, -1)
        # gathered per step: the step's constants and the base CDF split into its parts over the
        # correct and the incorrect responses
        self.tables = {"skill_c": self.tables["skill_c"], "closed": self.consts[:, :5].contiguous(),
                       "cdf_cor": (pi0 * correct).cumsum(-1).view(S * P, K),
                       "cdf_inc": (pi0 * (1 - correct)).cumsum(-1).view(S * P, K)}

    def forward(self, h, here, flat):
        """``U h`` [R, B, K] for the rows ``flat`` [R, B] of a step (``here``: gathered tables)."""
        R, B = flat.shape
        out = None
        if self.n_skill:
            hc = h.gather(1, here["skill_c"].view(R, B))  # [R, B]: each problem's cluster weight
            out = here["skill_w"] * hc[..., None]
        self.U_dense = None
        if self.n_dense:
            Ud = self.dense.index_select(0, flat.view(-1)).view(R, B * self.K, self.n_dense)
            zd = torch.bmm(h[:, None, self.n_skill:], Ud.transpose(1, 2)).view(R, B, self.K)
            out = zd if out is None else out.add_(zd)
            self.U_dense = Ud
        return out

    def backward(self, grad_z, here):
        """Gradient with respect to ``h`` [R, D] of ``sum grad_z * U h`` (after :meth:`forward`)."""
        R, B, K = grad_z.shape
        g = torch.zeros(R, self.n_skill + self.n_dense, dtype=grad_z.dtype, device=grad_z.device)
        if self.n_skill:
            w = (grad_z * here["skill_w"]).sum(-1)  # [R, B]
            g[:, : self.n_skill].scatter_add_(1, here["skill_c"].view(R, B), w)
        if self.n_dense:
            g[:, self.n_skill:] = torch.bmm(grad_z.reshape(R, 1, B * K), self.U_dense).view(R, self.n_dense)
        return g


# ----------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------
def all_logits(params, scale, tab_scale, pop: Population, pop_idx, linear: "LinearFeatures | None" = None
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


def unbiased_best_worst(c: np.ndarray, N: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Unbiased best@k = 1 - C(N-c, k)/C(N, k) and worst@k = C(c, k)/C(N, k) from c of N."""
    total = math.comb(N, k)
    best = 1.0 - np.array([math.comb(N - int(x), k) for x in c]) / total
    worst = np.array([math.comb(int(x), k) for x in c]) / total
    return best, worst


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


# ----------------------------------------------------------------------------------------
# A batch of runs
# ----------------------------------------------------------------------------------------
class _Batch:
    """State of the active runs: every tensor has a leading run axis.

    ``vec`` holds per-run settings and counters as tensors; flags derived from the configs
    (which runs use Adam, a decoupled baseline...) are recomputed only when runs leave.
    """

    VEC_FIELDS = {  # name: (SimConfig -> value, dtype kind)
        "n": (lambda c: c.n, "f"),
        "n_roll": (lambda c: c.rollouts_per_step, "f"),
        "b_p": (lambda c: c.b_p, "f"),
        "lr": (lambda c: c.step_lr, "f"),
        "kl": (lambda c: c.kl, "f"),
        "ent": (lambda c: c.entropy, "f"),
        "wd": (lambda c: c.wd, "f"),
        "beta1": (lambda c: c.beta1, "f"),
        "beta2": (lambda c: c.beta2, "f"),
        "warmup": (lambda c: c.warmup, "f"),
        "clip": (lambda c: c.clip_grad if c.clip_grad is not None else math.inf, "f"),
        "trust": (lambda c: c.trust_region if c.trust_region is not None else math.inf, "f"),
        "adam": (lambda c: c.optimizer in ("adam", "adamw"), "b"),
        "adamw": (lambda c: c.optimizer == "adamw", "b"),
        "grpo": (lambda c: c.adv == "grpo", "b"),
        "zero_var": (lambda c: c.zero_var_filter, "b"),
    }

    def __init__(self, cfgs, pop, pop_idx, scale, tab_scale, params, Bmax, device, dtype):
        self.cfgs = list(cfgs)
        self.streams = [RunStreams(c) for c in cfgs]
        self.schedule = [eval_steps(c) for c in cfgs]
        self.params = params
        self.m1 = {k: torch.zeros_like(v) for k, v in params.items()}
        self.m2 = {k: torch.zeros_like(v) for k, v in params.items()}
        kinds = {"f": dtype, "b": torch.bool}
        self.vec = {name: torch.as_tensor([get(c) for c in cfgs], dtype=kinds[kind], device=device)
                    for name, (get, kind) in self.VEC_FIELDS.items()}
        self.vec.update(
            scale=scale, tab_scale=tab_scale, pop_idx=pop_idx,
            b_mask=torch.as_tensor([[j < c.b_p for j in range(Bmax)] for c in cfgs], device=device),
            rollouts=torch.zeros(len(cfgs), dtype=dtype, device=device),
            tokens=torch.zeros(len(cfgs), dtype=dtype, device=device),
        )
        self._flags()

    def _flags(self) -> None:
        cfgs = self.cfgs
        self.big = [r for r, c in enumerate(cfgs) if c.n > DIRECT_MAX]
        co = [correct_only(c) for c in cfgs]
        self.all_co, self.any_co = all(co), any(co)
        self.big_counts = [r for r in self.big if not co[r]]  # large n, per-response counts
        self.big_correct = [r for r in self.big if co[r]]  # large n, correct draws only
        self.decoupled = [r for r, c in enumerate(cfgs) if c.rollouts_per_step > c.n]
        self.any = {name: bool(self.vec[name].any()) for name in ("adam", "adamw", "grpo", "zero_var")}
        self.any["clip"] = any(c.clip_grad is not None for c in cfgs)
        self.any["trust"] = any(c.trust_region is not None for c in cfgs)
        self.any["warmup"] = any(c.warmup > 0 for c in cfgs)
        self.any["wd"] = any(c.wd > 0 for c in cfgs)
        self.any_reg = any(c.kl > 0 or c.entropy > 0 for c in cfgs)
        # per-run constants shaped for broadcasting, recomputed only when runs leave
        v = self.vec
        self.masked = len({c.b_p for c in cfgs}) > 1  # some runs use fewer batch slots than others
        self.const = {
            "n": v["n"][:, None],
            "n_base": v["n_roll"][:, None],  # draws behind the baseline (n unless decoupled)
            "var_factor": adv.bessel(v["n_roll"])[:, None],  # unbiased variance
            "pg_scale": (-1.0 / (v["b_p"] * v["n"]))[:, None],  # loss normalisation, sign of descent
            "reg_scale": (1.0 / v["b_p"])[:, None],
            "spent": v["n_roll"] * v["b_p"],
            "std_norm": (True if all(c.adv == "grpo" for c in cfgs) else v["grpo"][:, None]) if self.any["grpo"] else None,
            # per group [R, 1] (the closed-form step); per response [R, 1, 1] below
            "kl_ent_g": (v["kl"] + v["ent"])[:, None],
            "ent_g": v["ent"][:, None],
            "is_dec_g": (v["n_roll"] > v["n"])[:, None].to(v["n"].dtype) if self.decoupled else None,
            "co": torch.as_tensor(co, device=v["n"].device)[:, None] if self.any_co and not self.all_co else None,
        }
        self.const.update(kl=v["kl"][:, None, None], ent=self.const["ent_g"][..., None],
                          is_dec=self.const["is_dec_g"][..., None] if self.decoupled else None)
        self.spent_total = float(sum(c.rollouts_per_step * c.b_p for c in cfgs))
        def one(name: str):  # the value every run shares, or None
            values = {getattr(c, name) for c in cfgs}
            return values.pop() if len(values) == 1 else None

        # Adam with the same betas and no weight decay / clipping / warm-up in every run: scalar fast path
        self.plain_adam = (all(c.optimizer == "adam" for c in cfgs) and not self.any["wd"]
                           and not self.any["clip"] and not self.any["warmup"] and not self.any["trust"]
                           and one("beta1") is not None and one("beta2") is not None)
        self.betas = (one("beta1"), one("beta2"))

    def keep(self, sel: list[int]) -> None:
        """Drop every run not in ``sel`` (finished runs leave the batch)."""
        ix = torch.as_tensor(sel, dtype=torch.long, device=self.vec["lr"].device)
        for name in ("params", "m1", "m2", "vec"):
            setattr(self, name, {k: v[ix] for k, v in getattr(self, name).items()})
        self.cfgs = [self.cfgs[i] for i in sel]
        self.streams = [self.streams[i] for i in sel]
        self.schedule = [self.schedule[i] for i in sel]
        self._flags()


def _run_batch(cfgs: list[SimConfig], device, dtype, progress) -> list[dict]:
    """Run configurations that share a batch key together; return their record rows."""
    pop_keys = list(dict.fromkeys(c.population_key for c in cfgs))
    mem = any(c.memorize > 0 and c.policy != "tabular" for c in cfgs)
    pop = stack([build(next(c for c in cfgs if c.population_key == key), device=device, dtype=dtype, memorize=mem)
                 for key in pop_keys])
    key_index = {key: i for i, key in enumerate(pop_keys)}
    Bmax = max(c.b_p for c in cfgs)
    logpi0_all = torch.log_softmax(pop.z0, -1)  # [S, P, K]

    scale, tab_scale = feature_scale(cfgs, pop, device, dtype)
    # keep only feature dimensions some run uses (a zero-strength part costs time, not results)
    used = (scale != 0).any(0)
    used[pop.dims["skill"]] |= not bool(used.any())
    cols = used.nonzero().squeeze(-1)
    pop = dataclasses.replace(pop, U=pop.U[..., cols].contiguous())
    P_all = pop.U.shape[1]
    has_len = bool(pop.length.isfinite().any())
    U_flat = pop.U.view(-1, pop.U.shape[-2] * pop.U.shape[-1])  # [S * P, K * D]: one row per problem
    # gathered per chunk, by row. The base log-probs serve as base logits too (a softmax does not
    # see a per-problem constant), which saves gathering z0 as well
    tables = {"correct": pop.correct, "logpi0": logpi0_all}  # (the closed form may drop both below)
    if has_len:
        tables["length"] = pop.length.nan_to_num(0.0)
    tables = {name: x.reshape(-1, x.shape[-1]) for name, x in tables.items()}
    scale = scale[:, cols]
    autograd = cfgs[0].policy == "mlp"
    linear = None
    all_co = all(correct_only(c) for c in cfgs)  # every run draws its correct draws only
    if not autograd and cfgs[0].policy == "linear":  # (tabular runs have no theta)
        closed_ok = not any(c.tabular > 0 for c in cfgs)  # nothing but the features in the logits
        linear = LinearFeatures(pop.U, int((cols < pop.clusters).sum()),
                                *((pop.correct, logpi0_all) if closed_ok else ()))
        tables.update(linear.tables)
        if linear.closed and not any(c.trust_region is not None for c in cfgs):
            del tables["logpi0"]  # (the trust region compares logits)
            if all_co:  # draws from the pass rate alone: no per-response counts
                del tables["correct"], tables["cdf_cor"], tables["cdf_inc"]
    closed = linear is not None and linear.closed
    pop_idx = torch.as_tensor([key_index[c.population_key] for c in cfgs], dtype=torch.long, device=device)
    b = _Batch(cfgs, pop, pop_idx, scale, tab_scale, init_params(cfgs, pop, device, dtype), Bmax, device, dtype)
    settings = {c.run_id: {"run_id": c.run_id, **c.settings()} for c in cfgs}
    rows: list[dict] = []

    def record(sel: list[int], step: int) -> None:
        if not sel:
            return
        ix = torch.as_tensor(sel, device=device)
        v = b.vec
        with torch.no_grad():
            sub = {k: p[ix] for k, p in b.params.items()}
            if closed:
                metrics, p = evaluate_closed(sub["theta"] * v["scale"][ix], linear, pop, v["pop_idx"][ix], cfgs[0].k)
            else:
                z_all = all_logits(sub, v["scale"][ix], v["tab_scale"][ix], pop, v["pop_idx"][ix], linear)
                metrics, p = evaluate(z_all, pop, v["pop_idx"][ix], logpi0_all, cfgs[0].k)
        spent = v["rollouts"][ix].tolist()
        tokens = v["tokens"][ix].tolist() if has_len else [float("nan")] * len(sel)
        p_val = p[:, pop.n_train:].cpu().numpy()
        for j, r in enumerate(sel):
            cfg = b.cfgs[r]
            row = {**settings[cfg.run_id], "step": step, "rollouts": spent[j], "k": cfg.k,
                   "tokens": tokens[j] if cfg.mean_len is not None else float("nan")}  # (whatever the batch)
            row.update({key: float(val[j]) for key, val in metrics.items()})
            if cfg.eval_samples:
                row.update(sampled_metrics(p_val[j], max(cfg.eval_samples, cfg.k), cfg.k, b.streams[r].evals))
            rows.append(row)

    record(list(range(len(cfgs))), 0)
    for sch in b.schedule:
        sch.pop(0)

    t = s = chunk_len = 0  # step; step within the current chunk of draws; that chunk's length
    while b.cfgs:
        v = b.vec
        # ---- every chunk of steps: draw the next problem batches and rollout uniforms -------
        # (the streams do not depend on the chunk length, so neither do the results)
        if s == chunk_len:
            R = len(b.cfgs)
            chunk_len = max(1, min(CHUNK, CHUNK_ROWS // (R * Bmax)))
            s = 0
            idx_np = np.zeros((R, chunk_len, Bmax), dtype=np.int64)
            n_max = max((c.n for c in b.cfgs if c.n <= DIRECT_MAX), default=0)
            u_np = np.full((R, chunk_len, Bmax, n_max), 2.0) if n_max else None
            for r, (c, st) in enumerate(zip(b.cfgs, b.streams)):
                idx_np[r, :, : c.b_p] = st.problems(chunk_len)
                if c.n <= DIRECT_MAX:
                    u_np[r, :, : c.b_p, : c.n] = st.uniforms(chunk_len)
            if n_max and not all_co:
                u_np.sort(axis=-1)  # each group's uniforms in order (the padding 2.0 stays last)
            # step-major layout [CHUNK, R, Bmax, ...]: one step's slice is contiguous
            sched = torch.as_tensor(idx_np, device=device).transpose(0, 1).contiguous()
            u_all = (torch.as_tensor(u_np, dtype=dtype, device=device).transpose(0, 1).contiguous()
                     if u_np is not None else None)
            # gather the chunk's problem tensors once
            flat_c = v["pop_idx"][None, :, None] * P_all + sched  # rows of the flattened tables, [CHUNK, R, B]
            chunk = {name: torch.nn.functional.embedding(flat_c, table)  # a row gather, faster than index_select
                     for name, table in tables.items()}
            if b.any_reg and not closed:  # the KL pull's fixed part, once per chunk
                chunk["neg_kl_logpi0"] = chunk["logpi0"] * -b.const["kl"]
        idx = sched[s]
        u = u_all[s] if u_all is not None else None
        here = {k: x[s] for k, x in chunk.items()}

        if closed:  # the linear policy in closed form: only the draws touch every response
            with torch.no_grad():
                grads, z, counts, pi = _closed_step(b, here, u, has_len)
        else:
            grads, z, counts, pi = _general_step(b, here, u, idx, flat_c[s], pop, linear, U_flat, autograd)
        with torch.no_grad():
            _apply_update(b, grads, z, pop, idx, t, here.get("logpi0"))
            # ---- accounting -------------------------------------------------------------------
            v["rollouts"] += b.const["spent"]
            if has_len and counts is not None:  # (None: no run left with a length model)
                L = here["length"]
                extra_draws = (v["n_roll"] - v["n"])[:, None]
                v["tokens"] += (counts * L).sum((-1, -2)) + ((pi * L).sum(-1) * extra_draws * v["b_mask"]).sum(-1)
        t += 1
        s += 1
        if progress is not None:
            progress(b.spent_total)
        # ---- evaluation points; finished runs leave the batch ---------------------------------
        due = [r for r, sch in enumerate(b.schedule) if sch[0] == t]
        if due:
            record(due, t)
            for r in due:
                b.schedule[r].pop(0)
            alive = [r for r, sch in enumerate(b.schedule) if sch]
            if len(alive) < len(b.cfgs):
                ix = torch.as_tensor(alive, dtype=torch.long, device=device)
                sched = sched[:, ix]
                flat_c = flat_c[:, ix]
                u_all = u_all[:, ix] if u_all is not None else None
                chunk = {k: x[:, ix] for k, x in chunk.items()}
                b.keep(alive)
    return rows


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
    with torch.no_grad():
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
    mu = adv.bernoulli_baseline(_baseline_correct(b, m, p), K_["n_base"])
    pg = m * adv.centre(1.0, mu)  # sum of the correct draws' centred rewards (isosim.advantage)
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


def _apply_update(b: _Batch, grads: dict, z, pop, idx, t: int, base) -> None:
    """Weight decay, clipping, SGD/Adam(W) with warm-up, optional trust region; in place."""
    v, R = b.vec, len(b.cfgs)
    if b.plain_adam:  # every run: Adam, the same betas, nothing else: scalar bias corrections
        b1, b2 = b.betas
        bc1, bc2 = 1 - b1 ** (t + 1), 1 - b2 ** (t + 1)
        for k, g in grads.items():
            b.m1[k].mul_(b1).add_(g, alpha=1 - b1)
            b.m2[k].mul_(b2).addcmul_(g, g, value=1 - b2)
            denom = (b.m2[k] / bc2).sqrt_().add_(ADAM_EPS)
            lr = v["lr"].view(R, *([1] * (g.dim() - 1)))
            b.params[k].addcdiv_(b.m1[k] * lr, denom, value=-1.0 / bc1)
        return

    def per_run(x, like):  # [R] -> broadcastable to ``like``
        return x.view(R, *([1] * (like.dim() - 1)))

    if b.any["wd"]:  # L2 in the gradient for sgd and adam; adamw decays below
        coupled_wd = torch.where(v["adamw"], 0.0, v["wd"])
        grads = {k: g + per_run(coupled_wd, g) * b.params[k] for k, g in grads.items()}
    if b.any["clip"]:
        norm = torch.sqrt(sum((g.reshape(R, -1) ** 2).sum(-1) for g in grads.values()))
        factor = torch.clamp(v["clip"] / (norm + 1e-12), max=1.0)
        grads = {k: g * per_run(factor, g) for k, g in grads.items()}
    lr = v["lr"]
    if b.any["warmup"]:
        lr = lr * torch.where(v["warmup"] > 0, ((t + 1) / v["warmup"].clamp(min=1)).clamp(max=1.0), 1.0)
    step = {}
    for k, g in grads.items():
        direction = g
        if b.any["adam"]:
            b1, b2 = per_run(v["beta1"], g), per_run(v["beta2"], g)
            b.m1[k].mul_(b1).add_((1 - b1) * g)
            b.m2[k].mul_(b2).add_((1 - b2) * g * g)
            adam_step = (b.m1[k] / (1 - b1 ** (t + 1))) / ((b.m2[k] / (1 - b2 ** (t + 1))).sqrt() + ADAM_EPS)
            direction = torch.where(per_run(v["adam"], g), adam_step, g)
        step[k] = -per_run(lr, g) * direction
        if b.any["adamw"]:
            step[k] -= per_run(torch.where(v["adamw"], lr * v["wd"], 0.0), g) * b.params[k]
    if b.any["trust"]:
        new = {k: b.params[k] + step[k] for k in step}
        dz = (logits(new, v["scale"], v["tab_scale"], pop, v["pop_idx"], idx, z0=base) - z).abs()
        dz = (dz * v["b_mask"][..., None]).reshape(R, -1).amax(-1)
        factor = torch.clamp(v["trust"] / (dz + 1e-12), max=1.0)
        step = {k: s * per_run(factor, s) for k, s in step.items()}
    for k in step:
        b.params[k] += step[k]


# ----------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------
def simulate(
    configs: Sequence[SimConfig] | SimConfig,
    *,
    device: str = "cpu",
    dtype: torch.dtype = torch.float64,
    progress: Callable[[float], None] | None = None,
    max_batch: int | None = None,
    threads: int | None = 1,
) -> pd.DataFrame:
    """Run simulated GRPO for every configuration; return the records table.

    Runs that share a ``batch_key`` advance together (at most ``max_batch`` at once). The result
    of each run depends only on its own configuration, not on the others in the call.
    ``progress`` receives the rollouts spent at each step (increments). ``threads`` caps torch's
    CPU threads while simulating (None: leave torch's setting alone).
    """
    if isinstance(configs, SimConfig):
        configs = [configs]
    configs = list(configs)
    if not configs:
        raise IsosimError("simulate: no configurations given")
    for c in configs:
        if not isinstance(c, SimConfig):
            raise IsosimError(f"simulate: expected SimConfig, got {type(c).__name__}")
    ids = [c.run_id for c in configs]
    if len(set(ids)) != len(ids):
        raise IsosimError("simulate: two configurations are identical (same run_id)")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise IsosimError(f"device {device!r} requested but CUDA is not available")
    groups: dict[tuple, list[SimConfig]] = defaultdict(list)
    for c in configs:
        groups[c.batch_key].append(c)
    rows: list[dict] = []
    before = torch.get_num_threads()
    if threads is not None:  # small tensors: extra threads mostly spin (and collapse on a busy machine)
        torch.set_num_threads(threads)
    try:
        for group in groups.values():
            size = max_batch or len(group)
            for i in range(0, len(group), size):
                # no autograd anywhere but in the mlp policy: inference mode skips autograd's bookkeeping
                with torch.inference_mode(group[0].policy != "mlp"):
                    rows.extend(_run_batch(group[i: i + size], torch.device(device), dtype, progress))
    finally:
        torch.set_num_threads(before)
    df = pd.DataFrame(rows)
    order = {rid: i for i, rid in enumerate(ids)}  # runs in the order given, each by step
    by = np.lexsort((df["step"].to_numpy(), np.fromiter((order[r] for r in df["run_id"]), int, len(df))))
    return df.take(by).reset_index(drop=True)
