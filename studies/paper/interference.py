# %% [markdown]
# # Interference (PAPER F6) and the single-problem theory (PAPER F4 theory)
# Matched compute: n = 8 for 64 epochs vs n = 128 for 4 epochs (the paper: 16 vs 1; one epoch
# of n = 128 moves nothing on the simulated hard set). Training pass@1 histograms, share of
# problems stuck at pass@1 < 0.01, distance of the histogram from uniform; the same with a
# shared "typicality" direction (interference), and with a tabular policy (no interference).
# Then one tabular problem: the theory's setting vs the preset's recipe.

# %%
import sys
import time
from pathlib import Path

import numpy as np

from isosim.predict import fidelity as F
from isosim.frontier.plots import save
from isosim.sim.presets import get_preset

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import MIX, PRESET, figure, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("interference", "pass@1 histograms at matched compute")
if not quick:
    scale = F.Scale(n_train=512, n_val=512, b_p=32, budget=1e7, seeds=(0, 1, 2))

# %% matched-compute histograms
settings = {
    "hard preset": (PRESET["hard"], {}),
    "hard + typicality 0.5": (PRESET["hard"], {"typicality": 0.5}),
    "hard + typicality 0.5, tabular": (PRESET["hard"], {"typicality": 0.5, "policy": "tabular"}),
    "mix 50/50 + typicality 0.5": (MIX, {"typicality": 0.5}),
    "mix 50/50, tabular": (MIX, {"policy": "tabular"}),
}
hist = {}
for name, (preset, kw) in settings.items():
    hist[name] = F.score_f6(preset, scale, epochs_hi=4, **kw)
    h = hist[name]
    print(f"{name:34s} stuck n=8 {h['small_n']['train_frac_zero']:.3f} n=128 {h['large_n']['train_frac_zero']:.3f}"
          f"  TV {h['small_n']['tv_from_uniform']:.3f} vs {h['large_n']['tv_from_uniform']:.3f}  holds {h['holds']}")

fig, axes = figure(len(settings), size=(3.6, 3.2))
edges = np.arange(10) / 10
for ax, (name, h) in zip(axes, hist.items()):
    ax.bar(edges, h["base"]["hist"], width=0.1, align="edge", color="0.8", label="base")
    ax.bar(edges, h["small_n"]["hist"], width=0.045, align="edge", color="tab:orange", label="n=8")
    ax.bar(edges + 0.05, h["large_n"]["hist"], width=0.045, align="edge", color="tab:blue", label="n=128")
    ax.set_title(name, fontsize=8)
    ax.set_xlabel("training pass@1")
axes[0].legend(fontsize=7)
save(fig, fig_dir / "interference_hist")

# %% single-problem theory
keys = ("kl", "entropy", "optimizer", "lr", "lr_rule", "adv", "wd")
n_values = (2, 4, 8, 16, 32, 64)
seeds = tuple(range(8 if quick else 32))
theory = {}
for prof in ("easy", "hard"):
    theory[prof] = {
        "theory_setting": F.score_f4_theory(PRESET[prof], budget=1e4, n_values=n_values, seeds=seeds)["train_reward"],
        "preset_recipe": F.score_f4_theory(PRESET[prof], budget=1e4, n_values=n_values, seeds=seeds,
                                           **{k: get_preset(PRESET[prof])[k] for k in keys})["train_reward"],
    }
    print(prof, {k: {n: round(v, 3) for n, v in c.items()} for k, c in theory[prof].items()})

write_json(out, {"scale": scale.__dict__, "matched_compute": hist, "single_problem": theory}, started)
