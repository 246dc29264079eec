"""Policies: the runs' parameters, the logits of a batch of (run, problem) pairs, and the
backward pass of the linear and tabular policies (no autograd), including the linear policy's
closed form (:class:`LinearFeatures`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from isosim.sim.config import SimConfig
from isosim.sim.problems import Population


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
        others (how :func:`isosim.sim.problems.build` makes them): then a problem's policy depends on
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
