# %% [markdown]
# # One lr for every n, set where it suits n = 8: the predictions, before the records past 5e4
#
# Sweep `organism-hard-256-const8`: the first organism on 256 training problems of its hard split
# drawn with `train_subset_seed` 20261207 (a seed no sweep used), the standard 300 validation
# problems, temperature 0.6, B_p 16, n = 2..256, seeds 0 and 1, to 1e6 rollouts, 30 evaluations,
# every n at lr 1.0607e-4 = 3e-4 x sqrt(128 / 1024): the sqrt rule's lr for n = 8 (the lr a TRL
# user who tuned it at n = 8 keeps for every n; config.json `lr_rule` constant, `base_lr` at
# `lr_ref_batch` 128).
#
# For each C in 1e5, 3e5, 1e6, from each run's records up to 5 % of C, per seed (a replay, as the
# plane scores) and with both seeds in one fit (what `recommend --runs` gives):
# - the method frozen at 07a27e7 (`isosim.predict.simfit_lr`: the frozen simfit calibration read under
#   the runs' lr rule, its reference batch fixed at 1,024 whatever the runs' lr);
# - the lr-read model (`isosim.predict.lr_read`) in both forms: one cheap run (n = 8) and every n's
#   cheap curves, each run read at its lr from where it was set, with the learner's lr calibration
#   (`organism_lr_grid/calibration.json`);
# - the cheap leader at 5 % (each seed's last cheap value, seed-pooled for the pooled pick).
# The bank is the sweep setting's (`organism_const8/simfit_bank_clusters64.json`, a simulation: no
# record). Every file read is hashed in the entry.
#
# Run: `python studies/scoring/const8_predict.py` -> `organism_const8/prediction_lr.json`

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
from isosim.predict import simfit_frozen as sff  # noqa: E402
from isosim.predict import simfit_lr as slr  # noqa: E402
from isosim.sim.config import scaled_lr  # noqa: E402
from isosim.validation import adaptive as ad  # noqa: E402
from isosim.validation import readings as rd  # noqa: E402
from llm_runs.organism.cheap_picks import cut_lines  # noqa: E402

RESULTS = ROOT / "studies" / "results"
HOME = RESULTS / "organism_const8"
SWEEP = HOME / "hard-256"
BANK_FILE = HOME / "simfit_bank_clusters64.json"
BANK_KEY = "hard-t0.6-256"
OUT = HOME / "prediction_lr.json"
KEY = "organism-hard-256-const8"
BUDGETS = (1e5, 3e5, 1e6)
SHARE = 0.05


def settings_of(sweep: Path) -> dict:
    """The runs' lr settings (one for every run: base_lr, lr_ref_batch, lr_rule, b_p)."""
    seen = set()
    for p in sorted(sweep.glob("n*_bp*_s*/config.json")):
        c = json.loads(p.read_text())
        seen.add((float(c["base_lr"]), float(c["lr_ref_batch"]), str(c["lr_rule"]), int(c["b_p"])))
    if len(seen) != 1:
        raise SystemExit(f"{sweep}: the runs hold several lr settings {sorted(seen)}")
    base, ref, rule, b_p = seen.pop()
    return {"base_lr": base, "lr_ref_batch": ref, "lr_rule": rule, "b_p": b_p}


def cheap(sw: dict, seeds: list[int], budget: float, ns: list[int]) -> dict:
    """n -> seed -> the curve a run paused at 5 % of ``budget`` has written."""
    return {n: {s: ad.reveal(sw["runs"][n][s], SHARE * budget) for s in seeds} for n in ns}


