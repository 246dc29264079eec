"""The simulator's prediction for the organism's Q1 sweeps, from its calibration profile alone.

    python -m llm_runs.organism.predict --calibration DIR/profile.json --splits DIR/splits \
        --out studies/results/organism_prediction.json

For each split (easy, hard) it writes the split's measured avg@16 rates as a profile, simulates
the sweep the real runs will make (same ``n`` grid, ``B_p``, seeds, budget and training/validation
sizes; one simulated rollout = one real rollout) with the preset of that split's recipe, and
reads it with the frontier analysis the real sweep will be read with. Nothing of the real sweep
is used: the file must be committed before the sweep's results are.

``--dynamics easy=FILE --dynamics hard=FILE`` predicts with calibrated dynamics instead of the
preset's: each FILE is a split's profile written by ``isosim calibrate --dynamics`` from cheap real
runs of that split (its rates must be the split's; its ``dynamics`` block overrides the preset's
settings). The output then also carries, per split, the dynamics used and the calibration's fit.
``--write-profiles DIR`` only writes each split's profile (the ``--profile`` of the calibration).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from isosim.files import write_json
from isosim.frontier import analysis
from isosim.frontier.analysis import frontier_summary
from isosim.sim.presets import get_preset
from isosim.sim.profiles import write_profile
from isosim.sweeps import sweep

# The real sweep's design, fixed here, before it runs.
N_VALUES = [4, 8, 16, 32, 64, 128]
B_P = 16
SEEDS = [0, 1]
MAX_ROLLOUTS = 2e5
VAL_SIZE = 300
PRESET_OF = {"easy": "easy", "hard": "hard"}  # the simulator preset of each split


def final_stats(df: Any) -> dict:
    """Per ``n``: the seed-mean val avg@k of each run's last record (``final_val_avg``), and
    ``seed_sd``: the seed-to-seed standard deviation of that final value, averaged over ``n``."""
    last = df.sort_values("step").groupby("run_id").tail(1)
    by_n = last.groupby("n")["val_avg"]
    sd = by_n.std(ddof=1).dropna()
    return {"final_val_avg": {str(int(n)): float(v) for n, v in by_n.mean().items()},
            "seed_sd": float(sd.mean()) if len(sd) else None}


def split_rates(calibration: Path, split_file: Path) -> list[float]:
    rates = dict(zip(*(json.loads(calibration.read_text())[k] for k in ("ids", "rates"))))
    ids = [json.loads(line)["id"] for line in split_file.read_text().splitlines() if line.strip()]
    return [rates[i] for i in ids]


def split_profile(split: str, calibration: Path, splits: Path, work: Path) -> tuple[Path, list[float]]:
    """Write the split's measured rates as a profile file (``WORK/SPLIT_profile.json``)."""
    rates = split_rates(calibration, splits / f"{split}.jsonl")
    k = int(json.loads(calibration.read_text())["k"])
    return write_profile(work / f"{split}_profile.json", rates, k=k, source=str(calibration), split=split), rates


def simulated_readings(df: Any, at: list[float]) -> dict[str, list[dict]]:
    """The simulated sweep read as the real one will be: per reading (best, final), n* and its tie
    band (n within 2 seed se) at each budget of ``at`` (:func:`isosim.validation.readings.truth_at`)."""
    from isosim.validation import readings as rd

    runs: dict[int, dict[int, list]] = {}
    for (n, seed), g in df.groupby(["n", "seed"]):
        g = g.sort_values("rollouts")
        runs.setdefault(int(n), {})[int(seed)] = [(float(r), float(v)) for r, v in zip(g["rollouts"], g["val_avg"])]
    out = {}
    for reading in rd.READINGS:
        out[reading] = [{k: t[k] for k in ("budget", "best", "tie_band", "seed_se", "mean")}
                        for t in (rd.truth_at(runs, b, reading) for b in at)]
        for row in out[reading]:
            row["n_star"] = row.pop("best")
    return out


