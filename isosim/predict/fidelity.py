"""Fidelity harness: score a preset (or a mechanism setting) against the paper's findings.

Mechanism search is a loop: pick settings, run the small sweeps each finding needs, read one
number per finding, keep or drop the setting. Each ``score_*`` function runs its own simulations
(through :func:`run`, cached per call signature) and returns a plain dict of the numbers it read
plus ``holds``: whether the finding is reproduced under that setting. The criterion of each
finding is stated in its docstring; nothing is tuned inside this module.

==========  ===============================================================================
finding     what is measured (PAPER.md numbering)
==========  ===============================================================================
F1          empirical n*(C) of seed-mean val avg@4 on a log budget grid: rises, and the largest
            n is not optimal at the top budget (saturation); gain of the best n over n = 8
F2          n* at the top budget on the hard preset below that of the easy preset
F3          gain of best@4 and worst@4 from the smallest n to the avg-optimal n; easy: worst
            gains more (sharpening), hard: best gains more (coverage)
F4          one problem, tabular softmax, no interference: at equal rollouts the smallest n
            beats the largest (sequential beats parallel)
F5          spread of val avg over B_p at fixed n vs over n at fixed B_p (same budget)
F6          training pass@1 at matched compute (n_lo for e epochs vs n_hi for e * n_lo / n_hi):
            share of training problems stuck at pass@1 < 0.01, and the histogram's distance
            from uniform (total variation)
F7          "another base model": a policy that can memorise training problems (tabular part)
            has a lower val n* than the preset while its training reward keeps rising with n
F8          n* at the top budget with a small training set below that with a large one
F9          B_p = 128 at matched update steps: n = 256 > decoupled (64 update, 256 baseline) > 64
F10         mixes: hard-only training forgets easy validation, the 50/50 mix prevents it (cost on
            hard reported), very easy problems add nothing, larger n wins on most (train, val) pairs
F11         train easy, validate on a harder profile (out of domain): larger n scores higher there
==========  ===============================================================================

Values at a budget are each run's metric interpolated (linearly in rollouts) at that budget,
then averaged over seeds; ``per_seed`` entries repeat the read for every seed alone, so a
finding that holds for one seed only is visible as such.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.files import dumps_json

# (FULL, MEDIUM, TEST, q1_configs, with_seeds: named here for the studies, which read everything from here)
from isosim.predict.fidelity_runs import (  # noqa: F401
    FULL,
    MEDIUM,
    QUICK,
    TEST,
    Scale,
    argmax_n,
    budget_grid,
    curve_at,
    n_star_curve,
    per_seed,
    q1_configs,
    run,
    run_q1,
    settings,
    values_at,
    with_seeds,
)
from isosim.sim.config import SimConfig


# ----------------------------------------------------------------------------------------------
# F1: n*(C) rises and saturates
# ----------------------------------------------------------------------------------------------
def score_f1(df: pd.DataFrame, top: float, n_grid: int = 9, n_ref: int = 8) -> dict:
    """n*(C) rises (n* at the top budget > n* at the smallest) and saturates (the largest n of the
    grid is not optimal at the top budget). ``gain_pp``: best n over ``n_ref`` (or the smallest n
    above it when absent) at the top budget, in points of val avg@4."""
    grid = budget_grid(df, top, n_grid)
    stars = n_star_curve(df, grid)
    curve = curve_at(df, top)
    ns = sorted(curve)
    ref = min((n for n in ns if n >= n_ref), default=ns[0])
    n_top = argmax_n(curve)

    def holds_for(d):
        s = n_star_curve(d, [grid[0], top])
        return bool(s[1] > s[0] and s[1] < max(ns))

    seeds = per_seed(df, holds_for)
    return {
        "budgets": grid.tolist(), "n_star": stars, "val_avg_at_top": curve,
        "n_star_top": n_top, "n_ref": ref, "gain_pp": 100 * (curve[n_top] - curve[ref]),
        "gain_over_min_pp": 100 * (curve[n_top] - curve[min(ns)]),
        "drop_at_max_n_pp": 100 * (curve[n_top] - curve[max(ns)]),
        "rises": bool(stars[-1] > stars[0]), "saturates": bool(n_top < max(ns)),
        "per_seed_holds": seeds,
        "holds": bool(stars[-1] > stars[0] and n_top < max(ns)),
    }


def nstar_trend(res: dict) -> dict:
    """How n*(C) moves in an analysis result (:func:`isosim.frontier.analysis.analyze`): Spearman(C, n*) on
    the budgets flagged as learning (the ones the n*(C) fit uses; elsewhere every n sits at the base
    reward and the argmax is noise) and on all budgets (None where n* is constant or fewer than 3
    budgets count), with the fitted n_sat and its interval."""
    from scipy.stats import spearmanr

    b, ns = np.asarray(res["budgets"], float), np.asarray(res["n_star"])
    learn = np.asarray(res["learning"], bool)

    def rho(mask):
        x = ns[mask]
        return float(spearmanr(b[mask], x).statistic) if mask.sum() > 2 and len(set(x)) > 1 else None

    fit = res["fit"]
    return {"budgets": b.tolist(), "n_star": [int(v) for v in ns], "learning": learn.tolist(),
            "spearman_learning": rho(learn), "spearman_all": rho(np.ones_like(learn)),
            "n_sat": fit["n_sat"], "n_sat_ci": fit["n_sat_ci"], "saturated": fit["saturated"]}


# ----------------------------------------------------------------------------------------------
# F2: hard saturates lower
# ----------------------------------------------------------------------------------------------
def score_f2(df_easy: pd.DataFrame, df_hard: pd.DataFrame, top: float) -> dict:
    """n* at the top budget: hard below easy (seed mean), and per seed."""
    e, h = argmax_n(curve_at(df_easy, top)), argmax_n(curve_at(df_hard, top))
    pe = per_seed(df_easy, lambda d: argmax_n(curve_at(d, top)))
    ph = per_seed(df_hard, lambda d: argmax_n(curve_at(d, top)))
    return {"n_star_easy": e, "n_star_hard": h,
            "per_seed": {s: [pe[s], ph.get(s)] for s in pe},
            "holds": bool(h < e)}


# ----------------------------------------------------------------------------------------------
# F3: coverage vs sharpening
# ----------------------------------------------------------------------------------------------
def metric_gains(df: pd.DataFrame, top: float) -> dict:
    """At the top budget: per metric, the curve over n, its argmax, and the gain (points) from the
    smallest n to the val-avg-optimal n."""
    avg = curve_at(df, top, "val_avg")
    n_opt, n_min = argmax_n(avg), min(avg)
    out = {"n_opt_avg": n_opt}
    for m in ("val_best", "val_worst"):
        c = curve_at(df, top, m)
        out[m] = {"curve": c, "argmax_n": argmax_n(c), "gain_pp": 100 * (c[n_opt] - c[n_min])}
    return out


def score_f3(df_easy: pd.DataFrame, df_hard: pd.DataFrame, top: float) -> dict:
    """Easy: worst@4 gains more than best@4 (sharpening); hard: best@4 gains more (coverage)."""
    e, h = metric_gains(df_easy, top), metric_gains(df_hard, top)
    easy_ok = e["val_worst"]["gain_pp"] > e["val_best"]["gain_pp"]
    hard_ok = h["val_best"]["gain_pp"] > h["val_worst"]["gain_pp"]
    return {"easy": e, "hard": h, "easy_sharpening": bool(easy_ok), "hard_coverage": bool(hard_ok),
            "holds": bool(easy_ok and hard_ok)}


# ----------------------------------------------------------------------------------------------
# F4 (theory): one problem, tabular softmax
# ----------------------------------------------------------------------------------------------
THEORY = dict(kl=0.0, entropy=0.0, optimizer="sgd", lr=1.0, lr_rule="constant", adv="drgrpo", wd=0.0)
"""the theory's setting: plain stochastic policy gradient, constant step, mean baseline"""