def predict() -> dict:
    bank = json.loads(BANK_FILE.read_text())["banks"][BANK_KEY]
    bank.setdefault("n_train", bank["setting"]["n_train"])
    doc = sff.frozen()
    spec = sff.CALIBRATIONS[sff.FROZEN]
    prior = {p: tuple(v) for p, v in doc["prior_for_a_new_learner"]["prior"].items()}
    band = float(doc["settings"]["tie_band_value"])
    cal = lrr.learner_calibration()
    st = settings_of(SWEEP)
    anchor = lrr.Anchor(st["base_lr"], st["lr_ref_batch"], "config.json base_lr at lr_ref_batch")
    sw = ad.load_sweep(SWEEP)
    ns = sorted(sw["runs"])
    lrs = {n: scaled_lr(st["base_lr"], st["b_p"] * n, st["lr_ref_batch"], st["lr_rule"]) for n in ns}
    forms = ("07a27e7", "lr-read one n", "lr-read every n", "cheap leader @5%")
    picks = {f: {r: {} for r in rd.READINGS} for f in forms}
    pooled = {f: {r: [] for r in rd.READINGS} for f in forms}
    detail = []
    for budget in BUDGETS:
        grid = ad.grid_at(ns, budget, sw["b_p"])
        for who, seeds in [(f"seed {s}", [s]) for s in sw["seeds"]] + [("pooled", list(sw["seeds"]))]:
            one = cheap(sw, seeds, budget, [8])
            every = cheap(sw, seeds, budget, grid)
            pts8 = [(8, float(r), float(v)) for c in one[8].values() for r, v in c]
            got = {
                "07a27e7": slr.choose(bank, pts8, grid, budget, prior, spec["free"], band, (8,), st["lr_rule"]),
                "lr-read one n": lrr.read_runs(bank, one, grid, budget, lrs, anchor, prior, band, cal, every=False),
                "lr-read every n": lrr.read_runs(bank, every, grid, budget, lrs, anchor, prior, band, cal, every=True),
            }
            lead = lrr.cheap_leader(every)
            for f in forms:
                for r in rd.READINGS:
                    n = lead if f == "cheap leader @5%" else int(got[f][r]["pick"])
                    (pooled[f][r].append(n) if who == "pooled" else picks[f][r].setdefault(who, []).append(n))
            detail.append({"budget": budget, "who": who, "grid": grid, "cheap_leader": lead,
                           **{f: {k: got[f][k] for k in ("theta", "v0", "rms", "points", "best", "final")
                                  if k in got[f]} for f in got}})
    inputs = {}
    for p in (BANK_FILE, sff.FROZEN_FILE, lrr.LR_CALIBRATION_FILE, ROOT / "isosim/predict/simfit.py",
              ROOT / "isosim/predict/simfit_lr.py", ROOT / "isosim/predict/lr_read.py", Path(__file__)):
        inputs[str(p.relative_to(ROOT))] = hashlib.sha256(p.read_bytes()).hexdigest()
    upto = max(BUDGETS) * SHARE
    for rec in sorted(SWEEP.glob("n*_bp*_s*/records.jsonl")):
        lines = "".join(line + "\n" for line in cut_lines(rec.read_text(), upto))
        inputs[f"{SWEEP.relative_to(ROOT)}/{rec.parent.name}/records.jsonl (lines <= {upto:g} rollouts)"] = \
            hashlib.sha256(lines.encode()).hexdigest()
    return {KEY: {
        "method": "lr-read (one n and every n), the method frozen at 07a27e7 and the cheap leader, each at 5 % of C",
        "budgets": list(BUDGETS), "share": SHARE, "cheap_budgets": [SHARE * b for b in BUDGETS], "lr": lrs, "lr_settings": st,
        "anchor": {"lr": anchor.lr, "batch": anchor.batch}, "lr_calibration": cal.as_dict(),
        "prior": doc["prior_for_a_new_learner"]["prior"], "tie_band": band, "frozen_commit": doc["commit"],
        "forms": {
            "07a27e7": "isosim/predict/simfit_lr.py as frozen at 07a27e7: the frozen calibration, n = 8's cheap run, "
                       "the rule's exponent from a reference batch of 1,024 (the runs' lr not read)",
            "lr-read one n": "isosim/predict/lr_read.py, n = 8's cheap run, each n at its lr from the runs' anchor, "
                             "the learner's lr calibration",
            "lr-read every n": "isosim/predict/lr_read.py, every n's cheap curves (step, exponent, ceiling; decay "
                               "where a run over-steps); the cheap leader kept when in the band",
            "cheap leader @5%": "the n with the best last cheap value (seed mean)"},
        "picks": picks, "pooled_seeds_picks": pooled, "replays": detail, "inputs": inputs,
        "command": "python studies/scoring/const8_predict.py",
    }}


if __name__ == "__main__":
    out = predict()
    write_json(OUT, out)
    d = out[KEY]
    for f in d["picks"]:
        print(f"{f:18s}", json.dumps(d["picks"][f]), "pooled", json.dumps(d["pooled_seeds_picks"][f]))
