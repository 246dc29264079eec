# %% [markdown]
# # The lr each batch wants, measured on the first organism
#
# Runs: the first organism (`--model organism`) on the problem set of its committed hard-128 sweep
# (`organism_f8/hard-128`: 128 training problems of the hard split, temperature 0.6, B_p 16), n = 8
# and n = 64, each at three lrs around its square-root-rule lr (3e-4 x sqrt(16 n / 1024)) x 1/3, 1
# and 3, seeds 0 and 1, to 2e5 rollouts, 12 evaluations: `organism_lr_grid/{x0.33,x1,x3}/hard-128/`.
#
# Read here:
# 1. each (n, lr)'s value at 2e5 in both readings (seed mean, seed se), the better lr of each n
#    (a parabola in log lr through the three seed means, its vertex kept inside the grid), and the
#    exponent of the optimal lr in the batch that the two n's optima imply;
# 2. the learner's lr calibration (`calibration.json`) that `isosim.predict.lr_read` reads: the
#    simfit model (the committed bank of this setting) fitted to all twelve runs' curves, each run
#    read at its lr over the sqrt rule's (`rho` = 1/3, 1, 3), with the step's exponent in `rho`
#    fixed at `a` = 1 (Adam: a step moves about lr; fixed before the runs) and the over-stepping
#    `decay` free; the decay's prior for a new learner is its fit, with sd the larger of twice the
#    fit's se and half the value (one learner and one problem set: fixed before the runs);
# 3. the x1 runs against the committed sweep's n = 8 and n = 64 runs (the same lr, problems and
#    seeds: the same trajectories where the CPU kind is the same).
#
# Run: `python studies/scoring/lr_grid.py` -> `organism_lr_grid/calibration.json`

# %%
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from isosim.files import write_json  # noqa: E402
from isosim.predict import lr_read as lrr  # noqa: E402
from isosim.predict import simfit as sf  # noqa: E402
from isosim.validation import adaptive as ad  # noqa: E402
from isosim.validation import plane_methods as pm  # noqa: E402

RESULTS = ROOT / "studies" / "results"
GRID = RESULTS / "organism_lr_grid"
OUT = GRID / "calibration.json"
COMMITTED = RESULTS / "organism_f8" / "hard-128"
BANK_SWEEP = "organism_f8/hard-128"
MULTIPLIERS = {"x0.33": 1 / 3, "x1": 1.0, "x3": 3.0}
N_VALUES = (8, 64)
BUDGET = 2e5
ANCHOR = lrr.Anchor(3e-4, 1024, "the first organism's sqrt rule: 3e-4 at 1,024 rollouts a step")
A_PRIORI = 1.0
WEAK = {"log_lr": (0.0, 3.0), "power": (0.0, 0.5), "log_h": (0.0, 1.0)}
"""the weak prior of the simfit study's full-data fits (``studies/scoring/simfit.py`` FULL_PRIOR)"""
DECAY_WEAK_SD = 10.0


def load() -> dict:
    """(tag, n) -> seed -> curve [(rollouts, val_avg)], and each run's lr from its config.json."""
    out = {}
    for tag in MULTIPLIERS:
        sw = ad.load_sweep(GRID / tag / "hard-128")
        for n in N_VALUES:
            lrs = {json.loads((GRID / tag / "hard-128" / f"n{n}_bp16_s{s}" / "config.json").read_text())["lr"]
                   for s in sw["runs"][n]}
            if len(lrs) != 1:
                raise SystemExit(f"{tag} n = {n}: seeds at different lrs {sorted(lrs)}")
            out[(tag, n)] = {"curves": sw["runs"][n], "lr": lrs.pop()}
    return out


def values(runs: dict) -> dict:
    table = {}
    for (tag, n), d in runs.items():
        row = {}
        for reading in ("best", "final"):
            per = [max(v for r, v in c if r <= BUDGET * 1.001) if reading == "best" else c[-1][1]
                   for c in d["curves"].values()]
            row[reading] = {"mean": float(np.mean(per)), "seeds": [float(x) for x in per],
                            "se": float(np.std(per, ddof=1) / math.sqrt(len(per))) if len(per) > 1 else None}
        table[f"{tag} n{n}"] = {"n": n, "multiplier": MULTIPLIERS[tag], "lr": d["lr"],
                                "rho": lrr.rho(d["lr"], n, 16, ANCHOR), **row}
    return table


def optimum(table: dict, n: int, reading: str) -> dict:
    xs = np.log([MULTIPLIERS[t] for t in MULTIPLIERS])
    ys = np.array([table[f"{t} n{n}"][reading]["mean"] for t in MULTIPLIERS])
    c2, c1, _ = np.polyfit(xs, ys, 2)
    best_tag = max(MULTIPLIERS, key=lambda t: table[f"{t} n{n}"][reading]["mean"])
    vertex = -c1 / (2 * c2) if c2 < 0 else (xs[-1] if c1 > 0 else xs[0])
    vertex = float(np.clip(vertex, xs[0], xs[-1]))
    return {"best_of_three": best_tag, "vertex_multiplier": float(math.exp(vertex)),
            "concave": bool(c2 < 0), "optimal_lr": float(3e-4 * math.sqrt(16 * n / 1024) * math.exp(vertex))}