def score_f4_theory(preset: str | dict = "hard", *, policy: str = "tabular", n_problems: int = 1,
                    b_p: int | None = None,
                    budget: float = 2e4, n_values: Sequence[int] = (4, 64),
                    seeds: Sequence[int] = tuple(range(8)), **overrides: Any) -> dict:
    """Train reward at equal rollouts: smallest n vs largest n. Holds when the smallest n wins
    (sequential beats parallel). Default: one problem, tabular, in the theory's setting
    (``THEORY``: plain stochastic PG, constant step); ``overrides`` replace any of it."""
    base = settings(preset, policy=policy, n_train=n_problems, n_val=max(1, n_problems),
                    b_p=b_p or n_problems, **THEORY)
    base.update(overrides)
    cfgs = [dict(base, n=n, budget=float(budget), seed=s) for n in n_values for s in seeds]
    df = run(cfgs)
    metric = "train_reward"
    curve = curve_at(df, budget, metric)
    lo, hi = min(n_values), max(n_values)
    return {"policy": policy, "n_problems": n_problems, "budget": budget, "train_reward": curve,
            "holds": bool(curve[lo] > curve[hi])}


# ----------------------------------------------------------------------------------------------
# F5: B_p marginal
# ----------------------------------------------------------------------------------------------
def score_f5(preset: str | dict, scale: Scale = QUICK, b_p_values: Sequence[int] = (8, 16, 32, 64),
             n_values: Sequence[int] | None = None, **overrides: Any) -> dict:
    """Spread (max - min, points) of val avg over B_p at fixed n, averaged over n, against the spread
    over n at fixed B_p; holds when the B_p spread is below half the n spread."""
    n_values = tuple(n_values or scale.n_values)
    base = settings(preset, n_train=scale.n_train, n_val=scale.n_val, **overrides)
    cfgs = [dict(base, n=n, b_p=b, budget=float(scale.budget), seed=s)
            for n in n_values for b in b_p_values for s in scale.seeds if b <= scale.n_train]
    df = run(cfgs)
    v = values_at(df, scale.budget)
    v["b_p"] = df.groupby("run_id", sort=False)["b_p"].first().reindex(v["run_id"]).to_numpy()
    table = v.groupby(["n", "b_p"])["value"].mean().unstack()
    over_bp = 100 * (table.max(axis=1) - table.min(axis=1)).mean()
    over_n = 100 * (table.max(axis=0) - table.min(axis=0)).mean()
    return {"table": {int(n): {int(b): float(x) for b, x in row.items()} for n, row in table.iterrows()},
            "spread_over_b_p_pp": float(over_bp), "spread_over_n_pp": float(over_n),
            "holds": bool(over_bp < 0.5 * over_n)}


