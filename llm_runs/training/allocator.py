"""A run's per-problem rollout allocation (``--allocation``): which problems a step samples and how
many rollouts each gets, by the rules and the pass-rate estimator of :mod:`isosim.sim.allocation`
(the simulator's, so both worlds allocate alike). A part of
:class:`llm_runs.training.train.GRPOTrainer`.

``uniform`` is today's GRPO: ``b_p`` problems in epoch order, ``n_est`` rollouts each, and no
estimator. Any other rule draws its candidates in epoch order (``b_p``, or ``2 b_p`` for the
selecting rules ``filter`` and ``band``), reads their pass rates from a
:class:`~isosim.sim.allocation.PassRateEstimator` fed with each problem's own sampled rewards
(never with evaluation results), and returns ``b_p`` problems with counts summing to ``b_p * n``:
every step spends the rollouts of a uniform step. A step's tie-breaking draws come from a seed
derived from (seed, step), so a resumed run plans the same batches; the estimator's state and the
group sizes since the last record go into the checkpoint.

Columns it adds to a record (only for rules other than uniform, whose records keep their columns):
``allocation`` (the rule), ``alloc_n_min``, ``alloc_n_mean``, ``alloc_n_max`` (per-problem n over
the groups sampled since the previous record; None at step 0) and ``alloc_n_counts`` (the list of
per-problem n of the latest step, in batch order). Each step's ``metrics.jsonl`` row carries
``alloc/n_min``, ``alloc/n_mean``, ``alloc/n_max`` and ``alloc/counts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.sim.allocation import PassRateEstimator, candidates_per_step, check_rule, plan_batch
from llm_runs.training.processes import TAG_ALLOC, derive_seed


class Allocator:
    """Plans each step's batch and counts, and learns the pass rates that the next plans read."""

    def __init__(self, rule: str, num_problems: int, b_p: int, n: int, n_est: int, seed: int):
        self.rule = check_rule(rule)
        self.b_p, self.n, self.n_est, self.seed = b_p, n, n_est, seed
        self.estimator = None if self.uniform else PassRateEstimator(num_problems)
        self.since: dict[int, int] = {}  # group size -> groups of that size since the last record
        self.last: list[int] | None = None  # the latest step's counts

    @property
    def uniform(self) -> bool:
        return self.rule == "uniform"

    def plan(self, order: Any, step: int) -> tuple[list[int], list[int]]:
        """The step's problem indices (``b_p``, identical on every process) and their rollouts."""
        if self.uniform:
            ids, counts = order.next(self.b_p), [self.n_est] * self.b_p
        else:
            cand = order.next(candidates_per_step(self.rule, self.b_p))
            rng = np.random.default_rng(derive_seed(self.seed, step, TAG_ALLOC))
            picked, sizes = plan_batch(self.rule, self.estimator, cand, self.b_p, self.n, rng)
            ids, counts = [int(i) for i in picked], [int(k) for k in sizes]
            if sum(counts) != self.b_p * self.n:  # the rule's contract: a uniform step's compute
                raise IsosimError(f"allocation {self.rule!r} planned {sum(counts)} rollouts, not {self.b_p * self.n}")
        for k in counts:
            self.since[k] = self.since.get(k, 0) + 1
        self.last = counts
        return ids, counts

    def observe(self, ids: list[int], successes: list[float], trials: list[int]) -> None:
        """Add a step's results (every process's groups, in batch order) to the estimator."""
        if self.estimator is not None:
            self.estimator.update(ids, np.clip(successes, 0.0, trials), trials)

    def step_metrics(self, counts: list[int]) -> dict[str, Any]:
        if self.uniform:
            return {}
        c = np.asarray(counts, dtype=float)
        return {"alloc/n_min": float(c.min()), "alloc/n_mean": float(c.mean()), "alloc/n_max": float(c.max())}

    def record_fields(self) -> dict[str, Any]:
        """The record's allocation columns (none for uniform); starts the next record's tally."""
        if self.uniform:
            return {}
        sizes = np.array(sorted(self.since), dtype=float)
        groups = np.array([self.since[int(k)] for k in sizes], dtype=float)
        row: dict[str, Any] = {"allocation": self.rule, "alloc_n_min": None, "alloc_n_mean": None,
                               "alloc_n_max": None, "alloc_n_counts": self.last}
        if groups.sum() > 0:
            row.update({"alloc_n_min": int(sizes.min()), "alloc_n_max": int(sizes.max()),
                        "alloc_n_mean": float((sizes * groups).sum() / groups.sum())})
        self.since = {}
        return row

    def state_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "since": {str(k): v for k, v in self.since.items()}, "last": self.last,
                "estimator": self.estimator.state_dict() if self.estimator is not None else None}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore :meth:`state_dict`; ``None`` (a checkpoint of a uniform run saved before
        allocation existed) is a uniform allocator's empty state."""
        if state is None:
            if not self.uniform:
                raise IsosimError("checkpoint: no allocation state for allocation " + repr(self.rule))
            return
        if state.get("rule") != self.rule:
            raise IsosimError(f"checkpoint: saved with allocation {state.get('rule')!r}, not {self.rule!r}")
        self.since = {int(k): int(v) for k, v in state["since"].items()}
        self.last = None if state["last"] is None else [int(k) for k in state["last"]]
        if self.estimator is not None:
            est = PassRateEstimator.from_state_dict(state["estimator"])
            if est.num_problems != self.estimator.num_problems:
                raise IsosimError("checkpoint: the estimator was saved for another training set")
            self.estimator = est


