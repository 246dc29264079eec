"""The optimiser: weight decay, gradient clipping, SGD / Adam(W) with warm-up and an optional
trust region on the logits, applied to every run of a batch at once (in place)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from isosim.sim.engine.policies import logits

if TYPE_CHECKING:
    from isosim.sim.engine.state import _Batch


ADAM_EPS = 1e-8


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

    c = b.optim_const
    if c["coupled_wd"] is not None:  # L2 in the gradient for sgd and adam; adamw decays below
        grads = {k: g + per_run(c["coupled_wd"], g) * b.params[k] for k, g in grads.items()}
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
        pr = b.run_views(g.dim())  # the per-run factors shaped for g (cached until runs leave)
        if b.any["adam"]:
            b1, b2 = pr["beta1"], pr["beta2"]
            b.m1[k].mul_(b1).add_(pr["1-beta1"] * g)
            b.m2[k].mul_(b2).add_(pr["1-beta2"] * g * g)
            adam_step = (b.m1[k] / (1 - b1 ** (t + 1))) / ((b.m2[k] / (1 - b2 ** (t + 1))).sqrt() + ADAM_EPS)
            direction = adam_step if c["all_adam"] else torch.where(pr["adam"], adam_step, g)
        step[k] = (pr["-lr"] if lr is v["lr"] else -per_run(lr, g)) * direction
        if b.any["adamw"]:
            decay = pr["adamw_decay"] if lr is v["lr"] else per_run(torch.where(v["adamw"], lr * v["wd"], 0.0), g)
            step[k] -= decay * b.params[k]
    if b.any["trust"]:
        new = {k: b.params[k] + step[k] for k in step}
        dz = (logits(new, v["scale"], v["tab_scale"], pop, v["pop_idx"], idx, z0=base) - z).abs()
        dz = (dz * v["b_mask"][..., None]).reshape(R, -1).amax(-1)
        factor = torch.clamp(v["trust"] / (dz + 1e-12), max=1.0)
        step = {k: s * per_run(factor, s) for k, s in step.items()}
    for k in step:
        b.params[k] += step[k]