# ----------------------------------------------------------------------------------------------
# F6: interference histograms
# ----------------------------------------------------------------------------------------------
def hist_summary(df: pd.DataFrame, budget: float) -> dict:
    """Seed-mean pass@1 histogram, share stuck (< 0.01) and solved, TV distance from uniform."""
    from isosim.records import HIST_COLUMNS

    cols = list(HIST_COLUMNS) + ["train_frac_zero", "train_frac_solved", "train_reward"]
    out = {}
    for c in cols:
        out[c] = float(values_at(df, budget, c)["value"].mean())
    h = np.array([out[c] for c in HIST_COLUMNS])
    out["tv_from_uniform"] = float(0.5 * np.abs(h - 1.0 / len(h)).sum())
    out["hist"] = h.tolist()
    return out


def score_f6(preset: str | dict, scale: Scale = QUICK, n_lo: int = 8, n_hi: int = 128, epochs_hi: float = 1.0,
             min_stuck_pp: float = 2.0, **overrides: Any) -> dict:
    """Matched compute: n_lo for ``epochs_hi * n_hi / n_lo`` epochs vs n_hi for ``epochs_hi`` epochs
    (paper: n = 8 x 16 epochs vs n = 128 x 1). Holds when the larger n leaves at least
    ``min_stuck_pp`` points fewer training problems stuck at pass@1 < 0.01 and a histogram no
    further from uniform."""
    budget = float(epochs_hi * scale.n_train * n_hi)
    base = settings(preset, n_train=scale.n_train, n_val=scale.n_val, b_p=scale.b_p, **overrides)
    cfgs = [dict(base, n=n, budget=budget, seed=s) for n in (n_lo, n_hi) for s in scale.seeds]
    df = run(cfgs)
    lo = hist_summary(df[df["n"] == n_lo], budget)
    hi = hist_summary(df[df["n"] == n_hi], budget)
    base_h = hist_summary(df[df["step"] == 0].assign(rollouts=budget), budget)
    fewer_stuck = 100 * (lo["train_frac_zero"] - hi["train_frac_zero"]) >= min_stuck_pp
    closer = hi["tv_from_uniform"] <= lo["tv_from_uniform"]
    return {"budget": budget, "n_lo": n_lo, "n_hi": n_hi, "base": base_h, "small_n": lo, "large_n": hi,
            "stuck_diff_pp": 100 * (lo["train_frac_zero"] - hi["train_frac_zero"]),
            "fewer_stuck": bool(fewer_stuck), "closer_to_uniform": bool(closer),
            "holds": bool(fewer_stuck and closer)}


