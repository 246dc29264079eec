"""Launchers of a validation plan's runs: ``local`` (one ``python -m llm_runs.training.train`` after
another) and ``slurm`` (a submitit job array, each job an ``accelerate launch``, FSDP for models
that do not fit DDP). The plan is :mod:`llm_runs.launch.plan`'s, made by :mod:`llm_runs.launch.validate`."""


from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from isosim.files import write_json
from llm_runs.launch.child import run_child
from llm_runs.launch.plan import RunSpec, ValidationPlan

ROOT = Path(__file__).resolve().parents[2]

Log = Callable[[str], None]


# --------------------------------------------------------------------------------------------
# 3a. local launcher
# --------------------------------------------------------------------------------------------
def local_command(run: RunSpec, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "llm_runs.training.train", "--config", str(run.config_path)]


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
    pending = False  # a step whose evaluation a stop signal interrupted (the resume evaluates it)
    if state.is_file():
        try:
            saved = json.loads(state.read_text(encoding="utf-8"))
            step, pending = max(step, int(saved["step"])), saved.get("pending_eval") is not None
        except (ValueError, KeyError, OSError, TypeError):
            pass
    return {"finished": step >= run.steps and not pending, "step": step, "rollouts": rollouts}


def progress_line(run: RunSpec) -> str:
    """``step 12/64``: how far a run got (its last metrics row; else its records and checkpoint)."""
    step = run_progress(run)["step"]
    metrics = Path(run.dir) / "metrics.jsonl"
    try:
        with metrics.open("rb") as fh:
            fh.seek(max(0, metrics.stat().st_size - 65536))
            for line in reversed(fh.read().splitlines()):
                try:
                    step = max(step, int(json.loads(line)["step"]))
                    break
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        pass
    return f"step {step}/{run.steps}"


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
            rc = run_child(local_command(run, python), fh, env=_env(), log=log, head=head,
                           progress=lambda: progress_line(run), log_path=train_log)
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
    """``python -m accelerate.commands.launch ... -m llm_runs.training.train --config <run>/config.json``.

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
    return cmd + ["-m", "llm_runs.training.train", "--config", str(Path(run.config_path).resolve())]


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
    write_json(jobs_file, record, indent=1, mkdir=False)
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