def fit_calibration(runs: dict, bank: dict) -> dict:
    from scipy.optimize import least_squares

    zero = [v for d in runs.values() for c in d["curves"].values() for r, v in c if r <= 0]
    v0 = float(np.mean(zero))
    data = [(n, lrr.rho(d["lr"], n, 16, ANCHOR), np.array([r for r, _ in c if r > 0]), np.array([v for r, v in c if r > 0]))
            for (tag, n), d in runs.items() for c in d["curves"].values()]
    names = ["log_lr", "power", "log_h", "decay"]
    prior = {**WEAK, "decay": (0.0, DECAY_WEAK_SD)}
    cal0 = lrr.LrCalibration(a=A_PRIORI, decay=0.0, decay_sd=DECAY_WEAK_SD, source="fit")

    def th(x):
        return dict(zip(names, (float(v) for v in x)))

    def residuals(x):
        t = th(x)
        res = [(lrr.predict_at(bank, t, n, r, v0, rh, cal0) - v) / sf.NOISE for n, rh, r, v in data]
        res.append(np.array([(t[p] - prior[p][0]) / prior[p][1] for p in names]))
        return np.concatenate(res)

    lo = [sf.BOUNDS["log_lr"][0], sf.BOUNDS["power"][0], sf.BOUNDS["log_h"][0], 0.0]
    hi = [sf.BOUNDS["log_lr"][1], sf.BOUNDS["power"][1], sf.BOUNDS["log_h"][1], lrr.DECAY_MAX]
    x0 = np.clip([WEAK["log_lr"][0], WEAK["power"][0], WEAK["log_h"][0], 0.1], np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0)
    npts = sum(len(r) for _, _, r, _ in data)
    resid = residuals(res.x)[:npts] * sf.NOISE
    rms = float(np.sqrt(np.mean(resid ** 2)))
    # the numbers' se: (J'J)^-1 of the whitened problem, scaled by the residuals' own sd over NOISE
    J = res.jac
    cov = np.linalg.pinv(J.T @ J) * max(rms / sf.NOISE, 1.0) ** 2
    se = dict(zip(names, (float(math.sqrt(max(c, 0.0))) for c in np.diag(cov))))
    per_run = {}
    t = th(res.x)
    for (tag, n), d in runs.items():
        rh = lrr.rho(d["lr"], n, 16, ANCHOR)
        pred = float(lrr.predict_at(bank, t, n, np.array([BUDGET]), v0, rh, cal0)[0])
        no_decay = float(lrr.predict_at(bank, {**t, "decay": 0.0}, n, np.array([BUDGET]), v0, rh, cal0)[0])
        meas = float(np.mean([c[-1][1] for c in d["curves"].values()]))
        per_run[f"{tag} n{n}"] = {"measured_final": meas, "model_final": pred, "model_final_without_decay": no_decay}
    return {"theta": t, "se": se, "v0": v0, "rms": rms, "points": npts, "per_run_at_2e5": per_run}


def reproduction(runs: dict) -> dict:
    """The x1 runs against the committed sweep's runs of the same n and seed: equal val_avg at every
    evaluation, or the largest difference."""
    out = {}
    committed = ad.load_sweep(COMMITTED)
    for n in N_VALUES:
        for seed, c in runs[("x1", n)]["curves"].items():
            ref = committed["runs"][n][seed]
            same_r = [r for r, _ in c] == [r for r, _ in ref]
            diff = max(abs(a[1] - b[1]) for a, b in zip(c, ref)) if same_r else None
            out[f"n{n} s{seed}"] = {"same_evaluations": same_r, "max_abs_diff_val_avg": diff}
    return out


def main() -> dict:
    runs = load()
    bank = pm.bank_of(BANK_SWEEP)
    table = values(runs)
    fitted = fit_calibration(runs, bank)
    decay, se = fitted["theta"]["decay"], fitted["se"]["decay"]
    opt = {reading: {str(n): optimum(table, n, reading) for n in N_VALUES} for reading in ("best", "final")}
    expo = {reading: 0.5 + math.log(opt[reading]["64"]["vertex_multiplier"] / opt[reading]["8"]["vertex_multiplier"]) / math.log(8)
            for reading in ("best", "final")}
    return {
        "about": "The first organism at three lrs around the sqrt rule's, n = 8 and 64, B_p 16, to 2e5 rollouts "
                 "(studies/scoring/lr_grid.py)",
        "runs": "studies/results/organism_lr_grid/{x0.33,x1,x3}/hard-128",
        "anchor": {"lr": ANCHOR.lr, "batch": ANCHOR.batch, "source": ANCHOR.source},
        "values_at_2e5": table, "optimum": opt, "optimal_lr_exponent_in_batch": expo,
        "fit": fitted, "reproduction_of_committed_x1": reproduction(runs),
        "calibration": {"a": A_PRIORI, "decay": decay, "decay_sd": max(2 * se, 0.5 * decay),
                        "source": f"the first organism's lr grid (n = 8, 64 at x 1/3, 1, 3 the sqrt rule's lr, to 2e5): "
                                  f"decay {decay:.3f} (se {se:.3f}), a = {A_PRIORI:g} fixed"},
        "command": "python studies/scoring/lr_grid.py",
    }


if __name__ == "__main__":
    doc = main()
    write_json(OUT, doc)
    for k, v in doc["values_at_2e5"].items():
        print(k, f"lr {v['lr']:.3g}", {r: round(v[r]["mean"], 4) for r in ("best", "final")})
    print("optimum", json.dumps(doc["optimum"]), "exponent", doc["optimal_lr_exponent_in_batch"])
    print("fit", {k: round(x, 3) for k, x in doc["fit"]["theta"].items()}, "se", {k: round(x, 3) for k, x in doc["fit"]["se"].items()},
          "rms", round(doc["fit"]["rms"], 4))
    print("calibration", doc["calibration"])
    print("reproduction", doc["reproduction_of_committed_x1"])
