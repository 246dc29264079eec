# %% [markdown]
# # The lr-aware frozen method applied to the constant-lr sweep, prospectively
#
# The method frozen at 07a27e7 is the frozen simfit method ("simfit (no gap) n=8 @5% wide, stay",
# ``studies/results/simfit_method.json``) read under the lr rule a sweep's runs were trained with:
# the step's exponent shifted by the rule's, and a decay for the walk a run takes beyond the
# calibrated sqrt rule, fitted to the cheap run. It is :mod:`isosim.predict.lr_read` at 07a27e7's
# parameters (the anchor at 1,024 rollouts a step by the runs' rule, ``CALIBRATION_07A27E7``: decay
# prior 0 ± 1.0). Under the sqrt rule it is the frozen method; this script checks that first, on the
# second organism's sqrt-rule sweep, against the committed ``organism_hard/prediction_simfit.json``
# (every pick equal).
#
# The committed ``organism_hard_const/prediction_simfit_lr.json`` was written by this script at
# commit 07a27e7 (with ``isosim/predict/simfit_lr.py`` there: the hashes in its ``inputs``);
# ``tests/test_frozen_replay.py`` replays that commit's files, and checks this script's picks today
# are the committed ones.
#
# Then, on ``organism_hard_const/hard-128`` (the same learner, recipe and setting, every n at lr
# 3e-4): per C in 1e5, 3e5, 1e6 and per seed, that seed's n = 8 run revealed to 5 % of C, fitted
# under the frozen prior with the rule read from the runs' ``config.json`` (``lr_rule``), every n
# of the grid read at C from the sweep's bank (the committed bank of the same setting:
# ``organism_hard/simfit_bank_clusters64.json``; the bank is rule-free, simulated at each step lr).
# The pick stays n = 8 unless the model puts it more than the frozen tie band below its best n.
# Also written: the pick from both seeds' n = 8 runs in one fit (what ``recommend --runs`` gives).
#
# Run: ``python studies/scoring/simfit_lr_const.py [--out FILE]``: the picks recomputed, said beside the
# committed ones (written to ``--out`` only: the committed file is the record made at 07a27e7)

# %%
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from isosim.files import write_json  # noqa: E402
from isosim.predict import lr_read as lrr  # noqa: E402
from isosim.sim.config import check_lr_rule  # noqa: E402
from isosim.validation import adaptive as ad  # noqa: E402
from isosim.validation import plane_methods as pm  # noqa: E402
from isosim.validation import readings as rd  # noqa: E402

RESULTS = ROOT / "studies" / "results"
SQRT_SWEEP = RESULTS / "organism_hard" / "hard-128"
SQRT_PREDICTION = RESULTS / "organism_hard" / "prediction_simfit.json"
CONST = RESULTS / "organism_hard_const"
SWEEP = CONST / "hard-128"
OUT = CONST / "prediction_simfit_lr.json"
KEY = "organism-hard-128-const"
BANK_SWEEP = "organism_hard/hard-128"
BUDGETS = (1e5, 3e5, 1e6)
METHOD = "simfit lr-aware (frozen simfit, no gap, n=8 @5% wide, stay; read under the runs' lr rule)"


def rule_of(sweep: Path) -> str:
    """The lr rule every run of ``sweep`` was trained with (its config.json ``lr_rule``; one rule)."""
    rules = {json.loads(p.read_text()).get("lr_rule", "sqrt") for p in sweep.glob("n*_bp*_s*/config.json")}
    if len(rules) != 1:
        raise SystemExit(f"{sweep}: the runs hold lr rules {sorted(rules)}, not one")
    return check_lr_rule(rules.pop())


def lr_base_of(sweep: Path) -> tuple[float, float]:
    """The runs' ``base_lr`` and ``lr_ref_batch`` (config.json; 3e-4 at 1,024 where a run predates them)."""
    seen = {(float(c.get("base_lr") or 3e-4), float(c.get("lr_ref_batch") or 1024))
            for c in (json.loads(p.read_text()) for p in sweep.glob("n*_bp*_s*/config.json"))}
    if len(seen) != 1:
        raise SystemExit(f"{sweep}: the runs hold lr settings {sorted(seen)}, not one")
    return seen.pop()


def replay(sweep: Path, bank: dict, rule: str, cal: lrr.LrCalibration = lrr.CALIBRATION_07A27E7) -> tuple[dict, list, dict]:
    """Per reading, seed -> picks at :data:`BUDGETS`; the replays' detail; the pooled picks. ``cal``:
    07a27e7's lr calibration (another only to ask how the picks hinge on its decay prior)."""
    spec = pm.CALIBRATIONS[lrr.FROZEN]
    prior, band = lrr.prior_and_band()
    sw = ad.load_sweep(sweep)
    ns = sorted(sw["runs"])
    base, ref = lr_base_of(sweep)
    anchor = lrr.anchor_07a27e7(base, ref, rule)
    rho = lrr.rhos(lrr.lrs_by_rule(set(ns) | set(spec["cheap"]), int(sw["b_p"]), base, ref, rule), int(sw["b_p"]), anchor)
    picks: dict = {r: {} for r in rd.READINGS}
    pooled: dict = {r: [] for r in rd.READINGS}
    detail = []
    for budget in BUDGETS:
        grid = ad.grid_at(ns, budget, sw["b_p"])
        seen_all = []
        for seed in sw["seeds"]:
            seen = {n: ad.reveal(sw["runs"][n][seed], s * budget) for n, s in spec["cheap"].items()}
            pts = [(n, float(r), float(v)) for n, c in seen.items() for r, v in c]
            seen_all += pts
            got = lrr.choose(bank, pts, grid, budget, rho, prior, spec["free"], band, tuple(spec["cheap"]), cal)
            detail.append({"budget": budget, "seed": int(seed), "points": len(pts),
                           "last_rollouts": {str(n): c[-1][0] for n, c in seen.items()}, "grid": grid,
                           **{k: got[k] for k in ("theta", "v0", "rms", "best", "final")}})
            for reading in rd.READINGS:
                picks[reading].setdefault(f"seed {seed}", []).append(int(got[reading]["pick"]))
        both = lrr.choose(bank, seen_all, grid, budget, rho, prior, spec["free"], band, tuple(spec["cheap"]), cal)
        for reading in rd.READINGS:
            pooled[reading].append(int(both[reading]["pick"]))
    return picks, detail, pooled