# ----------------------------------------------------------------------------------------------
# F8: training-set size
# ----------------------------------------------------------------------------------------------
def score_f8(preset: str | dict, scale: Scale = QUICK, n_small: int = 32, n_large: int | None = None,
             **overrides: Any) -> dict:
    """n* at the top budget with ``n_small`` training problems below n* with ``n_large``."""
    n_large = n_large or scale.n_train
    small = run_q1(preset, replace(scale, n_train=n_small, b_p=min(scale.b_p, n_small)), **overrides)
    large = run_q1(preset, replace(scale, n_train=n_large), **overrides)
    cs, cl = curve_at(small, scale.budget), curve_at(large, scale.budget)
    return {"n_small": n_small, "n_large": n_large, "curve_small": cs, "curve_large": cl,
            "n_star_small": argmax_n(cs), "n_star_large": argmax_n(cl),
            "holds": bool(argmax_n(cs) < argmax_n(cl))}


# ----------------------------------------------------------------------------------------------
# F9: baseline decoupling
# ----------------------------------------------------------------------------------------------
def score_f9(preset: str | dict, scale: Scale = QUICK, b_p: int = 128, n_lo: int = 64, n_hi: int = 256,
             steps: int = 200, **overrides: Any) -> dict:
    """B_p = 128, equal update steps: val avg of n_hi, decoupled (n_lo update, n_hi baseline), n_lo.
    Holds when n_hi > decoupled > n_lo. Matched-compute values (rollouts counting the baseline's
    draws, at the smallest final compute of the three) are reported alongside."""
    n_train = max(scale.n_train, b_p)
    base = settings(preset, n_train=n_train, n_val=scale.n_val, b_p=b_p, **overrides)
    arms = {"n_hi": dict(n=n_hi), "decoupled": dict(n=n_lo, n_est=n_hi), "n_lo": dict(n=n_lo)}
    cfgs = [dict(base, **a, steps=steps, budget=None, seed=s) for a in arms.values() for s in scale.seeds]
    df = run(cfgs)
    arm_of = {}
    for name, a in arms.items():
        for s in scale.seeds:
            arm_of[SimConfig(**dict(base, **a, steps=steps, budget=None, seed=s)).run_id] = name
    df = df.assign(arm=df["run_id"].map(arm_of))
    last = df[df["step"] == steps].groupby("arm")["val_avg"].mean()
    c_match = float(df.groupby("run_id")["rollouts"].max().min())
    matched = values_at(df, c_match, by="arm").groupby("arm")["value"].mean()
    at_steps = {k: float(last[k]) for k in arms}
    return {"b_p": b_p, "steps": steps, "val_avg_at_steps": at_steps,
            "matched_compute": c_match, "val_avg_at_compute": {k: float(matched[k]) for k in arms},
            "holds": bool(at_steps["n_hi"] > at_steps["decoupled"] > at_steps["n_lo"])}


