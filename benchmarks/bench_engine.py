"""Engine speed: what the README's performance table quotes. Every figure comes from this run.

    python benchmarks/bench_engine.py            # all four measurements (a few minutes)
    python benchmarks/bench_engine.py --skip-sweep

1. time per step at n = 2048 over n = 8 (one run each, same steps)      target <= 1.5
   (easy-distance preset, closed form: a large-n group draws its number of correct draws as one
   binomial; also with a typicality part: the general path, per-response multinomial counts)
2. 64 runs batched vs the same 64 runs one after another (200 and 1000 steps)  target >= 10x
   (easy-distance preset: the linear policy in closed form; also with a typicality part, which takes
   the general path over every response)
3. count-based engine vs per-rollout GRPO through the gymnasium vector env, n = 256, end to end
   (10 steps, setup included) and per step (marginal cost from runs of 10 and 110 steps)
                                                                           target >= 100x
4. wall time of a 9-n x 3-seed sweep of the easy preset to 4e6 and 1e7 rollouts

Timings in [1] and [2] are the fastest of ``--repeats`` alternating runs of each side (the
machine's noise only ever adds time); [3] takes the fastest of three count-based runs against one
per-rollout run; [4] is a single run.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from isosim.sim.config import SimConfig
from isosim.sim.engine import simulate
from isosim.sim.presets import get_preset
from isosim.sim.reference import train_per_rollout


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fastest(fns, repeats: int) -> list[float]:
    """Fastest of ``repeats`` timings of each function, the functions taking turns."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], timed(fn))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-sweep", action="store_true", help="skip the 1e7-rollout sweep")
    ap.add_argument("--budget", type=float, default=1e7, help="budget of the sweep (rollouts)")
    ap.add_argument("--repeats", type=int, default=3, help="timings per side in [1] and [2] (the fastest counts)")
    ap.add_argument("--preset", default="easy-distance",
                    help="preset whose settings every measurement uses (the README's table: easy-distance, "
                         "whose linear policy takes the closed form; the default easy preset's interference "
                         "part takes the general path)")
    args = ap.parse_args()
    base = SimConfig(**get_preset(args.preset))
    print(f"isosim engine benchmark on {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, threads per simulate call: 1")

    steps = 400
    simulate([base.replace(n=8, steps=20)])  # warm-up (imports, allocator)
    for label, typicality in (("closed form", 0.0), ("typicality 0.3, general path", 0.3)):
        t8, t2048 = fastest([lambda: simulate([base.replace(n=8, steps=steps, typicality=typicality)]),
                             lambda: simulate([base.replace(n=2048, steps=steps, typicality=typicality)])],
                            args.repeats)
        print(f"[1] per step ({label}): n=8 {1e3 * t8 / steps:.2f} ms, n=2048 {1e3 * t2048 / steps:.2f} ms, "
              f"ratio {t2048 / t8:.2f} (target <= 1.5)")

    for steps, label, data_seed, typicality in ((200, "one shared population", 0, 0.0),
                                                (200, "64 populations", None, 0.0),
                                                (1000, "one shared population", 0, 0.0),
                                                (200, "one shared population, typicality 0.3", 0, 0.3)):
        cfgs = [base.replace(n=8, steps=steps, seed=s, data_seed=data_seed, typicality=typicality)
                for s in range(64)]
        t_batch, t_seq = fastest([lambda: simulate(cfgs), lambda: [simulate([c]) for c in cfgs]], args.repeats)
        print(f"[2] 64 runs x {steps} steps (20 evaluations each), {label}: batched {t_batch:.2f} s, "
              f"one by one {t_seq:.2f} s, speed-up {t_seq / t_batch:.1f}x (target >= 10x)")

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
            print(f"[4] 9 n x 3 seeds to {budget:.0e} rollouts ({args.preset} preset): {t_sweep:.0f} s")


if __name__ == "__main__":
    main()
