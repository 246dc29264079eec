"""The simulator's prediction for the organism's Q1 sweeps, from its calibration profile alone.

    python -m llm_runs.organism_predict --calibration DIR/profile.json --splits DIR/splits \
        --out studies/results/organism_prediction.json

For each split (easy, hard) it writes the split's measured avg@16 rates as a profile, simulates
the sweep the real runs will make (same ``n`` grid, ``B_p``, seeds, budget and training/validation
sizes; one simulated rollout = one real rollout) with the preset of that split's recipe, and
reads it with the frontier analysis the real sweep will be read with. Nothing of the real sweep
is used: the file must be committed before the sweep's results are.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from isosim import analysis, sweep
from isosim.files import write_json
from isosim.profiles import write_profile

# The real sweep's design, fixed here, before it runs.
N_VALUES = [4, 8, 16, 32, 64, 128]
B_P = 16
SEEDS = [0, 1]
MAX_ROLLOUTS = 2e5
VAL_SIZE = 300
PRESET_OF = {"easy": "easy", "hard": "hard"}  # the simulator preset of each split


def split_rates(calibration: Path, split_file: Path) -> list[float]:
    rates = dict(zip(*(json.loads(calibration.read_text())[k] for k in ("ids", "rates"))))
    ids = [json.loads(line)["id"] for line in split_file.read_text().splitlines() if line.strip()]
    return [rates[i] for i in ids]


def predict(split: str, calibration: Path, splits: Path, work: Path, n_boot: int = 200) -> dict:
    rates = split_rates(calibration, splits / f"{split}.jsonl")
    k = int(json.loads(calibration.read_text())["k"])
    profile = write_profile(work / f"{split}_profile.json", rates, k=k, source=str(calibration), split=split)
    n_train = len(rates) - VAL_SIZE
    plan = sweep.plan_for_preset(PRESET_OF[split], "q1", seeds=len(SEEDS), seed=SEEDS[0], budget_max=MAX_ROLLOUTS,
                                 profile=str(profile), n_values=N_VALUES, b_p=B_P, n_train=n_train, n_val=VAL_SIZE)
    df = sweep.run_sweep(plan, work / f"sweep_{split}")
    res = analysis.analyze(df, metric="val_avg", n_boot=n_boot, seed=0)
    fit = res.get("fit") or {}
    return {
        "budgets": [float(b) for b in res["budgets"]], "n_star": [int(v) for v in res["n_star"]],
        "n_tol": [None if v is None else int(v) for v in res.get("n_tol", [])],
        "learning": res.get("learning"),
        "n_sat": fit.get("n_sat"), "n_sat_ci": fit.get("n_sat_ci"),
        "n_values": N_VALUES, "seeds": SEEDS, "max_rollouts": MAX_ROLLOUTS, "b_p": B_P,
        "train_problems": n_train, "val_problems": VAL_SIZE, "profile_mean": sum(rates) / len(rates),
        "preset": PRESET_OF[split], "simulated_config": plan.base, "dropped": list(plan.dropped),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", type=Path, required=True)
    ap.add_argument("--splits", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("runs/organism_prediction"))
    ap.add_argument("--out", type=Path, default=Path("studies/results/organism_prediction.json"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    out = {split: predict(split, args.calibration, args.splits, args.work) for split in ("easy", "hard")}
    write_json(args.out, out, indent=1)
    for split, p in out.items():
        print(f"{split}: n* {p['n_star']} over {len(p['budgets'])} budgets; n_sat {p['n_sat']} {p['n_sat_ci']}")


if __name__ == "__main__":
    main()
