# %% [markdown]
# # Map of n_sat over interference strength and difficulty (beyond the paper)
# n* at the top budget (argmax over n of the seed-mean val avg@4) for base pass@1 bands from
# hard to easy, crossed with the strength of a shared "typicality" direction (updates on one
# problem move every other problem's sharpness: interference). Default recipe otherwise.

# %%
import sys
import time
from pathlib import Path

import numpy as np

from isosim.predict import fidelity as F
from isosim.frontier.plots import save

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, figure, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("nsat_map", "n_sat over interference and difficulty")
if quick:
    scale = F.Scale(n_train=64, n_val=128, b_p=16, budget=1e5, n_values=(4, 16, 64, 256), seeds=(0,))
    profiles = ("uniform:0.02,0.06", "uniform:0.3,0.6")
    strengths = (0.0, 0.5)
else:
    scale = F.Scale(n_train=128, n_val=256, b_p=16, budget=5e5, n_values=(4, 8, 16, 32, 64, 128, 256), seeds=(0, 1))
    profiles = ("uniform:0.02,0.06", "uniform:0.06,0.15", "uniform:0.15,0.3", "uniform:0.3,0.6", "uniform:0.6,0.9")
    strengths = (0.0, 0.25, 0.5, 1.0)

# %%
grid = np.zeros((len(strengths), len(profiles)))
cells = []
for i, t in enumerate(strengths):
    for j, prof in enumerate(profiles):
        df = F.run_q1(PRESET["easy"], scale, profile=prof, typicality=t)
        c = F.curve_at(df, scale.budget)
        grid[i, j] = F.argmax_n(c)
        cells.append({"typicality": t, "profile": prof, "n_star": int(grid[i, j]), "curve": c})
        print(f"typicality {t:4.2f} {prof:20s} n* {int(grid[i, j])}")

fig, (ax,) = figure(1, size=(6.5, 3.8))
im = ax.imshow(np.log2(grid), origin="lower", cmap="viridis", aspect="auto")
ax.set_xticks(range(len(profiles)), [p.replace("uniform:", "") for p in profiles], fontsize=7)
ax.set_yticks(range(len(strengths)), [str(s) for s in strengths])
ax.set_xlabel("base pass@1 band")
ax.set_ylabel("typicality (interference)")
for i in range(len(strengths)):
    for j in range(len(profiles)):
        ax.text(j, i, int(grid[i, j]), ha="center", va="center", color="w")
fig.colorbar(im, ax=ax, label="log2 n*")
save(fig, fig_dir / "nsat_map")
write_json(out, {"scale": scale.__dict__, "cells": cells}, started)
