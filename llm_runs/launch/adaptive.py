"""``isosim validate --adaptive``: the decision logic of :mod:`isosim.validation.adaptive` driving real runs.

Every run of the grid is planned for the full budget ``C`` (its evaluations are placed over ``C``
from the start), and is advanced to a decision rung by ``llm_runs.training.train --pause-at-rollouts R``:
the trainer checkpoints at the pause and the next launch continues it exactly. ``R`` is the
run's last evaluation at or below the rung, so every pause falls on an evaluation. After each
advance the records are read (only up to what the decisions asked for) and the policy decides;
its decisions go to ``OUT/adaptive/decisions.json`` before anything else is launched, so a killed
``--adaptive`` rerun with the same command rebuilds its state from them and goes on. The chosen
run is continued to ``C``; ``OUT/adaptive/result.json`` and ``adaptive.png`` hold the outcome.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from isosim.validation import adaptive as ad
from isosim.errors import IsosimError
from isosim.files import write_json
from llm_runs.config import RunConfig
from llm_runs.launch.launchers import (
    Log,
    SlurmOptions,
    TrainJob,
    _env,
    accelerate_command,
    local_command,
    progress_line,
    run_progress,
)
from llm_runs.launch.child import run_child

if TYPE_CHECKING:
    from llm_runs.launch.plan import RunSpec, ValidationPlan


def eval_rollouts(cfg: RunConfig) -> list[int]:
    """Rollouts at which the trainer evaluates a run of this config (step 0 included)."""
    from llm_runs.training.train import eval_steps

    return [int(s * cfg.rollouts_per_step) for s in eval_steps(cfg.total_steps, cfg.eval_points)]


def pause_point(cfg: RunConfig, target: float) -> int | None:
    """Rollouts to pause the run at for a decision at ``target``: its last evaluation at or below
    it (its first one if none is); None when that is the run's end."""
    pts = [p for p in eval_rollouts(cfg) if p > 0]
    below = [p for p in pts if p <= target * (1 + ad.REACH_RTOL)]
    at = below[-1] if below else pts[0]
    return None if at >= pts[-1] else at


def read_curve(run_dir: str | Path, metric: str = "val_avg") -> list[tuple[float, float]]:
    """(rollouts, metric) of a run's records, in order (a torn last line is skipped)."""
    path = Path(run_dir) / "records.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get(metric) is not None:
            out.append((float(row["rollouts"]), float(row[metric])))
    return sorted(out)


def settings_for(plan: ValidationPlan, predicted_n: int | None, policy: str = "adaptive") -> ad.Settings:
    runs = [r for r in plan.runs if r.seed == 0]
    cfg = RunConfig.from_dict(runs[0].config, source="plan")
    grid = tuple(sorted(r.n for r in runs))
    samples = int(cfg.val_size) * int(cfg.eval_n)
    if policy == "lines":
        return ad.lines_settings(float(cfg.budget), grid, samples)
    if policy == "sbi":
        b_ps = sorted({r.b_p for r in runs})
        if len(b_ps) != 1:
            raise IsosimError(f"--search sbi compares runs at one B_p; the plan has B_p {b_ps}")
        return ad.sbi_settings(float(cfg.budget), grid, b_ps[0], samples)
    return ad.Settings(budget=float(cfg.budget), grid=grid, start=tuple(ad.spread_start(grid, predicted_n)),
                       eval_samples=samples)


def describe_search(plan: ValidationPlan, policy: str = "adaptive") -> list[str]:
    """Lines that say what the search will do with the plan's runs (``--dry-run`` prints them)."""
    s = settings_for(plan, plan.predicted.get("n_star"), policy)
    c = s.budget
    rungs = ", ".join(f"C/{c / r:.0f}" if c / r == round(c / r) else f"{r:.0f}" for r in s.rungs())
    if policy == "lines":
        return [f"search (lines): every n of {list(s.grid)} runs to C/4; the two whose local lines carried to "
                f"C = {c:.0f} are best continue to C/2; the better evaluation there wins and is continued to C"]
    if policy == "sbi":
        from isosim.validation.adaptive.sbi_search import READER, bank_path

        return [f"search (sbi): every n of {list(s.grid)} starts; at each rung ({rungs} rollouts, every surviving "
                f"n run to the same rollouts) the simulation-trained reader ({READER}, bank {bank_path(s.bank)}) "
                f"predicts each surviving n's regret at C = {c:.0f} from its curve so far, then the better half by "
                "that prediction continues; the last n left (or the best predicted at the last rung) is continued "
                "to C; the predictions go to the decision log"]
    return [f"search (adaptive): starts n = {list(s.start)} (the predicted n* and two octaves either side) of the "
            f"grid {list(s.grid)}; at each rung ({rungs} rollouts) it stops the runs that cannot catch the leader "
            f"by C = {c:.0f}, may start the next untried n, and continues the one it chooses (the last run left, "
            "or the best at the last rung) to C; no other run goes to C"]