@dataclass
class StepGroups:
    """A process's groups of one step: what enters the update and what is logged."""

    sel: list[int]  # rollouts (batch rows) in the update
    sel_adv: list[float]  # their advantages
    keep: Any  # bool tensor (groups,): groups kept in the update
    zero_var: Any  # bool tensor (groups,): groups whose rewards are all equal
    rates: list[float]  # each group's mean reward
    sums: list[float]  # each group's summed reward


def step_groups(rewards: Any, sizes: list[int], cfg: Any, uniform: bool) -> StepGroups:
    """Advantages and group statistics of a step's rewards (prompt-major groups of ``sizes``).

    Uniform: groups of ``n_est`` (a reshape), the update on the first ``n`` of each, zero-variance
    groups dropped with ``filter_zero_variance``. A rule's groups of unequal size: each group's
    baseline (and std) over its own rollouts (:func:`llm_runs.training.grpo.unequal_group_advantages`),
    every rollout in the update."""
    import torch

    from llm_runs.training import grpo

    per = len(sizes)
    keep = torch.ones(per, dtype=torch.bool)
    if uniform:
        adv = grpo.group_advantages(rewards, cfg.n, cfg.n_est, cfg.advantage)  # (per, n)
        if cfg.filter_zero_variance:
            keep = ~grpo.zero_variance_groups(rewards, cfg.n_est)
        sel = [g * cfg.n_est + j for g in range(per) if keep[g] for j in range(cfg.n)]
        sel_adv = [float(adv[g, j]) for g in range(per) if keep[g] for j in range(cfg.n)]
        rates = rewards.view(-1, cfg.n_est).mean(dim=1).tolist()
        sums = [r * cfg.n_est for r in rates]
        return StepGroups(sel, sel_adv, keep, grpo.zero_variance_groups(rewards, cfg.n_est), rates, sums)
    sums = [float(g.sum()) for g in torch.split(rewards, sizes)]
    return StepGroups(list(range(len(rewards))), grpo.unequal_group_advantages(rewards, sizes, cfg.advantage).tolist(),
                      keep, grpo.unequal_zero_variance_groups(rewards, sizes), [s / k if k else 0.0 for s, k in zip(sums, sizes)],
                      sums)
