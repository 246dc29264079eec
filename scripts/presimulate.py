"""Write what ships precomputed into isosim/predict/presimulated/.

1. The built-in presets' simulated sweeps to the cap (``PRESIMULATED_PRESETS``): ``isosim recommend``
   past the cap on a preset at its default settings copies one instead of simulating it (minutes).
2. The answer bank (:mod:`isosim.predict.bank`): for each of ``bank.PRESETS`` and each budget of
   ``bank.BUDGETS``, the sweep recommend simulates, its frontier read and its recommendation's
   allocation advice, in ``bank-<preset>.json.gz``.
3. The sweep of ``isosim explore --preset easy`` at its defaults (``EXPLORE_SHIPPED``).

The sweeps are simulated into ``--work`` (default: isosim's cache), so a second run resumes. Rerun this
after a change to the engine or the presets: ``python scripts/presimulate.py`` (about an hour on one
core; ``--jobs 2`` runs two sweeps at a time); ``tests/test_presimulated.py`` and ``tests/test_bank.py``
re-simulate parts and fail when they differ.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _sweep_job(job: tuple[str, str, float, str]) -> str:
    """Simulate one sweep into the work folder (a worker process: one torch thread)."""
    import torch

    torch.set_num_threads(1)
    from isosim.predict import bank
    from isosim.predict.recommend import sweep_plan
    from isosim.sweeps import sweep

    kind, preset, budget, work = job
    plan = bank.explore_plan() if kind == "explore" else sweep_plan(budget, preset=preset)[0]
    t0 = time.perf_counter()
    sweep.run_sweep(plan, Path(work) / plan.plan_id, progress=False)
    return f"{kind} {preset} {budget:g}: {plan.plan_id} ({time.perf_counter() - t0:.1f} s)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="folder of the simulated sweeps (default: the cache)")
    ap.add_argument("--jobs", type=int, default=1, help="sweeps simulated at a time")
    args = ap.parse_args()
    if args.work is not None:
        os.environ["ISOSIM_CACHE"] = str(args.work.resolve())

    from isosim.predict import bank, recommend
    from isosim.predict.recommend import PRESIMULATED, PRESIMULATED_PRESETS, SIM_BUDGET_CAP, cache_dir, sweep_plan

    work = cache_dir()
    work.mkdir(parents=True, exist_ok=True)
    shipped = [sweep_plan(SIM_BUDGET_CAP, preset=p)[0].plan_id for p in PRESIMULATED_PRESETS]
    for plan_id in shipped + [bank.explore_plan().plan_id]:  # what ships already is resumed from, not redone
        bank.seed_store(plan_id, work / plan_id)
    jobs = [("recommend", p, b, str(work)) for p in bank.PRESETS for b in bank.BUDGETS]
    jobs.append(("explore", "easy", float(bank.explore_plan().cells[0].budget), str(work)))
    jobs.sort(key=lambda j: -j[2])  # the longest first
    t0 = time.perf_counter()
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(args.jobs) as pool:
            for line in pool.imap_unordered(_sweep_job, jobs):
                print(line, flush=True)
    else:
        for job in jobs:
            print(_sweep_job(job), flush=True)
    print(f"sweeps: {time.perf_counter() - t0:.0f} s")

    keep = {bank.path(p).name for p in bank.PRESETS}
    for preset in PRESIMULATED_PRESETS:  # 1. the records of the sweeps to the cap
        plan, _ = sweep_plan(SIM_BUDGET_CAP, preset=preset)
        _ship_store(plan.plan_id, work, PRESIMULATED)
        keep.add(plan.plan_id)
        print(f"{preset}: {(PRESIMULATED / plan.plan_id).relative_to(ROOT)}")
    plan = bank.explore_plan()  # 3. explore's
    _ship_store(plan.plan_id, work, PRESIMULATED)
    keep.add(plan.plan_id)
    print(f"explore easy: {(PRESIMULATED / plan.plan_id).relative_to(ROOT)}")

    for preset in bank.PRESETS:  # 2. the bank
        entries = []
        for budget in bank.BUDGETS:
            entries.append(recommend.bank_entry(preset, budget))
            n, b_p = entries[-1]["pick"]
            print(f"bank {preset} {budget:g}: n {n} B_p {b_p}", flush=True)
        out = bank.write(preset, entries)
        print(f"{out.relative_to(ROOT)}: {out.stat().st_size / 1e3:.0f} kB")
    for old in PRESIMULATED.iterdir():
        if old.name not in keep and (old.is_dir() or old.name.startswith("bank-")):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
            print(f"removed {old.relative_to(ROOT)} (nothing ships it any more)")


def _ship_store(plan_id: str, work: Path, dest: Path) -> None:
    """Copy a finished sweep store (plan, manifest, records; no lock) into the package."""
    src = work / plan_id
    out = dest / plan_id
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns(".lock", "*.tmp*"))


if __name__ == "__main__":
    main()
