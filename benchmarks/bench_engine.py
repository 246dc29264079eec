"""Engine speed: what the README's performance table quotes. Every figure comes from this run.

    python benchmarks/bench_engine.py            # all four measurements (a few minutes)
    python benchmarks/bench_engine.py --skip-sweep

1. time per step at n = 2048 over n = 8 (one run each, same steps)      target <= 1.5
2. 64 runs batched vs the same 64 runs one after another (200 and 1000 steps)  target >= 10x
3. count-based engine vs per-rollout GRPO through the gymnasium vector env, n = 256, end to end
   (10 steps, setup included) and per step (marginal cost from runs of 10 and 110 steps)
                                                                           target >= 100x
4. wall time of a 9-n x 3-seed sweep of the easy preset to 4e6 and 1e7 rollouts
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from isosim.config import SimConfig
from isosim.engine import simulate
from isosim.presets import get_preset
from isosim.reference import train_per_rollout


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-sweep", action="store_true", help="skip the 1e7-rollout sweep")
    ap.add_argument("--budget", type=float, default=1e7, help="budget of the sweep (rollouts)")
    args = ap.parse_args()
    base = SimConfig(**get_preset("easy"))
    print(f"isosim engine benchmark on {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, threads per simulate call: 1")

    steps = 400
    simulate([base.replace(n=8, steps=20)])  # warm-up (imports, allocator)
    t8 = timed(lambda: simulate([base.replace(n=8, steps=steps)]))
    t2048 = timed(lambda: simulate([base.replace(n=2048, steps=steps)]))
    print(f"[1] per step: n=8 {1e3 * t8 / steps:.2f} ms, n=2048 {1e3 * t2048 / steps:.2f} ms, "
          f"ratio {t2048 / t8:.2f} (target <= 1.5)")

    for steps, label, data_seed in ((200, "one shared population", 0), (200, "64 populations", None),
                                    (1000, "one shared population", 0)):
        cfgs = [base.replace(n=8, steps=steps, seed=s, data_seed=data_seed) for s in range(64)]
        t_batch = timed(lambda: simulate(cfgs))
        t_seq = timed(lambda: [simulate([c]) for c in cfgs])
        print(f"[2] 64 runs x {steps} steps (20 evaluations each), {label}: batched {t_batch:.1f} s, "
              f"one by one {t_seq:.1f} s, speed-up {t_seq / t_batch:.1f}x (target >= 10x)")

    ref_cfg = base.replace(n=256, steps=10, seed=0)
    t_ref = timed(lambda: train_per_rollout(ref_cfg, eval_every=10))
    t_cnt = min(timed(lambda: simulate([ref_cfg.replace(eval_points=1)])) for _ in range(3))
    t_cnt110 = min(timed(lambda: simulate([ref_cfg.replace(steps=110, eval_points=1)])) for _ in range(3))
    per_step = (t_cnt110 - t_cnt) / 100  # marginal cost of a step (same evaluations in both runs)
    print(f"[3] n=256, b_p=32, 10 steps end to end (setup, 3 evaluations, records): per-rollout {t_ref:.2f} s, "
          f"count-based {t_cnt:.3f} s, speed-up {t_ref / t_cnt:.0f}x; per step: per-rollout "
          f"{1e3 * t_ref / 10:.0f} ms, count-based {1e3 * per_step:.2f} ms, speed-up {t_ref / 10 / per_step:.0f}x "
          f"(target >= 100x)")

    if not args.skip_sweep:
        for budget in (4e6, args.budget):  # 4e6: the numpy prototype's figure (30-40 s on 2 cores)
            sweep = [base.replace(n=n, budget=budget, seed=s)
                     for n in (4, 8, 16, 32, 64, 128, 256, 512, 1024) for s in range(3)]
            t_sweep = timed(lambda: simulate(sweep))
            print(f"[4] 9 n x 3 seeds to {budget:.0e} rollouts (easy preset): {t_sweep:.0f} s")


if __name__ == "__main__":
    main()
