# %% [markdown]
# # Regularisation and lr-scaling ablations
# n* at the top budget and the gain of the best n over the smallest, for the easy and hard
# presets with one knob changed: KL, entropy, weight decay (AdamW), lr rule, hard_loading.

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("ablations", "regularisation and lr-rule ablations")
if quick:
    scale = F.Scale(budget=1e5, n_values=(4, 16, 64), seeds=(0,))
else:
    scale = F.Scale(n_train=256, n_val=256, b_p=16, budget=2e6, n_values=(8, 32, 128, 512), seeds=(0, 1))
variants = {
    "preset": {},
    "kl 0": {"kl": 0.0},
    "kl 0.3": {"kl": 0.3},
    "kl 3": {"kl": 3.0},
    "entropy 0": {"entropy": 0.0},
    "adamw wd 0.1, kl 0": {"optimizer": "adamw", "wd": 0.1, "kl": 0.0},
    "lr rule linear": {"lr_rule": "linear"},
    "lr rule constant": {"lr_rule": "constant"},
    "hard_loading 1": {"hard_loading": 1.0},
}
if quick:
    variants = {k: variants[k] for k in ("preset", "kl 0")}

# %%
res = {}
for name, kw in variants.items():
    res[name] = {}
    for p in ("easy", "hard"):
        df = F.run_q1(PRESET[p], scale, **kw)
        c = F.curve_at(df, scale.budget)
        n_star = F.argmax_n(c)
        res[name][p] = {"curve": c, "n_star": n_star, "gain_over_min_pp": 100 * (c[n_star] - c[min(c)])}
    print(f"{name:22s}", {p: (r["n_star"], round(r["gain_over_min_pp"], 1)) for p, r in res[name].items()})
write_json(out, {"scale": scale.__dict__, "results": res}, started)
