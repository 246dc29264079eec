"""Check a predicted allocation with real GRPO runs: plan, launch, analyse, report.

``isosim validate --model M --data FILE --budget C`` (or the functions here, in that order):

1. **Predict** (:func:`predict`): ``isosim.predict.recommend`` simulates the budget for the preset or
   measured profile and returns ``n*(C)``, the fitted saturation ``n_sat``, ``B_p`` and the recipe.
2. **Plan** (:func:`plan_ns`, :func:`make_plan`): runs at ``n`` below, at and above ``n_sat``
   (``n_sat / 4``, ``n_sat``, ``4 n_sat`` as powers of two), all at the same ``B_p`` and budget,
   with ``n`` clipped so that every run gets at least ``min_steps`` updates. Each run is a full
   ``RunConfig`` written to ``OUT/runs/<name>/config.json``; ``OUT/plan.json`` holds the plan.
3. **Launch**: ``local`` runs ``python -m llm_runs.training.train --config <run>/config.json`` one after
   another (a run whose records reach its last step is skipped; a half-done run resumes from its
   own checkpoint). ``slurm`` submits one submitit job array, one job per run, each
   ``accelerate launch ... -m llm_runs.training.train --config ...`` (requeued on preemption or timeout;
   the trainer resumes from its checkpoint).
4. **Analyse** (:func:`analyse`): the records go through the same frontier code as simulated
   sweeps (``isosim.frontier.report.build_report``); the final rewards per ``n`` decide the verdict.
   ``OUT/validation.md`` (+ ``validation.json`` and figures) reports predicted vs observed
   ``n*(C)``, whether saturation was seen, reward curves per ``n`` and the verdict.

Noise: one validation set and (by default) one seed per ``n``. The tolerance used to call two
rewards different is twice the evaluation sampling error, ``sqrt(r (1 - r) / (V N))`` per run
(V validation problems, N samples each), combined with the seed-to-seed spread where there
are several seeds. With one seed, training noise is not measured, so the tolerance is a lower
bound and the verdict says so.

Where the pieces live: the plan's ``n`` / ``B_p``, the verdict table and the report are pure and
in :mod:`isosim.validation.validation` (the verdict's decision in :mod:`isosim.validation.verdict`); the local and
SLURM launchers in :mod:`llm_runs.launch.launchers`; this module predicts, writes the plan's run
configs and analyses, and names all of them as before.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from isosim.sweeps.plans import B_MAX_EASY, B_MAX_HARD
from isosim.validation.validation import (
    B_P_FLOOR,
    MIN_STEPS,
    default_b_max,
    n_max_for,
    n_sat_text,
    plan_b_p,
    plan_ns,
    plot_validation,
    pow2,
    verdict,
    write_markdown,
)
from llm_runs.config import RunConfig, read_config_file
from llm_runs.launch.launchers import (
    DDP_MAX_PARAMS,
    FSDP_CONFIG,
    ROOT,
    Log,
    SlurmOptions,
    TrainJob,
    accelerate_command,
    check_slurm_plan,
    distributed_kind,
    executor_parameters,
    local_command,
    model_params,
    run_local,
    run_progress,
    slurm_job_specs,
    slurm_settings,
    submit_slurm,
)
from llm_runs.launch.plan import RunSpec, ValidationPlan  # noqa: F401  (named here as before)

PLANNED_KEYS = ("n", "b_p", "budget", "seed", "out", "run_id", "model", "data")  # set by the plan, not --set


# --------------------------------------------------------------------------------------------
# 1. prediction
# --------------------------------------------------------------------------------------------
def predict(budget: float, *, preset: str | None = None, profile: str | None = None, problems: int | None = None,
            metric: str = "val_avg", quick: bool = False, b_max: int | None = None) -> dict[str, Any]:
    """The simulator's answer for this budget (``isosim.predict.recommend``), as a JSON-ready dict.

    ``n_sat`` is the fitted upper level of the simulated n*(C), the plan's centre, whether or not
    it saturated by the budget (``saturated_by_budget``; ``n_sat_ci`` only when it did).
    ``recipe`` is the recipe the prediction was simulated with (``simulated_config`` holds its
    SimConfig fields): the recipe the runs are launched with. ``advised_recipe`` is the paper's
    advice for the measured share of hard problems; ``recipe_mismatch`` flags a difference.
    """
    from isosim.predict.recommend import recommend

    b_max = int(b_max or default_b_max(preset, profile))
    # bank=False: the prediction names the simulated sweep it read (sweep_dir), which the answer bank has not
    r = recommend(budget, preset=preset, profile=profile, b_max=b_max, problems=problems, metric=metric,
                  quick=quick, bank=False)
    return {
        "source": f"profile {profile}" if profile else f"preset {preset or 'easy'}",
        "budget": float(budget), "n_star": int(r.predicted["n_star"][-1]), "n_recommended": int(r.n),
        "n_sat": r.fitted_upper_n, "n_sat_ci": r.n_sat_ci, "n_sat_reason": r.n_sat_reason,
        "n_tol": int(r.predicted["n_tol"][-1]), "n_tie_hi": int(r.predicted["n_tie_hi"][-1]),
        "learning": bool(r.predicted["learning"][-1]), "b_p": int(r.b_p), "m": int(r.m), "recipe": r.recipe,
        "advised_recipe": r.advised_recipe, "recipe_mismatch": r.recipe_mismatch, "hard_share": r.hard_share,
        "simulated_config": r.simulated_config, "b_max": b_max,
        "lr": float(r.lr), "metric": metric, "quick": quick, "sweep_dir": r.sweep_dir,
        "train_size": r.train_size, "train_size_source": r.train_size_source,
        "saturated_by_budget": r.saturated_by_budget,
        "curve": {"budgets": [float(b) for b in r.predicted["budgets"]],
                  "n_star": [int(n) for n in r.predicted["n_star"]]},
        "reasons": r.reasons,
    }


# --------------------------------------------------------------------------------------------
# 2. the plan
# --------------------------------------------------------------------------------------------

def parse_sets(items: list[str]) -> dict[str, Any]:
    """``key=value`` strings (``--set max_new_tokens=64``) -> settings; values typed by RunConfig."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key:
            raise IsosimError(f"--set {item!r}: expected key=value (a llm_runs.training.train setting)")
        out[key] = None if value.lower() == "none" else value
    return out


