# %% [markdown]
# # Per-problem allocation against a uniform n, at equal compute
# Every rule of `isosim.sim.allocation` (filter, variance, knapsack, band) against uniform on the
# presets easy, hard, extreme and the 50/50 mix of hard and easy (the presets' own recipes), at
# two training-set sizes (128 and 512 problems), over n = 4..64 at B_p = 32, several seeds. The
# rules spend the same rollouts per step as uniform and see only each problem's sampled history
# (`PassRateEstimator`), never the simulator's pass rates. Per rule and setting
# (`isosim.predict.allocation`):
#
# * the reward gain at the top budget (validation avg@4) with its seed noise, at each n and
#   frontier to frontier (each side at its best n);
# * the compute-equivalence ratio: the compute uniform needs to reach the rule's top-budget reward
#   over the top budget, read off uniform's own curve (uniform runs on to 4x the budget; "> 4x"
#   when it never gets there);
# * n* at the top budget (the best n of the grid) and the fitted n_sat of the rule's own sweep.
#
# Scale: the top budget is 2e5 rollouts with 256 validation problems and 3 seeds (the quick grids'
# budget), so that the whole study runs in minutes on one core; `--quick` runs 2 seeds, n 4 and
# 16, 5e4 rollouts, 128 problems.

# %%
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import figure, setup, write_json  # noqa: E402

from isosim.frontier import analysis  # noqa: E402
from isosim.predict import allocation as A  # noqa: E402
from isosim.sim.allocation import RULES  # noqa: E402
from isosim.sim.engine import simulate  # noqa: E402
from isosim.sim.presets import get_preset  # noqa: E402

started = time.time()
quick, _, fig_dir, out = setup("allocation", "per-problem allocation rules against uniform at equal compute")
PRESETS = ["easy", "hard", "extreme", "hard:0.5,easy:0.5"]
SIZES = [128] if quick else [128, 512]
N_VALUES = [4, 16] if quick else [4, 8, 16, 32, 64]
SEEDS = [0, 1] if quick else [0, 1, 2]
BUDGET = 5e4 if quick else 2e5
N_VAL = 128 if quick else 256


def n_sat_of(df, cfgs, rule):
    """The fitted n_sat and n* at the top budget of one rule's own sweep (no bootstrap)."""
    ids = {c.run_id for c in cfgs if c.allocation == rule and c.budget <= BUDGET}
    try:
        res = analysis.analyze(df[df["run_id"].isin(ids)], metric="val_avg", n_boot=0, seed=0)
    except Exception as e:  # a sweep the fit cannot read is reported, not hidden
        return {"n_sat": None, "n_star_fit": None, "note": f"{type(e).__name__}: {e}"}
    fit = res["fit"]
    return {"n_sat": fit.get("n_sat"), "saturated": fit.get("saturated"), "at_floor": fit.get("at_floor"),
            "n_star_fit": int(res["n_star"][-1]), "learning": bool(res["learning"][-1])}


# %%
results = {}
for preset in PRESETS:
    for size in SIZES:
        key = f"{preset}/{size}"
        t = time.time()
        base = {**get_preset(preset), "n_train": size, "n_val": N_VAL}
        cfgs = A.configs(base, N_VALUES, BUDGET, SEEDS)
        df = simulate(cfgs)
        summary = A.summarise(df, cfgs, BUDGET)
        for rule in ("uniform", *RULES[1:]):
            summary["rules"][rule].update(n_sat_of(df, cfgs, rule))
        summary["verdict"] = A.verdict(summary)
        results[key] = summary
        print(f"{key} ({time.time() - t:.0f} s, {len(cfgs)} runs): {summary['verdict']}")
        u = summary["rules"]["uniform"]
        for rule, r in summary["rules"].items():
            sat = "-" if r.get("n_sat") is None else f"{r['n_sat']:.0f}"
            extra = "" if rule == "uniform" else (f"gain {r['gain']:+.4f} (se {r['se']:.4f}) ratio "
                                                  f"{A.ratio_text(r['ratio'], summary['extend'], r['significant'])}")
            print(f"   {rule:9s} reward {r['reward']:.4f} n* {r['n_star']:3d} (uniform {u['n_star']}) "
                  f"n_sat {sat:>4s}  {extra}")

# %% [markdown]
# ## The table: frontier gain and compute-equivalence of each rule

# %%
rows = []
for key, s in results.items():
    for rule, r in s["rules"].items():
        if rule == "uniform":
            continue
        rows.append({"setting": key, "rule": rule, "gain": r["gain"], "se": r["se"],
                     "ratio": A.ratio_text(r["ratio"], s["extend"], r["significant"]), "ratio_value": r["ratio"],
                     "n_star": r["n_star"],
                     "n_star_uniform": s["rules"]["uniform"]["n_star"], "n_sat": r.get("n_sat"),
                     "n_sat_uniform": s["rules"]["uniform"].get("n_sat")})
for r in rows:
    ns = "-" if r["n_sat"] is None else f"{r['n_sat']:.0f}"
    nu = "-" if r["n_sat_uniform"] is None else f"{r['n_sat_uniform']:.0f}"
    print(f"{r['setting']:24s} {r['rule']:9s} gain {r['gain']:+.4f} ± {r['se']:.4f}  ratio {r['ratio']:>6s}  "
          f"n* {r['n_star']:3d} (uniform {r['n_star_uniform']:3d})  n_sat {ns:>4s} (uniform {nu:>4s})")

# %%
fig, axes = figure(len(SIZES), size=(6.0, 3.8))
rules = [r for r in RULES if r != "uniform"]
for ax, size in zip(axes, SIZES):
    keys = [f"{p}/{size}" for p in PRESETS]
    width = 0.8 / len(rules)
    for j, rule in enumerate(rules):
        g = [results[k]["rules"][rule]["gain"] for k in keys]
        e = [2 * (results[k]["rules"][rule]["se"] or 0.0) for k in keys]
        ax.bar([i + (j - (len(rules) - 1) / 2) * width for i in range(len(keys))], g, width, yerr=e, label=rule)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xticks(range(len(keys)), [p.replace("hard:0.5,easy:0.5", "mix") for p in PRESETS])
    ax.set_ylabel("frontier gain over uniform (val avg@4)")
    ax.set_title(f"{size} training problems, C = {BUDGET:.0e} (± 2 se)")
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(fig_dir / "allocation_gain.png", dpi=120)

# %%
write_json(out, {"settings": results, "table": rows, "presets": PRESETS, "sizes": SIZES, "n_values": N_VALUES,
                 "seeds": SEEDS, "budget": BUDGET, "n_val": N_VAL, "b_p": 32, "extend": A.EXTEND,
                 "scale": "quick" if quick else "reduced (budget 2e5, 256 validation problems, 3 seeds)"},
           started)
