# %% [markdown]
# # The model organism: a real transformer's isocompute frontier against isosim's prediction
# A Llama of 0.15 M parameters trained here from scratch on sums of 2-5 numbers
# (`python -m llm_runs.organism`), calibrated with `isosim calibrate` (avg@16 at temperature 1),
# split into an easy set (avg@16 in [0.3, 0.6]) and a hard set (avg@16 <= 1/16). From the
# calibration alone the simulator predicted the Q1 frontier (`llm_runs.organism.predict`, committed
# as `results/organism_prediction.json` before any real run); then real GRPO runs
# (`isosim validate`, n = 4..128, B_p = 16, 2 seeds, 2e5 rollouts each; easy recipe KL + entropy,
# hard recipe neither) measured it (`llm_runs.organism.compare` -> `results/organism_measured.json`
# and `results/organism_comparison.json`). This notebook reads those committed files and the runs'
# records; it trains nothing.

# %%
import json
import sys
import time
from pathlib import Path

import numpy as np

from isosim.integrations import load_runs

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import ROOT, figure, setup, write_json  # noqa: E402

started = time.time()
quick, _, fig_dir, out = setup("organism", "the organism's real frontier against the prediction")
RES = ROOT / "results"
pred = json.loads((RES / "organism_prediction.json").read_text())
meas = json.loads((RES / "organism_measured.json").read_text())
comp = json.loads((RES / "organism_comparison.json").read_text())
SPLITS = [s for s in ("easy", "hard") if s in meas]
real = {s: load_runs(RES / "organism" / "real" / s)[0] for s in SPLITS}
sim = {s: load_runs(RES / "organism" / "simulated" / s)[0] for s in SPLITS}

# %% [markdown]
# ## The prediction's error, budget by budget
# Octaves between the predicted and the measured compute-optimal n on the prediction's budget
# grid (all budgets; and the budgets where both the simulator and the real runs had learned).

# %%
summary = {}
for s in SPLITS:
    c = comp[s]
    summary[s] = {"error": c["error"], "error_learning_budgets": c["error_learning_budgets"],
                  "n_tol_error": c["n_tol_error"], "n_sat_predicted": c["n_sat_predicted"],
                  "n_sat_ci_predicted": c["n_sat_ci_predicted"], "n_sat_measured": c["n_sat_measured"],
                  "n_sat_ci_measured": c["n_sat_ci_measured"], "n_sat_ci_overlap": c["n_sat_ci_overlap"],
                  "base_val_avg": meas[s]["base_val_avg"], "final_val_avg": meas[s]["final_val_avg"]}
    print(f"{s}: median error {c['error']['median']:.2f} octaves, max {c['error']['max']:.2f} "
          f"({c['error']['budgets']} budgets); n_sat predicted {c['n_sat_predicted']:.0f} "
          f"{[round(v) for v in c['n_sat_ci_predicted']]}, measured "
          + ("none" if c["n_sat_measured"] is None else f"{c['n_sat_measured']:.0f}")
          + f" {c['n_sat_ci_measured']}; overlap {c['n_sat_ci_overlap']}")
    for b, p, m in zip(c["budgets"], c["n_star_predicted"], c["n_star_measured"]):
        if b >= 1e3:
            print(f"   C = {b:9.0f}: predicted n* {p:4d}, measured {m:4d}")

# %% [markdown]
# ## Learning curves: the real runs and the simulated ones
# Validation avg@4 against rollouts, the mean of the seeds per n (left: real; right: simulated).

# %%
def label(ax, xlabel, ylabel, title):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)


def save(fig, name):
    fig.tight_layout()
    fig.savefig(fig_dir / name, dpi=120)


def curves(ax, df, title):
    cmap = __import__("matplotlib").colormaps["viridis"]
    ns = sorted(int(n) for n in df["n"].unique())
    for i, n in enumerate(ns):
        g = df[(df["n"] == n) & df["val_avg"].notna()]
        m = g.groupby("rollouts")["val_avg"].mean()
        ax.plot(m.index.to_numpy()[1:], m.to_numpy()[1:], marker=".", color=cmap(i / max(1, len(ns) - 1)),
                label=f"n={n}")
    ax.set_xscale("log")
    label(ax, "rollouts", "validation avg@4", title)


fig, axes = figure(4, (4.2, 3.4))
for j, s in enumerate(SPLITS):
    curves(axes[2 * j], real[s], f"{s}: real transformer")
    curves(axes[2 * j + 1], sim[s], f"{s}: simulated (prediction)")
