"""The pure parts of checking a prediction with real runs (``isosim validate``): which ``n`` and
``B_p`` a validation plans, the verdict table of the runs' final rewards, and the report
(``validation.md`` and its figures). The launchers and the run folders live in
``llm_runs.launch.validate`` / ``llm_runs.launch.launchers``; these functions read a plan by its attributes
(``predicted``, ``runs``, ``b_p``, ``notes``, ``request``, ``out``) and never import ``llm_runs``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from isosim.files import atomic_write_text
from isosim.sweeps.plans import B_MAX_EASY, B_MAX_HARD

# --------------------------------------------------------------------------------------------
# the plan: n below, at and above the prediction, B_p within B_max
# --------------------------------------------------------------------------------------------
"""The paper's largest rollout batch B_p * n for easy and hard sets (PAPER.md)."""
MIN_STEPS = 20
"""Default smallest number of update steps of a planned run."""
B_P_FLOOR = 8
"""The plan halves B_p to fit the largest n, but not below this."""


def default_b_max(preset: str | None = None, profile: str | None = None) -> int:
    """The paper's B_max for the set: 16,384 when at least half its problems are hard (base
    pass@1 < 1/16, measured on the profile), else 65,536."""
    from isosim.sim.presets import hard_share

    return B_MAX_HARD if hard_share(profile or preset or "easy") >= 0.5 else B_MAX_EASY


def pow2(x: float) -> int:
    """The power of two nearest to ``x`` in log scale (at least 1)."""
    return int(2 ** max(0, round(math.log2(max(x, 1.0)))))


def n_max_for(budget: int, b_p: int, *, min_steps: int, b_max: int | None = None, n_min: int = 2) -> int | None:
    """The largest power of two ``n >= n_min`` with ``budget // (b_p * n) >= min_steps`` and
    ``b_p * n <= b_max``; None when not even ``n_min`` fits."""
    def fits(n: int) -> bool:
        return budget // (b_p * n) >= min_steps and (b_max is None or b_p * n <= b_max)

    if not fits(n_min):
        return None
    n = n_min
    while fits(n * 2):
        n *= 2
    return n


