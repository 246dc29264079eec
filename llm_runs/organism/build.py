"""The model organism: a small transformer trained here from scratch on a graded sum family.

``python -m llm_runs.organism --out DIR`` builds, seeded and reproducibly:

* ``DIR/pool.jsonl``: the problem pool, in the ``{id, problem, answer}`` format of the real math
  sets. A problem is a sum of 2-5 numbers of 1-2 digits (``"47+8+31"``); its worked answer is the
  running partial sums (``" 55,86"``), so a response is several tokens and is right only if every
  partial sum is. Difficulty grows with the number of terms, their digits and the carries.
* ``DIR/model/``: a Llama trained by supervised learning on worked answers of fresh random sums
  (never the pool's own answers), a Hugging Face folder that ``--model DIR/model`` loads like any
  other model, with the character tokenizer of ``llm_runs.sampling.tiny``. Training stops early, on
  purpose: the base model must be unreliable in a graded way, so that its pass rates span the
  paper's bands (easy: avg@16 in [0.3, 0.6]; hard: [0, 1/16]; extreme: pass@128 = 0).
* ``DIR/organism.json``: the settings, the SFT loss curve and a digest of the weights. A second
  call with the same settings finds it and returns at once (the cache); other settings in the same
  folder are refused.

Prompts are the runner's ``plain`` template with no instruction (``Question: 47+8+31\\nAnswer:``);
runs score the last number of a response (``--answer-fallback last-number``).

Stopping point (measured 2026-12-03, avg@16 at temperature 1 of the first 1,000 pool problems):
SFT learns the sums abruptly between ~1,200 steps (loss 0.74; 51 % of problems at 0/16, 3 % in
[0.3, 0.6]) and ~2,000 (loss 0.06; at 3,000 steps 62 % of problems are >= 0.9). The default 1,700
(loss 0.15) gives 6.1 % at 0/16, 6.1 % in (0, 1/16], 16 % in (1/16, 0.3), 28 % in [0.3, 0.6],
31 % in (0.6, 0.9) and 13 % above: on the 12,000-problem pool, about 3,300 easy and 1,450 hard
problems. The calibration (``isosim calibrate``) is the measurement that counts.

Model size (``full``: hidden 64, 2 layers, 2 heads, 0.15 M parameters): chosen for speed. Measured
speeds (docs/organism.md, "Speed", says where each comes from): the committed 24-run sweep (2e5
rollouts a run, ``sampler hf``) trained at 179-395 rollouts/s per one-thread run (its records'
training wall time, 2026-12-03) and took 2 h 22 min on the shared 2 cores (studies/LOG.md);
``sampler lean`` with ``train_forward lean`` does 1.4-2.1x more rollouts per core-second at n = 2,
2.4-3.1x at n = 16, 2.9-4.0x at n = 128, 2.1-2.6x over a sweep (``benchmarks/bench_organism.py``, 2026-12-04).
1 M parameters would be several times slower.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError

PROMPT_TEMPLATE = "plain"
INSTRUCTION = ""
ANSWER_FALLBACK = "last-number"
# How the organism's runs sample, score and learn (docs/organism.md, step 4: the committed sweeps'
# settings; the lean path draws the same tokens as the hf one, faster). Written into the card's
# ``run_defaults``: ``--model`` of a shipped organism takes them as its defaults (llm_runs.cards).
RUN_DEFAULTS = {
    "temperature": 1.0, "max_new_tokens": 24, "base_lr": 3e-4, "lr_rule": "sqrt", "lr_ref_batch": 1024,
    "warmup_steps": 10, "precision": "fp32", "eval_n": 8, "eval_k": 4, "sampler": "lean", "train_forward": "lean",
    "sampler_batch_size": 4096, "micro_batch_size": 4096,
}
RUN_THREADS = 1  # torch threads of a run (the committed sweeps' records are bit-identical at one thread)


@dataclass(frozen=True)
class OrganismSettings:
    """Everything the build depends on; the cache key."""

    seed: int = 0
    pool_size: int = 12_000       # problems in pool.jsonl
    min_terms: int = 2
    max_terms: int = 5
    max_digits: int = 2
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    sft_steps: int = 1_700        # optimiser steps of supervised training (chosen: see the docstring)
    sft_batch: int = 128          # sequences per step
    sft_lr: float = 3e-3
    threads: int = 2              # torch threads of the build (fixed: results depend on it)
    # stop early, at the first step whose mean loss over the last 20 steps is at most this (None:
    # train all sft_steps). A model of another size learns the sums at another step; stopping at
    # the same loss keeps it unreliable in the same graded way.
    sft_stop_loss: float | None = None

    @staticmethod
    def for_scale(scale: str, **overrides: Any) -> "OrganismSettings":
        base = {"full": {}, "quick": {"pool_size": 200, "sft_steps": 60, "sft_batch": 64, "hidden_size": 32,
                                      "num_heads": 2}}
        if scale not in base:
            raise IsosimError(f"unknown scale {scale!r} (full or quick)")
        return OrganismSettings(**{**base[scale], **{k: v for k, v in overrides.items() if v is not None}})

    def check(self) -> None:
        if not 2 <= self.min_terms <= self.max_terms:
            raise IsosimError("need 2 <= min_terms <= max_terms")
        if not 1 <= self.max_digits <= 6:
            raise IsosimError("max_digits must be in 1..6")
        if self.pool_size < 1 or self.sft_steps < 0 or self.sft_batch < 1 or self.sft_lr <= 0:
            raise IsosimError("pool_size, sft_batch and sft_lr must be positive, sft_steps >= 0")
        if min(self.hidden_size, self.num_layers, self.num_heads) < 1:
            raise IsosimError("hidden_size, num_layers and num_heads must be positive")
        if self.hidden_size % self.num_heads:
            raise IsosimError("hidden_size must be a multiple of num_heads")
        if self.sft_stop_loss is not None and not self.sft_stop_loss > 0:
            raise IsosimError(f"sft_stop_loss must be positive, got {self.sft_stop_loss}")


def settings_dict(s: OrganismSettings) -> dict[str, Any]:
    """The settings as written to ``organism.json`` (the cache key). ``sft_stop_loss`` is left out
    when unset, so builds made before it existed (the shipped one) keep their key."""
    d = asdict(s)
    if d["sft_stop_loss"] is None:
        del d["sft_stop_loss"]
    return d


# --- the problem family -----------------------------------------------------------------------


def draw_terms(rng: np.random.Generator, s: OrganismSettings) -> list[int]:
    """A sum's terms: 2..5 of them, each with 1..max_digits digits (uniform over digit counts)."""
    count = int(rng.integers(s.min_terms, s.max_terms + 1))
    digits = rng.integers(1, s.max_digits + 1, size=count)
    return [int(rng.integers(10 ** (d - 1) if d > 1 else 0, 10 ** d)) for d in digits]


