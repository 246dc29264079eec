# %% [markdown]
# # The flat regime: which mechanism makes the gain per step saturate in n and the ceiling flat
#
# The organism's hard-128 setting (its hard split's rates at temperature 0.6, 128 training and 300
# validation problems, B_p 16, 10 warm-up steps) simulated for n = 2 / 8 / 32 / 128 to 800 update
# steps under each candidate recipe (2 seeds); the seed-mean validation avg@4 at 50 and 800 steps
# beside the organism's own (its committed records, ``organism_f8/hard-128``, and ``organism_long``
# for 800 steps at n >= 8). Two summaries per recipe: ``step_gain_ratio`` = gain at 50 steps of
# n = 128 over that of n = 32 (the organism: below 1, saturated) and ``ceiling_spread`` = largest
# minus smallest value over n at 800 steps (the organism: .05).
#
# Run: ``python studies/fidelity/flat_regime.py`` (about 20 s on one core) ->
# ``studies/results/flat_regime.json``.

# %%
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))

from isosim.files import write_json  # noqa: E402
from isosim.sim.config import SimConfig  # noqa: E402
from isosim.sim.engine import simulate  # noqa: E402
from isosim.sim.presets import get_preset  # noqa: E402
from isosim.sim.profiles import write_profile  # noqa: E402

RESULTS = ROOT / "results"
N_VALUES = (2, 8, 32, 128)
STEPS = (50, 800)
SETTING = dict(n_train=128, n_val=300, b_p=16, warmup=10)
RECIPES = {
    "hard (AdamW wd .01, lr .2, sqrt rule; the default)": ("hard", {}),
    "hard, lr x5": ("hard", {"lr": 1.0}),
    "hard, constant lr rule": ("hard", {"lr_rule": "constant", "lr": 1.0}),
    "hard, no weight decay (Adam, sqrt rule)": ("hard", {"optimizer": "adam", "wd": 0.0, "lr": 1.0}),
    "SGD lr 2, sqrt rule": ("hard", {"optimizer": "sgd", "wd": 0.0, "lr": 2.0}),
    "SGD lr 2, constant rule": ("hard", {"optimizer": "sgd", "wd": 0.0, "lr": 2.0, "lr_rule": "constant"}),
    "flat (Adam, constant lr 1, no wd)": ("hard-flat", {}),
    "flat, lr .3": ("hard-flat", {"lr": 0.3}),
    "flat, lr 3": ("hard-flat", {"lr": 3.0}),
    "flat + AdamW wd .01": ("hard-flat", {"optimizer": "adamw", "wd": 0.01}),
    "flat, transfer .75 (capacity)": ("hard-flat", {"transfer_frac": 0.75}),
    "flat, beta2 .99": ("hard-flat", {"beta2": 0.99}),
    "flat, lr power .25": ("hard-flat", {"lr_power": 0.25}),
}


def hard_profile(out: Path) -> str:
    cal = json.loads((RESULTS / "organism_f8" / "profile_t06.json").read_text())
    rates = dict(zip(cal["ids"], cal["rates"]))
    ids = [json.loads(line)["id"] for line in (RESULTS / "organism" / "splits" / "hard.jsonl").read_text().splitlines()
           if line.strip()]
    return str(write_profile(out, [rates[i] for i in ids], k=int(cal["k"])))


def at_steps(df, n: int, steps=STEPS) -> list[float]:
    g = df[df["n"] == n].groupby("step")["val_avg"].mean()
    st = g.index.to_numpy(float)
    return [float(np.interp(np.log(s), np.log(st[st > 0]), g.to_numpy()[st > 0])) for s in steps]


def organism() -> dict:
    from isosim.validation.adaptive import load_sweep

    out = {}
    for name in ("organism_f8/hard-128", "organism_long/hard-128-long"):
        sw = load_sweep(RESULTS / name)
        for n in N_VALUES:
            if n not in sw["runs"]:
                continue
            vals = []
            for s in STEPS:
                r = s * sw["b_p"] * n
                v = [np.interp(np.log(r), np.log([p[0] for p in c if p[0] > 0]), [p[1] for p in c if p[0] > 0])
                     for c in sw["runs"][n].values() if c[-1][0] >= r * 0.99]
                vals.append(float(np.mean(v)) if v else None)
            prev = out.get(n, [None, None])
            out[n] = [a if a is not None else b for a, b in zip(prev, vals)]
        out["step0"] = float(np.mean([c[0][1] for c in sw["runs"][8].values()]))
    return out


def summary(table: dict, base: float) -> dict:
    v50 = {n: table[n][0] for n in N_VALUES}
    v800 = [table[n][1] for n in N_VALUES if table[n][1] is not None]
    return {"step_gain_ratio": (v50[128] - base) / (v50[32] - base), "ceiling_spread": max(v800) - min(v800)}


def main(out: Path = RESULTS / "flat_regime.json", seeds: int = 2) -> dict:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        profile = hard_profile(Path(tmp) / "hard_t06.json")
        doc = {"setting": {**SETTING, "profile": "organism hard split, temperature 0.6 (organism_f8/profile_t06.json)",
                           "n_values": list(N_VALUES), "steps": list(STEPS), "seeds": seeds},
               "organism": {}, "recipes": {}}
        org = organism()
        doc["organism"] = {"val_avg": {str(n): org[n] for n in N_VALUES}, "step0": org["step0"],
                           **summary(org, org["step0"])}
        for label, (preset, over) in RECIPES.items():
            t0 = time.perf_counter()
            settings = {**get_preset(preset), **SETTING, **over, "profile": profile}
            cfgs = [SimConfig(**{**settings, "n": n, "steps": max(STEPS), "budget": None, "seed": s,
                                 "eval_points": 24, "name": "r"}) for n in N_VALUES for s in range(seeds)]
            df = simulate(cfgs)
            table = {n: at_steps(df, n) for n in N_VALUES}
            base = float(df[df["step"] == 0]["val_avg"].mean())
            doc["recipes"][label] = {"preset": preset, "changes": over, "val_avg": {str(n): table[n] for n in N_VALUES},
                                     "step0": base, **summary(table, base), "seconds": time.perf_counter() - t0}
            r = doc["recipes"][label]
            print(f"{label:52s} 50 steps " + " ".join(f"{table[n][0]:.3f}" for n in N_VALUES) + "  800 steps "
                  + " ".join(f"{table[n][1]:.3f}" for n in N_VALUES)
                  + f"  ratio {r['step_gain_ratio']:.2f} spread {r['ceiling_spread']:.3f} ({r['seconds']:.1f} s)", flush=True)
    write_json(out, doc)
    return doc


if __name__ == "__main__":
    d = main()
    o = d["organism"]
    print("organism 50 steps", [round(o["val_avg"][str(n)][0], 3) for n in N_VALUES], "800 steps",
          [None if o["val_avg"][str(n)][1] is None else round(o["val_avg"][str(n)][1], 3) for n in N_VALUES],
          f"ratio {o['step_gain_ratio']:.2f} spread {o['ceiling_spread']:.3f}")
