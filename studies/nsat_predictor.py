# %% [markdown]
# # Predicting n_sat from the base pass@1 histogram (beyond the paper)
# Draw many settings (Beta(a, b) base pass@1 profiles scaled into [0, s]), run a small Q1 on each
# and read n* at the top budget. Features of the base histogram only: mean pass@1, share of
# problems with zero correct in 16 samples (expected), and a method-of-moments Beta fit.
# Fit log2 n* by least squares on 2/3 of the settings; score on the held-out third against the
# constant (mean) predictor.

# %%
import time

import numpy as np

from isosim import fidelity as F
from isosim.problems import build
from isosim.config import SimConfig
from isosim.plots import save

from common import figure, setup, write_json

started = time.time()
quick, scale, fig_dir, out = setup("nsat_predictor", "n_sat from base pass@1 statistics")
if quick:
    n_settings, scale = 6, F.Scale(n_train=64, n_val=64, b_p=16, budget=5e4, n_values=(4, 16, 64), seeds=(0,))
else:
    n_settings, scale = 36, F.Scale(n_train=128, n_val=128, b_p=16, budget=5e5, n_values=(4, 8, 16, 32, 64, 128, 256), seeds=(0,))
rng = np.random.default_rng(2026)


def features(p: np.ndarray) -> list[float]:
    m, v = p.mean(), p.var()
    common = m * (1 - m) / max(v, 1e-9) - 1
    a, b = max(m * common, 1e-3), max((1 - m) * common, 1e-3)
    zeros = float(((1 - p) ** 16).mean())
    return [m, zeros, np.log(a), np.log(b)]


# %%
rows = []
for i in range(n_settings):
    a, b, s = rng.uniform(0.3, 3.0), rng.uniform(0.5, 4.0), rng.choice([0.1, 0.3, 1.0])
    prof = f"scaled-beta:{s},{a:.3f},{b:.3f}"
    df = F.run_q1("easy", scale, profile=prof)
    c = F.curve_at(df, scale.budget)
    p0 = build(SimConfig(profile=prof, n_train=scale.n_train, n_val=scale.n_val, b_p=scale.b_p, seed=0),
               memorize=False).p0[: scale.n_train].numpy()
    rows.append({"profile": prof, "n_star": F.argmax_n(c), "features": features(p0)})
    print(f"{prof:34s} n* {rows[-1]['n_star']:4d}  mean {p0.mean():.3f}")

# %% fit on 2/3, score on 1/3
X = np.array([[1.0, *r["features"]] for r in rows])
y = np.log2([r["n_star"] for r in rows])
order = rng.permutation(len(rows))
cut = max(2, 2 * len(rows) // 3)
tr, te = order[:cut], order[cut:]
coef, *_ = np.linalg.lstsq(X[tr], y[tr], rcond=None)
pred = X[te] @ coef
mae = float(np.abs(pred - y[te]).mean())
mae_const = float(np.abs(y[tr].mean() - y[te]).mean())
print(f"held-out MAE {mae:.2f} octaves (constant predictor {mae_const:.2f}) on {len(te)} settings")

fig, (ax,) = figure(1)
ax.scatter(y[te], pred, label="held out")
ax.scatter(y[tr], X[tr] @ coef, alpha=0.4, label="fit")
lim = [min(y.min(), pred.min()) - 0.5, max(y.max(), pred.max()) + 0.5]
ax.plot(lim, lim, "k--", lw=1)
ax.set_xlabel("log2 n* (simulated)")
ax.set_ylabel("log2 n* (predicted)")
ax.legend()
save(fig, fig_dir / "nsat_predictor")
write_json(out, {"scale": scale.__dict__, "settings": rows, "coef": coef.tolist(),
                 "feature_names": ["1", "mean", "share_zero_of_16", "log_beta_a", "log_beta_b"],
                 "held_out_mae_octaves": mae, "constant_mae_octaves": mae_const, "n_test": len(te)}, started)