def problem_text(terms: list[int]) -> str:
    return "+".join(str(t) for t in terms)


def worked_answer(terms: list[int]) -> str:
    """The running partial sums after the first term: ``[47, 8, 31]`` -> ``" 55,86"``."""
    total, parts = terms[0], []
    for t in terms[1:]:
        total += t
        parts.append(str(total))
    return " " + ",".join(parts)


def make_pool(s: OrganismSettings) -> list[dict[str, Any]]:
    """``pool_size`` distinct problems, seeded; ids ``org-00000``..."""
    rng = np.random.default_rng([s.seed, 1])
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    while len(rows) < s.pool_size:
        terms = draw_terms(rng, s)
        text = problem_text(terms)
        if text in seen:
            continue
        seen.add(text)
        rows.append({"id": f"org-{len(rows):05d}", "problem": text, "answer": str(sum(terms)),
                     "terms": len(terms), "digits": sum(len(str(t)) for t in terms)})
    return rows


# --- the base model ---------------------------------------------------------------------------


def _sft_batch(rng: np.random.Generator, s: OrganismSettings, tokenizer: Any, pool_texts: set[str]) -> tuple[Any, Any]:
    """A batch of fresh worked sums (never a pool problem): input ids and a loss mask on the answer."""
    import torch

    from llm_runs.problems.data import build_prompt

    seqs, masks = [], []
    while len(seqs) < s.sft_batch:
        terms = draw_terms(rng, s)
        text = problem_text(terms)
        if text in pool_texts:
            continue
        prompt = build_prompt(tokenizer, text, PROMPT_TEMPLATE, INSTRUCTION)
        answer = list(tokenizer(worked_answer(terms), add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
        seqs.append(prompt + answer)
        masks.append([0] * len(prompt) + [1] * len(answer))
    width = max(len(x) for x in seqs)
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.float32)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (x, m) in enumerate(zip(seqs, masks)):
        ids[i, : len(x)] = torch.tensor(x)
        mask[i, : len(m)] = torch.tensor(m, dtype=torch.float32)
        attn[i, : len(x)] = 1
    return ids, (mask, attn)


def train_base_model(s: OrganismSettings, folder: Path, pool_texts: set[str], log: Any = print) -> dict[str, Any]:
    """Supervised training from a seeded random init; writes the HF folder, returns the loss curve.
    Runs on ``s.threads`` torch threads (the weights depend on it) and gives the caller's thread
    count back afterwards, so a build inside a longer process does not change that process's runs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(s.threads)
    try:
        return _train_base_model(s, folder, pool_texts, log)
    finally:
        torch.set_num_threads(before)


def _train_base_model(s: OrganismSettings, folder: Path, pool_texts: set[str], log: Any) -> dict[str, Any]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_runs.sampling.tiny import make_tokenizer

    torch.manual_seed(s.seed)
    tok = make_tokenizer(256)
    config = LlamaConfig(
        vocab_size=256, hidden_size=s.hidden_size, intermediate_size=4 * s.hidden_size,
        num_hidden_layers=s.num_layers, num_attention_heads=s.num_heads, num_key_value_heads=s.num_heads,
        max_position_embeddings=256, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=s.sft_lr, weight_decay=0.0, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1.0, (i + 1) / max(1, s.sft_steps // 20)))  # warm-up, then constant
    rng = np.random.default_rng([s.seed, 2])
    curve: list[list[float]] = []
    recent: deque[float] = deque(maxlen=20)  # the last 20 losses, for sft_stop_loss
    steps_done = s.sft_steps
    t0 = time.perf_counter()
    model.train()
    for step in range(s.sft_steps):
        ids, (mask, attn) = _sft_batch(rng, s, tok, pool_texts)
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                reduction="none").view_as(mask[:, 1:])
        loss = (nll * mask[:, 1:]).sum() / mask[:, 1:].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        recent.append(loss.item())
        mean = sum(recent) / len(recent)
        stop = s.sft_stop_loss is not None and len(recent) == recent.maxlen and mean <= s.sft_stop_loss
        if step % 100 == 0 or step == s.sft_steps - 1 or stop:
            curve.append([step, loss.item()])
            log(f"organism: sft step {step}/{s.sft_steps} loss {loss.item():.4f} ({time.perf_counter() - t0:.0f}s)")
        if stop:
            steps_done = step + 1
            log(f"organism: stopped after {steps_done} steps (mean loss of the last 20 "
                f"{mean:.4f} <= {s.sft_stop_loss})")
            break
    model.eval()
    model.generation_config.do_sample = True
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    out = {"sft_curve": curve, "sft_seconds": time.perf_counter() - t0,
           "parameters": int(sum(p.numel() for p in model.parameters()))}
    if s.sft_stop_loss is not None:
        out["sft_steps_done"] = steps_done
    return out


def weights_digest(folder: Path) -> str:
    """SHA-256 of the saved tensors (names and bytes), independent of file metadata."""
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "model.safetensors"))
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(tensors[name].contiguous().numpy().tobytes())
    return h.hexdigest()


def build(out: str | Path, settings: OrganismSettings, log: Any = print) -> dict[str, Any]:
    """Build (or find in the cache) the organism in ``out``; returns its ``organism.json``."""
    settings.check()
    out = Path(out)
    meta_path = out / "organism.json"
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise IsosimError(f"{meta_path}: unreadable ({exc})") from None
        if meta.get("settings") == settings_dict(settings) and (out / "model" / "model.safetensors").is_file():
            log(f"organism: cached in {out} (weights {meta['weights_sha256'][:12]})")
            return meta
        raise IsosimError(f"{out} holds an organism with other settings: use another --out")
    from llm_runs.training.runlog import write_json

    out.mkdir(parents=True, exist_ok=True)
    pool = make_pool(settings)
    with (out / "pool.jsonl.tmp").open("w", encoding="utf-8") as fh:
        for row in pool:
            fh.write(json.dumps(row) + "\n")
    (out / "pool.jsonl.tmp").replace(out / "pool.jsonl")
    info = train_base_model(settings, out / "model", {r["problem"] for r in pool}, log)
    meta = {"settings": settings_dict(settings), **info, "weights_sha256": weights_digest(out / "model"),
            "prompt_template": PROMPT_TEMPLATE, "instruction": INSTRUCTION, "answer_fallback": ANSWER_FALLBACK,
            "run_defaults": dict(RUN_DEFAULTS), "run_threads": RUN_THREADS, "pool": str(out / "pool.jsonl"), "model": str(out / "model")}
    write_json(meta_path, meta)
    log(f"organism: built in {out} ({info['parameters']} parameters, {info['sft_seconds']:.0f}s of SFT)")
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llm_runs.organism", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder to build into (a rerun finds the cached build)")
    ap.add_argument("--scale", default="full", help="full (the study's organism) or quick (seconds; tests)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--sft-steps", type=int, default=None)
    ap.add_argument("--pool-size", type=int, default=None)
    ap.add_argument("--hidden-size", type=int, default=None, help="width (default 64)")
    ap.add_argument("--num-layers", type=int, default=None, help="layers (default 2)")
    ap.add_argument("--num-heads", type=int, default=None, help="attention heads (default 2)")
    ap.add_argument("--max-terms", type=int, default=None, help="most terms in a sum (default 5)")
    ap.add_argument("--max-digits", type=int, default=None, help="most digits in a term (default 2)")
    ap.add_argument("--sft-stop-loss", type=float, default=None,
                    help="stop SFT once the mean loss of the last 20 steps is at most this; "
                         "--sft-steps is then the cap (the shipped organism ended at loss .153)")
    args = ap.parse_args(argv)
    try:
        s = OrganismSettings.for_scale(args.scale, seed=args.seed, sft_steps=args.sft_steps,
                                       pool_size=args.pool_size, hidden_size=args.hidden_size,
                                       num_layers=args.num_layers, num_heads=args.num_heads,
                                       max_terms=args.max_terms, max_digits=args.max_digits,
                                       sft_stop_loss=args.sft_stop_loss)
        build(args.out, s)
    except IsosimError as exc:
        print(f"error: {' '.join(str(exc).split())[:500]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
