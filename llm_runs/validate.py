"""Check a predicted allocation with real GRPO runs: plan, launch, analyse, report.

``isosim validate --model M --data FILE --budget C`` (or the functions here, in that order):

1. **Predict** (:func:`predict`): ``isosim.recommend`` simulates the budget for the preset or
   measured profile and returns ``n*(C)``, the fitted saturation ``n_sat``, ``B_p`` and the recipe.
2. **Plan** (:func:`plan_ns`, :func:`make_plan`): runs at ``n`` below, at and above ``n_sat``
   (``n_sat / 4``, ``n_sat``, ``4 n_sat`` as powers of two), all at the same ``B_p`` and budget,
   with ``n`` clipped so that every run gets at least ``min_steps`` updates. Each run is a full
   ``RunConfig`` written to ``OUT/runs/<name>/config.json``; ``OUT/plan.json`` holds the plan.
3. **Launch**: ``local`` runs ``python -m llm_runs.train --config <run>/config.json`` one after
   another (a run whose records reach its last step is skipped; a half-done run resumes from its
   own checkpoint). ``slurm`` submits one submitit job array, one job per run, each
   ``accelerate launch ... -m llm_runs.train --config ...`` (requeued on preemption or timeout;
   the trainer resumes from its checkpoint).
4. **Analyse** (:func:`analyse`): the records go through the same frontier code as simulated
   sweeps (``isosim.report.build_report``); the final rewards per ``n`` decide the verdict.
   ``OUT/validation.md`` (+ ``validation.json`` and figures) reports predicted vs observed
   ``n*(C)``, whether saturation was seen, reward curves per ``n`` and the verdict.

Noise: one validation set and (by default) one seed per ``n``. The tolerance used to call two
rewards different is twice the evaluation sampling error, ``sqrt(r (1 - r) / (V N))`` per run
(V validation problems, N samples each), combined with the seed-to-seed spread where there
are several seeds. With one seed, training noise is not measured, so the tolerance is a lower
bound and the verdict says so.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from isosim.errors import IsosimError
from llm_runs.config import RunConfig, read_config_file

ROOT = Path(__file__).resolve().parents[1]
PLANNED_KEYS = ("n", "b_p", "budget", "seed", "out", "run_id", "model", "data")  # set by the plan, not --set
Log = Callable[[str], None]


# --------------------------------------------------------------------------------------------
# 1. prediction
# --------------------------------------------------------------------------------------------
B_MAX_EASY, B_MAX_HARD = 65536, 16384
"""The paper's largest rollout batch B_p * n for easy and hard sets (PAPER.md)."""
MIN_STEPS = 20
"""Default smallest number of update steps of a planned run."""
B_P_FLOOR = 8
"""The plan halves B_p to fit the largest n, but not below this."""


def default_b_max(preset: str | None = None, profile: str | None = None) -> int:
    """The paper's B_max for the set: 16,384 when at least half its problems are hard (base
    pass@1 < 1/16, measured on the profile), else 65,536."""
    from isosim.recommend import hard_share

    return B_MAX_HARD if hard_share(profile or preset or "easy") >= 0.5 else B_MAX_EASY


def predict(budget: float, *, preset: str | None = None, profile: str | None = None, problems: int | None = None,
            metric: str = "val_avg", quick: bool = False, b_max: int | None = None) -> dict[str, Any]:
    """The simulator's answer for this budget (``isosim.recommend``), as a JSON-ready dict.

    ``recipe`` is the recipe the prediction was simulated with (``simulated_config`` holds its
    SimConfig fields): the recipe the runs are launched with. ``advised_recipe`` is the paper's
    advice for the measured share of hard problems; ``recipe_mismatch`` flags a difference.
    """
    from isosim.recommend import recommend

    b_max = int(b_max or default_b_max(preset, profile))
    r = recommend(budget, preset=preset, profile=profile, b_max=b_max, problems=problems, metric=metric,
                  quick=quick)
    return {
        "source": f"profile {profile}" if profile else f"preset {preset or 'easy'}",
        "budget": float(budget), "n_star": int(r.predicted["n_star"][-1]), "n_recommended": int(r.n),
        "n_sat": None if r.n_sat is None else float(r.n_sat), "n_sat_ci": r.n_sat_ci,
        "n_tol": int(r.predicted["n_tol"][-1]), "n_tie_hi": int(r.predicted["n_tie_hi"][-1]),
        "learning": bool(r.predicted["learning"][-1]), "b_p": int(r.b_p), "m": int(r.m), "recipe": r.recipe,
        "advised_recipe": r.advised_recipe, "recipe_mismatch": r.recipe_mismatch, "hard_share": r.hard_share,
        "simulated_config": r.simulated_config, "b_max": b_max,
        "lr": float(r.lr), "metric": metric, "quick": quick, "sweep_dir": r.sweep_dir,
        "curve": {"budgets": [float(b) for b in r.predicted["budgets"]],
                  "n_star": [int(n) for n in r.predicted["n_star"]]},
        "reasons": r.reasons,
    }


