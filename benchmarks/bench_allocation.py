"""Per-problem allocation's cost in the engine: time per step of a batch of runs with each rule
against the same runs with uniform (which draws its problems and uniforms ahead in chunks; a rule
plans every step from its estimator, in numpy, run by run).

    python benchmarks/bench_allocation.py [--runs 16] [--steps 400] [--repeats 3]

Both presets' policies are timed: ``hard`` (linear closed form) and ``easy`` (general path, with
memorisation). Each figure is the fastest of ``--repeats`` runs (noise only adds time).
"""

from __future__ import annotations

import argparse
import time

from isosim.sim.allocation import RULES
from isosim.sim.config import SimConfig
from isosim.sim.engine import simulate
from isosim.sim.presets import get_preset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    for preset in ("hard", "easy"):
        base = {**get_preset(preset), "n_train": 512, "n_val": 256, "eval_points": 5}
        times = {}
        for rule in RULES:
            cfgs = [SimConfig(**base, n=16, seed=s, steps=a.steps, allocation=rule) for s in range(a.runs)]
            best = float("inf")
            for _ in range(a.repeats):
                t = time.perf_counter()
                simulate(cfgs)
                best = min(best, time.perf_counter() - t)
            times[rule] = best
        per = {r: 1e3 * t / a.steps for r, t in times.items()}
        print(f"{preset}: {a.runs} runs x {a.steps} steps, n 16, B_p 32; ms per batched step: "
              + ", ".join(f"{r} {v:.2f} ({v / per['uniform']:.1f}x)" for r, v in per.items()))


if __name__ == "__main__":
    main()
