"""The trainer's policy update: ``num_iterations`` optimizer steps on a step's sequences, in
micro-batches, with the clipped policy-gradient, TIS, KL and entropy terms of ``llm_runs.training.grpo``.
A part of :class:`llm_runs.training.train.GRPOTrainer` (which holds the state these methods use)."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from llm_runs.config import lr_at

# the update's statistics that micro-batches add to (token means over the whole batch)
STAT_KEYS = ("loss/pg", "loss/kl", "policy/entropy", "policy/clip_frac", "policy/tis_weight",
             "policy/tis_frac_capped", "loss/total", "sampler_logprob_gap_mean")


class PolicyUpdate:
    """Mixin of :class:`llm_runs.training.train.GRPOTrainer`: the policy update and the forward pass."""

    def update(self, prompts: list[list[int]], completions: list[list[int]], sampler_logps: list[list[float]],
               advantages: list[float], filler: tuple[list[int], list[int], list[float]] | None = None
               ) -> dict[str, float]:
        """``num_iterations`` optimizer steps on these sequences, in micro-batches (see grpo.py)."""
        import torch

        cfg, acc, model = self.cfg, self.accelerator, self.model
        mb = cfg.micro_batch_size
        num_tokens, num_seqs = self._sum([float(sum(len(c) for c in completions)), float(len(completions))])
        stats = dict.fromkeys(STAT_KEYS, 0.0)
        gap_max = 0.0
        if num_seqs == 0 or num_tokens == 0:  # every group filtered: no gradient this step
            return {**stats, "optim/lr": lr_at(cfg, self.step), "optim/grad_norm": 0.0, "optim/skipped": 1.0,
                    "sampler_logprob_gap_max": 0.0}
        # Every process must run the same number of forward and backward passes (DDP and FSDP
        # synchronise inside them): processes with fewer sequences repeat one with weight 0, and a
        # process with none at all uses the filler sequence (weight 0).
        local_empty = not completions
        if local_empty:
            if filler is None:
                raise ValueError("update: a process with no sequences needs a filler sequence")
            prompts, completions, sampler_logps, advantages = [filler[0]], [filler[1]], [filler[2]], [0.0]
        n_micro = int(self._max(float(0 if local_empty else math.ceil(len(completions) / mb))))
        chunks = [list(range(i * mb, min((i + 1) * mb, len(completions)))) for i in range(n_micro)]
        chunks = [(c, 0.0 if local_empty else 1.0) if c else ([0], 0.0) for c in chunks]
        old_logps: list[torch.Tensor | None] = [None] * n_micro
        ref_logps: list[torch.Tensor | None] = [None] * n_micro  # computed once, reused by every iteration
        if cfg.num_iterations > 1:  # pi_old must be frozen before the first optimizer step
            with torch.no_grad():
                for k, (c, _) in enumerate(chunks):
                    if c:
                        old_logps[k] = self._forward(model, prompts, completions, c, with_entropy=False)[0]
        for it in range(cfg.num_iterations):
            for k, (c, weight) in enumerate(chunks):
                ctx = acc.no_sync(model) if k < n_micro - 1 else contextlib.nullcontext()
                with ctx:
                    logp, entropy, packed = self._forward(model, prompts, completions, c,
                                                          with_entropy=cfg.entropy_coef > 0)
                    if self.ref_model is not None and ref_logps[k] is None:
                        with torch.no_grad():
                            ref_logps[k] = self._forward(self.ref_model, prompts, completions, c,
                                                         with_entropy=False)[0]
                    loss, gap = self.micro_loss(it, c, weight, logp, entropy, packed, old_logps[k], ref_logps[k],
                                                sampler_logps, advantages, num_tokens, num_seqs, stats)
                    gap_max = max(gap_max, gap)
                    acc.backward(loss)
            grad_norm = self.optimizer_step()
        return self.update_stats(stats, grad_norm, gap_max)

    def micro_loss(self, it: int, c: list[int], weight: float, logp: Any, entropy: Any, packed: dict[str, Any],
                   old_logp: Any, ref_logp: Any, sampler_logps: list[list[float]], advantages: list[float],
                   num_tokens: float, num_seqs: float, stats: dict[str, float]) -> tuple[Any, float]:
        """The loss of one micro-batch (sequences ``c``) from its forward's outputs; on the first
        iteration, adds its share of the step statistics to ``stats``. Returns the loss and the
        largest sampler/trainer log-prob gap on its tokens (0 after the first iteration)."""
        import torch

        from llm_runs.training import grpo

        cfg, world = self.cfg, self.accelerator.num_processes
        gap_max = 0.0
        mask = packed["response_mask"]
        width = mask.shape[1]
        old = old_logp if old_logp is not None else logp.detach()
        adv = torch.tensor([advantages[i] for i in c], device=logp.device).unsqueeze(1)
        token_loss, clipped = grpo.clipped_pg_loss(logp, old, adv, cfg.clip_eps, cfg.clip_eps_high)
        stats_tis = torch.ones_like(logp)
        sampler_lp = grpo.pad_values([sampler_logps[i] for i in c], width, device=logp.device)
        if it == 0:  # sampler vs trainer on the sampled tokens, before any update
            gap = (old - sampler_lp).abs() * mask * weight
            gap_max = float(gap.max())
            stats["sampler_logprob_gap_mean"] += float(gap.sum()) / num_tokens
        if cfg.tis:
            stats_tis = grpo.tis_weights(old, sampler_lp, cfg.tis_cap)
            token_loss = token_loss * stats_tis
        pg_loss = token_loss
        kl = torch.zeros_like(logp)
        if ref_logp is not None:
            kl = grpo.kl_k3(logp, ref_logp)
            token_loss = token_loss + cfg.kl_coef * kl
        if cfg.entropy_coef > 0:
            token_loss = token_loss - cfg.entropy_coef * entropy
        else:
            with torch.no_grad():
                entropy = self._entropy_only(packed)
        w = grpo.token_weights(mask, cfg.loss_agg, num_tokens, num_seqs, cfg.max_new_tokens)
        w = w * (world * weight)  # DDP averages gradients over processes; undo that
        loss = (token_loss * w).sum()
        if it == 0:  # statistics: token means over the whole (global) batch
            tm = mask * weight / num_tokens * world
            stats["loss/total"] += float(loss.detach()) / world
            stats["loss/pg"] += float((pg_loss.detach() * tm).sum()) / world
            stats["loss/kl"] += float((kl.detach() * tm).sum()) / world
            stats["policy/entropy"] += float((entropy.detach() * tm).sum()) / world
            stats["policy/clip_frac"] += float((clipped * tm).sum()) / world
            stats["policy/tis_weight"] += float((stats_tis * tm).sum()) / world
            stats["policy/tis_frac_capped"] += float(((stats_tis >= cfg.tis_cap) * tm).sum()) / world
        return loss, gap_max

    def optimizer_step(self) -> float:
        """Clip the accumulated gradients, set this step's learning rate, step, zero; the norm."""
        cfg = self.cfg
        grad_norm = 0.0
        if cfg.max_grad_norm > 0:
            grad_norm = float(self.accelerator.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(cfg, self.step)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def update_stats(self, stats: dict[str, float], grad_norm: float, gap_max: float) -> dict[str, float]:
        """The step's update metrics, summed over processes."""
        self._weights_version += 1
        summed = self._sum([stats[k] for k in stats])  # each process holds its share of the global means
        out = dict(zip(stats, summed))
        out.update({"optim/lr": lr_at(self.cfg, self.step), "optim/grad_norm": grad_norm, "optim/skipped": 0.0,
                    "sampler_logprob_gap_max": self._max(gap_max)})
        return out

    def _forward(self, model: Any, prompts: list[list[int]], completions: list[list[int]], idx: list[int],
                 with_entropy: bool) -> tuple[Any, Any, dict[str, Any]]:
        """Per-token log-probs (and entropy) of the completions ``idx`` under ``model``."""
        from llm_runs.training import grpo

        if self.cfg.train_forward == "lean":  # each prompt once per group (llm_runs.training.lean_forward)
            from llm_runs.sampling.lean import LlamaParts
            from llm_runs.training import lean_forward

            parts = self._lean_parts.get(id(model))
            if parts is None or parts.model is not model:
                parts = self._lean_parts[id(model)] = LlamaParts(model)
            import torch

            # the policy's forward (gradients on) also yields the entropy statistic; the
            # reference and pi_old forwards (no gradients) need none
            stat = torch.is_grad_enabled()
            logp, entropy, ids, mask = lean_forward.response_logprobs(
                parts, [prompts[i] for i in idx], [completions[i] for i in idx], int(self.tokenizer.pad_token_id),
                self.cfg.temperature, with_entropy=with_entropy or stat, device=self.accelerator.device)
            packed = {"response_ids": ids, "response_mask": mask}
            if entropy is not None:
                packed["entropy"] = entropy.detach()
                if not with_entropy:
                    entropy = entropy.detach()
            return logp, entropy, packed

        packed = grpo.pack([prompts[i] for i in idx], [completions[i] for i in idx],
                           int(self.tokenizer.pad_token_id), device=self.accelerator.device)
        width = packed["response_ids"].shape[1]
        with self.accelerator.autocast():
            out = model(input_ids=packed["input_ids"], attention_mask=packed["attention_mask"],
                        position_ids=packed["position_ids"], use_cache=False, logits_to_keep=width + 1)
        logits = out.logits[:, :-1]
        packed["logits"] = logits
        logp, entropy = grpo.token_logprobs_and_entropy(logits, packed["response_ids"], self.cfg.temperature,
                                                        with_entropy=with_entropy)
        return logp, entropy, packed

    def _entropy_only(self, packed: dict[str, Any]) -> Any:
        from llm_runs.training import grpo

        if "entropy" in packed:
            return packed["entropy"]

        return grpo.token_logprobs_and_entropy(packed["logits"].detach(), packed["response_ids"],
                                               self.cfg.temperature, with_entropy=True)[1]
