"""Wall time of `isosim explore` with default settings on a preset, split into simulation and analysis.

    python benchmarks/bench_explore.py [--preset easy] [--out DIR]

Runs exactly what `isosim explore --preset easy` runs (the default Q1 plan: n = 8..2048, B_p = 32,
3 seeds, budget 1e7 rollouts), timing the sweep and the analysis (fits, bootstrap, figures) apart.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from isosim.frontier import report
from isosim.sweeps import sweep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="easy")
    ap.add_argument("--out", type=Path, default=None, help="store folder (default: a temporary one)")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="isosim-bench-")) / "explore"
    plan = sweep.plan_for_preset(args.preset, "q1")
    print(plan.summary())
    t0 = time.perf_counter()
    df = sweep.run_sweep(plan, out, progress=False)
    t1 = time.perf_counter()
    result = report.build_report(df, out)
    t2 = time.perf_counter()
    total = t2 - t0
    print(f"simulation {t1 - t0:.0f} s ({100 * (t1 - t0) / total:.0f}%), "
          f"analysis + figures {t2 - t1:.1f} s ({100 * (t2 - t1) / total:.0f}%), total {total:.0f} s")
    report.print_summary(result, title=f"isosim explore --preset {args.preset}", out_dir=out)


if __name__ == "__main__":
    main()
