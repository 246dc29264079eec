# %% [markdown]
# # Out of domain: does larger n also score higher on a harder validation set? (PAPER F11)
# Train on the easy set (pass@1 30-60 %) under the default recipe; validate in domain (the easy
# profile) and out of domain on harder profiles through ``val_profile`` (same training runs):
# ``uniform:0.05,0.2`` (an AIME-like band: harder than anything trained on, but above the hard
# set's 1/16 so its problems load normally on the skills) and ``hard`` (pass@1 < 1/16: weak
# skill loadings, ``hard_loading`` 0.05). Switched off: KL 0 (every n reaches the same
# asymptote, F1's off-case).

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F
from isosim.frontier.plots import save

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, figure, plot_vs_n, seed_scales, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("out_of_domain", "n* out of domain (F11)")
scales = seed_scales(quick, scale, F.MEDIUM)
oods = (F.OOD_PROFILE,) if quick else (F.OOD_PROFILE, "hard")

# %%
res = {}
for seeds, sc in scales.items():
    for ood in oods:
        t0 = time.time()
        res[f"{seeds}, ood {ood}"] = r = F.score_f11(PRESET["easy"], sc, ood=ood)
        print(f"{seeds}, ood {ood}: holds {r['holds']}  {F.brief('F11', r)} ({time.time() - t0:.0f} s)")
        for part in ("in_domain", "out_of_domain"):
            p = r[part]
            print(f"  {part:13s} {p['profile']:17s} base {p['base']:.4f} "
                  + " ".join(f"{n}:{x:.4f}" for n, x in p["val_avg"].items()))
if not quick:  # the FULL Q1 scale (512 problems, B_p 32, 1e7), AIME-like OOD set only
    full = F.Scale(**{**F.FULL.__dict__, "n_values": (8, 16, 32, 64, 128, 256, 512, 1024), "seeds": (0, 1)})
    t0 = time.time()
    res[f"FULL, tuning seeds, ood {F.OOD_PROFILE}"] = r = F.score_f11(PRESET["easy"], full)
    print(f"FULL: holds {r['holds']}  {F.brief('F11', r)} ({time.time() - t0:.0f} s)")
    for part in ("in_domain", "out_of_domain"):
        print(f"  {part:13s} " + " ".join(f"{n}:{x:.4f}" for n, x in r[part]["val_avg"].items()))
    scales["FULL"] = full
off = F.score_f11(PRESET["easy"], scales["tuning seeds"], kl=0.0)
res["off: kl 0, tuning seeds"] = off
print(f"off: kl 0: holds {off['holds']}  {F.brief('F11', off)}")

# %%
main = res[f"tuning seeds, ood {F.OOD_PROFILE}"]
fig, axes = figure(2)
for ax, part in zip(axes, ("in_domain", "out_of_domain")):
    plot_vs_n(ax, [(name, r[part]["val_avg"], {"marker": m, "ls": ls})
                   for name, r, m, ls in (("preset", main, "o", "-"), ("kl 0 (off)", off, "s", "--"))],
              main[part]["base"], f"val avg@4 at {scales['tuning seeds'].budget:g} rollouts",
              f"{part.replace('_', ' ')}: {main[part]['profile']}")
axes[0].legend(fontsize=8)
save(fig, fig_dir / "out_of_domain_val")
write_json(out, {"scales": {k: s.__dict__ for k, s in scales.items()}, "results": res}, started)
