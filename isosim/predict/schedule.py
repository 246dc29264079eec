"""A two-stage n schedule against constant n at the same budget: the simulator's view.

``--schedule 8:0.5,32`` means n = 8 for the first half of the budget's rollouts, then n = 32 for
the rest, at one B_p. isosim's batched engine runs one n per run, so the schedule and its
constant-n alternatives all go through the same plain GRPO loop here, written after
:func:`isosim.sim.reference.train_per_rollout` (one sampled response per rollout, groups of n,
group-normalised advantages, the exact KL and entropy terms, the optimizer of the preset): the
policy, optimizer state and problems carry over from stage 1 to stage 2, whose lr follows the
preset's batch-size rule for the new ``B_p * n``. Every arm shares its seeds' problem draws, and
the comparison is the held-out pass rate (validation avg@1, exact) at the end of the budget.

This is what the simulator expects for a preset, not a measurement of a real run.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch

from isosim.errors import IsosimError
from isosim.sim import advantage as adv_
from isosim.sim.config import SimConfig
from isosim.sim.engine import ADV_EPS, feature_scale, init_params, logits
from isosim.sim.presets import get_preset
from isosim.sim.problems import build, stack

SIM_CAP = 5e4
"""largest budget simulated here (rollouts): the loop stays within a minute on one CPU thread"""


def parse_schedule(text: str) -> list[tuple[int, float]]:
    """``"8:0.5,32"`` -> ``[(8, 0.5), (32, 0.5)]``: n and its share of the rollouts, two stages."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = IsosimError(f"--schedule {text!r}: expected two stages N1:SHARE,N2 (e.g. 8:0.5,32: n = 8 for the "
                      "first half of the rollouts, then n = 32)")
    if len(parts) != 2 or ":" not in parts[0] or ":" in parts[1]:
        raise bad
    try:
        n1, share = int(parts[0].split(":")[0]), float(parts[0].split(":")[1])
        n2 = int(parts[1])
    except ValueError:
        raise bad from None
    if not 0 < share < 1:
        raise IsosimError(f"--schedule {text!r}: the first stage's share of the rollouts must be between 0 and 1")
    if min(n1, n2) < 2:
        raise IsosimError(f"--schedule {text!r}: every stage needs n >= 2 (GRPO compares completions of a prompt)")
    if n1 == n2:
        raise IsosimError(f"--schedule {text!r}: both stages have n = {n1}; that is constant n")
    return [(n1, share), (n2, 1.0 - share)]


def _config(preset: str, n: int, b_p: int, seed: int) -> SimConfig:
    p = dict(get_preset(preset))
    p.update(n=n, b_p=b_p, seed=seed, budget=None, steps=1)
    fields = {f.name for f in dataclasses.fields(SimConfig)}
    return SimConfig(**{k: v for k, v in p.items() if k in fields})


def run_stages(preset: str, stages: list[tuple[int, int]], b_p: int, seed: int) -> float:
    """Validation pass rate after ``stages`` ((n, steps), ...) of plain GRPO on the preset."""
    cfg = _config(preset, stages[0][0], b_p, seed)
    dtype = torch.float64
    pop = stack([build(cfg, memorize=cfg.memorize > 0)])
    scale, tab_scale = feature_scale([cfg], pop, "cpu", dtype)
    params = init_params([cfg], pop, "cpu", dtype)
    for p in params.values():
        p.requires_grad_(True)
    opt_cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[cfg.optimizer]
    kwargs = {} if cfg.optimizer == "sgd" else {"betas": (cfg.beta1, cfg.beta2), "eps": 1e-8}
    opt = opt_cls(list(params.values()), lr=cfg.step_lr, weight_decay=cfg.wd, **kwargs)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    pop_idx = torch.zeros(1, dtype=torch.long)
    logpi0 = torch.log_softmax(pop.z0[0], -1)
    correct = pop.correct[0].to(dtype)
    for n, steps in stages:
        stage_cfg = dataclasses.replace(cfg, n=n)
        for group in opt.param_groups:
            group["lr"] = stage_cfg.step_lr
        for _ in range(steps):
            problems = torch.as_tensor(rng.choice(cfg.n_train, size=b_p, replace=False))
            z = logits(params, scale, tab_scale, pop, pop_idx, problems[None])[0]
            logpi = torch.log_softmax(z, -1)
            actions = torch.multinomial(logpi.detach().exp(), n, replacement=True, generator=gen)  # [b_p, n]
            r = correct[problems[:, None], actions]
            div = adv_.divisor(adv_.spread(r, 1), ADV_EPS) if cfg.adv == "grpo" else None
            adv = adv_.advantage(r, adv_.baseline(r, 1), div)
            chosen = logpi.gather(1, actions)
            pg = -(adv * chosen).sum() / (b_p * n)
            pi = logpi.exp()
            kl = (pi * (logpi - logpi0[problems])).sum(-1)
            ent = -(pi * logpi).sum(-1)
            loss = pg + (cfg.kl * kl - cfg.entropy * ent).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        val = torch.arange(cfg.n_train, cfg.n_train + cfg.n_val)
        pi = torch.softmax(logits(params, scale, tab_scale, pop, pop_idx, val[None])[0], -1)
        return float((pi * correct[val]).sum(-1).mean())


