# %% [markdown]
# # Other base models: does a larger train-test gap cap n*? (PAPER F7)
# In isosim a "base model" is the structure of the policy and its problems. The reference is the
# default preset (shared linear skills that transfer to validation). The other "models" add a
# per-problem tabular part of strength ``tabular`` (a policy that can memorise each training
# problem; ``tabular=3`` is ``F.MEMORISING_MODEL``), or stronger problem-specific features
# (``memorize``, ``mem_dim``), or weaker transfer (``transfer_frac``). Same recipe, same
# problems, Q1 sweep on the easy set; read val n* and train n* at the top budget and the
# train-test gap. Switched off: a weak memorising part (``tabular=0.3``).

# %%
import sys
import time
from pathlib import Path

from isosim.predict import fidelity as F
from isosim.frontier.plots import save

sys.path.insert(0, str(Path(globals().get("__file__", "_")).resolve().parents[1]))  # studies/: common.py
from common import PRESET, figure, seed_scales, setup, write_json  # noqa: E402

started = time.time()
quick, scale, fig_dir, out = setup("other_models", "n* vs the train-test gap (F7)")
scales = seed_scales(quick, F.Scale(**{**F.TEST.__dict__, "n_values": (8, 32, 128)}),
                     F.Scale(**{**F.MEDIUM.__dict__, "n_values": (8, 16, 32, 64, 128, 256, 512)}))
models = {"tabular 3 (MEMORISING_MODEL)": F.MEMORISING_MODEL, "tabular 1": {"tabular": 1.0},
          "off: tabular 0.3": {"tabular": 0.3}, "memorize 3, mem_dim 512": {"memorize": 3.0, "mem_dim": 512},
          "transfer_frac 0.25": {"transfer_frac": 0.25}}
if quick:
    models = {k: v for k, v in models.items() if k.startswith(("tabular 3", "off"))}

# %%
res = {}
for seeds, sc in scales.items():
    for name, model in models.items():
        if seeds == "held-out seeds" and not name.startswith(("tabular 3", "off")):
            continue
        t0 = time.time()
        res[f"{seeds}: {name}"] = r = F.score_f7(PRESET["easy"], sc, model=model)
        print(f"{seeds}: {name}: holds {r['holds']}  {F.brief('F7', r)} ({time.time() - t0:.0f} s)")
        for part in ("reference", "model"):
            print(f"  {part:9s} val   " + " ".join(f"{n}:{x:.4f}" for n, x in r[part]["val_avg"].items()))
            print(f"  {part:9s} train " + " ".join(f"{n}:{x:.4f}" for n, x in r[part]["train_reward"].items()))

# %% full scale only: the FULL Q1 scale (512 problems, B_p 32, 1e7), reference vs the memorising model
if not quick:
    full = F.Scale(**{**F.FULL.__dict__, "n_values": (8, 16, 32, 64, 128, 256, 512, 1024), "seeds": (0, 1)})
    t0 = time.time()
    res["FULL, tuning seeds: tabular 3 (MEMORISING_MODEL)"] = r = F.score_f7(PRESET["easy"], full, model=F.MEMORISING_MODEL)
    print(f"FULL: holds {r['holds']}  {F.brief('F7', r)} ({time.time() - t0:.0f} s)")
    for part in ("reference", "model"):
        print(f"  {part:9s} val   " + " ".join(f"{n}:{x:.4f}" for n, x in r[part]["val_avg"].items()))
        print(f"  {part:9s} train " + " ".join(f"{n}:{x:.4f}" for n, x in r[part]["train_reward"].items()))
    scales["FULL"] = full

# %%
fig, axes = figure(2)
first = next(iter(scales))
for ax, metric in zip(axes, ("val_avg", "train_reward")):
    ref = res[f"{first}: {next(iter(models))}"]["reference"][metric]
    ax.plot(list(ref), list(ref.values()), "ko-", label="reference (preset)")
    for name in models:
        c = res[f"{first}: {name}"]["model"][metric]
        ax.plot(list(c), list(c.values()), "o-", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n")
    ax.set_title(f"{metric} at the top budget ({first})")
axes[0].legend(fontsize=7)
save(fig, fig_dir / "other_models_val_train")
write_json(out, {"scales": {k: s.__dict__ for k, s in scales.items()}, "results": res}, started)
