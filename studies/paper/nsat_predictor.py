# %% [markdown]
# # Predicting n_sat from the base pass@1 histogram (beyond the paper)
# Draw many settings (Beta(a, b) base pass@1 profiles scaled into [0, s]), run a small Q1 on each
# and read n* at the top budget, both as the argmax over n and as n_tol (the smallest n within
# half a point of the best: robust on flat tops). Features of the base histogram only: mean and
# sd of pass@1, expected share of problems with zero correct in 16 samples, share below 1/16,
# and a method-of-moments Beta fit. Models: constant, linear fits, and 3 nearest neighbours;
# scored by leave-one-out error in octaves (log2 n). The first version's single 2/3 split is
# kept for comparison.

# %%
import sys
import time
from pathlib import Path

import numpy as np

from isosim.predict import fidelity as F
from isosim.sim.problems import build
from isosim.sim.config import SimConfig
from isosim.frontier.plots import save
sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, figure, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("nsat_predictor", "n_sat from base pass@1 statistics")
if quick:
    n_settings, scale = 6, F.Scale(n_train=64, n_val=64, b_p=16, budget=5e4, n_values=(4, 16, 64), seeds=(0,))
else:
    n_settings, scale = 36, F.Scale(n_train=128, n_val=128, b_p=16, budget=5e5,
                                    n_values=(4, 8, 16, 32, 64, 128, 256), seeds=(0, 1))
TOL = 0.005  # n_tol: the smallest n within half a point of val avg@4 of the best n (flat tops)
rng = np.random.default_rng(2026)


def features(p: np.ndarray) -> dict[str, float]:
    """Cheap statistics of a base pass@1 histogram."""
    m, v = p.mean(), p.var()
    common = m * (1 - m) / max(v, 1e-9) - 1
    a, b = max(m * common, 1e-3), max((1 - m) * common, 1e-3)
    return {"mean": m, "sd": np.sqrt(v), "share_zero_of_16": float(((1 - p) ** 16).mean()),
            "share_below_1_16": float((p < 1 / 16).mean()), "log_beta_a": np.log(a), "log_beta_b": np.log(b)}


MODELS = {  # name: feature columns of a least-squares fit (with intercept); "knn": 3 nearest neighbours
    "constant": [],
    "linear (mean, zeros, Beta fit)": ["mean", "share_zero_of_16", "log_beta_a", "log_beta_b"],
    "quadratic in mean + share below 1/16": ["mean", "mean2", "share_below_1_16"],
    "knn (mean, sd, share below 1/16)": ["mean", "sd", "share_below_1_16"],
}


def predict(name: str, cols: list[str], F_tr: dict, y_tr: np.ndarray, F_te: dict) -> np.ndarray:
    if not cols:
        return np.full(len(F_te["mean"]), y_tr.mean())
    X_tr = np.column_stack([F_tr[c] for c in cols])
    X_te = np.column_stack([F_te[c] for c in cols])
    if name.startswith("knn"):
        mu, sd = X_tr.mean(0), X_tr.std(0) + 1e-12
        d = (((X_te[:, None, :] - X_tr[None]) / sd) ** 2).sum(-1)
        return y_tr[np.argsort(d, axis=1)[:, :3]].mean(1)
    coef, *_ = np.linalg.lstsq(np.column_stack([np.ones(len(X_tr)), X_tr]), y_tr, rcond=None)
    return np.column_stack([np.ones(len(X_te)), X_te]) @ coef


# %%
rows = []
for i in range(n_settings):
    a, b, s = rng.uniform(0.3, 3.0), rng.uniform(0.5, 4.0), rng.choice([0.1, 0.3, 1.0])
    prof = f"scaled-beta:{s},{a:.3f},{b:.3f}"
    df = F.run_q1(PRESET["easy"], scale, profile=prof)
    c = F.curve_at(df, scale.budget)
    best = max(c.values())
    n_tol = min(n for n, v in c.items() if v >= best - TOL)
    p0 = build(SimConfig(profile=prof, n_train=scale.n_train, n_val=scale.n_val, b_p=scale.b_p, seed=0),
               memorize=False).p0[: scale.n_train].numpy()
    rows.append({"profile": prof, "n_star": F.argmax_n(c), "n_tol": n_tol, "curve": c, "features": features(p0)})
    print(f"{prof:34s} n* {rows[-1]['n_star']:4d} n_tol {n_tol:4d}  mean {p0.mean():.3f}", flush=True)

# %% leave-one-out scores of each model, for both targets
feats = {k: np.array([r["features"][k] for r in rows]) for k in rows[0]["features"]}
feats["mean2"] = feats["mean"] ** 2
scores = {}
for target in ("n_star", "n_tol"):
    y = np.log2([r[target] for r in rows])
    for name, cols in MODELS.items():
        pred = np.array([predict(name, cols, {k: np.delete(v, i) for k, v in feats.items()}, np.delete(y, i),
                                 {k: v[i: i + 1] for k, v in feats.items()})[0] for i in range(len(y))])
        scores[f"{target} | {name}"] = {"loo_mae_octaves": float(np.abs(pred - y).mean()), "pred": pred.tolist()}
        print(f"{target:6s} {name:40s} LOO MAE {scores[f'{target} | {name}']['loo_mae_octaves']:.2f} octaves")

# %% the first version's single split (2/3 fit, 1/3 held out), linear on the first four statistics
y = np.log2([r["n_star"] for r in rows])
order = rng.permutation(len(rows))
cut = max(2, 2 * len(rows) // 3)
tr, te = order[:cut], order[cut:]
sub = lambda idx: {k: v[idx] for k, v in feats.items()}  # noqa: E731
pred = predict("linear", MODELS["linear (mean, zeros, Beta fit)"], sub(tr), y[tr], sub(te))
mae, mae_const = float(np.abs(pred - y[te]).mean()), float(np.abs(y[tr].mean() - y[te]).mean())
print(f"single split: held-out MAE {mae:.2f} octaves (constant predictor {mae_const:.2f}) on {len(te)} settings")

# %%
best_model = min((k for k in scores if k.startswith("n_tol")), key=lambda k: scores[k]["loo_mae_octaves"])
fig, axes = figure(2, size=(9, 3.6))
for ax, target in zip(axes, ("n_star", "n_tol")):
    y = np.log2([r[target] for r in rows])
    for name in MODELS:
        if name == "constant":
            continue
        ax.scatter(y + rng.normal(0, 0.05, len(y)), scores[f"{target} | {name}"]["pred"], s=12, label=name)
    ax.plot([1.5, 8.5], [1.5, 8.5], "k--", lw=1)
    ax.set_xlabel(f"log2 {target} (simulated)")
    ax.set_ylabel("leave-one-out prediction")
axes[0].legend(fontsize=6)
save(fig, fig_dir / "nsat_predictor")
write_json(out, {"scale": scale.__dict__, "tol": TOL, "settings": rows,
                 "loo": {k: v["loo_mae_octaves"] for k, v in scores.items()}, "best_n_tol_model": best_model,
                 "single_split": {"held_out_mae_octaves": mae, "constant_mae_octaves": mae_const, "n_test": len(te)}},
           started)
