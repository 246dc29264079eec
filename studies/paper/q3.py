# %% [markdown]
# # Q3: n and B_p both free
# The frontier over all (n, B_p) cells at each budget: which allocation is compute-optimal.

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F
from isosim.sim.engine import simulate
from isosim.sweeps.sweep import plan_for_preset

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("q3", "Q3: (n, B_p) both free")
kw = dict(quick=True, seeds=2) if quick else dict(seeds=1, n_train=512, n_val=512, n_values=[8, 32, 128, 512],
                                                  b_p_values=[16, 64, 256], budget_max=3e6)

# %%
res = {}
for preset in ("easy", "hard"):
    plan = plan_for_preset(PRESET[preset], "q3", **kw)
    df = simulate(plan.configs())
    df = df.assign(cell=df["n"].astype(str) + "x" + df["b_p"].astype(str))
    top = float(df.groupby("run_id")["rollouts"].max().min())
    budgets = [top / 100, top / 10, top]
    best = {}
    for b in budgets:
        v = F.values_at(df, b, by="cell").groupby("cell")["value"].mean()
        best[b] = {"cell": v.idxmax(), "val_avg": float(v.max())}
    res[preset] = best
    print(preset, {f"{b:.2g}": (x["cell"], round(x["val_avg"], 3)) for b, x in best.items()})
write_json(out, {"results": res}, started)
