"""A plain per-rollout GRPO loop through the gymnasium vector env: the engine's yardstick.

It does what a textbook GRPO implementation does, one sampled response per sub-env: sample
``b_p * n`` actions, step the env, reshape rewards to ``[b_p, n]`` groups, normalise them, and
backpropagate ``-mean(A_i * log pi(a_i))`` (plus the exact KL / entropy terms) with autograd
and ``torch.optim``. Same problems, same policy parametrisation, same loss; different
randomness. Tests check that the engine's learning curves match it in distribution, and
``benchmarks/bench_engine.py`` times it against the count-based path. Only SGD and Adam
(``optimizer="sgd" | "adam"``), no decoupled baseline, trust region or warm-up.
"""

from __future__ import annotations

import pandas as pd
import torch

from isosim.sim import advantage as adv_
from isosim.sim.config import SimConfig
from isosim.sim.engine import ADV_EPS, feature_scale, init_params, logits
from isosim.sim.env import BanditVectorEnv
from isosim.sim.problems import build, stack


def train_per_rollout(cfg: SimConfig, *, eval_every: int = 1) -> pd.DataFrame:
    """Run ``cfg`` with one sample per rollout; return step, rollouts, train_reward rows."""
    if cfg.optimizer not in ("sgd", "adam") or cfg.n_est is not None:
        raise ValueError("the per-rollout reference supports sgd/adam without a decoupled baseline")
    dtype = torch.float64
    pop = stack([build(cfg)])
    scale, tab_scale = feature_scale([cfg], pop, "cpu", dtype)
    params = init_params([cfg], pop, "cpu", dtype)
    for p in params.values():
        p.requires_grad_(True)
    opt_cls = torch.optim.SGD if cfg.optimizer == "sgd" else torch.optim.Adam
    kwargs = {} if cfg.optimizer == "sgd" else {"betas": (cfg.beta1, cfg.beta2), "eps": 1e-8}
    opt = opt_cls(list(params.values()), lr=cfg.step_lr, weight_decay=cfg.wd, **kwargs)
    env = BanditVectorEnv(cfg.b_p * cfg.n, config=cfg, group_size=cfg.n)
    obs, _ = env.reset(seed=cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    pop_idx = torch.zeros(1, dtype=torch.long)
    logpi0_all = torch.log_softmax(pop.z0[0], -1)
    train_idx = torch.arange(cfg.n_train)[None]

    def train_reward() -> float:
        with torch.no_grad():
            pi = torch.softmax(logits(params, scale, tab_scale, pop, pop_idx, train_idx), -1)
            return float((pi * pop.correct[0, : cfg.n_train]).sum(-1).mean())

    rows = [{"step": 0, "rollouts": 0.0, "train_reward": train_reward()}]
    for step in range(1, cfg.total_steps + 1):
        problems = torch.as_tensor(obs[:: cfg.n])  # one per group: [b_p]
        z = logits(params, scale, tab_scale, pop, pop_idx, problems[None])[0]  # [b_p, K]
        logpi = torch.log_softmax(z, -1)
        rollout_logpi = logpi.repeat_interleave(cfg.n, dim=0)  # [b_p * n, K]
        actions = torch.multinomial(rollout_logpi.detach().exp(), 1, generator=gen).squeeze(-1)
        obs, rewards, _, _, _ = env.step(actions.numpy())
        r = torch.as_tensor(rewards).view(-1, cfg.n)  # the GRPO group is a reshape
        # (a group of one has no std; its centred reward is exactly 0 anyway)
        div = adv_.divisor(adv_.spread(r, 1), ADV_EPS) if cfg.adv == "grpo" and cfg.n > 1 else None
        adv = adv_.advantage(r, adv_.baseline(r, 1), div)
        keep = torch.ones(cfg.b_p, dtype=torch.bool)
        if cfg.zero_var_filter:
            keep = (r.max(1).values > r.min(1).values)
        kept = max(int(keep.sum()), 1)
        chosen = rollout_logpi.gather(1, actions[:, None]).squeeze(-1).view(-1, cfg.n)
        pg = -(adv * chosen * keep[:, None]).sum() / (kept * cfg.n)
        pi = logpi.exp()
        kl = (pi * (logpi - logpi0_all[problems])).sum(-1)
        ent = -(pi * logpi).sum(-1)
        loss = pg + ((cfg.kl * kl - cfg.entropy * ent) * keep).sum() / kept
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % eval_every == 0 or step == cfg.total_steps:
            rows.append({"step": step, "rollouts": float(step * cfg.b_p * cfg.n), "train_reward": train_reward()})
    return pd.DataFrame(rows)

