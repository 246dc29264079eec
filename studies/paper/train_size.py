# %% [markdown]
# # Training-set size (PAPER F8)
# n* at the top budget for several training-set sizes (same validation set size).

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("train_size", "n* vs training-set size")
sizes = (32, 128) if quick else (64, 512)
variants = {"preset": {}, "memorize 1.0": {"memorize": 1.0}}
if quick:
    variants = {"preset": {}}
if not quick:
    scale = F.Scale(n_train=512, n_val=256, b_p=16, budget=2e6, n_values=(8, 16, 32, 64, 128, 256, 512), seeds=(0, 1))

# %%
res = {}
for name, kw in variants.items():
    res[name] = F.score_f8(PRESET["easy"], scale, n_small=sizes[0], n_large=sizes[1], **kw)
    print(name, F.brief("F8", res[name]), {k: {n: round(v, 3) for n, v in res[name][k].items()}
                                             for k in ("curve_small", "curve_large")})
write_json(out, {"scale": scale.__dict__, "sizes": sizes, "results": res}, started)
