# %% [markdown]
# # Baseline decoupling (PAPER F9)
# B_p = 128: n = 256 vs "64 rollouts for the update, baseline from 256" vs n = 64, at equal
# update steps and at equal sampled rollouts (the decoupled arm pays for its baseline draws).

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("baseline", "baseline decoupling at B_p = 128")
steps = 200 if quick else 600
if not quick:
    scale = F.Scale(n_train=512, n_val=512, seeds=(0, 1, 2))

# %%
res = {"preset": F.score_f9(PRESET["easy"], scale, steps=steps),
       "dr_grpo (mean-only advantages)": F.score_f9(PRESET["easy"], scale, steps=steps, adv="drgrpo"),
       "hard preset": F.score_f9(PRESET["hard"], scale, steps=steps)}
for k, v in res.items():
    print(f"{k:32s} holds {v['holds']}  {F.brief('F9', v)}")
write_json(out, {"scale": scale.__dict__, "steps": steps, "results": res}, started)
