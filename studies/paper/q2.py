# %% [markdown]
# # Q2: fixed rollout batch B = B_p n; n*(M) along the steps (PAPER F4)
# Every n gets B_p = B / n and runs to the budget; `analysis.q2_split` reads n*(M) per step count.

# %%
import sys
import time
from pathlib import Path

from isosim.frontier import analysis
from isosim.sim.engine import simulate
from isosim.sweeps.sweep import plan_for_preset

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("q2", "Q2: n*(M) at fixed total batch")
kw = dict(quick=True, seeds=2) if quick else dict(seeds=2, total_batch=4096, n_train=512, n_val=512,
                                                  n_values=[8, 16, 32, 64, 128, 256, 512], budget_max=4e6)

# %%
res = {}
for preset in ("easy", "hard"):
    plan = plan_for_preset(PRESET[preset], "q2", **kw)
    df = simulate(plan.configs())
    split = analysis.q2_split(df, "val_avg", n_budgets=12)
    res[preset] = {"total_batch": int(df["b_p"].iat[0] * df["n"].iat[0]), "table": split.to_dict("list")}
    ns = split["n_star"].tolist()
    mono = all(b >= a for a, b in zip(ns, ns[1:]))
    res[preset]["n_star_monotone"] = mono
    print(preset, "n*(M):", list(zip(split["step"].round().astype(int), ns)), "monotone", mono)
write_json(out, {"results": res}, started)
