# %% [markdown]
# # Mechanisms: coverage (best@4) vs sharpening (worst@4) on easy, hard, extreme (PAPER F3)
# Per preset, the Q1 sweep's best@4 and worst@4 over n at the top budget: the gain of each from
# the smallest n to the avg-optimal n, and each metric's own optimal n.

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, figure, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("mechanisms", "best@k vs worst@k over n")
if not quick:
    scale = F.MEDIUM
presets = ("easy", "hard", "extreme")
extreme_scale = scale if quick else F.Scale(n_train=512, n_val=512, b_p=16, budget=1e7,
                                              n_values=(64, 256, 1024, 2048), seeds=(0, 1))

# %%
res, fig_data = {}, {}
for p in presets:
    sc = extreme_scale if p == "extreme" else scale
    df = F.run_q1(PRESET[p], sc)
    res[p] = F.metric_gains(df, sc.budget)
    res[p]["val_avg"] = F.curve_at(df, sc.budget)
    print(p, "avg-opt n", res[p]["n_opt_avg"],
          {m: (round(res[p][m]["gain_pp"], 2), res[p][m]["argmax_n"]) for m in ("val_best", "val_worst")})

# %%
fig, axes = figure(len(presets))
for ax, p in zip(axes, presets):
    for m, c in (("val_best", "tab:blue"), ("val_worst", "tab:red"), ("val_avg", "k")):
        curve = res[p][m]["curve"] if m != "val_avg" else res[p][m]
        ax.plot(list(curve), list(curve.values()), "o-", color=c, label=m.replace("val_", "") + "@4")
    ax.set_xscale("log", base=2)
    ax.set_title(f"{p}: metric at the top budget")
    ax.set_xlabel("n")
axes[0].legend()
from isosim.frontier.plots import save  # noqa: E402

save(fig, fig_dir / "mechanisms_best_worst")
f3 = {"easy_sharpening": res["easy"]["val_worst"]["gain_pp"] > res["easy"]["val_best"]["gain_pp"],
      "hard_coverage": res["hard"]["val_best"]["gain_pp"] > res["hard"]["val_worst"]["gain_pp"],
      "extreme_worst_peaks_before_best": res["extreme"]["val_worst"]["argmax_n"] < res["extreme"]["val_best"]["argmax_n"]}
print(f3)
write_json(out, {"scale": scale.__dict__, "extreme_scale": extreme_scale.__dict__, "presets": res, "F3": f3}, started)
