"""An isosim callback for TRL's ``GRPOTrainer``: the run's records table, as isosim writes it.

::

    from isosim.integrations.trl import RecordsCallback

    trainer = GRPOTrainer(model=..., reward_funcs=[accuracy], args=GRPOConfig(...),
                          train_dataset=train,
                          callbacks=[RecordsCallback(eval_dataset=held_out, reward_funcs=accuracy)])
    trainer.train()          # writes <output_dir>/records.jsonl
    # then: isosim analyze <folder holding several output_dirs>

At log-spaced steps (step 0, the last step and ``points`` steps between, as isosim's own runs)
the callback writes one row with ``n`` (``num_generations``), ``b_p`` (prompts per generation
batch), ``seed``, ``step``, ``rollouts`` (rollouts spent, from the generation batch; see
:func:`isosim.integrations._runs.trl_allocation`), ``tokens`` (response tokens spent, from the
mean completion length TRL logs), ``train_reward`` (TRL's ``reward`` over the steps since the
previous log), ``entropy`` and ``kl`` where TRL logs them, and, with an ``eval_dataset``,
validation avg@k / best@k / worst@k (with ``val_size``, the held-out prompts, and ``eval_n``,
``samples``, the answers each value rests on, as isosim's own runs record them): ``samples``
completions per held-out prompt at the training temperature, scored by ``reward_funcs`` (a completion is correct when its summed reward
is >= ``correct_at``), with the unbiased estimators of :mod:`isosim.sim.estimators`.

The callback asks the trainer to log at each of its steps, so every row has a fresh training
reward. Validation runs on the main process only (plain or data-parallel training; under FSDP
or DeepSpeed ZeRO-3 the model is sharded and generation on one process would stall the others:
leave ``eval_dataset`` out there). Importing this module imports transformers; importing
``isosim`` does not.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from transformers import TrainerCallback

from isosim.files import atomic_write_text
from isosim.integrations._runs import trl_allocation
from isosim.sim.estimators import summarize

RewardFunc = Callable[..., Sequence[float]]


def log_steps(total: int, points: int) -> list[int]:
    """Step 0, the last step, and ``points`` log-spaced steps between (deduplicated)."""
    steps = {0, int(total)}
    if points > 0 and total > 0:
        steps.update(int(round(s)) for s in np.geomspace(1, total, points))
    return sorted(steps)


def _clean(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    return v


class RecordsCallback(TrainerCallback):
    """Write isosim's records table (``records.jsonl``) for a TRL ``GRPOTrainer`` run.

    Parameters
    ----------
    eval_dataset:
        Held-out problems: a ``datasets.Dataset`` or a list of dicts with a ``prompt`` column
        (text, or chat messages as TRL takes them) and any columns ``reward_funcs`` read.
        ``None``: no validation columns.
    reward_funcs:
        One function or a list, with TRL's signature
        ``f(prompts, completions, completion_ids, **columns) -> list[float]``; their rewards are summed.
    samples:
        Completions per held-out prompt (N); ``k`` of best@k / worst@k must be <= N (default
        ``min(4, samples)``).
    points:
        Log-spaced evaluation steps between step 0 and the last step.
    path:
        Where to write (default ``<output_dir>/records.jsonl``). A fresh run rewrites it; a
        resumed run keeps the rows up to the step it resumes from (its later rows have ``tokens``
        NaN unless a row was written at that step: tokens are summed from the logs).
    correct_at:
        A completion counts as correct when its summed reward is >= this.
    max_new_tokens, temperature, seed, batch_size:
        Generation of the validation samples (defaults: the run's ``max_completion_length`` and
        ``temperature``; seed 0 (each evaluation seeds from (seed, step) without touching the
        training random state); 16 prompts per ``generate`` call).
    run_id:
        The run's name in the table (default: ``run_name``, else the output folder's name).
    """

    def __init__(self, eval_dataset: Any = None, reward_funcs: RewardFunc | Sequence[RewardFunc] | None = None,
                 *, samples: int = 8, k: int | None = None, points: int = 12, path: str | Path | None = None,
                 correct_at: float = 1.0, max_new_tokens: int | None = None, temperature: float | None = None,
                 seed: int = 0, batch_size: int = 16, run_id: str | None = None) -> None:
        if eval_dataset is not None and reward_funcs is None:
            raise ValueError("RecordsCallback: an eval_dataset needs reward_funcs to score its completions")
        self.k = min(4, samples) if k is None else k
        if samples < 1 or not 1 <= self.k <= samples:
            raise ValueError(f"RecordsCallback: need 1 <= k <= samples, got k={self.k}, samples={samples}")
        if points < 0 or batch_size < 1:
            raise ValueError("RecordsCallback: points must be >= 0 and batch_size >= 1")
        self.eval_rows = None if eval_dataset is None else [dict(r) for r in eval_dataset]
        if self.eval_rows is not None and (not self.eval_rows or any("prompt" not in r for r in self.eval_rows)):
            raise ValueError("RecordsCallback: eval_dataset must be non-empty with a 'prompt' column")
        funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
        self.reward_funcs = [f for f in funcs if f is not None]
        self.samples, self.points, self.path = samples, points, path
        self.correct_at, self.max_new_tokens, self.temperature = correct_at, max_new_tokens, temperature
        self.seed, self.batch_size, self.run_id = seed, batch_size, run_id
        self.rows: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ trainer events
    def on_train_begin(self, args, state, control, **kwargs):
        alloc = trl_allocation(args.to_dict())
        if "n" not in alloc:
            raise ValueError("RecordsCallback: the trainer's arguments have no num_generations (use GRPOTrainer)")
        self.n, self.b_p, self.rps = alloc["n"], alloc["b_p"], float(alloc["rollouts_per_step"])
        # older transformers default run_name to output_dir: name such runs after its last part
        named = args.run_name if args.run_name and args.run_name != args.output_dir else None
        self.run = self.run_id or named or Path(args.output_dir).name
        self.steps = set(log_steps(state.max_steps, self.points))
        self.file = Path(self.path) if self.path else Path(args.output_dir) / "records.jsonl"
        self.main = state.is_world_process_zero
        start = state.global_step
        kept = []
        if start > 0 and self.file.exists():  # resumed: keep what was written up to here
            kept = [r for r in map(json.loads, self.file.read_text().splitlines()) if r.get("step", 0) <= start]
        self.rows = kept
        # tokens are summed from the logs; after a resume they are known only if the last row kept
        # is at the resumed step (the logs between it and the checkpoint were not seen)
        last = kept[-1] if kept else {"step": 0, "tokens": 0.0}
        tokens = last.get("tokens") if last.get("step") == start else None
        self.tokens = math.nan if tokens is None else float(tokens)
        self.last_logged = start
        self.last_train: dict[str, float] = {}
        if self.main:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.file, "".join(json.dumps(r) + "\n" for r in kept))
        if start == 0 and 0 in self.steps and not any(r.get("step") == 0 for r in kept):
            self._write(args, state, kwargs, step=0)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step in self.steps:
            control.should_log = True  # so that this step's row carries a fresh training reward
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "reward" not in logs:  # evaluation logs and the end-of-training summary
            return
        step = state.global_step
        length = logs.get("completions/mean_length")
        if length is not None and step > self.last_logged:
            self.tokens += float(length) * self.rps * (step - self.last_logged)
        elif length is None:
            self.tokens = math.nan
        self.last_logged = step
        self.last_train = {"train_reward": logs.get("reward"), "entropy": logs.get("entropy"), "kl": logs.get("kl")}
        if step in self.steps and not any(r.get("step") == step for r in self.rows):
            self._write(args, state, kwargs, step=step)

    # ------------------------------------------------------------------ rows
    def _write(self, args, state, kwargs, step: int) -> None:
        row: dict[str, Any] = {
            "run_id": self.run, "n": self.n, "b_p": self.b_p, "seed": int(args.seed), "step": step,
            "rollouts": step * self.rps, "tokens": self.tokens if step > 0 else 0.0,
            "lr": float(args.learning_rate), "source": "trl",
        }
        if self.eval_rows is not None:  # what each validation value rests on: prompts x samples per prompt
            row.update(val_size=len(self.eval_rows), eval_n=self.samples)
        if step > 0:
            row.update({k: v for k, v in self.last_train.items() if v is not None})
        if self.eval_rows is not None and self.main:
            row.update(self.evaluate(kwargs["model"], kwargs["processing_class"], args, step))
        if self.main:
            row = {k: _clean(v) for k, v in row.items()}
            self.rows.append(row)
            with self.file.open("a") as f:
                f.write(json.dumps(row) + "\n")

    def evaluate(self, model, tokenizer, args, step: int) -> dict[str, float]:
        """Validation avg@k / best@k / worst@k of ``model`` now (``samples`` per prompt)."""
        import torch

        tok = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps its tokenizer
        texts = []
        for r in self.eval_rows:
            p = r["prompt"]
            texts.append(tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
                         if isinstance(p, list) else p)
        conversational = isinstance(self.eval_rows[0]["prompt"], list)
        temperature = self.temperature if self.temperature is not None else getattr(args, "temperature", 1.0)
        max_new = self.max_new_tokens or getattr(args, "max_completion_length", None) or 256
        top_k = getattr(args, "top_k", 0) or None
        was_training = model.training
        model.eval()
        correct = np.zeros(len(texts), dtype=int)
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(int(np.random.SeedSequence([self.seed, step]).generate_state(1)[0]))
                for lo in range(0, len(texts), self.batch_size):
                    chunk = texts[lo: lo + self.batch_size]
                    enc = tok(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                    out = model.generate(**enc, do_sample=True, temperature=temperature,
                                         top_p=getattr(args, "top_p", 1.0), top_k=top_k,
                                         max_new_tokens=max_new, num_return_sequences=self.samples,
                                         pad_token_id=tok.pad_token_id)
                    ids = out[:, enc["input_ids"].shape[1]:]
                    completion_ids = []
                    for row in ids.tolist():
                        cut = next((i for i, t in enumerate(row) if t in (tok.eos_token_id, tok.pad_token_id)), len(row))
                        completion_ids.append(row[: cut + (1 if cut < len(row) and row[cut] == tok.eos_token_id else 0)])
                    completions = tok.batch_decode(completion_ids, skip_special_tokens=True)
                    if conversational:
                        completions = [[{"role": "assistant", "content": c}] for c in completions]
                    rows = [r for r in self.eval_rows[lo: lo + self.batch_size] for _ in range(self.samples)]
                    columns = {key: [r[key] for r in rows] for key in rows[0] if key != "prompt"}
                    prompts = [r["prompt"] for r in rows]
                    total = np.zeros(len(rows))
                    for f in self.reward_funcs:
                        got = f(prompts=prompts, completions=completions, completion_ids=completion_ids, **columns)
                        total += np.array([np.nan if g is None else g for g in got], dtype=float)
                    ok = (np.nan_to_num(total, nan=-np.inf) >= self.correct_at).reshape(len(chunk), self.samples)
                    correct[lo: lo + len(chunk)] = ok.sum(axis=1)
        finally:
            tok.padding_side = side
            if was_training:
                model.train()
        return summarize(correct, self.samples, self.k)
