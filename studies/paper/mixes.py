# %% [markdown]
# # Mixes: forgetting on hard-only training, and what easy / very easy problems add (PAPER F10)
# Train on hard only, on hard:0.5,easy:0.5 and on hard:0.5,easy:0.25,very-easy:0.25 under the
# default recipe; validate each on an easy and a hard validation set (``val_profile``: the runs
# that differ only in the validation set train identically). Read at the top budget: easy
# validation after hard-only training against its base (forgetting), the mix's easy floor
# (prevention), the mix's cost on hard validation, what very easy problems add, and n* per
# (training set, validation set).
#
# The population that carries F10 (``F.F10_MODEL``): hard problems on skill clusters of their
# own (``hard_clusters=4``), so they share with easier problems only the global typicality
# direction (``typicality=0.5``). Switched off: typicality 0 (no shared direction), and the
# default shared clusters (the hard problems' skill updates transfer to easy problems).

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F
from isosim.frontier.plots import save

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import figure, plot_vs_n, seed_scales, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("mixes", "forgetting and mixes (F10)")
scales = seed_scales(quick, scale, F.MEDIUM)
few_n = F.Scale(**{**scales["tuning seeds"].__dict__, "n_values": (16, 64, 256)})  # off-cases: fewer, cheaper n
variants = {  # name: (scale, overrides)
    "hard clusters + typicality (F10_MODEL)": (scales["tuning seeds"], F.F10_MODEL),
    "off: typicality 0": (few_n, {**F.F10_MODEL, "typicality": 0.0}),
    "off: shared clusters (preset + typicality 0.5)": (few_n, {"typicality": 0.5}),
    "paper's hard/mix recipe (no KL, no entropy)": (few_n, {**F.F10_MODEL, "kl": 0.0, "entropy": 0.0}),
}
if not quick:
    variants["hard clusters + typicality (F10_MODEL), held-out seeds"] = (scales["held-out seeds"], F.F10_MODEL)
if quick:  # the mechanism and its off-case only, at the test's scale (two n, 128 val problems)
    few_n = F.Scale(**{**scale.__dict__, "n_values": (16, 128), "n_val": 128})
    variants = {"hard clusters + typicality (F10_MODEL)": (few_n, F.F10_MODEL),
                "off: typicality 0": (few_n, {**F.F10_MODEL, "typicality": 0.0})}

# %%
res = {}
for name, (sc, kw) in variants.items():
    t0 = time.time()
    res[name] = r = F.score_f10(sc, **kw)
    r["wall_seconds"] = round(time.time() - t0, 1)
    parts = {k: r[k] for k in ("forgets", "mix_prevents", "very_easy_helps_nothing", "larger_n_wins")}
    print(f"{name}: holds {r['holds']} {parts} ({r['wall_seconds']} s)\n  {F.brief('F10', r)}")
    for t, vs in r["val_avg"].items():
        for v, c in vs.items():
            print(f"  train {t:14s} val {v:5s} base {r['base_val_avg'][v]:.4f} n* {r['n_star'][t][v]:4d}  "
                  + " ".join(f"{n}:{x:.4f}" for n, x in c.items()))
    print("  train entropy at top (base", {t: round(x, 2) for t, x in r["base_train_entropy"].items()}, ")",
          {t: {n: round(x, 2) for n, x in c.items()} for t, c in r["train_entropy"].items()})

# %%
main = res["hard clusters + typicality (F10_MODEL)"]
fig, axes = figure(2)
colors = {"hard": "tab:red", "mix": "tab:blue", "mix+very-easy": "tab:green"}
for ax, v in zip(axes, ("easy", "hard")):
    plot_vs_n(ax, [(f"train {t}", main["val_avg"][t][v], {"color": c}) for t, c in colors.items()],
              main["base_val_avg"][v], f"{v} val avg@4 at {scales['tuning seeds'].budget:g} rollouts",
              f"validation on {v}")
axes[0].legend(fontsize=8)
save(fig, fig_dir / "mixes_val_by_train_set")
write_json(out, {"scales": {k: s.__dict__ for k, s in scales.items()}, "variants": res}, started)
