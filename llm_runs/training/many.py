"""K organism runs in one process: ``python -m llm_runs.training.many --config A.json --config B.json ...``.

A run of the organism at small n is overhead-bound: its step is a few hundred tiny operations whose
Python and dispatch costs outweigh their arithmetic. ``ManyTrainer`` advances K runs of one model
architecture (the same ``n``, ``n_est``, ``b_p`` and lengths; seeds, data, temperature, recipe and
learning rate may differ) step by step, and does the work of the K runs' step in one pass where
it can (``llm_runs.training.stacked``):

* one sampling loop for the K runs' rollouts (stacked weights, each run its own random stream);
* one forward and one backward of the K runs' update (and one reference forward), after which
  each run takes its own optimizer step.

Everything else is each run's own ``GRPOTrainer`` (``llm_runs.training.train``), called piece by
piece: its problem order, seeds, rewards and advantages, loss and statistics, AdamW state,
evaluation (its own lean sampler, one run at a time: an evaluation batch is large enough not to
need company), records.jsonl, metrics.jsonl, checkpoints and resume. A run's folder is the one
its single-run trainer writes, and either trainer resumes the other's run. The records match the
single-run lean path's (``sampler lean``, ``train_forward lean``) to float rounding: the batched
matmuls round differently, so over a long run a near-tied draw may flip (the tests bound it on
short runs). A run's ``wall_s`` counts its share of each joint step (the step's time / K).

A stop signal (SIGTERM / SIGUSR1) checkpoints every run at the end of the current step; the same
command resumes them (runs may stand at different steps: each step advances the unfinished ones).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from isosim.errors import IsosimError
from llm_runs.config import RunConfig, parse_args
from llm_runs.training.processes import STOP_SIGNALS, restore_stop_handlers
from llm_runs.training.train import GRPOTrainer, RewardFn

# settings every run of one process shares (the shapes of the joint step)
SHARED = ("model", "n", "n_est", "b_p", "max_new_tokens", "top_p", "sampler_batch_size", "precision",
          "max_prompt_tokens", "prompt_template", "instruction", "system_prompt")


def check_group(cfgs: Sequence[RunConfig]) -> None:
    """Refuse a set of runs that one process cannot advance together, with the reason."""
    if not cfgs:
        raise IsosimError("no runs given")
    first = cfgs[0]
    for c in cfgs:
        if c.sampler != "lean" or c.train_forward != "lean":
            raise IsosimError(f"{c.run_id}: runs in one process use sampler 'lean' and train_forward 'lean'")
        if c.num_iterations != 1:
            raise IsosimError(f"{c.run_id}: runs in one process take one optimizer step per batch (num_iterations 1)")
        if c.micro_batch_size < c.b_p * c.n:
            raise IsosimError(f"{c.run_id}: runs in one process update in one micro-batch "
                              f"(micro_batch_size >= b_p * n = {c.b_p * c.n})")
        if c.precision == "bf16":
            raise IsosimError(f"{c.run_id}: runs in one process compute in fp32")
        if getattr(c, "allocation", "uniform") != "uniform":
            raise IsosimError(f"{c.run_id}: runs in one process give every problem the same n "
                              f"(allocation uniform, not {c.allocation!r})")
        diff = [k for k in SHARED if getattr(c, k) != getattr(first, k)]
        if diff:
            raise IsosimError(f"{c.run_id} differs from {first.run_id} in {', '.join(diff)}: runs in one process "
                              "share these settings")
    outs = [str(c.out) for c in cfgs]
    if len(set(outs)) < len(outs):
        raise IsosimError("two runs write to the same --out folder")


class ManyTrainer:
    """K ``GRPOTrainer`` runs advanced together (see the module doc); ``train()`` runs all to their budgets."""

    def __init__(self, cfgs: Sequence[RunConfig], reward_fn: RewardFn | None = None,
                 log: Callable[[str], None] | None = None):
        check_group(cfgs)
        self.trainers = [GRPOTrainer(c, reward_fn=reward_fn, log=log) for c in cfgs]
        self._stacks: dict[tuple[int, ...], Any] = {}
        self._ref: dict[tuple[int, ...], Any] = {}
        self.interrupted = False
        self.stop_signal: int | None = None

    def setup(self) -> None:
        import torch

        from llm_runs.sampling.lean import LlamaParts

        for tr in self.trainers:
            tr.setup()
            if tr.world != 1:
                raise IsosimError("runs in one process need a single process (no accelerate launch)")
        for tr in reversed(self.trainers):  # each setup chained its handlers on the previous one's
            restore_stop_handlers(tr)
        self._saved_handlers = {}
        for name in STOP_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is not None:
                self._saved_handlers[sig] = signal.signal(sig, self._on_signal)
        self._parts = [LlamaParts(tr.accelerator.unwrap_model(tr.model)) for tr in self.trainers]
        self._ref_parts = [LlamaParts(tr.ref_model) if tr.ref_model is not None else None for tr in self.trainers]
        self._torch = torch

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop_signal = signum
        for tr in self.trainers:
            tr._stop_signal = signum

    def _stack(self, idx: tuple[int, ...]) -> Any:
        from llm_runs.training.stacked import StackedParts

        if idx not in self._stacks:
            self._stacks[idx] = StackedParts([self._parts[i] for i in idx])
        return self._stacks[idx]

    def _ref_weights(self, idx: tuple[int, ...]) -> tuple[Any, Any]:
        """The reference models of runs ``idx`` (they never change: stacked once)."""
        from llm_runs.training.stacked import StackedParts

        if idx not in self._ref:
            sp = StackedParts([self._ref_parts[i] for i in idx])
            with self._torch.no_grad():
                self._ref[idx] = (sp, sp.weights())
        return self._ref[idx]

    # ------------------------------------------------------------------------------------------
    def train(self) -> list[list[dict[str, Any]]]:
        """Run every run to its budget; returns each run's records (all of them, on resume too)."""
        if not hasattr(self, "_parts"):
            self.setup()
        done = set()
        try:
            for i, tr in enumerate(self.trainers):
                cfg = tr.cfg
                if not tr.running():
                    if tr.step >= cfg.total_steps:
                        tr._log(f"run already complete ({tr.step} steps); records in {tr.records.path}")
                    tr.close()
                    done.add(i)
                    continue
                tr._log(f"{cfg.run_id}: {len(tr.train_problems)} training / {len(tr.val_problems)} validation "
                        f"problems, n={cfg.n} (n_est={cfg.n_est}) b_p={cfg.b_p} M={cfg.total_steps} steps, "
                        f"lr={cfg.lr:.3g}, {len(self.trainers)} runs in this process")
                if tr.step == 0 and 0 in tr.eval_at:
                    tr._write_record(tr.evaluate(), None)
            while len(done) < len(self.trainers):
                active = tuple(i for i in range(len(self.trainers)) if i not in done)
                t0 = time.perf_counter()
                metrics = self.step(active)
                share = (time.perf_counter() - t0) / len(active)
                for i, m in zip(active, metrics):
                    tr = self.trainers[i]
                    tr.wall += share
                    m["time/step_s"] = share
                    if tr.end_step(m):
                        self.interrupted = True
                        done.add(i)
                    elif not tr.running():
                        tr.finish()
                        done.add(i)
        finally:
            for sig, old in getattr(self, "_saved_handlers", {}).items():
                signal.signal(sig, old)
            self._saved_handlers = {}
        return [tr.records.rows() for tr in self.trainers]

    def step(self, idx: tuple[int, ...]) -> list[dict[str, float]]:
        """One step of each run ``idx``: joint sampling, each run's scoring and selection, joint update."""
        from llm_runs.training.stacked import generate_many

        trs = [self.trainers[i] for i in idx]
        ms: list[dict[str, float]] = [{} for _ in trs]
        t = time.perf_counter()
        mines = [tr.next_problems() for tr in trs]
        c0 = trs[0].cfg
        batches = generate_many(self._stack(idx), [tr.sampler for tr in trs],
                                [[tr.train_prompts[i] for i in mine] for tr, mine in zip(trs, mines)], n=c0.n_est,
                                temperatures=[tr.cfg.temperature for tr in trs], top_p=c0.top_p,
                                max_new_tokens=c0.max_new_tokens, seeds=[tr.rollout_seed() for tr in trs])
        share = (time.perf_counter() - t) / len(trs)
        selected = []
        for tr, mine, batch, m in zip(trs, mines, batches, ms):
            m["time/sample_s"] = share
            selected.append(tr.select(mine, batch, m))
        t = time.perf_counter()
        updates = self.update(idx, [args for _, _, args in selected])
        share = (time.perf_counter() - t) / len(trs)
        out = []
        for tr, mine, batch, (rewards, groups, _), m, u in zip(trs, mines, batches, selected, ms, updates):
            m.update(u)
            m["time/train_s"] = share
            out.append(tr.bookkeeping(mine, batch, rewards, groups, m))
        return out

    def update(self, idx: tuple[int, ...], args: list[tuple]) -> list[dict[str, float]]:
        """Each run's ``update(*args)``, with one forward and one backward for all of them."""
        from llm_runs.training.policy_update import STAT_KEYS
        from llm_runs.training.stacked import response_logprobs_many

        torch = self._torch
        out: list[dict[str, float] | None] = [None] * len(idx)
        joint = []
        for j, (i, a) in enumerate(zip(idx, args)):
            if not a[1] or sum(len(c) for c in a[1]) == 0:  # nothing to train on: the single path's skip
                out[j] = self.trainers[i].update(*a)
            else:
                joint.append(j)
        if not joint:
            return out  # type: ignore[return-value]
        sub = tuple(idx[j] for j in joint)
        trs = [self.trainers[i] for i in sub]
        pad = int(trs[0].tokenizer.pad_token_id)
        temps = [tr.cfg.temperature for tr in trs]
        sp = self._stack(sub)
        fwd = response_logprobs_many(sp, sp.weights(), [args[j][0] for j in joint], [args[j][1] for j in joint],
                                     pad, temps, with_entropy=True, device=trs[0].accelerator.device)
        refs: list[Any] = [None] * len(sub)
        with_ref = tuple(k for k, tr in enumerate(trs) if tr.ref_model is not None)
        if with_ref:
            rsp, rw = self._ref_weights(tuple(sub[k] for k in with_ref))
            with torch.no_grad():
                rout = response_logprobs_many(rsp, rw, [args[joint[k]][0] for k in with_ref],
                                              [args[joint[k]][1] for k in with_ref], pad,
                                              [temps[k] for k in with_ref], with_entropy=False,
                                              device=trs[0].accelerator.device)
            for k, r in zip(with_ref, rout):
                refs[k] = r[0]
        total, stats, gaps = None, [], []
        for k, (tr, j) in enumerate(zip(trs, joint)):
            prompts, completions, slps, adv, _ = args[j]
            logp, ent, ids, mask = fwd[k]
            packed = {"response_ids": ids, "response_mask": mask, "entropy": ent.detach()}
            entropy = ent if tr.cfg.entropy_coef > 0 else ent.detach()
            st = dict.fromkeys(STAT_KEYS, 0.0)
            num_tokens = float(sum(len(c) for c in completions))
            loss, gap = tr.micro_loss(0, list(range(len(completions))), 1.0, logp, entropy, packed, None, refs[k],
                                      slps, adv, num_tokens, float(len(completions)), st)
            total = loss if total is None else total + loss
            stats.append(st)
            gaps.append(gap)
        total.backward()
        for k, (tr, j) in enumerate(zip(trs, joint)):
            out[j] = tr.update_stats(stats[k], tr.optimizer_step(), gaps[k])
        return out  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", action="append", required=True, help="a run's config file (once per run)")
    a = ap.parse_args(argv)
    try:
        cfgs = [parse_args(["--config", path]) for path in a.config]
        many = ManyTrainer(cfgs)
        many.train()
        if many.interrupted:
            return 128 + int(many.stop_signal or 15)
    except IsosimError as exc:
        msg = " ".join(str(exc).split())
        print(f"error: {msg[:500]}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
