# %% [markdown]
# # Per-problem allocation on the organism: the simulator's prediction, before any real run
# The organism check runs uniform against the simulator's best allocation rule at equal compute
# on two settings, at the n the scoreboard calls best: the easy split at n = 4 (temperature 1, its
# 3,200 training problems) and the hard split at temperature 0.6 with 128 training problems at
# n = 32; B_p = 16, 2e5 rollouts, 300 validation problems, as the organism's sweeps. This script
# predicts both from the committed calibration profiles alone (`results/organism/profile.json`,
# `results/organism_f8/profile_t06.json`: each split's measured pass rates, the preset of its
# recipe), and, as a second reading, from the dynamics-calibrated profiles of the same settings.
# It writes `results/organism_allocation/prediction.json`.

# %%
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import ROOT, setup, write_json  # noqa: E402

from isosim.predict import allocation as A  # noqa: E402
from isosim.sim import allocation as rules  # noqa: E402
from isosim.sim.profiles import write_profile  # noqa: E402
from isosim.sweeps import sweep  # noqa: E402

started = time.time()
quick, _, _, out = setup("organism_allocation_prediction", "the simulator's allocation prediction for the organism")
RES = ROOT / "results"  # (the committed inputs)
OUT = out.parent / "organism_allocation"
OUT.mkdir(parents=True, exist_ok=True)
SEEDS = list(range(2 if quick else 8))
BUDGET = 2e4 if quick else 2e5
SETTINGS = {
    "easy-n4": dict(split="easy", preset="easy", calibration=RES / "organism" / "profile.json", n=4,
                    train=3200, temperature=1.0, dynamics=RES / "organism" / "dynamics_easy.json"),
    "hard-128-t06-n32": dict(split="hard", preset="hard", calibration=RES / "organism_f8" / "profile_t06.json",
                             n=32, train=128, temperature=0.6,
                             dynamics=RES / "organism_f8" / "dynamics_hard-128.json"),
}


def _rel(path):
    path = Path(path).resolve()
    return str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else str(path)


def split_profile(name, s):
    """The split's measured rates (from the calibration profile) as a profile file."""
    cal = json.loads(Path(s["calibration"]).read_text())
    rate = dict(zip(cal["ids"], cal["rates"]))
    ids = [json.loads(x)["id"] for x in (RES / "organism" / "splits" / f"{s['split']}.jsonl").read_text().splitlines()
           if x.strip()]
    return write_profile(OUT / f"{name}_profile.json", [rate[i] for i in ids], k=int(cal["k"]),
                         source=_rel(s["calibration"]), split=s["split"])


def base_of(s, profile):
    plan = sweep.plan_for_preset(s["preset"], "q1", seeds=1, budget_max=BUDGET, profile=str(profile),
                                 n_values=[s["n"]], b_p=16, n_train=s["train"], n_val=300)
    return plan.base


# %%
prediction = {}
for name, s in SETTINGS.items():
    profile = split_profile(name, s)
    entry = {"setting": {k: (_rel(v) if isinstance(v, Path) else v)
                         for k, v in s.items()}, "b_p": 16, "budget": BUDGET, "val_problems": 300}
    readings = {"profile": profile}
    if s["dynamics"].is_file():
        readings["calibrated"] = s["dynamics"]
    for label, prof in readings.items():
        t = time.time()
        base = base_of(s, prof)
        summary = A.compare(base, [s["n"]], BUDGET, seeds=SEEDS)
        best, r = A.best_rule(summary)
        print(f"{name} [{label}] ({time.time() - t:.0f} s): {A.verdict(summary)}")
        for rule, v in summary["rules"].items():
            if rule != "uniform":
                print(f"   {rule:9s} gain {v['gain']:+.4f} (se {v['se']:.4f})  ratio "
                      f"{A.ratio_text(v['ratio'], summary['extend'], v['significant'])}")
        entry[label] = {**summary, "best_rule": best, "verdict": A.verdict(summary),
                        "simulated_config": {k: (_rel(v) if k == "profile" else v) for k, v in base.items()}}
    entry["predicted"] = {"rule": entry["profile"]["best_rule"],
                          "gain": entry["profile"]["rules"][entry["profile"]["best_rule"]]["gain"],
                          "se": entry["profile"]["rules"][entry["profile"]["best_rule"]]["se"],
                          "ratio": entry["profile"]["rules"][entry["profile"]["best_rule"]]["ratio"],
                          "significant": entry["profile"]["rules"][entry["profile"]["best_rule"]]["significant"],
                          "ratio_note": f"None means uniform never matched it by {A.EXTEND:g}x the budget",
                          "reading": "profile"}
    prediction[name] = entry

RULE_SETTINGS = {"decay": rules.DECAY, "prior_mean": 0.5, "prior_strength": 2.0, "pooled_prior": True,
                 "candidates_per_slot": rules.CANDIDATES, "signal_min": rules.SIGNAL_MIN, "band": list(rules.BAND),
                 "n_min_max": "min(2, n), 4 n"}
write_json(OUT / "prediction.json", {"settings": prediction, "seeds": SEEDS, "metric": "val_avg",
                                     "rules": RULE_SETTINGS,
                                     "note": "reward gain at equal compute (rule minus uniform at the same n, "
                                             "paired seeds) and the compute uniform needs to match the rule's "
                                             "reward at the budget, over the budget"}, started)
