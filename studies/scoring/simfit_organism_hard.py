# %% [markdown]
# # The frozen simfit method applied to organism-hard, prospectively
#
# ``studies/results/simfit_method.json`` froze "simfit (no gap) n=8 @5% wide, stay" (variant
# ``clusters64``). This applies it unchanged to the second organism's sweep
# (``studies/results/organism_hard/hard-128``, n = 2..256, B_p 16, 128 training problems):
#
# - the bank: ``isosim.predict.simfit.build_bank`` on the ``hard-flat`` recipe with the variant's
#   changes (64 skill directions), the sweep's setting (its split's T 0.6 rates from the base
#   profile ``organism_hard/profile_t06.json``, training and validation sizes, B_p, warm-up) as
#   ``studies/scoring/simfit.py``'s ``build_banks`` makes it, every n of the sweep, the sweep's
#   budget (1e6), bank seeds 0 and 1;
# - per C and per seed (a replay of the nine sweeps' scoring): that seed's n = 8 run revealed to
#   5 % of C, ``log_lr`` and ``log_h`` fitted under the frozen prior for a new learner, every n of
#   the grid read at C; the pick is n = 8 unless the simulator puts it more than the frozen tie band
#   below the best n, else the best n (``score`` in ``studies/scoring/simfit.py``).
#
# Run: ``python studies/scoring/simfit_organism_hard.py`` -> ``organism_hard/prediction_simfit.json``
# (the bank is cached in ``organism_hard/simfit_bank_clusters64.json``).

# %%
from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from isosim.files import write_json  # noqa: E402
from isosim.predict import simfit as sf  # noqa: E402
from isosim.sim.profiles import write_profile  # noqa: E402
from isosim.validation import adaptive as ad  # noqa: E402
from isosim.validation import readings as rd  # noqa: E402

RESULTS = ROOT / "studies" / "results"
METHOD = RESULTS / "simfit_method.json"
HARD = RESULTS / "organism_hard"
SWEEP = HARD / "hard-128"
PROFILE = HARD / "profile_t06.json"
SPLIT = HARD / "splits" / "hard.jsonl"
BANK = HARD / "simfit_bank_clusters64.json"
OUT = HARD / "prediction_simfit.json"
KEY = "organism-hard-128"
BUDGETS = (1e5, 3e5, 1e6)
SWEEP_BUDGET = 1e6
"""the budget every run of the sweep is configured for (the bank's budget, as the nine sweeps' max)"""

