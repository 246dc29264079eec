"""The learner search's pilot criterion, read from a pilot's runs (docs/organism.md, the search table).

A pilot runs n = 4 for 1,562 update steps (1e5 rollouts at B_p 16) and n = 64 for 195 (2e5), on
each seed. The mechanism the paper's F1 needs (a larger group reaching a level a small group never
reaches) is *present* if the seed mean of n = 64's best evaluation within its 195 steps exceeds
the seed mean of n = 4's best over its 1,562 steps by more than 2 se of the mean, and n = 64 is
ahead on every seed. The se is the conservative one fixed in studies/LOG.md (2026-12-05) before
the first pilot was read: sqrt(p (1 - p) / 300) at the higher of the two values (300 validation
problems, a problem's 4 samples counted as one draw), divided by sqrt(seeds) for the mean; the
1,200-draw se is printed beside it.

    python studies/organism/pilot_criterion.py studies/results/organism_hard/pilot_constant_lr
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

SMALL, LARGE = (4, 1562), (64, 195)
PROBLEMS = 300
SAMPLES = 4


def best_within(records: Path, max_step: int) -> tuple[float, int]:
    """The best ``val_avg`` among a run's evaluations at or before ``max_step``, and its step."""
    rows = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["step"] <= max_step and r.get("val_avg") is not None]
    if not rows:
        raise ValueError(f"{records}: no evaluation at or before step {max_step}")
    top = max(rows, key=lambda r: r["val_avg"])
    return float(top["val_avg"]), int(top["step"])


def read(folder: Path, seeds: tuple[int, ...] = (0, 1), b_p: int = 16) -> dict[str, Any]:
    """The criterion on the runs ``n{n}_bp{b_p}_s{seed}`` under ``folder``."""
    per_seed = []
    for s in seeds:
        small = best_within(folder / f"n{SMALL[0]}_bp{b_p}_s{s}" / "records.jsonl", SMALL[1])
        large = best_within(folder / f"n{LARGE[0]}_bp{b_p}_s{s}" / "records.jsonl", LARGE[1])
        p = max(small[0], large[0])
        se = math.sqrt(p * (1 - p) / PROBLEMS)
        per_seed.append({"seed": s, "small_best": small[0], "small_step": small[1], "large_best": large[0],
                         "large_step": large[1], "gap": large[0] - small[0], "gap_in_se": (large[0] - small[0]) / se})
    small_mean = sum(r["small_best"] for r in per_seed) / len(per_seed)
    large_mean = sum(r["large_best"] for r in per_seed) / len(per_seed)
    p = max(small_mean, large_mean)
    se_mean = math.sqrt(p * (1 - p) / PROBLEMS) / math.sqrt(len(per_seed))
    gap = large_mean - small_mean
    return {"per_seed": per_seed, "small_mean": small_mean, "large_mean": large_mean, "gap": gap,
            "se_mean": se_mean, "gap_in_se": gap / se_mean,
            "gap_in_se_1200_draws": gap / (math.sqrt(p * (1 - p) / (PROBLEMS * SAMPLES)) / math.sqrt(len(per_seed))),
            "present": gap > 2 * se_mean and all(r["gap"] > 0 for r in per_seed)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", help="the pilot's runs folder (nN_bp16_sS runs)")
    ap.add_argument("--seeds", default="0,1")
    a = ap.parse_args(argv)
    try:
        doc = read(Path(a.folder), tuple(int(s) for s in a.seeds.split(",")))
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in doc["per_seed"]:
        print(f"seed {r['seed']}: n = 64 best {r['large_best']:.3f} (step {r['large_step']}), n = 4 best "
              f"{r['small_best']:.3f} (step {r['small_step']}): {r['gap']:+.3f}, {r['gap_in_se']:+.1f} se")
    print(f"seed mean: {doc['large_mean']:.4f} vs {doc['small_mean']:.4f}: {doc['gap']:+.4f}, {doc['gap_in_se']:+.2f} se "
          f"of the mean ({doc['gap_in_se_1200_draws']:+.2f} with the 1,200-draw se): "
          f"{'present' if doc['present'] else 'not present'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
