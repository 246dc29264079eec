"""Write the built-in presets' simulated sweeps to the cap into isosim/predict/presimulated/.

``isosim recommend`` at any budget from ``SIM_BUDGET_CAP`` up, on a built-in preset at its default
settings, reads one of these sweeps instead of simulating it (about 25 s each on one core). Rerun
this after a change to the engine or the presets: ``python scripts/presimulate.py``; the test
``tests/test_presimulated.py`` re-simulates part of each and fails when they differ.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from isosim.predict.recommend import PRESIMULATED, PRESIMULATED_PRESETS, SIM_BUDGET_CAP, sweep_plan  # noqa: E402
from isosim.sweeps import sweep  # noqa: E402


def main() -> None:
    keep = set()
    for preset in PRESIMULATED_PRESETS:
        plan, _ = sweep_plan(SIM_BUDGET_CAP, preset=preset)
        out = PRESIMULATED / plan.plan_id
        keep.add(out.name)
        t0 = time.perf_counter()
        sweep.run_sweep(plan, out, progress=sys.stderr.isatty())
        (out / ".lock").unlink(missing_ok=True)
        print(f"{preset}: {out.relative_to(ROOT)} ({time.perf_counter() - t0:.1f} s)")
    for old in PRESIMULATED.iterdir():
        if old.is_dir() and old.name not in keep:
            shutil.rmtree(old)
            print(f"removed {old.relative_to(ROOT)} (no preset's plan any more)")


if __name__ == "__main__":
    main()
