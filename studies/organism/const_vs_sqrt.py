# %% [markdown]
# # One learner under two lr rules: the measured cheap parts and one calibration of both
#
# The second organism (``organism-hard``, hard-128 at T 0.6, B_p 16) was swept twice with the same
# weights, data and seeds: at the sqrt rule (``organism_hard/hard-128``, lr 3e-4 x sqrt(16 n / 1024))
# and at one lr for every n (``organism_hard_const/hard-128``, 3e-4). This reads, per n:
#
# - the measured seed-mean validation avg@4 under each rule at matched rollouts (linear in ln
#   rollouts between evaluations; only where every run of that n has reached them);
# - one calibration of the method frozen at 07a27e7 (:mod:`isosim.predict.lr_read` at 07a27e7's
#   parameters: the anchor at 1,024 rollouts a step, no measured decay) fitted to *both* rules' n = 8
#   runs (both seeds, to ``--upto`` rollouts) with the same numbers (step, ceiling, decay) and only
#   the rule differing, and its error for every n under each rule at the same points, in seed se.
#
# Run: ``python studies/organism/const_vs_sqrt.py [--upto 5e4] [--out FILE]``
# (default: ``organism_hard_const/const_vs_sqrt.json``). Under the sqrt rule the model has no decay
# (every run walks as calibrated), so the decay is read from the constant-rule run alone.

# %%
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from isosim.files import write_json  # noqa: E402
from isosim.predict import lr_read as lrr  # noqa: E402
from isosim.validation import adaptive as ad  # noqa: E402
from isosim.validation import plane_methods as pm  # noqa: E402
from isosim.validation import readings as rd  # noqa: E402

RESULTS = ROOT / "studies" / "results"
SWEEPS = {"sqrt": RESULTS / "organism_hard" / "hard-128", "constant": RESULTS / "organism_hard_const" / "hard-128"}
OUT = RESULTS / "organism_hard_const" / "const_vs_sqrt.json"
POINTS = (1e4, 2e4, 3e4, 4.5e4)


def at(curve: list, r: float) -> float:
    """A run's value at ``r`` rollouts (NaN past its last evaluation)."""
    return rd.final_at(curve, r)


def measured(sweeps: dict, points: tuple) -> dict:
    """rule -> n -> point -> (seed mean, seed values)."""
    out: dict = {}
    for rule, sw in sweeps.items():
        for n, seeds in sorted(sw["runs"].items()):
            row = {}
            for r in points:
                vals = [at(c, r) for c in seeds.values()]
                if not any(math.isnan(v) for v in vals):
                    row[f"{r:g}"] = {"mean": float(np.mean(vals)), "seeds": [float(v) for v in vals]}
            out.setdefault(rule, {})[str(n)] = row
    return out


def seed_se(table: dict) -> float:
    """The seed se of a seed mean, pooled over every (rule, n, point) cell with two seeds."""
    devs = [v - c["mean"] for rows in table.values() for row in rows.values() for c in row.values() for v in c["seeds"]]
    cells = sum(len(row) for rows in table.values() for row in rows.values())
    return math.sqrt(float(np.sum(np.square(devs))) / max(len(devs) - cells, 1) / 2)


def rho_07a27e7(ns: list[int], b_p: int, rule: str) -> dict[int, float]:
    """Each n's lr over the calibration's as the method frozen at 07a27e7 read it: from the lr the
    runs' ``rule`` gives 1,024 rollouts a step (the lr itself cancels)."""
    anchor = lrr.anchor_07a27e7(3e-4, 1024.0, rule)
    return lrr.rhos(lrr.lrs_by_rule(ns, b_p, 3e-4, 1024.0, rule), b_p, anchor)