_spec = importlib.util.spec_from_file_location("simfit_scoring", ROOT / "studies" / "scoring" / "simfit.py")
scoring = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scoring)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_frozen(frozen: dict) -> None:
    """The code the method was frozen with is the code run here (git blob hashes)."""
    for rel, blob in frozen["code"].items():
        if rel.endswith(".py"):
            now = subprocess.run(["git", "hash-object", rel], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.strip()
            if now != blob:
                raise SystemExit(f"{rel} differs from the frozen method's ({now} != {blob})")
    label = frozen["method_label"]
    spec = scoring.METHODS[label]
    if (scoring.FROZEN != label or {str(n): s for n, s in spec["cheap"].items()} != frozen["methods"][label]["cheap_runs"]
            or list(spec["free"]) != frozen["methods"][label]["fitted"] or not spec.get("stay") or not spec.get("wide")):
        raise SystemExit("studies/scoring/simfit.py's method is not the frozen one")


def profile_file(setting: dict, tmp: Path) -> str:
    """``studies/scoring/simfit.py``'s ``profile_file`` for this learner: the split's rates from its
    own base profile (the nine sweeps' came from the first organism's calibration)."""
    if (setting["split"], setting["temperature"]) != (SPLIT.stem, 0.6):
        raise SystemExit(f"the base profile is the {SPLIT.stem} split's at T 0.6, not {setting}")
    cal = json.loads(PROFILE.read_text())
    rates = dict(zip(cal["ids"], cal["rates"]))
    ids = [json.loads(line)["id"] for line in SPLIT.read_text().splitlines() if line.strip()]
    return str(write_profile(tmp / f"{setting['split']}_t{setting['temperature']:g}.json", [rates[i] for i in ids],
                             k=int(cal["k"])))


def bank(sw: dict, setting: dict, frozen: dict) -> dict:
    """The bank, by ``studies/scoring/simfit.py``'s ``build_banks`` (cached in :data:`BANK`) with the
    frozen recipe, variant and bank seeds, the profile read by :func:`profile_file`."""
    if frozen["settings"]["recipe"] != scoring.RECIPE:
        raise SystemExit("studies/scoring/simfit.py's recipe is not the frozen one")
    variant = frozen["variant"]
    scoring.profile_file = profile_file
    sws = {KEY: {"sweep": sw, "setting": setting, "group": scoring.group_of(setting)}}
    doc = scoring.build_banks(sws, path=BANK, changes=variant["changes"], seeds=tuple(variant["bank_seeds"]))
    return doc["banks"][scoring.group_of(setting)]


def predict(sweep: Path = SWEEP) -> dict:
    """The method's entry for the sweep in ``sweep`` (its n = 8 runs read to 5 % of each C), from the
    cached bank (built first when missing)."""
    frozen = json.loads(METHOD.read_text())
    check_frozen(frozen)
    label = frozen["method_label"]
    spec = scoring.METHODS[label]
    prior = {p: tuple(v) for p, v in frozen["prior_for_a_new_learner"]["prior"].items()}
    band = float(frozen["settings"]["tie_band_value"])
    sw = ad.load_sweep(sweep)
    setting = scoring.setting_of(KEY, sweep)
    ns = sorted(sw["runs"])
    if sw["max_budget"] != SWEEP_BUDGET:
        raise SystemExit(f"the sweep's runs are configured to {sw['max_budget']:g}, not {SWEEP_BUDGET:g}")
    bk = bank(sw, setting, frozen)
    bk.setdefault("n_train", bk["setting"]["n_train"])
    picks: dict = {r: {} for r in rd.READINGS}
    detail = []
    for budget in BUDGETS:
        grid = ad.grid_at(ns, budget, sw["b_p"])
        for seed in sw["seeds"]:
            seen = {n: ad.reveal(sw["runs"][n][seed], s * budget) for n, s in spec["cheap"].items()}
            pts = [(n, float(r), float(v)) for n, c in seen.items() for r, v in c]
            res = sf.fit(bk, pts, prior, spec["free"])
            row = {"budget": budget, "seed": int(seed), "cheap_to": {str(n): s * budget for n, s in spec["cheap"].items()},
                   "points": len(pts), "last_rollouts": {str(n): c[-1][0] for n, c in seen.items()},
                   "theta": res["theta"], "v0": res["v0"], "rms": res["rms"], "grid": grid}
            for reading in rd.READINGS:
                pick = sf.pick(bk, res["theta"], grid, budget, reading)
                vals = {n: sf.value(bk, res["theta"], n, budget, reading) for n in grid}
                stay = [n for n in spec["cheap"] if n in vals and vals[n] >= max(vals.values()) - band]
                if stay:
                    pick = max(stay, key=lambda n: vals[n])
                top = max(vals.values())
                row[reading] = {"pick": int(pick), "simulator_best": int(sf.pick(bk, res["theta"], grid, budget, reading)),
                                "predicted_gain": {str(n): v for n, v in vals.items()},
                                "within_band": sorted(int(n) for n, v in vals.items() if v >= top - band)}
                picks[reading].setdefault(f"seed {seed}", []).append(int(pick))
            detail.append(row)
    inputs = {str(p.relative_to(ROOT)): sha256(p) for p in (PROFILE, SPLIT, BANK, METHOD, ROOT / "isosim/predict/simfit.py",
                                                             ROOT / "studies/scoring/simfit.py", Path(__file__))}
    upto = max(BUDGETS) * max(spec["cheap"].values())
    for n in spec["cheap"]:  # the lines read: each record up to the first one past the largest cheap budget
        for rec in sorted(sweep.glob(f"n{n}_bp*_s*/records.jsonl")):
            lines = []
            for line in rec.read_text().splitlines():
                if line.strip() and float(json.loads(line)["rollouts"]) > upto * (1 + 1e-12):
                    break
                lines.append(line + "\n")
            inputs[f"{SWEEP.relative_to(ROOT)}/{rec.parent.name}/records.jsonl (lines <= {upto:g} rollouts)"] = \
                hashlib.sha256("".join(lines).encode()).hexdigest()
    doc = {KEY: {
        "method": label, "freeze_commit": frozen["commit"], "variant": frozen["variant"]["name"],
        "setting": setting, "budgets": list(BUDGETS),
        "cheap_runs": {str(n): s for n, s in spec["cheap"].items()},
        "cheap_budgets": [max(spec["cheap"].values()) * b for b in BUDGETS],
        "n_values": ns, "tie_band": band, "prior": frozen["prior_for_a_new_learner"]["prior"],
        "read": "the base profile (bank) and each seed's n = 8 records at or below 5 % of C",
        "picks": picks,
        "replays": detail,
        "inputs": inputs,
        "command": "python studies/scoring/simfit_organism_hard.py",
        "note": "one pick per seed (a replay, as on the nine sweeps); pick = n = 8 unless the simulator puts it more "
                "than the tie band below its best n. predicted_gain: the fitted simulator's gain over step 0 at C.",
    }}
    return doc


if __name__ == "__main__":
    doc = predict()
    write_json(OUT, doc)
    d = doc[KEY]
    print(json.dumps(d["picks"]))
    for row in d["replays"]:
        print(row["budget"], row["seed"], {k: round(v, 3) for k, v in row["theta"].items()},
              {r: (row[r]["pick"], row[r]["simulator_best"], row[r]["within_band"]) for r in rd.READINGS})