save(fig, "organism_curves.png")

# %% [markdown]
# ## n*(C): predicted and measured
# The argmax n at each budget (solid) and the smallest n within the tie tolerance (dashed).

# %%
fig, axes = figure(len(SPLITS), (4.6, 3.6))
for ax, s in zip(axes, SPLITS):
    for kind, d, color in (("predicted", pred[s], "C0"), ("measured", meas[s], "C3")):
        ax.step(d["budgets"], d["n_star"], where="mid", color=color, label=f"{kind} n*")
        ax.step(d["budgets"], [np.nan if v is None else v for v in d["n_tol"]], where="mid", color=color,
                ls="--", alpha=0.6, label=f"{kind} n_tol")
        if d.get("n_sat") is not None:
            ax.axhline(d["n_sat"], color=color, ls=":", alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    label(ax, "budget C (rollouts)", "compute-optimal n", s)
save(fig, "organism_nstar.png")

# %% [markdown]
# ## Across training-set sizes (F8): the real curves and the profile-only prediction's
# The hard split at temperature 0.6 with 128, 512 and 1,238 training problems: validation avg@4 per n
# (seed means; left: real runs; right: the simulated sweep behind the profile-only prediction,
# committed before the runs), and n*(C) measured against the three committed predictions.

# %%
F8 = RES / "organism_f8"
f8_keys = sorted(json.loads((F8 / "measured.json").read_text()) if (F8 / "measured.json").is_file() else [],
                 key=lambda k: int(k.split("-")[1]))  # by training-set size: hard-128, hard-512, hard-1238-t06
if f8_keys:
    f8_meas = json.loads((F8 / "measured.json").read_text())
    f8_pred = {name: json.loads((F8 / f"{name}.json").read_text())
               for name in ("prediction", "prediction_calibrated", "prediction_dynamics")}
    fig, axes = figure(2 * len(f8_keys), (4.2, 3.4))
    for j, k in enumerate(f8_keys):
        curves(axes[2 * j], load_runs(F8 / k)[0], f"{k}: real transformer")
        curves(axes[2 * j + 1], load_runs(F8 / "simulated" / k)[0], f"{k}: simulated (profile-only)")
    save(fig, "organism_f8_curves.png")
    fig, axes = figure(len(f8_keys), (4.6, 3.6))
    for ax, k in zip(axes, f8_keys):
        ax.step(f8_meas[k]["budgets"], f8_meas[k]["n_star"], where="mid", color="C3", lw=2, label="measured n*")
        for (name, d), color in zip(f8_pred.items(), ("C0", "C1", "C2")):
            ax.step(d[k]["budgets"], d[k]["n_star"], where="mid", color=color, alpha=0.7, label=name)
        ax.set_xscale("log")
        ax.set_yscale("log", base=2)
        label(ax, "budget C (rollouts)", "compute-optimal n", k)
    save(fig, "organism_f8_nstar.png")

# %% [markdown]
# ## Pass@1 on the validation problems, before and after
# Before: the calibration (avg@16 of the base model); after: the final models of the smallest n
# and of the measured n* at the top budget (seed 0), each re-evaluated at k = 16
# (`results/organism/final_eval.json`).

# %%
final = json.loads((RES / "organism" / "final_eval.json").read_text())
profile = json.loads((RES / "organism" / "profile.json").read_text())
base_rate = dict(zip(profile["ids"], profile["rates"]))
bins = np.linspace(0, 1, 11)
fig, axes = figure(len(SPLITS), (4.6, 3.6))
hist = {}
for ax, s in zip(axes, SPLITS):
    ids = final[s]["val_ids"]
    series = {"base": [base_rate[i] for i in ids]}
    for name, rates in final[s]["after"].items():
        series[name] = rates
    for name, rates in series.items():
        h, _ = np.histogram(rates, bins=bins)
        hist.setdefault(s, {})[name] = (h / len(rates)).tolist()
        ax.step(bins[:-1], h / len(rates), where="post", label=f"{name} (mean {np.mean(rates):.2f})")
    label(ax, "pass@1 (avg@16)", "share of validation problems", s)
save(fig, "organism_pass1_hist.png")

# %%
write_json(out, {"summary": summary, "val_pass1_hist": hist, "bins": bins.tolist()}, started)
