"""GRPO on math problems with compute counted in rollouts: ``python -m llm_runs.training.train --config FILE``.

Each step draws ``b_p`` problems (epoch-wise shuffling), samples ``n_est`` completions of each,
scores them 0/1 with math-verify, turns the rewards of each group into advantages and takes one
AdamW step (per ``num_iterations``) on a clipped policy-gradient loss, accumulated over
micro-batches. The run stops before its rollout budget ``C = b_p * n_est * M`` (or token budget)
would be exceeded, evaluates at log-spaced points, and writes one ``records.jsonl`` row per point
in the column schema of ``isosim.records``. Launch with ``accelerate launch -m llm_runs.training.train`` for
DDP / FSDP / DeepSpeed and several nodes: each process samples and trains on ``b_p / processes``
whole problem groups.

Departures from textbook GRPO (DeepSeekMath, Shao et al. 2024)
----------------------------------------------------------------
1. Learning rate scales with the rollout batch, ``lr = base_lr * sqrt(B / B_ref)`` with
   ``B = b_p * n`` (the paper's rule; linear and constant are options), linear warm-up for
   ``warmup_steps`` steps, then constant. AdamW.
2. Advantages: 'grpo' divides by the group's std (Bessel-corrected, + 1e-6); 'drgrpo' is mean-only
   (Dr.GRPO). A *decoupled baseline* (``n_est > n``) takes the mean/std over n_est rollouts and
   updates on the first n of them; all n_est count towards the budget. The baseline includes the
   rollout itself (as GRPO does; not leave-one-out).
3. Loss aggregation defaults to token-mean over the whole batch (DAPO/verl), not GRPO's per-sequence
   mean; normalisers are global, so micro-batching gives the full-batch gradient exactly.
4. The KL penalty is a loss term (k3 estimator, as GRPO) but off on the 'hard' recipe; an entropy
   bonus (not in GRPO) is on in the 'easy' recipe. Both follow the paper's healthy recipe.
5. Truncated importance sampling (TIS): each token's loss is weighted by
   ``min(pi_old / pi_sampler, tis_cap)``, with pi_sampler the sampler's own log-probs, to correct
   the sampler/trainer mismatch (bf16 vLLM vs the trainer). With the hf sampler at top_p = 1 the
   weight is 1 up to float error. With top_p < 1, pi_sampler is the truncated nucleus distribution.
6. One optimizer step per rollout batch by default (``num_iterations = 1``): the trainer's ratio
   pi / pi_old is then exactly 1 and the PPO clip never binds; it binds for ``num_iterations > 1``.
7. Zero-variance groups are kept (advantage 0; they still count in token-mean normalisers and
   carry KL/entropy gradients) unless ``--filter-zero-variance``.
8. Log-probs and entropy use logits / temperature, matching the sampling distribution.
9. Responses that hit ``max_new_tokens`` are trained on like any other (no overlong penalty,
   no masking); rewards need a ``\\boxed{}`` answer (no partial credit, no format reward).

``--allocation RULE`` (not uniform) gives each of a step's problems its own n from its estimated
pass rate, at the same ``b_p * n`` rollouts per step (:mod:`llm_runs.training.allocator`).

Compute accounting: ``rollouts`` counts every sampled completion (including baseline-only ones);
``tokens`` counts every sampled response token. Evaluation samples are not counted.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from llm_runs.cards import apply_threads
from llm_runs.config import RunConfig, parse_args
from llm_runs.problems.data import (
    EpochSampler,
    Problem,
    build_prompt,
    filter_by_pass_rate,
    load_problems,
    read_calibration,
    split_train_val,
)
from llm_runs.sampling.batch import SamplingStopped
from llm_runs.training import runlog
from llm_runs.training.allocator import Allocator, step_groups
from llm_runs.training.policy_update import PolicyUpdate
from llm_runs.training.processes import (  # noqa: F401  (STOP_SIGNALS and the TAG_* named here as before)
    STOP_SIGNALS,
    TAG_TRAIN,
    TAG_TRAIN_EVAL,
    TAG_VAL,
    check_distributed,
    derive_seed,
    fp32_gradient_reduction,
    install_stop_handlers,
    restore_stop_handlers,
)
from llm_runs.training.trainer_eval import Evaluation

SPLIT_SEED = 0  # the train/validation split ignores --seed: runs of a sweep share one validation set

RewardFn = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


def eval_steps(total_steps: int, points: int) -> list[int]:
    """Step 0, the last step, and ``points`` log-spaced steps in between (deduplicated)."""
    steps = {0, total_steps}
    if points > 0 and total_steps > 0:
        steps.update(int(round(s)) for s in np.geomspace(1, total_steps, points))
    return sorted(steps)


def load_data(cfg: RunConfig) -> tuple[list[Problem], list[Problem]]:
    """Training and validation problems (no torch needed: bad files fail fast)."""
    fields = dict(id_field=cfg.id_field, problem_field=cfg.problem_field, answer_field=cfg.answer_field)
    problems = load_problems(cfg.data, cfg.data_split, **fields)
    # Difficulty filtering comes before the split, so validation problems share the training band
    # (the paper's easy set: avg@16 in [0.3, 0.6], 300 of them held out).
    if cfg.calibration:
        cal = read_calibration(cfg.calibration)
        problems = filter_by_pass_rate(problems, cal["rates"], cfg.pass_rate_min, cfg.pass_rate_max,
                                       source=cfg.calibration)
    elif cfg.pass_rate_min > 0 or cfg.pass_rate_max < 1:
        raise IsosimError("a pass-rate range needs --calibration (a file of measured pass rates)")
    if cfg.val_data:
        train, val = problems, load_problems(cfg.val_data, cfg.data_split, **fields)[: cfg.val_size]
    else:
        train, val = split_train_val(problems, cfg.val_size, SPLIT_SEED)
    if cfg.max_train_problems and len(train) > cfg.max_train_problems:
        subset_seed = SPLIT_SEED if cfg.train_subset_seed is None else cfg.train_subset_seed
        keep = np.random.default_rng([subset_seed, 1]).choice(len(train), cfg.max_train_problems, replace=False)
        train = [train[i] for i in sorted(keep.tolist())]
    return train, val

class GRPOTrainer(PolicyUpdate, Evaluation):
    """Holds the run's state; ``train()`` runs it to its budget, resuming from OUT if possible.

    The policy update lives in :mod:`llm_runs.training.policy_update`, evaluation in
    :mod:`llm_runs.training.trainer_eval`, per-process seeds and signals in :mod:`llm_runs.training.processes`."""

    def __init__(self, cfg: RunConfig, reward_fn: RewardFn | None = None, log: Callable[[str], None] | None = None):
        self.cfg = cfg
        self.out = Path(cfg.out)
        self._reward_fn = reward_fn
        self._print = log or (lambda s: print(s, flush=True))
        self.train_problems, self.val_problems = load_data(cfg)

    # ------------------------------------------------------------------------------------------
    # setup
    # ------------------------------------------------------------------------------------------
    def setup(self) -> None:
        import torch
        from accelerate import Accelerator
        from accelerate.utils import DistributedType
        from transformers.utils import logging as hf_logging

        from llm_runs.sampling import models
        from llm_runs.sampling.samplers import make_sampler

        hf_logging.disable_progress_bar()
        cfg = self.cfg
        use_bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and torch.cuda.is_available())
        self.accelerator = acc = Accelerator(mixed_precision="bf16" if use_bf16 else "no")
        self.world, self.rank = acc.num_processes, acc.process_index
        if cfg.b_p % self.world:
            raise IsosimError(f"b_p ({cfg.b_p}) must be a multiple of the number of processes ({self.world}): "
                              "each process samples whole problem groups")
        check_distributed(acc.distributed_type, cfg.sampler)
        if acc.distributed_type == DistributedType.FSDP and use_bf16:
            fp32_gradient_reduction(acc.state.fsdp_plugin)
        self._stop_signal: int | None = None
        self.interrupted = False  # set when a stop signal ended the run early (checkpoint saved)
        install_stop_handlers(self)
        torch.manual_seed(cfg.seed)

        # --- model, tokenizer, prompts -------------------------------------------------------
        self.model_path = models.resolve_model(cfg.model)
        self.tokenizer = models.load_tokenizer(self.model_path)
        model = models.load_model(self.model_path)
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False
        self.eos_ids = models.eos_ids(self.tokenizer, model)
        self.train_problems, self.train_prompts = self._prompts(self.train_problems, "training")
        self.val_problems, self.val_prompts = self._prompts(self.val_problems, "validation")
        self.train_eval_idx = sorted(
            np.random.default_rng([SPLIT_SEED, 2]).choice(
                len(self.train_problems), min(cfg.train_eval_size, len(self.train_problems)), replace=False
            ).tolist()
        ) if cfg.train_eval_size else []

        # --- optimizer, reference model, sampler ---------------------------------------------
        optimizer = torch.optim.AdamW(model.parameters(), lr=float(cfg.lr), betas=(cfg.adam_beta1, cfg.adam_beta2),
                                      eps=cfg.adam_eps, weight_decay=cfg.weight_decay)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        self.ref_model = None
        if cfg.kl_coef > 0:
            ref_dtype = torch.bfloat16 if use_bf16 else torch.float32
            self.ref_model = models.load_model(self.model_path, dtype=ref_dtype).to(acc.device).eval()
            self.ref_model.requires_grad_(False)
        self._lean_parts: dict[int, Any] = {}
        if cfg.train_forward == "lean" and self.world > 1:
            raise IsosimError("train_forward 'lean' runs in one process (it calls the model's modules directly, "
                              "past DDP's hooks): use train_forward hf with several processes")
        self.sampler = make_sampler(cfg.sampler, model=acc.unwrap_model(self.model), tokenizer=self.tokenizer,
                                    eos_ids=self.eos_ids, model_path=self.model_path, cfg=cfg, accelerator=acc)
        self._weights_version, self._sampler_version = 0, -1
        self.scorer = None
        if self._reward_fn is None and cfg.reward_workers > 0:
            from llm_runs.problems.rewards import RewardPool

            self.scorer = RewardPool(cfg.reward_workers, cfg.reward_timeout, cfg.answer_fallback)

        # --- run state --------------------------------------------------------------------------
        self.order = EpochSampler(len(self.train_problems), cfg.seed)
        self.allocator = Allocator(cfg.allocation, len(self.train_problems), cfg.b_p, cfg.n, cfg.n_est, cfg.seed)
        self.step, self.rollouts, self.tokens, self.wall = 0, 0, 0, 0.0
        self.pass_rates: dict[str, float] = {}  # problem id -> pass rate of its latest group
        self.eval_at = eval_steps(cfg.total_steps, cfg.eval_points)
        self.records = runlog.JsonlLog(self.out / "records.jsonl", fsync=True)
        self.metrics_log = runlog.JsonlLog(self.out / "metrics.jsonl")
        self._pending_eval: dict[str, Any] | None = None  # a step whose evaluation a stop signal interrupted
        self._prepare_out_dir()
        self.tb = None
        if cfg.tensorboard and acc.is_main_process:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise IsosimError("--tensorboard needs the tensorboard package (pip install tensorboard)") from None
            self.tb = SummaryWriter(str(self.out / "tb"))

    def _prompts(self, problems: list[Problem], what: str) -> tuple[list[Problem], list[list[int]]]:
        cfg = self.cfg
        kept, prompts = [], []
        for p in problems:
            ids = build_prompt(self.tokenizer, p.problem, cfg.prompt_template, cfg.instruction, cfg.system_prompt)
            if len(ids) <= cfg.max_prompt_tokens:
                kept.append(p)
                prompts.append(ids)
        if not kept:
            raise IsosimError(f"every {what} prompt is longer than max_prompt_tokens ({cfg.max_prompt_tokens})")
        if len(kept) < len(problems):
            self._log(f"dropped {len(problems) - len(kept)} {what} problems longer than {cfg.max_prompt_tokens} tokens")
        return kept, prompts

    def _prepare_out_dir(self) -> None:
        """Resume from OUT/checkpoint if there is one (settings must match), else start afresh."""
        cfg, acc = self.cfg, self.accelerator
        current = cfg.to_dict()
        ckpt = None if cfg.overwrite else runlog.find_checkpoint(self.out)
        if ckpt is None and not cfg.overwrite and (self.out / "config.json").is_file():
            saved = runlog.read_state_json(self.out / "config.json")
            diff = runlog.config_diff(saved, current)
            if diff:
                raise IsosimError(f"{self.out} holds a run with other settings ({'; '.join(diff)}): "
                                  "use another --out, or --overwrite")
        if ckpt is not None:
            saved = runlog.read_state_json(self.out / "config.json")
            diff = runlog.config_diff(saved, current)
            if diff:
                raise IsosimError(f"{self.out} holds a run with other settings ({'; '.join(diff)}): "
                                  "use another --out, or --overwrite")
            self._load_checkpoint(ckpt)
            return
        if acc.is_main_process:
            if cfg.overwrite:
                for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp", "tb", "final_model"):
                    shutil.rmtree(self.out / name, ignore_errors=True)
            self.out.mkdir(parents=True, exist_ok=True)
            runlog.write_json(self.out / "config.json", current)
            self.records.truncate(0)
            self.metrics_log.truncate(0)
        acc.wait_for_everyone()

    # ------------------------------------------------------------------------------------------
    # checkpoints
    # ------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        acc = self.accelerator
        tmp = self.out / "checkpoint.tmp"
        if acc.is_main_process and tmp.exists():
            shutil.rmtree(tmp)
        acc.wait_for_everyone()
        acc.save_state(str(tmp), safe_serialization=True)
        acc.wait_for_everyone()
        if acc.is_main_process:
            state = {
                "step": self.step, "rollouts": self.rollouts, "tokens": self.tokens, "wall_s": self.wall,
                "order": self.order.state_dict(), "pass_rates": self.pass_rates,
                "records_bytes": self.records.size(), "metrics_bytes": self.metrics_log.size(),
            }
            if not self.allocator.uniform:
                state["allocation"] = self.allocator.state_dict()
            if self._pending_eval is not None:  # this step's evaluation comes first on resume
                state["pending_eval"] = self._pending_eval
            runlog.write_state(tmp, state)
            runlog.commit_checkpoint(self.out, tmp)
        acc.wait_for_everyone()

    def _load_checkpoint(self, ckpt: Path) -> None:
        acc = self.accelerator
        state = runlog.read_state(ckpt)
        try:
            acc.load_state(str(ckpt))
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise IsosimError(f"{ckpt}: unreadable checkpoint ({type(exc).__name__}: {first})") from None
        try:
            self.step, self.rollouts, self.tokens = int(state["step"]), int(state["rollouts"]), int(state["tokens"])
            self.wall = float(state["wall_s"])
            self.order.load_state_dict(state["order"])
            self.pass_rates = {str(k): float(v) for k, v in state["pass_rates"].items()}
            self.allocator.load_state_dict(state.get("allocation"))
            self._pending_eval = state.get("pending_eval")
            records_bytes, metrics_bytes = int(state["records_bytes"]), int(state["metrics_bytes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IsosimError(f"{ckpt}: unreadable checkpoint (bad trainer state: {exc})") from None
        self._weights_version += 1
        if acc.is_main_process:
            self.records.truncate(records_bytes)
            self.metrics_log.truncate(metrics_bytes)
        acc.wait_for_everyone()
        self._log(f"resumed from {ckpt} at step {self.step} ({self.rollouts} rollouts)")

    # ------------------------------------------------------------------------------------------
    # the loop
    # ------------------------------------------------------------------------------------------
    def train(self) -> list[dict[str, Any]]:
        """Run to the budget; returns the records written by this run (all of them, on resume too)."""
        if not hasattr(self, "accelerator"):
            self.setup()
        cfg = self.cfg
        self.drop_eval_on_stop = True  # (GRPOTrainer.train handles SamplingStopped; llm_runs.training.many does not)
        self._eval_metrics: dict[str, Any] | None = None
        try:
            if self._pending_eval is not None:  # a stop signal interrupted this step's evaluation: it comes first
                self._log(f"step {self.step}: its evaluation, interrupted by a stop signal, runs first")
                self._eval_metrics = self._pending_eval
                self._write_record(self.evaluate(), self._pending_eval)
                self._pending_eval = None
                self.save_checkpoint()
                if self.step >= cfg.total_steps:
                    return self.finish()
            if self.step >= cfg.total_steps:
                self._log(f"run already complete ({self.step} steps); records in {self.records.path}")
                return self.records.rows()
            self._log(f"{cfg.run_id}: {len(self.train_problems)} training / {len(self.val_problems)} validation "
                      f"problems, n={cfg.n} (n_est={cfg.n_est}) b_p={cfg.b_p} M={cfg.total_steps} steps, "
                      f"lr={cfg.lr:.3g}, sampler={cfg.sampler}, processes={self.world}")
            if self.step == 0 and 0 in self.eval_at:
                self._eval_metrics = None
                self._write_record(self.evaluate(), None)
            return self._loop()
        except SamplingStopped:  # a stop signal mid-evaluation: the evaluation waits for the resume
            self._stop_in_evaluation()
            return self.records.rows()
        except BaseException:
            restore_stop_handlers(self)
            raise

    def _stop_in_evaluation(self) -> None:
        """A stop signal ended an evaluation early: after a step, checkpoint that step with its
        evaluation pending (the resume evaluates it first, with the same seed: the same record);
        at step 0 there is nothing to keep (the rerun starts afresh)."""
        if self._eval_metrics is not None:
            from isosim.files import dumps_json

            self._pending_eval = json.loads(dumps_json(self._eval_metrics))
            self.save_checkpoint()
            kept = f"checkpoint saved at step {self.step}, its evaluation to run first on resume"
        else:
            kept = "nothing to keep before the first step"
        self._log(f"stopping on signal {self._stop_signal} during the evaluation at step {self.step}: {kept}; "
                  "rerun the same command to resume")
        self.interrupted = True
        self.close()

    def _loop(self) -> list[dict[str, Any]]:
        while self.running():
            t0 = time.perf_counter()
            step_metrics = self.train_step()
            self.wall += time.perf_counter() - t0
            step_metrics["time/step_s"] = time.perf_counter() - t0
            if self.end_step(step_metrics):
                return self.records.rows()
        return self.finish()

    def running(self) -> bool:
        """Whether the run has steps left (budget not spent, not paused)."""
        cfg = self.cfg
        return (self.step < cfg.total_steps and (cfg.budget_tokens is None or self.tokens < cfg.budget_tokens)
                and not self._paused())

    def end_step(self, step_metrics: dict[str, float]) -> bool:
        """After a step: its metrics row, an evaluation where due, a checkpoint where due. True when a
        stop signal ended the run (checkpoint saved, trainer closed)."""
        cfg = self.cfg
        self._log_step(step_metrics)
        last = self.step >= cfg.total_steps or (cfg.budget_tokens is not None and self.tokens >= cfg.budget_tokens)
        if self.step in self.eval_at or last:
            self._eval_metrics = step_metrics
            self._write_record(self.evaluate(), step_metrics)
        stop = self._stop_requested()
        if last or self.step % cfg.save_every == 0 or stop or self._paused():
            self.save_checkpoint()
        if stop:  # the scheduler is about to end the job: the checkpoint holds this step
            self._log(f"stopping on signal {self._stop_signal or 'from another process'}: checkpoint saved "
                      f"at step {self.step}; rerun the same command to resume")
            self.interrupted = True
            self.close()
        return stop

    def finish(self) -> list[dict[str, Any]]:
        """The run reached its budget (or its pause): the final model where asked, then close."""
        if self.cfg.save_final_model and not self._paused():
            self._save_final_model()
        self.close()
        return self.records.rows()

    def train_step(self) -> dict[str, float]:
        """One step: sample B_p * n_est rollouts, score them, update on B_p * n of them (with an
        allocation rule: B_p * n rollouts in groups of the sizes it chose, all in the update)."""
        m: dict[str, float] = {}
        t = time.perf_counter()
        mine = self.next_problems()
        self._sync_sampler()
        cfg = self.cfg
        batch = self.sampler.generate([self.train_prompts[i] for i in mine], n=self.group_sizes(),
                                      temperature=cfg.temperature, top_p=cfg.top_p,
                                      max_new_tokens=cfg.max_new_tokens, seed=self.rollout_seed())
        self.sampler.release()
        m["time/sample_s"] = time.perf_counter() - t
        rewards, groups, update_args = self.select(mine, batch, m)
        t = time.perf_counter()
        m.update(self.update(*update_args))
        m["time/train_s"] = time.perf_counter() - t
        return self.bookkeeping(mine, batch, rewards, groups, m)

    def next_problems(self) -> list[int]:
        """This step's problems of this process, and their group sizes (``group_sizes``): the plan
        is identical on every process."""
        cfg = self.cfg
        idx, counts = self.allocator.plan(self.order, self.step)
        per = cfg.b_p // self.world
        self._plan = (counts, counts[self.rank * per:(self.rank + 1) * per])
        return idx[self.rank * per:(self.rank + 1) * per]

    def group_sizes(self) -> int | list[int]:
        """The sampler's ``n`` for this step's problems: n_est, or the allocation rule's sizes."""
        return self.cfg.n_est if self.allocator.uniform else list(self._plan[1])

    def rollout_seed(self) -> int:
        return derive_seed(self.cfg.seed, self.step, self.rank, TAG_TRAIN)

    def select(self, mine: list[int], batch: Any, m: dict[str, float]) -> tuple[Any, Any, tuple]:
        """Rewards of the rollouts, the step's groups (``step_groups``: which are kept, their pass
        rates and sums), and the arguments of ``update`` (the first n rollouts of each kept group
        and their advantages; groups of unequal size each take their own baseline)."""
        import torch

        cfg = self.cfg
        sizes = self._plan[1]
        t = time.perf_counter()
        golds = [self.train_problems[i].answer for i, k in zip(mine, sizes) for _ in range(k)]
        rewards = torch.tensor(self.score(batch.texts, golds), dtype=torch.float32)
        m["time/score_s"] = time.perf_counter() - t
        # advantages: a group is a reshape (see llm_runs.training.grpo)
        g = step_groups(rewards, sizes, cfg, self.allocator.uniform)
        sel, sel_adv = g.sel, g.sel_adv
        # A process whose groups were all filtered still runs a forward and backward (weight 0) on
        # one real sequence, so that DDP / FSDP collectives stay in step across processes.
        args = ([batch.prompt_ids[i] for i in sel], [batch.completion_ids[i] for i in sel],
                [batch.logprobs[i] for i in sel], sel_adv,
                (batch.prompt_ids[0], batch.completion_ids[0], batch.logprobs[0]))
        return rewards, g, args

    def bookkeeping(self, mine: list[int], batch: Any, rewards: Any, g: Any, m: dict[str, float]
                    ) -> dict[str, float]:
        """The step's counters (global over processes), the estimator's evidence (with an
        allocation rule) and the step's reward / length metrics."""
        import torch

        cfg = self.cfg
        counts, sizes = self._plan
        if not self.allocator.uniform:  # every process's groups, in batch order, to the estimator the next plans read
            results = [x for part in self._gather_object(list(zip(mine, g.sums, sizes))) for x in part]
            self.allocator.observe([i for i, _, _ in results], [s for _, s, _ in results], [k for _, _, k in results])
            m.update(self.allocator.step_metrics(counts))
        for rank_rates in self._gather_object([(self.train_problems[i].id, r) for i, r in zip(mine, g.rates)]):
            for pid, r in rank_rates:
                self.pass_rates[pid] = r
        lengths = torch.tensor([len(c) for c in batch.completion_ids], dtype=torch.float32)
        sums = self._sum([rewards.sum().item(), (rewards ** 2).sum().item(), float(len(rewards)),
                          lengths.sum().item(), lengths.max().item() if len(lengths) else 0.0,
                          float(sum(batch.truncated)), float((~g.keep).sum().item()),
                          float(g.zero_var.sum().item())])
        count = sums[2]
        self.step += 1
        self.rollouts += int(count)
        self.tokens += int(sums[3])
        m["reward/mean"] = sums[0] / count
        m["reward/std"] = math.sqrt(max(sums[1] / count - m["reward/mean"] ** 2, 0.0))
        m["reward/frac_zero_var_groups"] = sums[7] / cfg.b_p
        m["reward/frac_filtered_groups"] = sums[6] / cfg.b_p
        m["response/len_mean"] = sums[3] / count
        m["response/frac_truncated"] = sums[5] / count
        m["response/len_max"] = self._max(float(lengths.max().item()) if len(lengths) else 0.0)
        return m

    # ------------------------------------------------------------------------------------------
    # helpers
    # ------------------------------------------------------------------------------------------
    def score(self, texts: Sequence[str], golds: Sequence[str]) -> list[float]:
        if self._reward_fn is not None:
            return [float(r) for r in self._reward_fn(texts, golds)]
        if self.scorer is not None:
            return self.scorer.score(texts, golds)
        from llm_runs.problems.rewards import score

        return score(texts, golds, self.cfg.reward_timeout, self.cfg.answer_fallback)

    def _sync_sampler(self) -> None:
        # A sampler whose weights were discarded (vLLM's level-2 sleep) needs them back even when
        # the trainer's weights have not changed since the last sync.
        if self._sampler_version != self._weights_version or getattr(self.sampler, "needs_sync", False):
            model = self.model if self.cfg.sampler == "vllm" else self.accelerator.unwrap_model(self.model)
            self.sampler.sync_weights(model)
            self._sampler_version = self._weights_version

    def _sum(self, values: list[float]) -> list[float]:
        import torch

        if self.world == 1:
            return [float(v) for v in values]
        t = torch.tensor(values, dtype=torch.float64, device=self.accelerator.device)
        return self.accelerator.reduce(t, reduction="sum").tolist()

    def _max(self, value: float) -> float:
        import torch

        if self.world == 1:
            return float(value)
        t = torch.tensor([value], dtype=torch.float64, device=self.accelerator.device)
        return float(self.accelerator.gather(t).max())

    def _gather_object(self, obj: Any) -> list[Any]:
        if self.world == 1:
            return [obj]
        from accelerate.utils import gather_object

        return gather_object([obj])

    def _log_step(self, m: dict[str, float]) -> None:
        cfg = self.cfg
        row = {"step": self.step, "rollouts": self.rollouts, "tokens": self.tokens, "wall_s": self.wall, **m}
        if not self.allocator.uniform:
            row["alloc/counts"] = self.allocator.last
        if self.accelerator.is_main_process:
            self.metrics_log.append(row)
            if self.tb is not None:
                for k, v in m.items():
                    self.tb.add_scalar(k, v, self.rollouts)
        self._log(f"step {self.step}/{cfg.total_steps} | {self.rollouts} rollouts | reward {m['reward/mean']:.3f} | "
                  f"len {m['response/len_mean']:.0f} | entropy {m['policy/entropy']:.3f} | "
                  f"{m['time/step_s']:.1f}s (sample {m['time/sample_s']:.1f} score {m['time/score_s']:.1f} "
                  f"train {m['time/train_s']:.1f})")

    def _log(self, msg: str) -> None:
        if not hasattr(self, "accelerator") or self.accelerator.is_main_process:
            self._print(msg)

    def _save_final_model(self) -> None:
        acc = self.accelerator
        state = acc.get_state_dict(self.model)
        if acc.is_main_process:
            target = self.out / "final_model"
            acc.unwrap_model(self.model).save_pretrained(target, state_dict=state)
            self.tokenizer.save_pretrained(target)
        acc.wait_for_everyone()

    def _paused(self) -> bool:
        """Whether the run reached ``pause_at_rollouts`` (checkpointed there; a rerun with a larger
        value continues it: the pause changes neither the schedule nor where evaluations fall)."""
        return self.cfg.pause_at_rollouts is not None and self.rollouts >= self.cfg.pause_at_rollouts

    def _stop_requested(self) -> bool:
        """Whether any process received SIGTERM / SIGUSR1 (agreed on by all processes)."""
        return self._max(1.0 if self._stop_signal is not None else 0.0) > 0

    def close(self) -> None:
        restore_stop_handlers(self)
        if self.scorer is not None:
            self.scorer.close()
        if self.tb is not None:
            self.tb.close()
        self.sampler.close()


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_args(argv, log=lambda s: print(s, flush=True))
        apply_threads(cfg.model, log=lambda s: print(s, flush=True))
        with runlog.run_lock(cfg.out, log=lambda s: print(s, flush=True)):
            trainer = GRPOTrainer(cfg)
            trainer.train()
        if trainer.interrupted:
            return 128 + int(trainer._stop_signal or 15)
    except IsosimError as exc:
        msg = " ".join(str(exc).split())  # one line, whatever a library put in the message
        print(f"error: {msg[:500]}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
