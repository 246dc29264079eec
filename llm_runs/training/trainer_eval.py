"""The trainer's evaluation: validation avg@k / best@k / worst@k from ``eval_n`` samples per
problem (``isosim.sim.estimators``), the training pass@1 histogram and the records row. A part of
:class:`llm_runs.training.train.GRPOTrainer`."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from llm_runs.training.metrics import histogram_columns, summarize_eval
from llm_runs.training.processes import TAG_TRAIN_EVAL, TAG_VAL, derive_seed


EVAL_PROGRESS_S = 15.0  # seconds between the progress lines of one evaluation


class Evaluation:
    """Mixin of :class:`llm_runs.training.train.GRPOTrainer`: evaluation points and the records they write."""

    def evaluate(self) -> dict[str, Any]:
        """Validation avg@k / best@k / worst@k (unbiased, N = eval_n samples) and the pass@1 histogram.

        In one process a stop signal ends the evaluation within a chunk of tokens: the sampler
        raises ``SamplingStopped``; the trainer checkpoints the step with its evaluation pending
        and the resume runs it first (``GRPOTrainer.train``)."""
        cfg = self.cfg
        t = time.perf_counter()
        self._log(f"evaluating at step {self.step}: {len(self.val_problems)} validation problems x {cfg.eval_n} "
                  f"samples of up to {cfg.eval_max_new_tokens} tokens")
        if self.world == 1 and getattr(self, "drop_eval_on_stop", False):
            self.sampler.should_stop = lambda: self._stop_signal is not None
        last = [t]

        def on_chunk(done: int, total: int) -> None:  # a line every EVAL_PROGRESS_S of a long evaluation
            now = time.perf_counter()
            if now - last[0] >= EVAL_PROGRESS_S and done < total:
                last[0] = now
                self._log(f"evaluating at step {self.step}: {done}/{total} samples of this process, {now - t:.0f}s")

        self.sampler.on_chunk = on_chunk
        try:
            return self._evaluate(t)
        finally:
            self.sampler.should_stop = None
            self.sampler.on_chunk = None

    def _evaluate(self, t: float) -> dict[str, Any]:
        cfg = self.cfg
        correct, val_len = self._eval_counts(self.val_prompts, [p.answer for p in self.val_problems], TAG_VAL)
        row: dict[str, Any] = summarize_eval(correct, cfg.eval_n, cfg.eval_k)
        row["val_response_len"] = val_len
        if self.train_eval_idx:
            c, _ = self._eval_counts([self.train_prompts[i] for i in self.train_eval_idx],
                                     [self.train_problems[i].answer for i in self.train_eval_idx], TAG_TRAIN_EVAL)
            row.update(histogram_columns(c / cfg.eval_n))
        elif self.pass_rates:
            row.update(histogram_columns(np.array(list(self.pass_rates.values()))))
        # No release here: the next use of the sampler (the next step's rollouts) follows at once.
        row["eval_s"] = time.perf_counter() - t
        return row

    def _eval_counts(self, prompts: list[list[int]], golds: list[str], tag: int) -> tuple[np.ndarray, float]:
        cfg = self.cfg
        mine = list(range(self.rank, len(prompts), self.world))
        self._sync_sampler()
        batch = self.sampler.generate([prompts[i] for i in mine], n=cfg.eval_n, temperature=cfg.eval_temperature,
                                      top_p=cfg.top_p, max_new_tokens=cfg.eval_max_new_tokens,
                                      seed=derive_seed(cfg.seed, self.step, self.rank, tag))
        rewards = np.asarray(self.score(batch.texts, [golds[i] for i in mine for _ in range(cfg.eval_n)]))
        local = list(zip(mine, rewards.reshape(-1, cfg.eval_n).sum(axis=1).round().astype(int).tolist()))
        counts = np.zeros(len(prompts), dtype=int)
        for part in self._gather_object(local):
            for i, c in part:
                counts[i] = c
        tok, num = self._sum([float(batch.num_tokens), float(len(batch))])
        return counts, tok / max(num, 1.0)

    def _write_record(self, ev: dict[str, Any], step_metrics: dict[str, float] | None) -> None:
        cfg = self.cfg
        sm = step_metrics or {}
        row: dict[str, Any] = {
            "run_id": cfg.run_id, "n": cfg.n, "b_p": cfg.b_p, "seed": cfg.seed, "step": self.step,
            "rollouts": float(self.rollouts), "tokens": float(self.tokens),
            "train_reward": sm.get("reward/mean"), "val_avg": ev["val_avg"], "val_best": ev["val_best"],
            "val_worst": ev["val_worst"], "k": cfg.eval_k,
            "entropy": sm.get("policy/entropy"), "kl": sm.get("loss/kl") if self.ref_model is not None else None,
            # sampler vs trainer log-probs of that step's sampled tokens (before its update)
            "sampler_logprob_gap_max": sm.get("sampler_logprob_gap_max"),
            "sampler_logprob_gap_mean": sm.get("sampler_logprob_gap_mean"),
        }
        for col in ("train_frac_zero", "train_frac_solved", *[f"train_hist_{i}" for i in range(10)]):
            row[col] = ev.get(col)
        row.update({
            "train_hist_source": "train_eval" if self.train_eval_idx else "last_group",
            "response_len": sm.get("response/len_mean"), "val_response_len": ev["val_response_len"],
            "wall_s": self.wall, "eval_s": ev["eval_s"],
            # settings of the run
            "n_est": cfg.n_est, "model": cfg.model, "data": cfg.data, "lr": cfg.lr, "recipe": cfg.recipe,
            "advantage": cfg.advantage, "answer_fallback": cfg.answer_fallback, "kl_coef": cfg.kl_coef,
            "entropy_coef": cfg.entropy_coef,
            "sampler": cfg.sampler, "temperature": cfg.temperature, "max_new_tokens": cfg.max_new_tokens,
            "eval_n": cfg.eval_n, "val_size": len(self.val_problems), "train_size": len(self.train_problems),
            "budget": cfg.budget, "source": "llm_runs",
        })
        row.update(self.allocator.record_fields())  # (none for uniform: its records keep their columns)
        if self.accelerator.is_main_process:
            self.records.append(row)
        self._log(f"eval @ step {self.step} ({self.rollouts} rollouts): val avg@{cfg.eval_k}={row['val_avg']:.3f} "
                  f"best@{cfg.eval_k}={row['val_best']:.3f} worst@{cfg.eval_k}={row['val_worst']:.3f}")
