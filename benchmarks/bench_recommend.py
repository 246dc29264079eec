"""Wall time of `isosim recommend` at budgets from 500 rollouts to 1e30, each in a fresh process
with an empty cache (what a new install meets), and again with the cache it left.

    python benchmarks/bench_recommend.py [--preset easy] [--budgets 500,1e5,1e12,1e30]

Budgets from the cap (1e7) up share one simulated sweep: on a built-in preset it ships with
isosim (isosim/predict/presimulated/) and is only analysed; on any other setting it is simulated
once (about 25 s on one core) and cached.
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


def timed(args: list[str], cache: Path) -> tuple[float, int, str]:
    env = {**os.environ, "ISOSIM_CACHE": str(cache)}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", "import cli; cli.main()", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    last = (res.stdout.strip().splitlines() or [res.stderr.strip()])[-1]
    return time.perf_counter() - t0, res.returncode, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="easy")
    ap.add_argument("--budgets", default="500,1e5,1e12,1e30")
    args = ap.parse_args()
    for budget in args.budgets.split(","):
        cache = Path(tempfile.mkdtemp(prefix="isosim-bench-cache-"))
        cmd = ["recommend", "--budget", budget, "--preset", args.preset]
        fresh, rc, last = timed(cmd, cache)
        again, rc2, _ = timed(cmd, cache)
        print(f"recommend --budget {budget} --preset {args.preset}: {fresh:.1f} s fresh cache, {again:.1f} s cached "
              f"(exit {rc}, {rc2}); last line: {last[:90]}")


if __name__ == "__main__":
    main()