class Launcher:
    """Advances runs to pause points: one after another (local) or as one batch of jobs (slurm)."""

    def __init__(self, kind: str, opts: SlurmOptions | None, log: Log, folder: Path):
        self.kind, self.opts, self.log, self.folder = kind, opts or SlurmOptions(), log, folder

    def advance(self, runs: list[tuple[RunSpec, int | None]]) -> None:
        todo = []
        for run, pause in runs:
            prog = run_progress(run)
            goal = pause if pause is not None else run.steps * RunConfig.from_dict(run.config).rollouts_per_step
            if prog["finished"] or prog["rollouts"] >= goal:
                continue
            todo.append((run, pause))
        if self.kind == "local":
            for run, pause in todo:
                self._local(run, pause)
        elif todo:
            self._slurm(todo)

    @staticmethod
    def _flags(pause: int | None) -> list[str]:
        return ["--pause-at-rollouts", str(pause) if pause is not None else "none"]

    def _local(self, run: RunSpec, pause: int | None) -> None:
        cmd = local_command(run) + self._flags(pause)
        train_log = Path(run.dir) / "train.log"
        what = f"to {pause} rollouts" if pause is not None else "to the budget"
        self.log(f"  {run.name}: running {what} (log: {train_log})")
        t0 = time.perf_counter()
        with train_log.open("a", encoding="utf-8") as fh:
            fh.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(cmd)}\n")
            fh.flush()
            # a stop signal is passed on: the trainer checkpoints and exits (llm_runs.launch.child)
            rc = run_child(cmd, fh, env=_env(), log=self.log, head=f"  {run.name}",
                           progress=lambda: progress_line(run), log_path=train_log)
        if rc != 0:
            last = [ln for ln in train_log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
            raise IsosimError(f"run {run.name} failed (exit {rc}): {last[-1][:300] if last else 'no output'} "
                              f"(full log: {train_log}); rerun to resume")
        self.log(f"  {run.name}: {time.perf_counter() - t0:.0f}s")

    def _slurm(self, todo: list[tuple[RunSpec, int | None]]) -> None:
        try:
            import submitit
        except ImportError:
            raise IsosimError("--launcher slurm needs submitit (pip install 'isosim[slurm]')") from None
        from llm_runs.launch.launchers import executor_parameters

        try:
            executor = submitit.SlurmExecutor(folder=str(self.folder / "slurm"), max_num_timeout=20)
        except RuntimeError as exc:
            raise IsosimError(f"--launcher slurm: {exc}") from None
        executor.update_parameters(**executor_parameters(self.opts, name="isosim-adaptive"))
        jobs = []
        with executor.batch():
            for run, pause in todo:
                cmd = accelerate_command(run, self.opts) + self._flags(pause)
                jobs.append(executor.submit(TrainJob(), cmd, str(Path(run.dir).resolve()), os.getcwd()))
        for (run, _), job in zip(todo, jobs):
            self.log(f"  {run.name}: job {job.job_id}")
        for (run, _), job in zip(todo, jobs):
            try:
                job.result()
            except Exception as exc:
                last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:300]
                raise IsosimError(f"run {run.name} (job {job.job_id}) failed: {last}; rerun to resume") from None


SAME_SEARCH = ("budget", "grid", "start", "eval_samples", "policy", "b_p")
"""the settings that make a search; the others are the policy's rules"""


def load_decisions(path: Path, settings: ad.Settings) -> tuple[list[dict[str, Any]], ad.Settings]:
    """The decision log at ``path`` and the settings to continue it with: a search begun under
    other rules (an older isosim) finishes under the rules it began with."""
    if not path.is_file():
        return [], settings
    try:
        decisions = json.loads(path.read_text(encoding="utf-8"))
        saved = ad.Settings.from_json(decisions[0]["settings"])
    except (OSError, ValueError, TypeError, KeyError, IndexError) as exc:
        raise IsosimError(f"{path}: unreadable decision log ({type(exc).__name__}: {exc}); use another --out") from None
    if any(getattr(saved, k) != getattr(settings, k) for k in SAME_SEARCH):
        raise IsosimError(f"{path} holds an adaptive search with other settings (grid, start, budget or --search): "
                          "rerun it as it was, or use another --out")
    return decisions, saved


