# %% [markdown]
# # Fidelity report: every finding scored for the default presets, on tuning and held-out seeds
# `isosim.predict.fidelity.evaluate` at the QUICK scale (seeds 0-1 were used for tuning; 100-101 are
# held out), plus F1-F3 at the MEDIUM scale (256 problems, budget 2e6) unless --quick.

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, _, fig_dir, out = setup("fidelity_report", "scores of every finding")

# %%
reports = {}
for name, seeds in (("tuning seeds 0-1", (0, 1)), ("held-out seeds 100-101", (100, 101))):
    r = F.evaluate(PRESET["easy"], PRESET["hard"], F.with_seeds(F.QUICK, seeds))
    reports[f"QUICK, {name}"] = r.scores
    print(f"== QUICK, {name}\n{r.summary()}")
if not quick:
    for name, seeds in (("tuning seeds 0-1", (0, 1)), ("held-out seeds 100-101", (100, 101))):
        r = F.evaluate(PRESET["easy"], PRESET["hard"], F.with_seeds(F.MEDIUM, seeds), findings=("F1", "F2", "F3"))
        reports[f"MEDIUM, {name}"] = r.scores
        print(f"== MEDIUM, {name}\n{r.summary()}")
write_json(out, {"reports": reports}, started)
