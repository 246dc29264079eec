"""Organism run speed: today's path (hf sampler, hf forward) against the lean one (``sampler lean``,
``train_forward lean``), on the organism sweep's settings, in one process.

    python benchmarks/bench_organism.py --quick                      # < 5 min on 2 cores
    python benchmarks/bench_organism.py --model runs/organism/model  # the built organism

Settings are docs/organism.md step 4's: B_p 16, temperature 1, 24 new tokens, sampler and micro
batch 4096, fp32, the easy recipe (KL 1e-3 + entropy 1e-3, so a reference forward every step),
base lr 3e-4 with the sqrt rule, plain template, last-number answers, on the committed easy split
(``studies/results/organism/splits/easy.jsonl``). Without ``--model`` the script builds the
organism's architecture itself (hidden 64, 2 layers, 2 heads) with a short supervised training
(``--sft-steps``, default 150: enough to answer in the format and stop after ~8 tokens like the real one)
into ``--work``, and says so.

For each n (2, 16, 128) both paths are set up as real trainers (``GRPOTrainer``: sampling,
scoring, the update with its reference forward, the optimizer), take one untimed step, then take
timed steps each (at least 320 rollouts, 2,048 without ``--quick``), alternating in ``--repeats``
rounds so that the machine's load falls on both alike; each side's time is the CPU time of this
one-thread process (``time.process_time``: core-seconds, which other processes on a loaded
machine do not inflate the way they do wall time) in its fastest round. The ceiling is the FLOP
count of a rollout done the plain way (sampling forward 2 P T, policy forward and backward 6 P T,
reference forward 2 P T, with P the matmul parameters and T the prompt + response tokens) divided
by the rate this core sustains on a matmul of the model's shapes, measured in the same run. The
lean path computes each prompt once per group, so it can exceed that ceiling at large n.

Last line: ``speedup X.XX``, the time of a sweep that spends the same rollouts at each n (the
harmonic combination of the per-n rates), old path over new.

``--many`` measures instead the lean path's runs of a small-n mix (``--mix``, default four runs at
n = 2 and four at n = 4, seeds 0-3) two ways, in worker processes of one thread each that hold their
trainers and take steps on command: one process per run (``runs`` side), against one process per
n holding its runs together (``llm_runs.training.many``, ``many`` side). Each round gives both
sides ``--window`` seconds of steps (every worker of a side at once; the order of the sides
alternates), and counts each worker's rollouts, wall time and CPU time. Per side it prints the
total rollouts per second (the sum of the workers' rates) and the rollouts per core-second (all
rollouts over all CPU time), fastest round of ``--repeats``. On a machine the benchmark has to
itself both say the same; on a shared one the wall figure also measures how much of the machine
each side's processes win from the others (eight processes win more than two), so the last line,
``many-speedup X.XX``, is the ratio of the rollouts per core-second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SWEEP = {"val_size": 300, "b_p": 16, "prompt_template": "plain", "instruction": "", "answer_fallback": "last-number",
         "temperature": 1.0, "max_new_tokens": 24, "sampler_batch_size": 4096, "micro_batch_size": 4096,
         "precision": "fp32", "eval_n": 8, "eval_k": 4, "base_lr": 3e-4, "recipe": "easy"}
PATHS = {"old": {"sampler": "hf", "train_forward": "hf"}, "new": {"sampler": "lean", "train_forward": "lean"}}


def organism_model(args: argparse.Namespace) -> tuple[str, str]:
    if args.model:
        return args.model, f"the given organism {args.model}"
    from llm_runs.organism.build import OrganismSettings, build

    work = Path(args.work or Path(tempfile.gettempdir()) / "isosim_bench_organism")
    s = OrganismSettings(sft_steps=args.sft_steps, pool_size=2000, threads=1)
    meta = build(work, s, log=lambda m: None)
    return meta["model"], (f"the organism's architecture built here ({meta['parameters']:,} parameters, "
                           f"{args.sft_steps} SFT steps instead of 1,700; cached in {work})")


def matmul_gflops(hidden: int, seconds: float = 1.0) -> float:
    import torch

    x, w = torch.randn(8192, hidden), torch.randn(3 * hidden, hidden)
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.nn.functional.linear(x, w)
        reps += 1
    return 2 * 8192 * hidden * 3 * hidden * reps / (time.perf_counter() - t0) / 1e9


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a built organism's model folder (default: build one)")
    ap.add_argument("--data", default=str(ROOT / "studies/results/organism/splits/easy.jsonl"))
    ap.add_argument("--work", default=None, help="where to build the organism without --model")
    ap.add_argument("--sft-steps", type=int, default=150)
    ap.add_argument("--n", default="2,16,128")
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds (< 5 min on 2 cores)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--many", action="store_true", help="K runs in one process against one process per run")
    ap.add_argument("--mix", default="2,2,2,2,4,4,4,4", help="--many: the runs' n (seeds 0, 1, ... per n)")
    ap.add_argument("--window", type=float, default=None, help="--many: seconds of steps per side and round")
    args = ap.parse_args(argv)
    if args.many:
        from bench_many import bench_many

        return bench_many(args, organism_model, SWEEP)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    from llm_runs.config import RunConfig
    from llm_runs.training.train import GRPOTrainer

    t_start = time.perf_counter()
    model, what = organism_model(args)
    print(f"model: {what}")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min) "
          f"on {os.cpu_count()} cores; torch {torch.__version__}, 1 thread")
    ns = [int(x) for x in args.n.split(",")]
    repeats = args.repeats or (3 if args.quick else 5)
    rollouts_target = 320 if args.quick else 2048  # timed rollouts per side per round, at least one step
    work = Path(tempfile.mkdtemp(prefix="bench_organism_"))
    rates: dict[str, dict[int, float]] = {"old": {}, "new": {}}
    tokens_per_rollout = []
    for n in ns:
        trainers = {}
        for side, extra in PATHS.items():
            cfg = RunConfig(model=model, data=args.data, out=str(work / f"{side}_n{n}"), overwrite=True, n=n,
                            budget=16 * n * 10_000, seed=0, **SWEEP, **extra)
            tr = GRPOTrainer(cfg, log=lambda m: None)
            tr.setup()
            tr.train_step()  # untimed: first-call costs
            trainers[side] = tr
        steps = max(1, rollouts_target // (16 * n))
        best = {"old": float("inf"), "new": float("inf")}
        split: dict[str, dict[str, float]] = {}
        for _ in range(repeats):
            for side, tr in trainers.items():
                t0, parts = time.process_time(), {"sample": 0.0, "train": 0.0}
                for _ in range(steps):
                    m = tr.train_step()
                    parts["sample"] += m["time/sample_s"]
                    parts["train"] += m["time/train_s"]
                    tokens_per_rollout.append(m["response/len_mean"])
                dt = time.process_time() - t0  # CPU seconds of this process: core-seconds
                if dt < best[side]:
                    best[side], split[side] = dt, {k: v / steps for k, v in parts.items()}
        for side in trainers:
            rates[side][n] = 16 * n * steps / best[side]
            trainers[side].close()
        old, new = split["old"], split["new"]
        print(f"n={n:4d} ({steps} steps x {repeats} rounds): old {rates['old'][n]:7.0f} rollouts/core-s "
              f"(wall per step: sample {old['sample']:.3f}s, update {old['train']:.3f}s) | "
              f"new {rates['new'][n]:7.0f} (sample {new['sample']:.3f}s, "
              f"update {split['new']['train']:.3f}s) | x{rates['new'][n] / rates['old'][n]:.2f}", flush=True)
    # the FLOP-derived ceiling of the plain way of doing a rollout
    import statistics

    from llm_runs.problems.data import build_prompt, load_problems
    from llm_runs.sampling import models

    tok = models.load_tokenizer(model)
    mdl = models.load_model(model)
    params = sum(p.numel() for p in mdl.parameters() if p.dim() > 1)  # matmul weights (the tied head counted once)
    prompt_len = statistics.mean(len(build_prompt(tok, p.problem, "plain", "")) for p in load_problems(args.data)[:500])
    resp_len = statistics.mean(tokens_per_rollout)
    flop = 10 * params * (prompt_len + resp_len)
    gflops = matmul_gflops(mdl.config.hidden_size)
    print(f"ceiling: {flop / 1e6:.1f} MFLOP a rollout (10 x {params:,} matmul parameters x {prompt_len + resp_len:.1f} "
          f"tokens: prompt {prompt_len:.1f} + response {resp_len:.1f}); this core sustains {gflops:.1f} GFLOP/s on "
          f"the model's qkv matmul -> {gflops * 1e9 / flop:.0f} rollouts/core-s")
    sweep = {side: len(ns) / sum(1 / rates[side][n] for n in ns) for side in rates}
    print(f"sweep (equal rollouts at each n): old {sweep['old']:.0f}, new {sweep['new']:.0f} rollouts/core-s")
    print(f"load at the end: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
          f"took {time.perf_counter() - t_start:.0f}s")
    print(json.dumps({"old": rates["old"], "new": rates["new"]}))
    print(f"speedup {sweep['new'] / sweep['old']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