# ----------------------------------------------------------------------------------------------
# F7: other base models (a larger train-test gap caps n*)
# ----------------------------------------------------------------------------------------------
MEMORISING_MODEL = dict(tabular=3.0)
"""a "base model" whose policy can memorise each training problem (a per-problem tabular part
next to the shared linear skills): training reward runs far ahead of validation"""


def score_f7(preset: str | dict = "easy", scale: Scale = QUICK, model: dict | None = None,
             reference: dict | None = None, **overrides: Any) -> dict:
    """Two "base models" under one recipe: ``reference`` (default: the preset as it is) and
    ``model`` (default ``MEMORISING_MODEL``). Holds when the model's validation n* at the top
    budget is below the reference's (seed mean and every seed) while its training reward still
    rises past its validation n* (train argmax n > val argmax n): the train-test gap caps n*."""
    model = MEMORISING_MODEL if model is None else model
    reference = reference or {}
    out: dict[str, Any] = {"model": model, "reference": reference}
    for name, kw in (("reference", reference), ("model", model)):
        df = run_q1(preset, scale, **{**overrides, **kw})
        val, train = curve_at(df, scale.budget), curve_at(df, scale.budget, "train_reward")
        n_val, n_train = argmax_n(val), argmax_n(train)
        out[name] = {"val_avg": val, "train_reward": train, "kl": curve_at(df, scale.budget, "kl"),
                     "n_star_val": n_val, "n_star_train": n_train,
                     "gap_at_n_star_pp": 100 * (train[n_val] - val[n_val]),
                     "per_seed_n_star_val": per_seed(df, lambda d: argmax_n(curve_at(d, scale.budget)))}
    m, r = out["model"], out["reference"]
    seeds_ok = all(m["per_seed_n_star_val"][s] < r["per_seed_n_star_val"][s] for s in m["per_seed_n_star_val"])
    out.update(lower_n_star=bool(m["n_star_val"] < r["n_star_val"]), every_seed=bool(seeds_ok),
               train_keeps_rising=bool(m["n_star_train"] > m["n_star_val"]))
    out["holds"] = bool(out["lower_n_star"] and seeds_ok and out["train_keeps_rising"])
    return out


# ----------------------------------------------------------------------------------------------
# F10: mixes (forgetting on hard-only training; easy problems prevent it)
# ----------------------------------------------------------------------------------------------
F10_MODEL = dict(typicality=0.5, hard_clusters=4)
"""the population under which F10 reproduces: hard problems on skill clusters of their own (they
share only the global typicality direction with easier problems, whose correct answers are
typical while hard problems' are atypical)"""

MIXES = {"hard": "hard", "mix": "hard:0.5,easy:0.5", "mix+very-easy": "hard:0.5,easy:0.25,very-easy:0.25"}
"""the paper's training sets of the mix study (name: profile)"""