def check_sqrt(bank: dict) -> None:
    """Under the sqrt rule the lr-aware method is the frozen one: its picks on the sqrt-rule sweep
    equal the committed ``prediction_simfit.json``'s."""
    committed = json.loads(SQRT_PREDICTION.read_text())["organism-hard-128"]["picks"]
    picks, _, _ = replay(SQRT_SWEEP, bank, rule_of(SQRT_SWEEP))
    if picks != committed:
        raise SystemExit(f"under the sqrt rule the lr-aware picks {picks} differ from the frozen method's {committed}")


def predict() -> dict:
    bank = pm.bank_of(BANK_SWEEP)
    if bank is None:
        raise SystemExit(f"no committed bank for {BANK_SWEEP}")
    check_sqrt(bank)
    rule = rule_of(SWEEP)
    picks, detail, pooled = replay(SWEEP, bank, rule)
    doc = lrr.frozen()
    spec = pm.CALIBRATIONS[lrr.FROZEN]
    upto = max(BUDGETS) * max(spec["cheap"].values())
    inputs = {}
    for p in (pm.EXTRA_BANKS[BANK_SWEEP][0], lrr.FROZEN_FILE, ROOT / "isosim/predict/simfit.py",
              ROOT / "isosim/predict/lr_read.py", Path(__file__)):
        inputs[str(p.relative_to(ROOT))] = hashlib.sha256(p.read_bytes()).hexdigest()
    for rec in sorted(SWEEP.glob("n8_bp*_s*/records.jsonl")):
        lines = []
        for line in rec.read_text().splitlines():
            if line.strip() and float(json.loads(line)["rollouts"]) > upto * (1 + 1e-12):
                break
            lines.append(line + "\n")
        inputs[f"{SWEEP.relative_to(ROOT) if SWEEP.is_relative_to(ROOT) else SWEEP}/{rec.parent.name}/records.jsonl (lines <= {upto:g} rollouts)"] = \
            hashlib.sha256("".join(lines).encode()).hexdigest()
    return {KEY: {
        "method": METHOD, "freeze_commit": doc["commit"], "variant": doc["variant"]["name"], "lr_rule": rule,
        "budgets": list(BUDGETS), "cheap_runs": {str(n): s for n, s in spec["cheap"].items()},
        "cheap_budgets": [max(spec["cheap"].values()) * b for b in BUDGETS],
        "n_values": sorted(int(n) for n in bank["curves"]), "tie_band": float(doc["settings"]["tie_band_value"]),
        "prior": doc["prior_for_a_new_learner"]["prior"], "decay_prior_sd": lrr.CALIBRATION_07A27E7.decay_sd,
        "read": "the committed bank of the same setting and each seed's n = 8 records at or below 5 % of C",
        "picks": picks, "pooled_seeds_picks": pooled, "replays": detail, "inputs": inputs,
        "checked": "under the sqrt rule it reproduces organism_hard/prediction_simfit.json's picks exactly",
        "command": "python studies/scoring/simfit_lr_const.py",
        "note": "one pick per seed (a replay, as the plane scores); pick = n = 8 unless the model puts it more than "
                "the tie band below its best n. pooled_seeds_picks: both seeds' n = 8 runs in one fit.",
    }}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="the method frozen at 07a27e7 on the constant-lr sweep, recomputed")
    ap.add_argument("--out", type=Path, default=None, help="write the recomputed entry here (never the committed file)")
    args = ap.parse_args()
    if args.out is not None and args.out.resolve() == OUT.resolve():
        raise SystemExit(f"{OUT} is the record made at 07a27e7: give another --out")
    doc = predict()
    if args.out is not None:
        write_json(args.out, doc)
    d = doc[KEY]
    committed = json.loads(OUT.read_text())[KEY]
    same = d["picks"] == committed["picks"] and d["pooled_seeds_picks"] == committed["pooled_seeds_picks"]
    print(json.dumps(d["picks"]), json.dumps(d["pooled_seeds_picks"]),
          "= the committed picks" if same else "DIFFER from the committed picks")
    for row in d["replays"]:
        print(row["budget"], row["seed"], {k: round(v, 3) for k, v in row["theta"].items()},
              {r: (row[r]["pick"], row[r]["simulator_best"], row[r]["within_band"]) for r in ("best", "final")})
