"""Per-problem allocation in the engine: each step, every run of a batch whose rule is not
``uniform`` plans its batch (:func:`isosim.sim.allocation.plan_batch`) from its pass-rate
estimator, draws its rollouts' uniforms for its own counts, and after the step adds the groups'
correct draws to the estimator. The estimator sees only those sampled outcomes, never the
simulator's pass rates.

A planned step hands the GRPO step per-group sizes: the draws of group ``j`` are its first
``n_j`` uniforms (the rest are padding, 2.0, which no response takes), and the group's mean and
std come from its own ``n_j`` draws. The loss is normalised by the step's ``b_p * n`` rollouts,
as a uniform step's is.
"""

from __future__ import annotations

import numpy as np
import torch

from isosim.sim import advantage as adv
from isosim.sim.allocation import PassRateEstimator, plan_batch


def start(b, Bmax: int) -> None:
    """Give every run of ``b`` its estimator (an unseen problem at the prior)."""
    b.Bmax = Bmax
    for c, st in zip(b.cfgs, b.streams):
        st.estimator = PassRateEstimator(c.n_train)
        st.cand = None
        st.plan = None


def refill(b, steps: int) -> None:
    """Draw the next ``steps`` steps' candidate problems of every run (epoch order)."""
    for st in b.streams:
        st.cand = st.candidates(steps)


def plan_step(b, s: int, sort: bool, P_all: int):
    """Plan step ``s`` of the current chunk for every run: the batch's problem indices
    [R, Bmax] (a tensor), the rollout uniforms [R, Bmax, n_cap] (sorted per group when ``sort``)
    and the rows of the flattened problem tables; sets the step's group sizes in ``b.const``."""
    R, Bmax = len(b.cfgs), b.Bmax
    idx = np.zeros((R, Bmax), dtype=np.int64)
    n = np.ones((R, Bmax))  # padding slots: a group of one that draws nothing
    for r, (c, st) in enumerate(zip(b.cfgs, b.streams)):
        ids, counts = plan_batch(c.allocation, st.estimator, st.cand[s], c.b_p, c.n, rng=st.alloc)
        st.plan = (ids, counts)
        idx[r, : c.b_p] = ids
        n[r, : c.b_p] = counts
    n_cap = int(n.max())
    u = np.full((R, Bmax, n_cap), 2.0)
    cols = np.arange(n_cap)
    for r, (c, st) in enumerate(zip(b.cfgs, b.streams)):
        counts = st.plan[1]
        u[r, : c.b_p][cols[None, :] < counts[:, None]] = st.draws.random(int(counts.sum()))
    if sort:
        u.sort(axis=-1)
    device, dtype = b.vec["n"].device, b.vec["n"].dtype
    n_t = torch.as_tensor(n, dtype=dtype, device=device)
    b.const.update(n=n_t, n_base=n_t, var_factor=adv.bessel(n_t))
    idx_t = torch.as_tensor(idx, device=device)
    flat = b.vec["pop_idx"][:, None] * P_all + idx_t
    return idx_t, torch.as_tensor(u, dtype=dtype, device=device), flat


def observe(b, m) -> None:
    """Add each run's groups' correct draws ``m`` [R, Bmax] to its estimator."""
    m_np = m.cpu().numpy()
    for r, (c, st) in enumerate(zip(b.cfgs, b.streams)):
        ids, counts = st.plan
        st.estimator.update(ids, np.rint(m_np[r, : c.b_p]), counts)