def score_f10(scale: Scale = QUICK, val_sets: Sequence[str] = ("easy", "hard"), margin_pp: float = 1.0,
              n_grid: int | None = None, preset: str = "easy-distance", **overrides: Any) -> dict:
    """Train on each of ``MIXES`` (``preset``'s recipe and model with its profile replaced by the
    training set's, and ``overrides``: one recipe for every set, as in the committed study), validate on each of
    ``val_sets`` (``val_profile``; training is the same for every validation set). At the top
    budget, on seed-mean val avg@4:

    - forgetting: training on hard only leaves easy validation below its base at every n, by at
      least ``margin_pp`` (``forgetting_pp`` = base minus the best n);
    - prevented: training on the 50/50 mix leaves easy validation at or above its base at every n;
    - cost: hard validation of the mix's best n below hard-only's best n (``hard_cost_pp``, reported);
    - very easy helps nothing: swapping half the easy problems for very easy ones raises no
      validation set by ``margin_pp`` or more;
    - larger n wins: n* > smallest n on most (mix, validation set) pairs (both mixes); n*(C) on a
      budget grid is reported per pair (the data-dependent threshold is where it leaves the
      smallest n).

    Holds when all four boolean parts hold.
    """
    cells: dict[str, dict[str, pd.DataFrame]] = {}
    for name, prof in MIXES.items():
        recipe = dict(settings(preset), profile=prof)
        cells[name] = {v: run_q1(recipe, scale, val_profile=v, **overrides) for v in val_sets}
    top = scale.budget
    curves = {t: {v: curve_at(d, top) for v, d in vs.items()} for t, vs in cells.items()}
    base = {v: float(cells["hard"][v].query("step == 0")["val_avg"].mean()) for v in val_sets}
    n_star = {t: {v: argmax_n(c) for v, c in vs.items()} for t, vs in curves.items()}
    grid = None
    stars = {}
    for t, vs in cells.items():
        for v, d in vs.items():
            grid = budget_grid(d, top, n_grid or scale.n_grid) if grid is None else grid
            stars[f"{t} -> {v}"] = n_star_curve(d, grid)
    best = lambda t, v: max(curves[t][v].values())  # noqa: E731
    n_min = min(scale.n_values)
    pairs = [(t, v) for t in curves if t != "hard" for v in curves[t]]  # the mixes' validation sets
    wins = sum(n_star[t][v] > n_min for t, v in pairs)
    forgetting_pp = 100 * (base["easy"] - best("hard", "easy"))
    mix_floor_pp = 100 * (min(curves["mix"]["easy"].values()) - base["easy"])
    ve_gain = {v: 100 * (best("mix+very-easy", v) - best("mix", v)) for v in val_sets}
    out = {
        "base_val_avg": base, "val_avg": curves, "n_star": n_star, "budgets": grid.tolist(), "n_star_curve": stars,
        "per_seed_forgetting_pp": per_seed(cells["hard"]["easy"],
                                           lambda d: 100 * (float(d.query("step == 0")["val_avg"].mean())
                                                            - max(curve_at(d, top).values()))),
        "forgetting_pp": forgetting_pp, "mix_easy_floor_over_base_pp": mix_floor_pp,
        "forgetting_at_hard_n_star_pp": 100 * (base["easy"] - curves["hard"]["easy"][n_star["hard"]["hard"]]),
        "hard_cost_pp": 100 * (best("hard", "hard") - best("mix", "hard")),
        "hard_cost_rel": (best("hard", "hard") - best("mix", "hard")) / (best("hard", "hard") - base["hard"]),
        "very_easy_gain_pp": ve_gain, "larger_n_wins_pairs": f"{wins}/{len(pairs)}",
        "train_entropy": {t: curve_at(vs[val_sets[0]], top, "entropy") for t, vs in cells.items()},
        "base_train_entropy": {t: float(vs[val_sets[0]].query("step == 0")["entropy"].mean())
                               for t, vs in cells.items()},
    }
    out["forgets"] = bool(forgetting_pp >= margin_pp and min(out["per_seed_forgetting_pp"].values()) > 0)
    out["mix_prevents"] = bool(mix_floor_pp >= 0)
    out["very_easy_helps_nothing"] = bool(max(ve_gain.values()) < margin_pp)
    out["larger_n_wins"] = bool(2 * wins > len(pairs))
    out["holds"] = bool(out["forgets"] and out["mix_prevents"] and out["very_easy_helps_nothing"]
                        and out["larger_n_wins"])
    return out


# ----------------------------------------------------------------------------------------------
# F11: out of domain
# ----------------------------------------------------------------------------------------------
OOD_PROFILE = "uniform:0.05,0.2"
"""the out-of-domain validation set: harder than the easy training set (base pass@1 5-20 %, an
AIME-like band for a model trained on pass@1 30-60 %)"""


