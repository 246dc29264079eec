# %% [markdown]
# # The scoreboard: isosim's recommended n against the rules a practitioner would use instead
# On every real sweep held here (the organism's easy-3200 and hard-1238 under
# `results/organism/real/`, and each sweep under `results/organism_f8/`, keyed by its folder), the n
# each predictor picks at each budget is scored by its **regret**: the measured seed-mean val avg@4
# of the best n at that budget minus that of the picked n, beside the seed noise (standard error of
# a seed mean), and by its octaves from the measured n*. Predictors: isosim profile-only, isosim
# calibrated on the cheap part (every n and seed up to 5 % of each run's budget; the method chosen
# by a rule written down before scoring), the paper's n (easy 512 / hard 128, clipped), the
# smallest and the largest n of the grid, and the cheap part's best n. The rules and the scoring
# live in `isosim.validation.scoreboard`; the log of every method's score is `LOG.md` (2026-12-04).
# Quick and full are the same computation (about 20 s on one core).

# %%
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import ROOT, setup, write_json  # noqa: E402

from isosim.validation import scoreboard as sb

started = time.time()
quick, _, _, out = setup("scoreboard", "isosim's n against a practitioner's rules on every real sweep")
doc = sb.build(ROOT / "results", root=ROOT.parent)

# %% [markdown]
# ## Per sweep and predictor: the pick at the top budget, its regret (seed noise) and the worst
# octave error and mean regret over the scored budgets (measured learning, more than one n stepped)

# %%
print(sb.table(doc))
print("regret reading above: final (value at C); the best reading (best validated value up to C), top budget:")
for name, v in doc["summary_best"].items():
    print(f"  {name:18s} mean regret {v['mean_regret_top']:.4f}" if v else f"  {name:18s} -")

# %% [markdown]
# ## The cheap-part methods, each scored on every sweep at once; the kept one by the rule

# %%
print(sb.method_table(doc))
print("kept:", doc["kept_method"], "| not scored yet:", doc["not_scored_yet"] or "none")

# %% [markdown]
# ## Can any pick pass? At the top budget, the picks within 2x noise of the best seed mean and
# those within 1 octave of the measured n*: where no n is both, no predictor meets both bars there

# %%
print(sb.attainable_table(doc))
print("attainable on every sweep:", doc["attainable_on_every_sweep"])

# %%
write_json(out, doc, started)
