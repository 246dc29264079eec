# %% [markdown]
# # B_p sensitivity (PAPER F5)
# Spread of val avg@4 over B_p at fixed n against the spread over n at fixed B_p, same budget;
# the preset (Adam) against the round-3 SGD recipe.

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("bp_sensitivity", "B_p vs n spread")
b_p_values = (8, 16, 32, 64)
n_values = (4, 16, 64, 256)
if quick:
    scale = F.Scale(budget=1e5, seeds=(0,))
if not quick:
    scale = F.Scale(n_train=256, n_val=256, budget=2e6, seeds=(0, 1))
    b_p_values = (16, 32, 64, 128)
    n_values = (8, 32, 128, 512)

# %%
res = {}
for preset in (("easy", "easy-kl") if quick else ("easy", "hard", "easy-kl")):
    res[preset] = F.score_f5(PRESET.get(preset, preset), scale, b_p_values=b_p_values, n_values=n_values)
    print(preset, F.brief("F5", res[preset]), "holds", res[preset]["holds"])
write_json(out, {"scale": scale.__dict__, "b_p_values": b_p_values, "n_values": n_values, "results": res}, started)