def observed(pol: ad.Adaptive, runs: dict[int, RunSpec], metric: str) -> dict[int, list[tuple[float, float]]]:
    """Each tried run's records, cut at what the decisions asked of it (so a rerun decides alike)."""
    req = pol.requests()
    out = {}
    for n in sorted(pol.tried):
        cfg = RunConfig.from_dict(runs[n].config, source=runs[n].name)
        target = req.get(n, pol.settings.budget if n == pol.chosen else pol.stopped.get(n))
        if target is None:
            continue
        pause = pause_point(cfg, target)
        out[n] = ad.reveal(read_curve(runs[n].dir, metric), pause if pause is not None else cfg.budget)
    return out


def run_adaptive(plan: ValidationPlan, *, launcher: str = "local", opts: SlurmOptions | None = None,
                 metric: str = "val_avg", log: Log = print, policy: str = "adaptive") -> dict[str, Any]:
    """Run the adaptive search of ``plan`` (its runs are the grid, seed 0) to the end; resumable.
    ``policy``: "adaptive", "lines" or "sbi" (:class:`isosim.validation.adaptive.Settings`)."""
    if any(r.seed != 0 for r in plan.runs):
        raise IsosimError("--adaptive runs one seed per n (--seeds 1)")
    runs = {r.n: r for r in plan.runs}
    folder = Path(plan.out) / "adaptive"
    folder.mkdir(parents=True, exist_ok=True)
    settings = settings_for(plan, plan.predicted.get("n_star"), policy)
    dec_path = folder / "decisions.json"
    decisions, settings = load_decisions(dec_path, settings)
    pol = ad.Adaptive(settings, decisions=decisions)
    write_json(dec_path, pol.decisions, mkdir=False)
    log(f"adaptive ({settings.policy}): budget {settings.budget:.0f}, grid n = {list(settings.grid)}, start n = {list(settings.start)} "
        f"(predicted n* = {plan.predicted.get('n_star')}), rungs {[round(r) for r in pol.rungs]}")
    if len(pol.decisions) > 1:
        log(f"resuming after {len(pol.decisions)} decisions ({dec_path})")
    launch = Launcher(launcher, opts, log, folder)

    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _term)  # a killed search stops its current run cleanly
    try:
        _search(pol, runs, launch, dec_path, metric, log)
    finally:
        signal.signal(signal.SIGTERM, previous)
    curves = observed(pol, runs, metric)
    final = curves[pol.chosen][-1]
    result = {"chosen": pol.chosen, "overhead": pol.overhead(), "budget": settings.budget,
              "final": {"rollouts": final[0], metric: final[1]}, "run": runs[pol.chosen].dir,
              "spent": {str(n): ad.spent(c) for n, c in curves.items()}, "settings": settings.to_json(),
              "predicted_n_star": plan.predicted.get("n_star"), "decisions": str(dec_path), "metric": metric}
    fig = ad.plot_search(curves, pol.decisions, folder / "adaptive.png", metric=metric)
    result["figure"] = str(fig)
    write_json(folder / "result.json", result, mkdir=False)
    log(f"chosen n = {pol.chosen}: {metric} {final[1]:.4f} at {final[0]:.0f} rollouts; overhead "
        f"{pol.overhead():.2f} runs ({folder / 'result.json'})")
    return result


def default_grid(budget: int, b_p: int, min_steps: int, b_max: int | None) -> list[int]:
    """Every power of two from 2 that leaves ``min_steps`` updates within ``B_p * n <= b_max``."""
    from isosim.validation.validation import n_max_for

    top = n_max_for(budget, b_p, min_steps=min_steps, b_max=b_max)
    if top is None:
        raise IsosimError(f"budget {budget} gives fewer than {min_steps} steps even at n = 2 (B_p = {b_p})")
    return [2 ** k for k in range(1, top.bit_length())]


def _search(pol: ad.Adaptive, runs: dict[int, RunSpec], launch: Launcher, dec_path: Path, metric: str,
            log: Log) -> None:
    """Advance the requested runs, read them, decide and log; until the search is done."""
    while pol.requests():
        req = pol.requests()
        batch = []
        for n, target in req.items():
            cfg = RunConfig.from_dict(runs[n].config, source=runs[n].name)
            batch.append((runs[n], pause_point(cfg, target)))
        log(f"rung {pol.rung:.0f}: advancing n = {sorted(req)}" if pol.chosen is None else
            f"extending n = {pol.chosen} to the budget")
        launch.advance(batch)
        curves = observed(pol, runs, metric)
        for n in req:
            if not curves.get(n):
                raise IsosimError(f"run {runs[n].name} wrote no records ({runs[n].dir}/records.jsonl)")
        new = pol.update(curves)
        write_json(dec_path, pol.decisions, mkdir=False)
        for d in new:
            if d["event"] in ("stop", "spawn", "choose", "done"):
                log(f"  {d['event']} n = {d['n']}: {d.get('why', '')}")
