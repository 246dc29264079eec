"""The ``isosim`` command: explore, analyze, recommend, calibrate, validate.

Imports are lazy so that ``isosim --help`` is instant and ``isosim explore`` never imports
transformers, vLLM or accelerate. Any user error prints one line and exits with code 2.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Compute-optimal rollout allocation (n, B_p, M) for LLM RL: simulate, analyse, validate.",
)


def _fresh_out(kind: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path("runs") / f"{kind}-{stamp}"
    i = 1
    while out.exists():
        out = Path("runs") / f"{kind}-{stamp}-{i}"
        i += 1
    return out


@app.command()
def explore(
    preset: str = typer.Option("easy", help="built-in preset: easy, hard, extreme, very-easy, or a mix 'hard:0.5,easy:0.5'"),
    profile: Optional[Path] = typer.Option(None, help="measured difficulty profile JSON (from isosim calibrate); overrides the preset's profile"),
    policy: Optional[str] = typer.Option(None, help="linear (default), tabular or mlp"),
    question: str = typer.Option("q1", help="q1: fixed B_p, vary n and M; q2: fixed B = B_p*n; q3: all free"),
    seeds: int = typer.Option(3, min=1, help="how many seeds per cell"),
    seed: int = typer.Option(0, help="base seed (seeds seed .. seed+seeds-1)"),
    budget_max: Optional[float] = typer.Option(None, help="budget of every run, in rollouts (default 1e7; quick 3e4)"),
    metric: str = typer.Option("avg", help="avg, best, worst (validation avg@k, best@k, worst@k) or a column"),
    device: str = typer.Option("cpu", help="cpu or cuda"),
    quick: bool = typer.Option(False, "--quick", help="a small grid that finishes in seconds"),
    plan: Optional[Path] = typer.Option(None, help="run this plan JSON (plan.json of an earlier sweep) instead"),
    n_boot: int = typer.Option(200, min=0, help="bootstrap resamples for the n_sat interval"),
    out: Optional[Path] = typer.Option(None, help="output folder (default: a fresh folder under runs/); rerun to resume"),
) -> None:
    """Run a simulated isocompute sweep, fit the frontier and n*(C), write frontier.json and figures."""
    from isosim import report, sweep
    from isosim.errors import IsosimError

    if plan is not None:
        if not plan.is_file():
            raise IsosimError(f"{plan}: no such plan file")
        the_plan = sweep.SweepPlan.from_json(plan.read_text(), source=str(plan))
    else:
        if budget_max is not None and budget_max <= 0:
            raise IsosimError(f"--budget-max must be positive (got {budget_max:g})")
        overrides = {}
        if profile is not None:
            from isosim.profiles import read_profile

            read_profile(profile)
            overrides["profile"] = str(profile)
        if policy is not None:
            overrides["policy"] = policy
        the_plan = sweep.plan_for_preset(preset, question, quick=quick, seeds=seeds, seed=seed,
                                         budget_max=budget_max, **overrides)
    out = out or _fresh_out("explore")
    typer.echo(f"{the_plan.summary()}  ->  {out}")
    df = sweep.run_sweep(the_plan, out, device=device, progress=sys.stderr.isatty())
    result = report.build_report(df, out, metric=metric, n_boot=n_boot, seed=seed)
    report.print_summary(result, title=f"isosim explore: {preset if plan is None else plan.name} ({question})", out_dir=out)


@app.command()
def analyze(
    path: Path = typer.Argument(..., help="a sweep folder, a folder of runs (*/records.jsonl), or a CSV/Parquet/JSONL table"),
    metric: str = typer.Option("avg", help="avg, best, worst or a column name"),
    n_boot: int = typer.Option(200, min=0, help="bootstrap resamples"),
    seed: int = typer.Option(0, help="bootstrap seed"),
    out: Optional[Path] = typer.Option(None, help="output folder (default: the input folder, or <table>_analysis)"),
) -> None:
    """Fit the frontier and n*(C) of any records table: simulated, real, or your own trainer's logs."""
    from isosim import report

    df = report.load_records(path)
    if out is None:
        out = path if path.is_dir() else path.with_name(path.stem + "_analysis")
    result = report.build_report(df, out, metric=metric, n_boot=n_boot, seed=seed)
    report.print_summary(result, title=f"isosim analyze: {path}", out_dir=out)


@app.command()
def recommend(
    budget: Optional[float] = typer.Option(None, help="sampling budget in rollouts"),
    gpu_hours: Optional[float] = typer.Option(None, help="budget in GPU-hours (needs --rollouts-per-gpu-hour)"),
    rollouts_per_gpu_hour: Optional[float] = typer.Option(None, help="measured sampling throughput"),
    preset: str = typer.Option("easy", help="built-in difficulty preset (ignored with --profile)"),
    profile: Optional[Path] = typer.Option(None, help="measured profile JSON from isosim calibrate"),
    max_batch: int = typer.Option(65536, help="hardware cap on B_p * n (rollouts per step)"),
    problems: Optional[int] = typer.Option(None, help="training-set size (smaller sets saturate lower)"),
    metric: str = typer.Option("avg", help="avg, best or worst"),
    quick: bool = typer.Option(False, "--quick", help="a small simulated sweep (seconds; for tests)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Recommend n, B_p, M, lr and the KL/entropy recipe for a budget, with the reason for each."""
    import json

    from isosim import recommend as rec
    from isosim.errors import IsosimError
    from isosim.report import metric_column

    if gpu_hours is not None:
        if rollouts_per_gpu_hour is None or rollouts_per_gpu_hour <= 0 or gpu_hours <= 0:
            raise IsosimError("--gpu-hours needs a positive --rollouts-per-gpu-hour (and positive hours)")
        budget = gpu_hours * rollouts_per_gpu_hour
    if budget is None:
        raise IsosimError("give --budget (rollouts) or --gpu-hours with --rollouts-per-gpu-hour")
    r = rec.recommend(budget, preset=preset, profile=str(profile) if profile else None, b_max=max_batch,
                      problems=problems, metric=metric_column(metric), quick=quick, progress=sys.stderr.isatty())
    if as_json:
        typer.echo(json.dumps(r.to_json(), default=float))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"isosim recommend: C = {r.budget:.3g} rollouts ({r.recipe} recipe)")
    for col in ("setting", "value", "why"):
        table.add_column(col, overflow="fold")
    table.add_row("n", str(r.n), r.reasons["n"])
    table.add_row("B_p", str(r.b_p), r.reasons["b_p"])
    table.add_row("M", str(r.m), r.reasons["m"])
    table.add_row("lr", f"{r.lr:.3g}", r.reasons["lr"])
    table.add_row("KL / entropy", f"{'on' if r.kl else 'off'} / {'on' if r.entropy else 'off'}", r.reasons["kl"])
    Console().print(table)
    typer.echo(f"predicted n_sat = {r.n_sat:.0f}; simulated sweep in {r.sweep_dir}")


def main() -> None:
    """Entry point: run the app; user errors become one line on stderr and exit code 2."""
    import click

    from isosim.errors import IsosimError

    try:
        app(standalone_mode=False)
    except IsosimError as exc:
        typer.echo(f"isosim: error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        typer.echo("isosim: interrupted (rerun the same command to resume)", err=True)
        sys.exit(130)
    except click.exceptions.ClickException as exc:
        typer.echo(f"isosim: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code if exc.exit_code else 2)
    except KeyboardInterrupt:
        typer.echo("isosim: interrupted (rerun the same command to resume)", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