def joint_fit(bank: dict, sweeps: dict, upto: float) -> dict:
    """One calibration from both rules' n = 8 runs: the step and ceiling shared, the decay read where
    a run walks beyond the calibrated rule (:func:`isosim.predict.lr_read.fit` per rule at 07a27e7's
    parameters, then the shared numbers averaged: the rules share the learner, not the noise)."""
    prior, _ = lrr.prior_and_band()
    fits = {}
    for rule, sw in sweeps.items():
        pts = [(8, float(r), float(v)) for c in sw["runs"][8].values() for r, v in ad.reveal(c, upto)]
        fits[rule] = lrr.fit(bank, pts, rho_07a27e7([8], int(sw["b_p"]), rule), prior, lrr.ONE_FREE,
                             lrr.CALIBRATION_07A27E7)
    shared = {p: float(np.mean([f["theta"][p] for f in fits.values()])) for p in fits["sqrt"]["theta"]}
    shared["decay"] = float(fits["constant"]["theta"].get("decay", 0.0))
    return {"per_rule": {r: {"theta": f["theta"], "v0": f["v0"], "rms": f["rms"]} for r, f in fits.items()},
            "shared": shared, "v0": float(np.mean([f["v0"] for f in fits.values()]))}


def errors(bank: dict, fit: dict, table: dict, se: float) -> dict:
    """rule -> n -> mean |model - measured| over the points, in seed se, and the per-point values."""
    out: dict = {}
    for rule, rows in table.items():
        for n, row in rows.items():
            if not row:
                continue
            rs = np.array([float(k) for k in row])
            rho = rho_07a27e7([int(n)], int(bank["b_p"]), rule)[int(n)]
            pred = lrr.predict_at(bank, fit["shared"], int(n), rs, fit["v0"], rho, lrr.CALIBRATION_07A27E7)
            meas = np.array([c["mean"] for c in row.values()])
            out.setdefault(rule, {})[n] = {"mean_abs_err_se": float(np.mean(np.abs(pred - meas)) / se),
                                           "predicted": dict(zip(row, pred.round(4).tolist()))}
    return out


PAUSE = 5e4
"""the constant-lr sweep's cheap part: every run paused at its first step past this many rollouts"""


def cheap_part(sw: dict, pause: float = PAUSE) -> dict:
    """``sw`` as its cheap part was committed: each run's records up to its first step past
    ``pause`` (this study was made then, before any record past it; its inputs stay that)."""
    step = {n: n * int(sw["b_p"]) for n in sw["runs"]}
    cut = {n: {s: [pt for pt in c if pt[0] <= (math.floor(pause / step[n]) + 1) * step[n]] for s, c in seeds.items()}
           for n, seeds in sw["runs"].items()}
    return {**sw, "runs": cut}


def build(upto: float = 5e4, points: tuple = POINTS) -> dict:
    sweeps = {rule: ad.load_sweep(p) for rule, p in SWEEPS.items()}
    sweeps["constant"] = cheap_part(sweeps["constant"])  # the cheap part the study read (its records now go to 1e6)
    table = measured(sweeps, points)
    se = seed_se(table)
    bank = pm.bank_of("organism_hard/hard-128")
    fit = joint_fit(bank, sweeps, upto)
    return {"about": "the second organism under the sqrt and the constant lr rule, per n at matched rollouts; "
                     "one lr-aware calibration of both",
            "runs": {r: str(p.relative_to(ROOT)) for r, p in SWEEPS.items()}, "points": list(points), "seed_se": se,
            "measured": table, "calibration": {"upto": upto, **fit}, "model_error": errors(bank, fit, table, se),
            "command": "python studies/organism/const_vs_sqrt.py"}


def main() -> None:
    ap = argparse.ArgumentParser(description="the second organism under two lr rules, and one calibration of both")
    ap.add_argument("--upto", type=float, default=5e4)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    doc = build(a.upto)
    write_json(a.out, doc)
    print(f"seed se {doc['seed_se']:.4f}; shared theta {json.dumps({k: round(v, 3) for k, v in doc['calibration']['shared'].items()})}")
    for n in doc["measured"]["sqrt"]:
        cells = []
        for r in doc["points"]:
            k = f"{r:g}"
            s, c = (doc["measured"][rule][n].get(k, {}).get("mean", float("nan")) for rule in ("sqrt", "constant"))
            cells.append(f"{k}: {s:.3f}/{c:.3f}")
        err = {rule: doc["model_error"].get(rule, {}).get(n, {}).get("mean_abs_err_se", float("nan")) for rule in ("sqrt", "constant")}
        print(f"n = {int(n):>3}  sqrt/const  " + "  ".join(cells) + f"  | model err (se) sqrt {err['sqrt']:.1f} const {err['constant']:.1f}")


if __name__ == "__main__":
    main()