def plan_ns(n_sat: float, budget: int, b_p: int, *, factor: int = 4, min_steps: int = MIN_STEPS,
            n_min: int = 2, b_max: int | None = None, name: str = "n_sat") -> tuple[list[int], list[str]]:
    """Three group sizes around ``n_sat`` (``n_sat/factor``, ``n_sat``, ``factor*n_sat``, powers of two).
    ``name`` is what the notes call the centre (``n*`` where the plan centres on the simulated n*).

    Each is clipped to ``[n_min, n_max]``, where ``n_max`` is the largest power of two that still
    leaves ``min_steps`` updates (``budget // (b_p * n) >= min_steps``) and keeps the batch
    ``b_p * n`` within ``b_max``. Values that clipping merges are replaced by the nearest unused
    powers of two inside the range, so the plan keeps three distinct n where the range allows.
    Returns the sorted n and notes on what was clipped.
    """
    n_max = n_max_for(budget, b_p, min_steps=min_steps, b_max=b_max, n_min=n_min)
    if n_max is None:
        cap = "" if b_max is None else f" within B_max = {b_max}"
        raise IsosimError(f"budget {budget} is too small to test anything at B_p = {b_p}: even n = {n_min} gets "
                          f"fewer than {min_steps} steps{cap} ({budget} // ({b_p} x {n_min}) = "
                          f"{budget // (b_p * n_min)}); raise --budget, or lower --b-p or --min-steps")
    centre = pow2(n_sat)
    wanted = [max(1, centre // factor), centre, centre * factor]
    notes, ns = [], []
    for label, n in zip((f"{name}/{factor}", name, f"{factor}*{name}"), wanted):
        c = min(max(n, n_min), n_max)
        if c != n:
            why = (f"so each run gets >= {min_steps} steps and B_p * n <= B_max at B_p = {b_p}" if c < n
                   else "(n = 1 gives no GRPO signal)")
            notes.append(f"{label} = {n} clipped to {c} {why}")
        if c not in ns:
            ns.append(c)
    candidates = [2 ** i for i in range(int(math.log2(n_min)), int(math.log2(n_max)) + 1)]
    while len(ns) < 3 and len(ns) < len(candidates):
        free = [c for c in candidates if c not in ns]
        add = min(free, key=lambda c: min(abs(math.log2(c) - math.log2(x)) for x in ns))
        notes.append(f"added n = {add} (clipping left fewer than three distinct n)")
        ns.append(add)
    if max(ns) <= pow2(n_sat):
        what = "the predicted saturation" if name == "n_sat" else f"the plan's centre {name}"
        notes.append(f"no planned n lies above {what} ({pow2(n_sat)}): the plan cannot see "
                     "saturation; raise --budget or --b-max, or lower --min-steps")
    return sorted(ns), notes


def plan_b_p(n_sat: float, budget: int, b_p: int, *, factor: int = 4, min_steps: int = MIN_STEPS,
             b_max: int | None = None, floor: int = B_P_FLOOR) -> tuple[int, list[str]]:
    """Halve the recommended ``b_p`` (not below ``floor``) until ``factor * n_sat`` fits both the
    step minimum and ``b_max``; returns the B_p and a note when it changed."""
    top = pow2(n_sat) * factor
    chosen = b_p
    while chosen > floor:
        n_max = n_max_for(budget, chosen, min_steps=min_steps, b_max=b_max)
        if n_max is not None and n_max >= top:
            break
        chosen = max(floor, chosen // 2)
    if chosen == b_p:
        return b_p, []
    return chosen, [f"B_p lowered from the recommended {b_p} to {chosen} so that n up to {top} keeps "
                    f">= {min_steps} steps and B_p * n <= B_max = {b_max}"]


def fmt_num(v: float | None, spec: str) -> str:
    """A number formatted with ``spec``, or ``none`` (e.g. no fitted n_sat)."""
    return "none" if v is None else format(v, spec)


def n_sat_text(pred: dict[str, Any], spec: str = ".0f") -> str:
    """The predicted n_sat in words: a number only where n*(C) saturated by the budget; otherwise
    the fitted upper level, named as what it is (every line of validate says the same)."""
    if pred.get("n_sat") is None:
        return "n_sat: none"
    if pred.get("saturated_by_budget") is False:
        return f"n_sat: not saturated by C (fitted upper level {fmt_num(pred.get('n_sat'), spec)})"
    return f"n_sat = {fmt_num(pred.get('n_sat'), spec)}"


def real_n_sat_line(fr: dict[str, Any], n_values: int) -> str:
    """The real runs' fitted n_sat, with as many n values as ran (a bound, not a fit, with few)."""
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}.get(n_values, str(n_values))
    return (f"Fitted n_sat of the real runs: {fmt_num(fr.get('n_sat'), '.1f')} (with {words} n value"
            f"{'s' if n_values != 1 else ''} this is a bound, not a fit).")


# --------------------------------------------------------------------------------------------
# the verdict table and the report
# --------------------------------------------------------------------------------------------
def verdict(plan: Any, df: Any, metric: str = "val_avg",
            frontier_n_star: int | None = None) -> dict[str, Any]:
    """The runs' final rewards per n, the verdict (``isosim.validation.verdict.decide``) and the sentence."""
    from isosim.validation.verdict import Observed, Prediction, decide, eval_se

    pred = plan.predicted
    last = df.sort_values("step").groupby("run_id").tail(1)
    base = df[df["step"] == 0]
    base_r = float(base[metric].mean()) if len(base) else float("nan")
    per_n: dict[int, dict[str, Any]] = {}
    for n, g in last.groupby("n"):
        rs = g[metric].astype(float).to_numpy()
        r = float(rs.mean())
        se = eval_se(r, float(g["val_size"].iloc[0]), float(g["eval_n"].iloc[0])) / math.sqrt(len(rs))
        if len(rs) > 1:
            se = math.sqrt(se ** 2 + float(np.var(rs, ddof=1)) / len(rs))
        per_n[int(n)] = {"reward": r, "se": se, "seeds": int(len(rs)), "step": int(g["step"].max()),
                         "rollouts": float(g["rollouts"].max()), "val_best": float(g["val_best"].mean()),
                         "val_worst": float(g["val_worst"].mean()),
                         "train_reward": float(g["train_reward"].astype(float).mean())}
    n_pred = int(pred["n_star"])
    prediction = Prediction(n_star=n_pred, n_tol=pred.get("n_tol"), n_tie_hi=pred.get("n_tie_hi"),
                            n_sat=pred.get("n_sat"))
    v = decide(prediction, {n: Observed(d["reward"], d["se"]) for n, d in per_n.items()},
               base_r if math.isfinite(base_r) else None)
    ns = sorted(per_n)
    one_seed = all(d["seeds"] == 1 for d in per_n.values())
    sentence = (f"At C = {plan.runs[0].config['budget']} rollouts (B_p = {plan.b_p}), the simulator "
                f"({pred['source']}) predicted n*(C) = {n_pred} ({n_sat_text(pred)}); the real runs at "
                f"n = {ns} reached validation {metric} " + ", ".join(f"{per_n[n]['reward']:.3f}" for n in ns)
                + f" (base {base_r:.3f}), best n = {v.best_n}"
                + (f", frontier-fit n*(C) = {frontier_n_star}" if frontier_n_star is not None else "")
                + f". Verdict: {v.agreement} ({v.reason}).")
    return {"metric": metric, "base_reward": base_r, "per_n": {str(k): d for k, d in per_n.items()},
            "predicted_n_star": n_pred, "predicted_n_sat": pred.get("n_sat"), "predicted_set": v.predicted_set,
            "nearest_planned_n": v.nearest_n, "observed_best_n": v.best_n, "tied_with_best": v.tied,
            "observed_frontier_n_star": frontier_n_star, "saturation": v.saturation,
            "saturation_detail": v.saturation_detail, "learned": v.testable, "agreement": v.agreement,
            "reason": v.reason, "one_seed": one_seed, "sentence": sentence}


def plot_validation(plan: Any, df: Any, metric: str, frontier: dict[str, Any] | None,
                    folder: Path, v: dict[str, Any] | None = None) -> list[Path]:
    """``reward_curves`` (validation metric at eval points; train reward of every step, from
    ``metrics.jsonl``) and ``n_star_predicted_vs_observed`` (n*(C) predicted vs observed, and the
    final reward per n with its tolerance, against the predicted n*(C) and n_sat)."""
    from isosim.frontier import plots

    ns = sorted(int(n) for n in df["n"].unique())
    cmap, norm = plots.n_colors(ns)
    fig, (ax1, ax2) = plots.figure(ncols=2)
    for n in ns:
        color = cmap(norm(math.log2(n)))
        for _, g in df[df["n"] == n].groupby("run_id"):
            g = g.sort_values("rollouts")
            ax1.plot(g["rollouts"], g[metric], "o-", color=color, label=f"n = {n}")
    for run in plan.runs:
        path = Path(run.dir) / "metrics.jsonl"
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        rows = [json.loads(x) for x in text.splitlines() if x.strip()]
        if rows:
            ax2.plot([r["rollouts"] for r in rows], [r["reward/mean"] for r in rows], ".-", alpha=0.8,
                     color=cmap(norm(math.log2(run.n))), label=f"n = {run.n}")
    ax1.set_xlabel("rollouts C")
    ax1.set_ylabel(f"validation {metric}")
    ax1.set_title(f"validation, B_p = {plan.b_p}", fontsize=10)
    ax2.set_xlabel("rollouts C")
    ax2.set_ylabel("train reward (mean of the step's rollouts)")
    ax2.set_title("training reward, every step", fontsize=10)
    for ax in (ax1, ax2):
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        if uniq:
            ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    written = plots.save(fig, folder / "reward_curves")

    fig, (ax, axr) = plots.figure(ncols=2)
    curve = plan.predicted["curve"]
    ax.step(curve["budgets"], curve["n_star"], "o-", where="post", color="#4c72b0", ms=3,
            label=f"predicted n*(C) (simulator, {plan.predicted['source']})")
    if plan.predicted.get("n_sat") is not None:
        ax.axhline(plan.predicted["n_sat"], color="#4c72b0", ls=":",
                   label=f"predicted n_sat = {plan.predicted['n_sat']:.0f}")
    if frontier is not None:
        ax.step(frontier["budgets"], frontier["n_star"], "s-", where="post", color="#c44e52", ms=5,
                label="observed n*(C) (frontier fit of the real runs)")
    plots.log_compute_axis(ax)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("rollouts C")
    ax.set_ylabel("n*")
    ax.set_title(f"n*(C): predicted vs observed (tried n = {ns})", fontsize=10)
    ax.legend(fontsize=7)
    if v is not None:
        per = {int(k): d for k, d in v["per_n"].items()}
        xs = sorted(per)
        axr.errorbar(xs, [per[n]["reward"] for n in xs], yerr=[2 * per[n]["se"] for n in xs], fmt="o-",
                     color="#333333", capsize=4, label=f"final validation {metric} (+/- 2 se)")
        if math.isfinite(v["base_reward"]):
            axr.axhline(v["base_reward"], color="#999999", ls="--", label=f"base model {v['base_reward']:.3f}")
        axr.axvline(v["predicted_n_star"], color="#4c72b0", ls="-", alpha=0.6,
                    label=f"predicted n*(C) = {v['predicted_n_star']}")
        axr.set_xscale("log", base=2)
        axr.set_xticks(xs)
        axr.set_xticklabels([str(n) for n in xs])
        axr.set_xlabel("n (rollouts per problem)")
        axr.set_ylabel(f"validation {metric} at C = {plan.runs[0].config['budget']}")
        axr.set_title(f"verdict: {v['agreement']}", fontsize=10)
        axr.legend(fontsize=7)
    written += plots.save(fig, folder / "n_star_predicted_vs_observed")
    return written


def write_markdown(plan: Any, df: Any, result: dict[str, Any], path: Path) -> Path:
    """The human-readable report: settings, plan, observed rewards, frontier and verdict."""
    v, pred = result["verdict"], plan.predicted
    req = {"model": plan.runs[0].config["model"], "data": plan.runs[0].config["data"], "budget": pred["budget"],
           **plan.request}
    cfg0 = plan.runs[0].config
    lines = [
        "# isosim validate: predicted vs observed n*(C)", "",
        f"Model `{req.get('model')}`, data `{req.get('data')}`, budget C = {req.get('budget'):.0f} rollouts per run, "
        f"B_p = {plan.b_p}, recipe `{cfg0['recipe']}`, sampler `{cfg0['sampler']}`, max_new_tokens "
        f"{cfg0['max_new_tokens']}, validation {cfg0['val_size']} problems x {cfg0['eval_n']} samples "
        f"(k = {cfg0['eval_k']}), {len({r.seed for r in plan.runs})} seed(s) per n.", "",
        "## Verdict", "", f"**{v['agreement']}**. {v['sentence']}", "",
        f"- Saturation seen: {v['saturation_detail']}.",
        "- Tolerance: twice the combined sampling error of two runs (evaluation noise"
        + (", plus seed spread" if not v["one_seed"] else "; one seed per n, so training noise is NOT included "
           "and the tolerance is a lower bound") + ").",
        "", "## Prediction", "",
        f"- Source: {pred['source']}, simulated sweep{' (quick)' if pred.get('quick') else ''} "
        f"in `{pred['sweep_dir']}`.",
        f"- n*(C) at C = {pred['budget']:.0f}: {pred['n_star']}; fitted {n_sat_text(pred, '.1f')}"
        + (f" (90% interval {pred['n_sat_ci'][0]:.0f}-{pred['n_sat_ci'][1]:.0f})" if pred.get("n_sat_ci") else "")
        + ".",
        f"- Recommended allocation: n = {pred['n_recommended']}, B_p = {pred['b_p']}, M = {pred['m']}, "
        f"recipe {pred['recipe']}.",
        "- Simulated budgets count the simulator's rollouts; whether they transfer to this model is what this "
        "run tests.",
        "", "## Plan", "",
        "| run | n | B_p | M (steps) | lr |", "|---|---:|---:|---:|---:|",
        *[f"| {r.name} | {r.n} | {r.b_p} | {r.steps} | {r.lr:.3g} |" for r in plan.runs],
        "", *[f"- {note}" for note in plan.notes], "",
        "## Observed (last evaluation of each run)", "",
        f"Base model (step 0): validation {v['metric']} = {v['base_reward']:.3f}.", "",
        f"| n | steps | rollouts | val {v['metric']} | +/- (1 se) | val best@k | val worst@k | train reward |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *[f"| {n} | {d['step']} | {d['rollouts']:.0f} | {d['reward']:.3f} | {d['se']:.3f} | {d['val_best']:.3f} | "
          f"{d['val_worst']:.3f} | {d['train_reward']:.3f} |"
          for n, d in sorted(v["per_n"].items(), key=lambda x: int(x[0]))],
        "",
    ]
    fr = result.get("frontier")
    if fr:
        from isosim.frontier.report import INTERPOLATED, interpolated, summary_rows

        lines += ["## Frontier analysis of the real runs (isosim.frontier.report)", "",
                  "| budget | observed n* | tie band | frontier reward | learning |", "|---:|---:|---:|---:|---:|",
                  *[f"| {' | '.join(row)} |" for row in summary_rows(fr, 8)], ""]
        if any(interpolated(fr)):
            lines += [f"{INTERPOLATED} interpolated: read between a run's evaluations, above every evaluation any run "
                      "had made by that budget.", ""]
        lines += [real_n_sat_line(fr, int(df["n"].nunique())), ""]
    else:
        lines += ["## Frontier analysis", "", f"Failed: {result.get('frontier_error')}", ""]
    lines += ["## Figures", ""]
    for f in result["figures"] + (fr["figures"] if fr else []):
        if str(f).endswith(".png"):
            rel = os.path.relpath(f, path.parent)
            lines.append(f"![{Path(f).stem}]({rel})")
    lines += ["", f"Records: `{Path(plan.out) / 'runs'}/*/records.jsonl`; machine-readable: `validation.json`.", ""]
    atomic_write_text(path, "\n".join(lines))
    return path