def score_f11(preset: str | dict = "easy", scale: Scale = QUICK, ood: str = OOD_PROFILE,
              margin_pp: float = 1.0, **overrides: Any) -> dict:
    """Train on ``preset``; validate in domain (its own profile) and out of domain (``ood``,
    through ``val_profile``: the same training). Holds when, out of domain, the best n at the top
    budget is larger than the smallest n and beats it by at least ``margin_pp`` (seed mean), and
    on every seed the best n is above the smallest."""
    own = settings(preset)["profile"]
    out: dict[str, Any] = {"ood": ood}
    for name, v in (("in_domain", own), ("out_of_domain", ood)):
        df = run_q1(preset, scale, val_profile=v, **overrides)
        c = curve_at(df, scale.budget)
        n_star, n_min = argmax_n(c), min(c)
        out[name] = {"profile": v, "base": float(df.query("step == 0")["val_avg"].mean()), "val_avg": c,
                     "n_star": n_star, "gain_over_min_pp": 100 * (c[n_star] - c[n_min]),
                     "per_seed_n_star": per_seed(df, lambda d: argmax_n(curve_at(d, scale.budget))),
                     "val_best": curve_at(df, scale.budget, "val_best"),
                     "val_worst": curve_at(df, scale.budget, "val_worst")}
    o, n_min = out["out_of_domain"], min(scale.n_values)
    out["holds"] = bool(o["n_star"] > n_min and o["gain_over_min_pp"] >= margin_pp
                        and all(n > n_min for n in o["per_seed_n_star"].values()))
    return out


