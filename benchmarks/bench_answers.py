"""Time to the first answer: a base commit's code against this checkout's, in one run, cold.

Each command runs in a subprocess with an empty ``ISOSIM_CACHE`` (cold) and its output to a pipe (not a
terminal), under the base commit's code (``git archive BASE`` into a temporary folder, on
``PYTHONPATH``) and under this checkout's; the table gives both wall times and their ratio. Then the
engine: rollouts simulated per second on recommend's easy sweep to 1e5 rollouts (float64 one thread,
the default; the same on two processes, ``simulate(workers=2)``, its helper warm from the first of the
two timings; float32; two threads), against the limit of this CPU for its inner loop (see
``engine_limit``).

    python benchmarks/bench_answers.py                      # the default cases (about 3 min)
    python benchmarks/bench_answers.py --nice 5             # every command under nice 5
    python benchmarks/bench_answers.py --old-all            # the base's time at every case (15+ min)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PRESETS = ("easy", "very-easy", "hard", "extreme")
BUDGETS = ("1e4", "1e5", "1e6", "2e6", "1e7", "1e8")
OLD_DEFAULT = {("easy", "1e4"), ("easy", "1e5"), ("easy", "1e6"), ("easy", "1e7"), ("easy", "1e8"),
               ("hard", "1e5"), ("hard", "1e7")}
"""cases timed under the base too by default (the base simulates the rest for minutes each)"""
PROFILE = ROOT / "studies" / "results" / "organism" / "profile.json"


def extract(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` in ``dest`` (``git archive``)."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def timed(code: Path, args: list[str], nice: int, tmp: Path) -> tuple[float, int, str, float]:
    """Wall seconds of ``cli.py ARGS`` from the tree ``code``, cold; its exit status, last stderr line and
    CPU seconds (user + system: what a machine to itself would take, about, on one core)."""
    import resource

    cache = Path(tempfile.mkdtemp(dir=tmp, prefix="cache-"))
    env = {**os.environ, "PYTHONPATH": str(code), "ISOSIM_CACHE": str(cache)}
    cmd = ([*(["nice", "-n", str(nice)] if nice else [])] + [sys.executable, str(code / "cli.py"), *args])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    return wall, p.returncode, (err[-1] if err else ""), cpu


def cases(old_all: bool) -> list[tuple[str, list[str], bool]]:
    """(name, cli arguments, time the base too)."""
    out = []
    for preset in PRESETS:
        for b in BUDGETS:
            out.append((f"recommend --budget {b} --preset {preset}", ["recommend", "--budget", b, "--preset", preset],
                        old_all or (preset, b) in OLD_DEFAULT))
    out.append(("recommend --budget 1e6 --profile organism/profile.json",
                ["recommend", "--budget", "1e6", "--profile", str(PROFILE)], True))
    out.append(("explore --preset easy", ["explore", "--preset", "easy", "--out", "OUT"], True))
    return out


# ----------------------------------------------------------------------------------------
# The engine against this CPU's limit
# ----------------------------------------------------------------------------------------
def bandwidth(mb: int = 256, repeats: int = 5) -> float:
    """Memory bandwidth in bytes/s: the fastest numpy copy of an ``mb`` MB float64 array (read + write)."""
    import numpy as np

    a = np.ones(mb * 2**20 // 8)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best


def step_bytes(cfg, itemsize: int = 8) -> float:
    """Bytes the general step of one run moves through memory: the batch's dense feature rows
    (B_p problems x responses x dense features) are gathered (read + written), then read by the forward
    and by the backward product: 4 passes; plus the per-response vectors (logits, policy, counts,
    advantages, gradient: about 12 passes of B_p x responses)."""
    dense = 1 + (cfg.mem_dim if cfg.memorize > 0 else 0)
    return itemsize * cfg.b_p * cfg.responses * (4 * dense + 12)


def eval_bytes(cfg, itemsize: int = 8) -> float:
    """Bytes of one evaluation: every validation and training problem's dense rows read once."""
    dense = 1 + (cfg.mem_dim if cfg.memorize > 0 else 0)
    return itemsize * (cfg.n_val + cfg.n_train) * cfg.responses * (dense + 4)


def engine(bw: float) -> list[tuple[str, float, float]]:
    """(setting, rollouts/s, share of the limit) on recommend's easy sweep to 1e5 rollouts."""
    import torch

    from isosim.predict.recommend import sweep_plan
    from isosim.sim.engine import simulate

    cfgs = sweep_plan(1e5, preset="easy")[0].configs()
    rollouts = sum(c.total_steps * c.b_p * c.rollouts_per_step for c in cfgs)
    out = []
    for name, dtype, threads, size, workers in (("float64, 1 thread (default)", torch.float64, 1, 8, 1),
                                                ("float64, 2 processes (workers=2)", torch.float64, 1, 8, 2),
                                                ("float32, 1 thread", torch.float32, 1, 4, 1),
                                                ("float64, 2 threads", torch.float64, 2, 8, 1)):
        need = sum(c.total_steps * step_bytes(c, size) + (c.eval_points + 1) * eval_bytes(c, size) for c in cfgs)
        limit = rollouts / (need / bw)
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            simulate(cfgs, dtype=dtype, threads=threads, **({"workers": workers} if workers > 1 else {}))
            best = min(best, time.perf_counter() - t0)
        out.append((name, rollouts / best, rollouts / best / limit, limit))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="80b8322", help="the commit to compare with")
    ap.add_argument("--nice", type=int, default=0, help="run every timed command under this nice value")
    ap.add_argument("--old-all", action="store_true", help="time the base at every case (long)")
    ap.add_argument("--no-engine", action="store_true", help="skip the engine's rollouts per second")
    ap.add_argument("--only", default=None, help="only the cases whose name holds this text")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; nice {args.nice}")
    with tempfile.TemporaryDirectory(prefix="bench-answers-") as tmp:
        tmp = Path(tmp)
        base = extract(args.base, tmp / "base")
        print(f"{'command':58s} {'base s':>8s} {'new s':>8s} {'ratio':>7s} {'base cpu':>9s} {'new cpu':>8s}")
        for name, cli_args, old in cases(args.old_all):
            if args.only and args.only not in name:
                continue
            t_new = timed(ROOT, [a.replace("OUT", str(tmp / "out-new")) for a in cli_args], args.nice, tmp)
            t_old = (timed(base, [a.replace("OUT", str(tmp / "out-old")) for a in cli_args], args.nice, tmp)
                     if old else None)
            for got, who in ((t_new, "new"), (t_old, "base")):
                if got is not None and got[1] != 0:
                    print(f"  {who} failed ({got[1]}): {got[2]}")
            old_s = f"{t_old[0]:8.1f}" if t_old else f"{'-':>8s}"
            ratio = f"{t_old[0] / t_new[0]:6.1f}x" if t_old else f"{'':>7s}"
            old_cpu = f"{t_old[3]:9.1f}" if t_old else f"{'-':>9s}"
            print(f"{name:58s} {old_s} {t_new[0]:8.1f} {ratio} {old_cpu} {t_new[3]:8.1f}", flush=True)
    if args.no_engine:
        return
    bw = bandwidth()
    print(f"\nmemory bandwidth (numpy copy of 256 MB, read + write): {bw / 1e9:.1f} GB/s")
    print(f"{'engine on the easy sweep to 1e5':34s} {'rollouts/s':>12s} {'limit':>12s} {'share':>7s}")
    for name, rate, share, limit in engine(bw):
        print(f"{name:34s} {rate:12.3g} {limit:12.3g} {share:7.1%}")


if __name__ == "__main__":
    main()