def predict(split: str, calibration: Path, splits: Path, work: Path, n_boot: int = 200, *,
            n_values: list[int] = N_VALUES, b_p: int = B_P, seeds: list[int] = SEEDS,
            max_rollouts: float = MAX_ROLLOUTS, val_size: int = VAL_SIZE, dynamics: Path | None = None,
            preset: str | None = None, train_problems: int | None = None, readings: list[float] | None = None,
            lr_rule: str | None = None) -> dict:
    """One split's predicted frontier. ``train_problems`` caps the training set (the real runs'
    ``max_train_problems``: a seeded subset of the split's training part); default all of it.
    ``readings``: budgets at which the simulated sweep's n* is also given in both readings.
    ``lr_rule``: the simulated runs' batch-size rule instead of the preset's (the real runs'
    ``lr_rule``; ``constant`` gives every n the preset's lr at its reference batch)."""
    preset = preset or PRESET_OF[split]
    profile, rates = split_profile(split, calibration, splits, work)
    n_train = len(rates) - val_size
    if train_problems is not None:
        n_train = min(n_train, int(train_problems))
    if n_train < b_p:
        raise IsosimError(f"split {split!r} has {len(rates)} problems: too few for {val_size} validation "
                          f"problems and a batch of {b_p}")
    extra = {}
    if dynamics is not None:
        doc = _dynamics_doc(dynamics, rates, split)
        profile = dynamics  # the same rates, plus the fitted dynamics (plan_for_preset applies them)
        extra = {"dynamics": doc["dynamics"], "dynamics_profile": str(dynamics),
                 "calibration_fit": {k: v for k, v in doc.get("fit", {}).items() if k != "curves"}}
    plan = sweep.plan_for_preset(preset, "q1", seeds=len(seeds), seed=seeds[0], budget_max=max_rollouts,
                                 profile=str(profile), n_values=n_values, b_p=b_p, n_train=n_train, n_val=val_size,
                                 **({"lr_rule": lr_rule} if lr_rule else {}))
    df = sweep.run_sweep(plan, work / (f"sweep_{split}" if dynamics is None else f"sweep_{split}_{plan.plan_id}"))
    res = analysis.analyze(df, metric="val_avg", n_boot=n_boot, seed=0)
    if readings:
        extra["readings"] = simulated_readings(df, readings)
    return {
        **frontier_summary(res), **final_stats(df),
        "n_values": list(n_values), "seeds": list(seeds), "max_rollouts": float(max_rollouts), "b_p": b_p,
        "train_problems": n_train, "val_problems": val_size, "profile_mean": sum(rates) / len(rates),
        "preset": preset, "simulated_config": plan.base, "dropped": list(plan.dropped), **extra,
    }


def _dynamics_doc(path: Path, rates: list[float], split: str) -> dict:
    """A calibrated profile of this split: it must carry a dynamics block and the split's rates."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IsosimError(f"--dynamics {split}={path}: cannot read ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("dynamics"), dict):
        raise IsosimError(f"--dynamics {split}={path}: no dynamics block (write it with isosim calibrate --dynamics)")
    if [float(r) for r in doc.get("rates", [])] != [float(r) for r in rates]:
        raise IsosimError(f"--dynamics {split}={path}: its rates are not the {split} split's (calibrated on other data)")
    return doc


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration", type=Path, required=True)
    ap.add_argument("--splits", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("runs/organism_prediction"))
    ap.add_argument("--out", type=Path, default=Path("studies/results/organism_prediction.json"))
    ap.add_argument("--split-names", default="easy,hard", help="splits to predict (files SPLITS/NAME.jsonl)")
    # The design of the study's sweep is the default; smaller ones are for the quick chain.
    ap.add_argument("--n-values", type=_ints, default=N_VALUES)
    ap.add_argument("--b-p", type=int, default=B_P)
    ap.add_argument("--seeds", type=_ints, default=SEEDS)
    ap.add_argument("--max-rollouts", type=float, default=MAX_ROLLOUTS)
    ap.add_argument("--val-size", type=int, default=VAL_SIZE)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--dynamics", action="append", default=[], metavar="SPLIT=FILE",
                    help="a split's profile calibrated by isosim calibrate --dynamics (repeat per split)")
    ap.add_argument("--preset", action="append", default=[], metavar="SPLIT=NAME",
                    help="simulator preset of a split (default: easy=easy, hard=hard; e.g. easy=easy-distance)")
    ap.add_argument("--write-profiles", type=Path, default=None, metavar="DIR",
                    help="only write each split's profile (DIR/SPLIT_profile.json) and stop")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    design = dict(n_values=args.n_values, b_p=args.b_p, seeds=args.seeds, max_rollouts=args.max_rollouts,
                  val_size=args.val_size)
    names = [s for s in args.split_names.split(",") if s]
    unknown = [s for s in names if s not in PRESET_OF]
    try:
        if unknown:
            raise IsosimError(f"unknown split {unknown[0]!r} (easy or hard)")
        if args.write_profiles is not None:
            args.write_profiles.mkdir(parents=True, exist_ok=True)
            for split in names:
                path, rates = split_profile(split, args.calibration, args.splits, args.write_profiles)
                print(f"{split}: {len(rates)} problems -> {path}")
            return
        dyn = {}
        for item in args.dynamics:
            split, sep, path = item.partition("=")
            if not sep or split not in names:
                raise IsosimError(f"--dynamics wants SPLIT=FILE with SPLIT one of {names}, got {item!r}")
            dyn[split] = Path(path)
        if dyn and set(dyn) != set(names):
            raise IsosimError(f"--dynamics given for {sorted(dyn)} but not for {sorted(set(names) - set(dyn))}: "
                              "calibrate every split (or predict fewer with --split-names)")
        presets = {}
        for item in args.preset:
            split, sep, name = item.partition("=")
            if not sep or split not in names:
                raise IsosimError(f"--preset wants SPLIT=NAME with SPLIT one of {names}, got {item!r}")
            get_preset(name)  # an unknown preset: one line, exit 2
            presets[split] = name
        out = {split: predict(split, args.calibration, args.splits, args.work, args.n_boot, **design,
                              dynamics=dyn.get(split), preset=presets.get(split))
               for split in names}
    except IsosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    write_json(args.out, out, indent=1)
    for split, p in out.items():
        print(f"{split}: n* {p['n_star']} over {len(p['budgets'])} budgets; n_sat {p['n_sat']} {p['n_sat_ci']}")


if __name__ == "__main__":
    main()