# ----------------------------------------------------------------------------------------------
# Everything at once
# ----------------------------------------------------------------------------------------------
@dataclass
class Report:
    """Scores of one easy/hard pair of settings at one scale."""

    scale: dict
    easy: dict
    hard: dict
    scores: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line per finding: holds or not, and its key numbers."""
        s = self.scores
        lines = []
        for key, val in s.items():
            flag = "OK " if val.get("holds") else "no "
            lines.append(f"{key:8s} {flag} {brief(key, val)}")
        return "\n".join(lines)

    def to_json(self) -> str:
        """JSON of the report (numbers only)."""
        return dumps_json(asdict(self), indent=1)


def brief(key: str, v: dict) -> str:
    if key == "F1" or key.startswith("F1-"):
        return (f"n*(C)={v['n_star']} top={v['n_star_top']} gain={v['gain_pp']:.1f}pp over n={v['n_ref']} "
                f"drop@max={v['drop_at_max_n_pp']:.1f}pp seeds={v['per_seed_holds']}")
    if key == "F2":
        return f"easy n*={v['n_star_easy']} hard n*={v['n_star_hard']} per seed {v['per_seed']}"
    if key == "F3":
        e, h = v["easy"], v["hard"]
        return (f"easy best {e['val_best']['gain_pp']:+.1f} worst {e['val_worst']['gain_pp']:+.1f}; "
                f"hard best {h['val_best']['gain_pp']:+.1f} worst {h['val_worst']['gain_pp']:+.1f} (pp)")
    if key.startswith("F4"):
        return f"train reward {_r(v['train_reward'])}"
    if key.startswith("F5"):
        return f"spread over B_p {v['spread_over_b_p_pp']:.2f}pp vs over n {v['spread_over_n_pp']:.2f}pp"
    if key.startswith("F6"):
        return (f"stuck n={v['n_lo']}: {v['small_n']['train_frac_zero']:.3f} n={v['n_hi']}: "
                f"{v['large_n']['train_frac_zero']:.3f}; TV {v['small_n']['tv_from_uniform']:.3f} vs "
                f"{v['large_n']['tv_from_uniform']:.3f}")
    if key.startswith("F8"):
        return f"n* small set {v['n_star_small']} large set {v['n_star_large']}"
    if key.startswith("F7"):
        m, r = v["model"], v["reference"]
        return (f"val n* reference {r['n_star_val']} {r['per_seed_n_star_val']} vs model {m['n_star_val']} "
                f"{m['per_seed_n_star_val']}; model train n* {m['n_star_train']}, gap {m['gap_at_n_star_pp']:.1f}pp")
    if key.startswith("F10"):
        return (f"forgetting {v['forgetting_pp']:.1f}pp (seeds {_r(v['per_seed_forgetting_pp'])}), mix easy "
                f"floor {v['mix_easy_floor_over_base_pp']:+.1f}pp, hard cost {v['hard_cost_pp']:.2f}pp, "
                f"very easy {_r(v['very_easy_gain_pp'])}pp, n*>min on {v['larger_n_wins_pairs']}")
    if key.startswith("F11"):
        o, i = v["out_of_domain"], v["in_domain"]
        return (f"OOD n* {o['n_star']} {o['per_seed_n_star']} +{o['gain_over_min_pp']:.1f}pp; "
                f"in domain n* {i['n_star']} +{i['gain_over_min_pp']:.1f}pp")
    if key.startswith("F9"):
        return f"at steps {_r(v['val_avg_at_steps'])} at compute {_r(v['val_avg_at_compute'])}"
    return ""


def _r(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {x:.4f}" for k, x in d.items()) + "}"




FINDINGS = ("F1", "F2", "F3", "F4", "F5", "F6", "F8", "F9")


def evaluate(easy: str | dict = "easy", hard: str | dict = "hard", scale: Scale = QUICK,
             findings: Sequence[str] = FINDINGS, easy_overrides: dict | None = None,
             hard_overrides: dict | None = None) -> Report:
    """Score an easy/hard pair of settings on the findings asked for."""
    for f in findings:
        if f not in FINDINGS:
            raise IsosimError(f"unknown finding {f!r} (use {', '.join(FINDINGS)})")
    eo, ho = dict(easy_overrides or {}), dict(hard_overrides or {})
    need_q1 = {"F1", "F2", "F3"} & set(findings)
    d_e = run_q1(easy, scale, **eo) if need_q1 else None
    d_h = run_q1(hard, scale, **ho) if need_q1 else None
    s: dict[str, dict] = {}
    if "F1" in findings:
        s["F1-easy"] = score_f1(d_e, scale.budget, scale.n_grid)
        s["F1-hard"] = score_f1(d_h, scale.budget, scale.n_grid)
    if "F2" in findings:
        s["F2"] = score_f2(d_e, d_h, scale.budget)
    if "F3" in findings:
        s["F3"] = score_f3(d_e, d_h, scale.budget)
    if "F4" in findings:
        s["F4-tabular"] = score_f4_theory(hard, budget=1e4, seeds=tuple(range(8)))
        recipe = {k: settings(hard, **ho)[k] for k in THEORY}
        s["F4-recipe"] = score_f4_theory(hard, budget=1e4, seeds=tuple(range(8)), **recipe)
    if "F5" in findings:
        s["F5-easy"] = score_f5(easy, scale, n_values=(4, 16, 64, 256), **eo)
    if "F6" in findings:
        s["F6-hard"] = score_f6(hard, scale, epochs_hi=4, **ho)
        s["F6-hard-typ"] = score_f6(hard, scale, epochs_hi=4, **{"typicality": 0.5, **ho})
        s["F6-tabular"] = score_f6(hard, scale, epochs_hi=4, policy="tabular", **ho)
    if "F8" in findings:
        s["F8-easy"] = score_f8(easy, scale, **eo)
    if "F9" in findings:
        s["F9-easy"] = score_f9(easy, scale, **eo)
    name = lambda p: p if isinstance(p, str) else "custom"  # noqa: E731
    return Report(scale=asdict(scale), easy={"preset": name(easy), **eo}, hard={"preset": name(hard), **ho},
                  scores=s)
