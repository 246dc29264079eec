# %% [markdown]
# # Q1: compute-optimal n at a fixed B_p (PAPER F1, F2)
# Sweep n at B_p fixed on the easy and hard presets, every run to the top budget; read the
# frontier with `isosim.frontier.analysis.analyze` (record-breaking points, sigmoid per n, envelope,
# sigmoid fit of log n*) and the empirical n*(C) of `isosim.predict.fidelity`.

# %%
import sys
import time
from pathlib import Path

from isosim.frontier import analysis, plots
from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("q1", "Q1 sweep: n*(C) on the easy and hard presets")
if not quick:
    scale = F.Scale(n_train=512, n_val=512, b_p=32, budget=1e7,
                    n_values=(8, 16, 32, 64, 128, 256, 512, 1024), seeds=(0, 1, 2))

# %% run the sweeps
data = {p: F.run_q1(PRESET[p], scale) for p in ("easy", "hard")}

# %% frontier and n* per preset
results = {}
for p, df in data.items():
    res = analysis.analyze(df, "val_avg", n_boot=0 if quick else 50, n_budgets=15)
    f1 = F.score_f1(df, scale.budget, scale.n_grid)
    results[p] = {"n_sat": res["fit"]["n_sat"], "n_sat_ci": res["fit"]["n_sat_ci"],
                  "analyze_n_star": dict(zip(res["budgets"], res["n_star"])), "empirical": f1}
    plots.plot_frontier(df, res, fig_dir / f"q1_{p}_frontier")
    plots.plot_n_star(res, fig_dir / f"q1_{p}_n_star")
    print(p, "n_sat", res["fit"]["n_sat"], "empirical n*(C)", f1["n_star"], f"gain {f1['gain_pp']:.1f} pp")

f2 = F.score_f2(data["easy"], data["hard"], scale.budget)
print("F2", F.brief("F2", f2))

# %%
write_json(out, {"scale": scale.__dict__, "presets": results, "F2": f2}, started)