def base_settings(config_file: str | None, sets: dict[str, Any]) -> dict[str, Any]:
    """Run settings shared by every run: a config file, then ``--set`` overrides."""
    settings: dict[str, Any] = read_config_file(config_file) if config_file else {}
    settings.update(sets)
    fixed = sorted(k for k in sets if k in PLANNED_KEYS)
    if fixed:
        raise IsosimError(f"--set {', '.join(fixed)}: set by the plan; use --model, --data, --budget, --n, "
                          "--b-p, --seeds and --out instead")
    for k in PLANNED_KEYS:
        settings.pop(k, None)
    return settings


def count_train_problems(model: str, data: str, settings: dict[str, Any]) -> int:
    """Training problems a run will see (after difficulty filtering and the validation hold-out)."""
    from llm_runs.training.train import load_data

    cfg = RunConfig.from_dict({**settings, "model": model, "data": data, "n": 2, "b_p": 1, "budget": 2},
                              source="validate settings")
    return len(load_data(cfg)[0])


def launched_recipe(predicted: dict[str, Any]) -> dict[str, Any]:
    """RunConfig settings that reproduce the recipe the prediction was simulated with."""
    from llm_runs.config import RECIPES

    recipe = predicted.get("recipe", "easy")
    if recipe in RECIPES:
        return {"recipe": recipe}
    if recipe == "kl-only":
        return {"recipe": "easy", "entropy_coef": 0.0}
    if recipe == "entropy-only":
        return {"recipe": "hard", "entropy_coef": RECIPES["easy"]["entropy_coef"]}
    raise IsosimError(f"unknown simulated recipe {recipe!r}")


def recipe_of(cfg: RunConfig) -> str:
    """``easy`` / ``hard`` / ``kl-only`` / ``entropy-only`` by which of KL and entropy bonus are on."""
    kl, ent = (cfg.kl_coef or 0) > 0, (cfg.entropy_coef or 0) > 0
    return {(True, True): "easy", (False, False): "hard", (True, False): "kl-only", (False, True): "entropy-only"}[
        (kl, ent)]


def check_ns(ns: list[int], budget: int, *, b_p: int | None = None, min_steps: int = MIN_STEPS,
             b_max: int | None = None) -> list[str]:
    """Refuse an ``--n`` no run can use: n < 2 always; with B_p (and B_max) known, an n below one
    step or with a batch above B_max. An n given whose run gets fewer than ``min_steps`` steps is
    run as asked, with a note (returned). Cheap: ``validate`` calls it before the prediction, and
    the plan again with the predicted B_p."""
    notes = []
    for n in sorted(set(int(n) for n in ns)):
        if n < 2:
            raise IsosimError(f"--n {n}: GRPO needs n >= 2 (a group of one has zero advantage)")
        if b_p is None:
            continue
        if budget // (b_p * n) < 1:
            raise IsosimError(f"--n {n}: budget {budget} is below one step at B_p = {b_p} ({b_p * n} rollouts)")
        if b_max is not None and b_p * n > b_max:
            raise IsosimError(f"--n {n}: B_p * n = {b_p * n} exceeds B_max = {b_max} (--b-max)")
        if budget // (b_p * n) < min_steps:
            notes.append(f"n = {n} (given by --n) gets {budget // (b_p * n)} update steps at B_p = {b_p}, fewer "
                         f"than --min-steps {min_steps}: its curve has few points (kept as asked)")
    return notes