# --------------------------------------------------------------------------------------------
# 2. the plan
# --------------------------------------------------------------------------------------------
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
            n_min: int = 2, b_max: int | None = None) -> tuple[list[int], list[str]]:
    """Three group sizes around ``n_sat`` (``n_sat/factor``, ``n_sat``, ``factor*n_sat``, powers of two).

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
    for label, n in zip((f"n_sat/{factor}", "n_sat", f"{factor}*n_sat"), wanted):
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
        notes.append(f"no planned n lies above the predicted saturation ({pow2(n_sat)}): the plan cannot see "
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


@dataclass
class RunSpec:
    name: str
    n: int
    b_p: int
    seed: int
    steps: int
    lr: float
    dir: str
    config: dict[str, Any] = field(repr=False)

    @property
    def config_path(self) -> Path:
        return Path(self.dir) / "config.json"


@dataclass
class ValidationPlan:
    request: dict[str, Any]  # what the user asked for (a rerun must ask the same to resume)
    predicted: dict[str, Any]
    ns: list[int]
    b_p: int
    notes: list[str]
    runs: list[RunSpec]
    out: str
    b_max: int | None = None
    min_steps: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ValidationPlan:
        d = dict(d)
        d["runs"] = [RunSpec(**r) for r in d["runs"]]
        return cls(**d)


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``key=value`` strings (``--set max_new_tokens=64``) -> settings; values typed by RunConfig."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not key:
            raise IsosimError(f"--set {item!r}: expected key=value (a llm_runs.train setting)")
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
    from llm_runs.train import load_data

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


def make_plan(*, model: str, data: str, budget: int, predicted: dict[str, Any], settings: dict[str, Any], out: str,
              b_p: int | None = None, n_list: list[int] | None = None, seeds: int = 1, min_steps: int = MIN_STEPS,
              b_max: int | None = None, request: dict[str, Any] | None = None) -> ValidationPlan:
    """Turn a prediction into runs: n around n_sat (or ``n_list``), one B_p, full run configs.

    Every run gets at least ``min_steps`` updates and a batch ``B_p * n`` within ``b_max``
    (default: the prediction's, the paper's B_max for the set). Without ``b_p`` the recommended
    B_p is halved as needed (``plan_b_p``). The runs train with the recipe the prediction was
    simulated with unless the settings say otherwise; a difference is flagged in the notes.
    """
    if seeds < 1:
        raise IsosimError("seeds must be >= 1")
    if min_steps < 1:
        raise IsosimError("min_steps must be >= 1")
    b_max = int(b_max or predicted.get("b_max") or B_MAX_EASY)
    if b_max < 2:
        raise IsosimError(f"B_max must be >= 2, got {b_max}")
    notes: list[str] = []
    centre = predicted.get("n_sat")
    if centre is None:
        centre = predicted.get("n_tol") or predicted["n_star"]
        notes.append(f"the simulation shows no learning beyond noise at this budget: no n_sat, the plan centres "
                     f"on the simulated n* = {centre}; the runs will likely not rank the allocations "
                     "(the budget is probably too small to test the prediction)")
    given_b_p = b_p is not None
    b_p = int(b_p or predicted["b_p"])
    if b_p < 1:
        raise IsosimError(f"B_p must be >= 1, got {b_p}")
    if n_list:
        ns, notes = sorted(set(int(n) for n in n_list)), notes + ["n given by --n"]
        for n in ns:
            if n < 2:
                raise IsosimError(f"--n {n}: GRPO needs n >= 2 (a group of one has zero advantage)")
            if budget // (b_p * n) < 1:
                raise IsosimError(f"--n {n}: budget {budget} is below one step at B_p = {b_p} ({b_p * n} rollouts)")
            if budget // (b_p * n) < min_steps:
                raise IsosimError(f"--n {n}: budget {budget} gives {budget // (b_p * n)} steps at B_p = {b_p}, "
                                  f"fewer than --min-steps {min_steps}")
            if b_p * n > b_max:
                raise IsosimError(f"--n {n}: B_p * n = {b_p * n} exceeds B_max = {b_max} (--b-max)")
    else:
        if not given_b_p:
            b_p, more = plan_b_p(centre, budget, b_p, min_steps=min_steps, b_max=b_max)
            notes += more
        ns, more = plan_ns(centre, budget, b_p, min_steps=min_steps, b_max=b_max)
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
            saved = ValidationPlan.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise IsosimError(f"{path}: unreadable plan ({type(exc).__name__}: {exc}); use another --out") from None
        if saved.request != request:
            diff = sorted(k for k in set(saved.request) | set(request) if saved.request.get(k) != request.get(k))
            raise IsosimError(f"{out} holds a validation planned with other settings ({', '.join(diff)}): "
                              "rerun it as it was, or use another --out")
        return saved
    return build()


def _num(v: float | None, spec: str) -> str:
    """A number formatted with ``spec``, or ``none`` (e.g. no fitted n_sat)."""
    return "none" if v is None else format(v, spec)


def _write_json(path: Path, obj: Any) -> Path:
    from isosim.files import write_json

    return write_json(path, obj, indent=1, mkdir=False)


# --------------------------------------------------------------------------------------------
# 3a. local launcher
# --------------------------------------------------------------------------------------------
def local_command(run: RunSpec, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "llm_runs.train", "--config", str(run.config_path)]


def run_progress(run: RunSpec) -> dict[str, Any]:
    """How far a run got: {"finished", "step", "rollouts"} from its records and checkpoint."""
    step, rollouts = 0, 0.0
    rec = Path(run.dir) / "records.jsonl"
    if rec.is_file():
        for line in rec.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line: the trainer cuts it on resume
            step, rollouts = max(step, int(row.get("step", 0))), max(rollouts, float(row.get("rollouts", 0)))
    state = Path(run.dir) / "checkpoint" / "trainer_state.json"
    if state.is_file():
        try:
            step = max(step, int(json.loads(state.read_text(encoding="utf-8"))["step"]))
        except (ValueError, KeyError, OSError):
            pass
    return {"finished": step >= run.steps, "step": step, "rollouts": rollouts}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_local(plan: ValidationPlan, log: Log = print, python: str | None = None) -> None:
    """Run the plan's runs one after another; finished runs are skipped, half-done ones resume."""
    for i, run in enumerate(plan.runs, start=1):
        prog = run_progress(run)
        head = f"[{i}/{len(plan.runs)}] {run.name} (n={run.n}, B_p={run.b_p}, M={run.steps})"
        if prog["finished"]:
            log(f"{head}: finished earlier, not rerun")
            continue
        train_log = Path(run.dir) / "train.log"
        log(f"{head}: {'resuming at step ' + str(prog['step']) if prog['step'] else 'starting'} (log: {train_log})")
        t0 = time.perf_counter()
        with train_log.open("a", encoding="utf-8") as fh:
            fh.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(local_command(run, python))}\n")
            fh.flush()
            # In the caller's folder: the run configs' paths (data, out) are relative to it.
            rc = subprocess.call(local_command(run, python), stdout=fh, stderr=subprocess.STDOUT, env=_env())
        if rc != 0:
            last = [ln for ln in train_log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
            raise IsosimError(f"run {run.name} failed (exit {rc}): {last[-1][:300] if last else 'no output'} "
                              f"(full log: {train_log}); rerun to resume")
        log(f"{head}: done in {time.perf_counter() - t0:.0f}s")


# --------------------------------------------------------------------------------------------
# 3b. SLURM launcher (submitit job array; each job an accelerate launch)
# --------------------------------------------------------------------------------------------
@dataclass
class SlurmOptions:
    partition: str | None = None
    time_min: int = 24 * 60
    nodes: int = 1
    gpus_per_node: int = 8
    cpus_per_task: int = 32
    mem_gb: int | None = None
    array_parallelism: int = 16
    account: str | None = None
    qos: str | None = None
    accelerate_config: str | None = None
    main_process_port: int = 29500
    distributed: str = "auto"
    """auto (FSDP for models that do not fit plain DDP, see ``distributed_kind``), ddp or fsdp"""

    def __post_init__(self) -> None:
        for name in ("time_min", "nodes", "gpus_per_node", "cpus_per_task", "array_parallelism"):
            if getattr(self, name) < 1:
                raise IsosimError(f"slurm {name.replace('_', '-')} must be >= 1")
        if self.distributed not in ("auto", "ddp", "fsdp"):
            raise IsosimError(f"--distributed must be auto, ddp or fsdp (got {self.distributed!r})")
        if self.accelerate_config and not Path(self.accelerate_config).is_file():
            raise IsosimError(f"{self.accelerate_config}: no such accelerate config file")


def executor_parameters(opts: SlurmOptions, name: str = "isosim-validate") -> dict[str, Any]:
    """``submitit.SlurmExecutor.update_parameters`` keywords for one job of the array.

    One task per node: ``accelerate launch`` starts the per-GPU processes itself.
    """
    params: dict[str, Any] = {
        "job_name": name, "time": int(opts.time_min), "nodes": int(opts.nodes), "ntasks_per_node": 1,
        "gpus_per_node": int(opts.gpus_per_node), "cpus_per_task": int(opts.cpus_per_task),
        "array_parallelism": int(opts.array_parallelism), "signal_delay_s": 120,
    }
    for key, value in (("partition", opts.partition), ("account", opts.account), ("qos", opts.qos)):
        if value:
            params[key] = value
    if opts.mem_gb:
        params["mem"] = f"{int(opts.mem_gb)}GB"
    return params


FSDP_CONFIG = ROOT / "configs" / "accelerate_fsdp_8gpu.yaml"
DDP_MAX_PARAMS = 3e9
"""Plain DDP keeps a full copy of weights, gradients and AdamW state on every GPU (~16 bytes per
parameter in bf16 + fp32 Adam): models above ~3B parameters do not fit an 80 GB GPU that way."""


def model_params(model: str) -> float | None:
    """Parameter count of a model: from a local ``config.json`` (an estimate from its shapes) or
    from a size in its name (``Qwen2.5-7B-Instruct``: 7e9, ``SmolLM2-135M``: 1.35e8); None if unknown."""
    import re

    cfg_file = Path(model) / "config.json"
    if cfg_file.is_file():
        try:
            c = json.loads(cfg_file.read_text(encoding="utf-8"))
            h, layers, vocab = int(c["hidden_size"]), int(c["num_hidden_layers"]), int(c["vocab_size"])
            inter = int(c.get("intermediate_size", 4 * h))
            embed = vocab * h * (1 if c.get("tie_word_embeddings", False) else 2)
            return float(embed + layers * (4 * h * h + 3 * h * inter))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    name = Path(model).name if not model.startswith("hf:") else model[3:]
    found = re.findall(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([bBmM])(?![A-Za-z0-9])", name)
    if not found:
        return None
    value, unit = found[-1]
    return float(value) * (1e9 if unit in "bB" else 1e6)


def distributed_kind(model: str, opts: SlurmOptions) -> tuple[str, str]:
    """(``config``/``single``/``ddp``/``fsdp``, why) for a run of ``model`` under ``opts``."""
    if opts.accelerate_config:
        return "config", f"--accelerate-config {opts.accelerate_config}"
    if opts.nodes * opts.gpus_per_node == 1:
        return "single", "one process"
    if opts.distributed != "auto":
        return opts.distributed, f"--distributed {opts.distributed}"
    params = model_params(model)
    if params is None:
        return "fsdp", "model size unknown: FSDP (works for any size)"
    if params > DDP_MAX_PARAMS:
        return "fsdp", f"~{params / 1e9:.1f}B parameters do not fit plain DDP with AdamW (> {DDP_MAX_PARAMS / 1e9:g}B)"
    return "ddp", f"~{params / 1e9:.2f}B parameters fit plain DDP"


def accelerate_command(run: RunSpec, opts: SlurmOptions) -> list[str]:
    """``python -m accelerate.commands.launch ... -m llm_runs.train --config <run>/config.json``.

    ``accelerate`` comes from the running interpreter (not from PATH). Plain DDP (``--multi_gpu``)
    for models that fit it, FSDP (``configs/accelerate_fsdp_8gpu.yaml``) otherwise; a given
    ``--accelerate-config`` wins. With several nodes, ``{machine_rank}`` and ``{main_process_ip}``
    are filled in on each node from SLURM's environment when the job starts (see :class:`TrainJob`).
    """
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    kind, _ = distributed_kind(str(run.config.get("model", "")), opts)
    if opts.accelerate_config:
        cmd += ["--config_file", str(opts.accelerate_config)]
    elif kind == "fsdp":
        cmd += ["--config_file", str(FSDP_CONFIG)]
    procs = opts.nodes * opts.gpus_per_node
    cmd += ["--num_processes", str(procs), "--num_machines", str(opts.nodes)]
    if kind == "ddp":
        cmd += ["--multi_gpu"]
    if opts.nodes > 1:
        cmd += ["--machine_rank", "{machine_rank}", "--main_process_ip", "{main_process_ip}",
                "--main_process_port", str(opts.main_process_port)]
    return cmd + ["-m", "llm_runs.train", "--config", str(Path(run.config_path).resolve())]


def slurm_settings(model: str, settings: dict[str, Any], opts: SlurmOptions) -> tuple[dict[str, Any], list[str]]:
    """Run settings a SLURM plan needs: the vLLM sampler under FSDP (the hf sampler needs the whole
    model on every process) unless one was chosen."""
    settings, notes = dict(settings), []
    kind, why = distributed_kind(model, opts)
    notes.append(f"distributed: {kind} ({why})")
    if kind == "fsdp" and "sampler" not in settings:
        settings["sampler"] = "vllm"
        notes.append("sampler: vllm (FSDP shards the model; the hf sampler needs it whole on every process)")
    notes.append("preemption: the trainer checkpoints and exits on SIGTERM / SIGUSR1 (untested under SLURM); "
                 "a rerun resumes at that step")
    return settings, notes


def check_slurm_plan(plan: ValidationPlan, opts: SlurmOptions) -> None:
    """Refuse, before anything is queued, what a job would fail on when it starts."""
    procs = opts.nodes * opts.gpus_per_node
    for run in plan.runs:
        if run.b_p % procs:
            raise IsosimError(f"run {run.name}: B_p = {run.b_p} is not a multiple of the {procs} processes "
                              f"({opts.nodes} node(s) x {opts.gpus_per_node} GPUs): each process samples whole "
                              "problem groups; use --b-p, --nodes or --gpus-per-node so that it divides")
        kind, _ = distributed_kind(str(run.config.get("model", "")), opts)
        if kind == "fsdp" and run.config.get("sampler") == "hf":
            raise IsosimError(f"run {run.name}: the hf sampler cannot run under FSDP; use --set sampler=vllm, "
                              "or --distributed ddp for a model that fits")


def slurm_job_specs(plan: ValidationPlan, opts: SlurmOptions) -> dict[str, Any]:
    """What ``--launcher slurm`` submits: executor parameters and one command per unfinished run."""
    jobs = [{"name": r.name, "run_dir": str(Path(r.dir).resolve()), "command": accelerate_command(r, opts)}
            for r in plan.runs if not run_progress(r)["finished"]]
    return {"folder": str(Path(plan.out) / "slurm"), "executor": executor_parameters(opts), "jobs": jobs,
            "skipped": [r.name for r in plan.runs if run_progress(r)["finished"]]}


class TrainJob:
    """A submitit job: one run's ``accelerate launch``. Requeued on preemption/timeout (it resumes)."""

    def __call__(self, command: list[str], run_dir: str, cwd: str | None = None) -> int:
        env = _env()
        if "{machine_rank}" in command:
            rank = env.get("SLURM_NODEID", "0")
            hosts = subprocess.run(["scontrol", "show", "hostnames", env.get("SLURM_JOB_NODELIST", "")],
                                   capture_output=True, text=True).stdout.split()
            ip = hosts[0] if hosts else "localhost"
            command = [c.replace("{machine_rank}", rank).replace("{main_process_ip}", ip) for c in command]
        with (Path(run_dir) / "train.log").open("a", encoding="utf-8") as fh:
            rc = subprocess.call(command, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        if rc != 0:
            raise RuntimeError(f"{shlex.join(command)} exited with {rc} (see {run_dir}/train.log)")
        return rc

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(TrainJob(), *args, **kwargs)


def submit_slurm(plan: ValidationPlan, opts: SlurmOptions, wait: bool = True, log: Log = print) -> list[Any]:
    """Submit the unfinished runs as one job array; optionally wait for all of them."""
    try:
        import submitit
    except ImportError:
        raise IsosimError("--launcher slurm needs submitit (pip install 'isosim[slurm]')") from None
    check_slurm_plan(plan, opts)
    spec = slurm_job_specs(plan, opts)
    for name in spec["skipped"]:
        log(f"{name}: finished earlier, not resubmitted")
    if not spec["jobs"]:
        return []
    jobs_file = Path(plan.out) / "slurm_jobs.json"
    active = _active_jobs(jobs_file, spec["folder"])
    todo = [j for j in spec["jobs"] if j["name"] not in active]
    for j in spec["jobs"]:
        if j["name"] in active:
            log(f"{j['name']}: job {active[j['name']]} is still queued or running, not resubmitted")
    try:
        executor = submitit.SlurmExecutor(folder=spec["folder"], max_num_timeout=20)
    except RuntimeError as exc:
        raise IsosimError(f"--launcher slurm: {exc}") from None
    executor.update_parameters(**spec["executor"])
    jobs = []
    with executor.batch():
        for j in todo:
            jobs.append(executor.submit(TrainJob(), j["command"], j["run_dir"], os.getcwd()))
    record = {**{k: v for k, v in (json.loads(jobs_file.read_text()) if jobs_file.is_file() else {}).items()},
              **{j["name"]: job.job_id for j, job in zip(todo, jobs)}}
    _write_json(jobs_file, record)
    for j, job in zip(todo, jobs):
        log(f"{j['name']}: submitted as job {job.job_id}")
    if wait:
        for j, job in zip(todo, jobs):
            try:
                job.result()
            except Exception as exc:  # the job's own error, one line
                last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
                raise IsosimError(f"run {j['name']} (job {job.job_id}) failed: {last}") from None
    return jobs


def _active_jobs(jobs_file: Path, folder: str) -> dict[str, str]:
    """Runs whose recorded SLURM job is still pending or running (best effort: needs sacct)."""
    if not jobs_file.is_file():
        return {}
    import submitit

    active = {}
    for name, job_id in json.loads(jobs_file.read_text()).items():
        try:
            state = submitit.SlurmJob(folder=folder, job_id=str(job_id)).state
        except Exception:
            continue
        if state.upper() in ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "RESIZING", "SUSPENDED"):
            active[name] = str(job_id)
    return active


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


def verdict(plan: ValidationPlan, df: Any, metric: str = "val_avg",
            frontier_n_star: int | None = None) -> dict[str, Any]:
    """The runs' final rewards per n, the verdict (``isosim.verdict.decide``) and the sentence."""
    from isosim.verdict import Observed, Prediction, decide, eval_se

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
    n_sat_txt = "none" if pred.get("n_sat") is None else f"{pred['n_sat']:.0f}"
    sentence = (f"At C = {plan.runs[0].config['budget']} rollouts (B_p = {plan.b_p}), the simulator "
                f"({pred['source']}) predicted n*(C) = {n_pred} (n_sat = {n_sat_txt}); the real runs at "
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


def analyse(plan: ValidationPlan, metric: str = "avg", n_boot: int = 100, log: Log = print) -> dict[str, Any]:
    """Frontier analysis (isosim.report) of the runs, the verdict, figures and ``OUT/validation.md``."""
    from isosim import records
    from isosim.report import build_report, metric_column

    metric = metric_column(metric)
    out = Path(plan.out)
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
        "n_sat": frontier["fit"]["n_sat"], "figures": frontier["figures"]},
        "frontier_error": frontier_error, "figures": [str(f) for f in figures], "plan": plan.to_json()}
    _write_json(out / "validation.json", result)
    write_markdown(plan, df, result, out / "validation.md")
    log(v["sentence"])
    log(f"report: {out / 'validation.md'}")
    return result


def plot_validation(plan: ValidationPlan, df: Any, metric: str, frontier: dict[str, Any] | None,
                    folder: Path, v: dict[str, Any] | None = None) -> list[Path]:
    """``reward_curves`` (validation metric at eval points; train reward of every step, from
    ``metrics.jsonl``) and ``n_star_predicted_vs_observed`` (n*(C) predicted vs observed, and the
    final reward per n with its tolerance, against the predicted n*(C) and n_sat)."""
    from isosim import plots

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
    ax.set_xscale("log")
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


def write_markdown(plan: ValidationPlan, df: Any, result: dict[str, Any], path: Path) -> Path:
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
        f"- Tolerance: twice the combined sampling error of two runs (evaluation noise"
        + (", plus seed spread" if not v["one_seed"] else "; one seed per n, so training noise is NOT included "
           "and the tolerance is a lower bound") + ").",
        "", "## Prediction", "",
        f"- Source: {pred['source']}, simulated sweep{' (quick)' if pred.get('quick') else ''} "
        f"in `{pred['sweep_dir']}`.",
        f"- n*(C) at C = {pred['budget']:.0f}: {pred['n_star']}; fitted n_sat = {_num(pred.get('n_sat'), '.1f')}"
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
        idx = np.unique(np.linspace(0, len(fr["budgets"]) - 1, min(8, len(fr["budgets"]))).round().astype(int))
        lines += ["## Frontier analysis of the real runs (isosim.report)", "",
                  "| budget | observed n* | frontier reward |", "|---:|---:|---:|",
                  *[f"| {fr['budgets'][i]:.0f} | {fr['n_star'][i]} | {fr['reward'][i]:.3f} |" for i in idx], "",
                  f"Fitted n_sat of the real runs: {_num(fr.get('n_sat'), '.1f')} (with three n values this is a bound, "
                  "not a fit).", ""]
    else:
        lines += ["## Frontier analysis", "", f"Failed: {result.get('frontier_error')}", ""]
    lines += ["## Figures", ""]
    for f in result["figures"] + (fr["figures"] if fr else []):
        if str(f).endswith(".png"):
            rel = os.path.relpath(f, path.parent)
            lines.append(f"![{Path(f).stem}]({rel})")
    lines += ["", f"Records: `{Path(plan.out) / 'runs'}/*/records.jsonl`; machine-readable: `validation.json`.", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# printing the plan
# --------------------------------------------------------------------------------------------
def describe(plan: ValidationPlan, launcher: str, opts: SlurmOptions | None = None) -> list[str]:
    """Lines that show the plan and exactly what would be launched (``--dry-run`` prints them)."""
    pred = plan.predicted
    lines = [f"prediction ({pred['source']}): n*(C={pred['budget']:.0f}) = {pred['n_star']}, "
             f"n_sat = {_num(pred.get('n_sat'), '.1f')}, recipe {pred['recipe']}",
             f"plan: n = {plan.ns} at B_p = {plan.b_p}, budget {plan.runs[0].config['budget']} rollouts per run"
             + (f" (limits: B_p * n <= {plan.b_max}, >= {plan.min_steps} steps)" if plan.b_max else "")]
    lines += [f"  note: {n}" for n in plan.notes]
    for r in plan.runs:
        prog = run_progress(r)
        state = "finished" if prog["finished"] else (f"at step {prog['step']}" if prog["step"] else "not started")
        lines.append(f"  {r.name}: n={r.n} B_p={r.b_p} M={r.steps} lr={r.lr:.3g} [{state}]  {r.dir}")
    if launcher == "local":
        lines.append("commands (run one after another):")
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
