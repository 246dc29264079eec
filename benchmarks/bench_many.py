"""``bench_organism.py --many``: a small-n mix of lean organism runs, one process per run against one
process per n holding its runs together (``llm_runs.training.many``). See bench_organism.py's doc."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _worker(conn: Any, cfgs: list[dict]) -> None:
    """Hold ``cfgs``' trainers (one: ``GRPOTrainer``; several: ``ManyTrainer``); on ``window`` seconds
    from ``conn``, take steps for that long and answer (rollouts, wall s, CPU s)."""
    import torch

    torch.set_num_threads(1)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    from llm_runs.config import RunConfig
    from llm_runs.training.many import ManyTrainer
    from llm_runs.training.train import GRPOTrainer

    quiet = lambda m: None  # noqa: E731
    if len(cfgs) == 1:
        tr = GRPOTrainer(RunConfig(**cfgs[0]), log=quiet)
        tr.setup()
        step: Callable[[], Any] = tr.train_step
    else:
        many = ManyTrainer([RunConfig(**c) for c in cfgs], log=quiet)
        many.setup()
        idx = tuple(range(len(cfgs)))
        step = lambda: many.step(idx)  # noqa: E731
    per_step = sum(c["b_p"] * c["n"] for c in cfgs)
    step()  # untimed: first-call costs
    conn.send("ready")
    while (window := conn.recv()) is not None:
        t0, c0, rollouts = time.perf_counter(), time.process_time(), 0
        while True:
            step()
            rollouts += per_step
            if time.perf_counter() - t0 >= window:
                break
        conn.send((rollouts, time.perf_counter() - t0, time.process_time() - c0))


def _load() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def bench_many(args: argparse.Namespace, organism_model: Callable[[argparse.Namespace], tuple[str, str]],
               sweep: dict) -> int:
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    t_start = time.perf_counter()
    model, what = organism_model(args)
    print(f"model: {what}")
    mix = [int(x) for x in args.mix.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench_many_"))
    runs, seen = [], {}
    for n in mix:
        seed = seen[n] = seen.get(n, -1) + 1
        runs.append({**sweep, "model": model, "data": args.data, "out": str(work / f"n{n}_s{seed}"),
                     "overwrite": True, "n": n, "seed": seed, "budget": sweep["b_p"] * n * 1_000_000,
                     "sampler": "lean", "train_forward": "lean"})
    groups: dict[int, list[dict]] = {}
    for c in runs:
        groups.setdefault(c["n"], []).append({**c, "out": c["out"] + "_many"})
    sides = {"runs": [[c] for c in runs], "many": list(groups.values())}
    print(f"mix: {len(runs)} runs, n = {mix}, B_p {sweep['b_p']}; side 'runs': {len(sides['runs'])} processes of "
          f"one run; side 'many': {len(sides['many'])} processes of "
          f"{', '.join(str(len(g)) for g in sides['many'])} runs (one per n); 1 thread each, {os.cpu_count()} cores")
    print(f"load before: {_load()} (1, 5, 15 min)", flush=True)
    ctx = mp.get_context("spawn")
    workers: dict[str, list[tuple[Any, Any]]] = {}
    for side, cfg_lists in sides.items():
        workers[side] = []
        for cfgs in cfg_lists:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, cfgs), daemon=True)
            proc.start()
            workers[side].append((proc, parent))
    for side in workers:
        for proc, conn in workers[side]:
            if conn.recv() != "ready":
                raise RuntimeError("a worker failed to start")
    repeats = args.repeats or (2 if args.quick else 3)
    window = args.window or (6.0 if args.quick else 12.0)
    best = {side: {"wall": 0.0, "cpu": 0.0} for side in sides}
    for r in range(repeats):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for side in order:
            for _, conn in workers[side]:
                conn.send(window)
            res = [conn.recv() for _, conn in workers[side]]
            wall_rate = sum(roll / wall for roll, wall, _ in res)
            cpu_rate = sum(roll for roll, _, _ in res) / sum(cpu for _, _, cpu in res)
            best[side]["wall"] = max(best[side]["wall"], wall_rate)
            best[side]["cpu"] = max(best[side]["cpu"], cpu_rate)
            print(f"round {r + 1} {side:>4}: {wall_rate:7.0f} rollouts/s in all, {cpu_rate:6.0f} rollouts/core-s "
                  f"({sum(x[0] for x in res)} rollouts; load {_load()})", flush=True)
    for side in workers:
        for proc, conn in workers[side]:
            conn.send(None)
            proc.join(timeout=30)
    for side in sides:
        print(f"{side:>4}: {best[side]['wall']:7.0f} rollouts/s in all, {best[side]['cpu']:6.0f} rollouts/core-s "
              f"(fastest of {repeats} rounds of {window:.0f} s)")
    wall_x = best["many"]["wall"] / best["runs"]["wall"]
    cpu_x = best["many"]["cpu"] / best["runs"]["cpu"]
    print(f"many / runs: x{wall_x:.2f} in rollouts/s in all (wall), x{cpu_x:.2f} in rollouts/core-s")
    print(f"load at the end: {_load()}; took {time.perf_counter() - t_start:.0f}s")
    print(f"many-speedup {cpu_x:.2f}")
    return 0