def settings_note(model: str, user: dict[str, Any], sources: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    """The runs' settings (the card of a shipped ``model`` under ``user``) and a note that says
    where each setting given came from (``sources``: setting -> ``--set`` / ``--config FILE``)."""
    from llm_runs.cards import defaults_source, with_defaults

    merged, used = with_defaults(model, user)
    parts = []
    if used:
        parts.append(f"from the {defaults_source(model)}: " + ", ".join(f"{k}={v!r}" for k, v in used.items()))
    by_source: dict[str, list[str]] = {}
    for k, v in user.items():
        by_source.setdefault(sources.get(k, "the launcher"), []).append(f"{k}={v!r}")
    parts += [f"from {src}: {', '.join(items)}" for src, items in by_source.items()]
    return merged, ("settings " + "; ".join(parts) + "; the rest RunConfig's defaults") if parts else None


def make_plan(*, model: str, data: str, budget: int, predicted: dict[str, Any], settings: dict[str, Any], out: str,
              b_p: int | None = None, n_list: list[int] | None = None, seeds: int = 1, min_steps: int = MIN_STEPS,
              b_max: int | None = None, request: dict[str, Any] | None = None,
              n_source: str = "n given by --n") -> ValidationPlan:
    """Turn a prediction into runs: n around n_sat (or ``n_list``), one B_p, full run configs.

    Every run gets at least ``min_steps`` updates and a batch ``B_p * n`` within ``b_max``
    (default: the prediction's, the paper's B_max for the set). Without ``b_p`` the recommended
    B_p is halved as needed (``plan_b_p``). The runs train with the recipe the prediction was
    simulated with unless the settings say otherwise; a difference is flagged in the notes.
    ``n_source`` is the note that says where a given ``n_list`` comes from.
    """
    if seeds < 1:
        raise IsosimError("seeds must be >= 1")
    if min_steps < 1:
        raise IsosimError("min_steps must be >= 1")
    b_max = int(b_max or predicted.get("b_max") or B_MAX_EASY)
    if b_max < 2:
        raise IsosimError(f"B_max must be >= 2, got {b_max}")
    notes: list[str] = []
    centre, centre_name = predicted.get("n_sat"), "n_sat"
    if centre is None:
        centre_name = "n*"
        centre = predicted.get("n_tol") or predicted["n_star"]
        notes.append(f"the simulation shows no learning beyond noise at this budget: no n_sat, the plan centres "
                     f"on the simulated n* = {centre}; the runs will likely not rank the allocations "
                     "(the budget is probably too small to test the prediction)")
    given_b_p = b_p is not None
    b_p = int(b_p or predicted["b_p"])
    if b_p < 1:
        raise IsosimError(f"B_p must be >= 1, got {b_p}")
    if n_list:
        ns, notes = sorted(set(int(n) for n in n_list)), notes + [n_source]
        notes += check_ns(ns, budget, b_p=b_p, min_steps=min_steps, b_max=b_max)
    else:
        if not given_b_p:
            b_p, more = plan_b_p(centre, budget, b_p, min_steps=min_steps, b_max=b_max)
            notes += more
        ns, more = plan_ns(centre, budget, b_p, min_steps=min_steps, b_max=b_max, name=centre_name)
        notes += more
    settings = dict(settings)
    user_recipe = {k: settings[k] for k in ("recipe", "kl_coef", "entropy_coef") if k in settings}
    if not user_recipe:
        settings.update(launched_recipe(predicted))
    runs = []
    for n in ns:
        for seed in range(seeds):
            name = f"n{n}_bp{b_p}_s{seed}"
            run_dir = str(Path(out) / "runs" / name)
            cfg = RunConfig.from_dict({**settings, "model": model, "data": data, "n": n, "b_p": b_p,
                                       "budget": int(budget), "seed": seed, "out": run_dir, "run_id": name},
                                      source=f"run {name}")
            runs.append(RunSpec(name=name, n=n, b_p=b_p, seed=seed, steps=cfg.total_steps, lr=float(cfg.lr),
                                dir=run_dir, config=cfg.to_dict()))
    launched = recipe_of(RunConfig.from_dict(runs[0].config, source="plan")) if runs else None
    simulated = predicted.get("recipe")
    if simulated and launched != simulated:
        notes.append(f"RECIPE MISMATCH: the prediction was simulated with the {simulated} recipe but the runs "
                     f"train with the {launched} recipe ({user_recipe}): the verdict tests a recipe that was not "
                     "simulated")
    if predicted.get("recipe_mismatch"):
        notes.append(f"the paper advises the {predicted.get('advised_recipe')} recipe for this set "
                     f"({predicted.get('hard_share', 0):.0%} hard problems); the prediction (and so the runs) "
                     f"use the simulated {simulated} recipe")
    return ValidationPlan(request=request or {}, predicted=predicted, ns=ns, b_p=b_p, notes=notes, runs=runs,
                          out=str(out), b_max=b_max, min_steps=min_steps)


def write_plan(plan: ValidationPlan) -> Path:
    """``OUT/plan.json`` and every run's ``config.json`` (a full RunConfig, so resuming matches it)."""
    out = Path(plan.out)
    out.mkdir(parents=True, exist_ok=True)
    for run in plan.runs:
        Path(run.dir).mkdir(parents=True, exist_ok=True)
        if not run.config_path.is_file():  # the trainer rewrites it identically; never clobber a run's own
            _write_json(run.config_path, run.config)
    return _write_json(out / "plan.json", plan.to_json())


def load_or_make_plan(out: str | Path, request: dict[str, Any], build: Callable[[], ValidationPlan]) -> ValidationPlan:
    """Reuse ``OUT/plan.json`` when it was made for the same request; else build a new plan."""
    path = Path(out) / "plan.json"
    if path.is_file():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IsosimError(f"{path}: unreadable plan ({type(exc).__name__}: {exc}); use another --out") from None
        if not isinstance(doc, dict) or not {"request", "runs"} <= set(doc):
            kind = ("the plan of an isosim explore sweep" if isinstance(doc, dict) and "cells" in doc
                    else "no validation plan")
            raise IsosimError(f"{out} holds another command's folder ({path.name} is {kind}, not a validation's): "
                              "use another --out")
        try:
            saved = ValidationPlan.from_json(doc)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise IsosimError(f"{path}: unreadable plan ({type(exc).__name__}: {exc}); use another --out") from None
        if saved.request != request:
            diff = sorted(k for k in set(saved.request) | set(request) if saved.request.get(k) != request.get(k))
            raise IsosimError(f"{out} holds a validation planned with other settings ({', '.join(diff)}): "
                              "rerun it as it was, or use another --out")
        return saved
    return build()


def _write_json(path: Path, obj: Any) -> Path:
    from isosim.files import write_json

    return write_json(path, obj, indent=1, mkdir=False)

# --------------------------------------------------------------------------------------------
# 4. analysis, verdict and report
# --------------------------------------------------------------------------------------------
def _final_rows(plan: ValidationPlan) -> Any:
    import pandas as pd

    frames = []
    for run in plan.runs:
        rec = Path(run.dir) / "records.jsonl"
        if rec.is_file() and rec.stat().st_size:
            frames.append(pd.read_json(rec, lines=True))
    if not frames:
        raise IsosimError(f"{plan.out}: no run has records yet")
    return pd.concat(frames, ignore_index=True)


def analyse(plan: ValidationPlan, metric: str = "avg", n_boot: int = 100, log: Log = print) -> dict[str, Any]:
    """Frontier analysis (isosim.frontier.report) of the runs, the verdict, figures and ``OUT/validation.md``."""
    from isosim import records
    from isosim.frontier.report import build_report, metric_column

    from isosim.files import remove_stale_tmp

    metric = metric_column(metric)
    out = Path(plan.out)
    for folder in (out, out / "figures"):  # analysis/ is tidied by build_report
        remove_stale_tmp(folder)
    unfinished = [r.name for r in plan.runs if not run_progress(r)["finished"]]
    if unfinished:
        raise IsosimError(f"runs not finished: {', '.join(unfinished)}; rerun the same command to finish them")
    df = _final_rows(plan)
    df = records.normalize(df, source=str(out / "runs"))
    frontier: dict[str, Any] | None = None
    frontier_error = None
    try:
        frontier = build_report(df, out / "analysis", metric=metric, n_boot=n_boot)
    except IsosimError as exc:  # few points per run can defeat the fits; the verdict does not need them
        frontier_error = str(exc)
        log(f"frontier analysis failed: {exc}")
    f_n_star = int(frontier["n_star"][-1]) if frontier else None
    v = verdict(plan, df, metric=metric, frontier_n_star=f_n_star)
    figures = plot_validation(plan, df, metric, frontier, out / "figures", v)
    result = {"verdict": v, "frontier": None if frontier is None else {
        "budgets": frontier["budgets"], "n_star": frontier["n_star"], "reward": frontier["reward"],
        **{k: frontier.get(k) for k in ("measured_by", "n_tol", "n_tie_hi", "learning")},
        "n_sat": frontier["fit"]["n_sat"], "figures": frontier["figures"]},
        "frontier_error": frontier_error, "figures": [str(f) for f in figures], "plan": plan.to_json()}
    _write_json(out / "validation.json", result)
    write_markdown(plan, df, result, out / "validation.md")
    log(v["sentence"])
    log(f"report: {out / 'validation.md'}")
    return result


# --------------------------------------------------------------------------------------------
# printing the plan
# --------------------------------------------------------------------------------------------
def describe(plan: ValidationPlan, launcher: str, opts: SlurmOptions | None = None,
             search: str | None = None) -> list[str]:
    """Lines that show the plan and exactly what would be launched (``--dry-run`` prints them).
    ``search`` (``adaptive``, ``lines`` or ``sbi``): an ``--adaptive`` search runs the plan, which these
    lines describe (each run's command is then its full form; the search pauses runs at rungs)."""
    pred = plan.predicted
    lines = [f"prediction ({pred['source']}): n*(C={pred['budget']:.0f}) = {pred['n_star']}, "
             + n_sat_text(pred, ".1f")
             + f", recipe {pred['recipe']}, training-set size "
             f"{pred.get('train_size')} ({pred.get('train_size_source', '?')})",
             f"plan: n = {plan.ns} at B_p = {plan.b_p}, budget {plan.runs[0].config['budget']} rollouts per run"
             + (f" (limits: B_p * n <= {plan.b_max}, >= {plan.min_steps} steps)" if plan.b_max else "")]
    lines += [f"  note: {n}" for n in plan.notes]
    if search is not None:
        from llm_runs.launch.adaptive import describe_search

        lines += describe_search(plan, search)
    for r in plan.runs:
        prog = run_progress(r)
        state = "finished" if prog["finished"] else (f"at step {prog['step']}" if prog["step"] else "not started")
        lines.append(f"  {r.name}: n={r.n} B_p={r.b_p} M={r.steps} lr={r.lr:.3g} [{state}]  {r.dir}")
    if launcher == "local":
        lines.append("commands (each run's full form; the search launches them a rung at a time, adding "
                     "--pause-at-rollouts):" if search is not None else "commands (run one after another):")
        lines += ["  " + shlex.join(local_command(r)) for r in plan.runs]
    else:
        spec = slurm_job_specs(plan, opts or SlurmOptions())
        lines.append(f"submitit.SlurmExecutor(folder={spec['folder']!r}).update_parameters(**{spec['executor']!r})")
        lines.append(f"job array of {len(spec['jobs'])} job(s), one task per node, each running:")
        lines += ["  " + shlex.join(j["command"]) for j in spec["jobs"]]
        if opts is not None and opts.nodes > 1:
            lines.append("  ({machine_rank} and {main_process_ip} are filled in on each node from SLURM_NODEID "
                         "and the job's first host)")
        if spec["skipped"]:
            lines.append(f"  (finished, not submitted: {', '.join(spec['skipped'])})")
    return lines


__all__ = [  # (the launchers and the pure plan / verdict / report parts are importable from here as before)
    "B_MAX_EASY", "B_MAX_HARD", "B_P_FLOOR", "DDP_MAX_PARAMS", "FSDP_CONFIG", "MIN_STEPS", "PLANNED_KEYS", "ROOT",
    "RunSpec", "SlurmOptions", "TrainJob", "ValidationPlan", "accelerate_command", "analyse", "base_settings",
    "check_ns", "check_slurm_plan", "count_train_problems", "default_b_max", "describe", "distributed_kind",
    "executor_parameters", "launched_recipe", "load_or_make_plan", "local_command", "make_plan", "model_params",
    "n_max_for", "parse_sets", "plan_b_p", "plan_ns", "plot_validation", "pow2", "predict", "recipe_of", "run_local",
    "run_progress", "settings_note", "slurm_job_specs", "slurm_settings", "submit_slurm", "verdict",
    "write_markdown", "write_plan",
]