def compare(schedule: list[tuple[int, float]], ns: list[int], budget: float, b_p: int, *, preset: str = "easy",
            seeds: int = 3) -> dict:
    """The schedule against constant n at ``min(budget, SIM_CAP)`` rollouts: the schedule's own two n
    and the n of ``ns`` from half the smaller to twice the larger; final validation pass rate per
    arm, mean and standard error over ``seeds`` (one CPU thread)."""
    if seeds < 2:
        raise IsosimError("the schedule comparison needs at least 2 seeds (for its standard errors)")
    sim_budget = min(float(budget), SIM_CAP)
    (n1, share1), (n2, _) = schedule
    m1 = int(sim_budget * share1 // (b_p * n1))
    m2 = int((sim_budget - m1 * b_p * n1) // (b_p * n2))
    if m1 < 1 or m2 < 1:
        raise IsosimError(f"--schedule: at {sim_budget:.3g} rollouts and B_p = {b_p} a stage gets no whole step "
                          f"(stage 1: {m1}, stage 2: {m2}); lower --b-p")
    arms = {f"n = {n1} then {n2}": [(n1, m1), (n2, m2)]}
    near = [n for n in ns if min(n1, n2) / 2 <= n <= 2 * max(n1, n2)]
    for n in sorted(set(near) | {n1, n2}):
        steps = int(sim_budget // (b_p * n))
        if steps >= 1:
            arms[f"n = {n}"] = [(n, steps)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: more threads only contend
    try:
        rows = [{"arm": arm, "seed": s, "val": run_stages(preset, stages, b_p, s)}
                for arm, stages in arms.items() for s in range(seeds)]
    finally:
        torch.set_num_threads(threads)
    df = pd.DataFrame(rows)
    table = df.groupby("arm", sort=False)["val"].agg(["mean", "std", "count"])
    table["se"] = table["std"] / np.sqrt(table["count"])
    best_const = table.drop(index=next(iter(arms))).sort_values("mean").index[-1]
    diff = df[df.arm == next(iter(arms))]["val"].to_numpy() - df[df.arm == best_const]["val"].to_numpy()
    diff_se = float(diff.std(ddof=1) / math.sqrt(len(diff)))
    return {
        "preset": preset, "budget": float(budget), "simulated_budget": sim_budget, "b_p": b_p, "seeds": seeds,
        "schedule": [{"n": n1, "steps": m1}, {"n": n2, "steps": m2}],
        "arms": {arm: {"val_mean": float(r["mean"]), "val_se": float(r["se"]), "steps": sum(m for _, m in arms[arm])}
                 for arm, r in table.iterrows()},
        "best_constant": best_const, "schedule_minus_best": float(np.mean(diff)), "schedule_minus_best_se": diff_se,
        "verdict": _verdict(float(np.mean(diff)), diff_se, best_const),
        "note": ("the simulator's view: a plain GRPO loop on the preset's simulated problems, validation pass rate "
                 f"at {sim_budget:.3g} rollouts" + (f" (the budget {budget:.3g} capped)" if budget > sim_budget else "")
                 + "; not a measurement of your model"),
    }


def _verdict(diff: float, se: float, best: str) -> str:
    if abs(diff) <= 2 * se:
        return f"the schedule ties the best constant n ({best}) within 2 se"
    return (f"the schedule {'beats' if diff > 0 else 'trails'} the best constant n ({best}) by "
            f"{abs(diff):.3f} (+- {se:.3f})")
