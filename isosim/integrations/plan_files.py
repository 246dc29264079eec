"""``isosim plan`` and ``isosim recommend --for``: the sweep's folder, its launch lines and README.

The output folder of ``isosim plan --for TRAINER --out OUT``::

    OUT/README.md          what to run and what to do next
    OUT/isosim_plan.json   the request, the hardware and every run (recommend --for reads it back)
    OUT/isosim_runs.csv    run, n, b_p, seed of every run (read with the logs where they lack them)
    OUT/launch.sh          one launch line per run; your model and data arguments follow "$@"
    OUT/runs/<run>/        each run's settings (TRL config.yaml, verl overrides.txt, isosim
                           config.json); the run's logs go here too
    OUT/train_grpo.py      (TRL) the training script: GRPOTrainer + isosim's records callback
    OUT/submit_slurm.py    (isosim) the sweep as one SLURM job array through submitit
    OUT/schedule/          (--schedule) the two stages at the full budget

``recommend --runs OUT/runs --budget C --for TRAINER`` writes the pick's full-budget run the same
way under ``OUT/full/``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from isosim.integrations import lr as LR
from isosim.integrations import plan as P

PLAN_FILE = "isosim_plan.json"
RUNS_FILE = "isosim_runs.csv"
USER_ARGS = {
    "trl": "--model_name_or_path MODEL --dataset_name TRAIN_DATA --reward_funcs accuracy_reward "
           "--eval_dataset HELD_OUT_DATA",
    "verl": "data.train_files=TRAIN.parquet data.val_files=VAL.parquet actor_rollout_ref.model.path=MODEL",
    "isosim": "--model MODEL --data TRAIN_DATA",
}
SETTINGS_FILE = {"trl": "config.yaml", "verl": "overrides.txt", "isosim": "config.json"}


@dataclass
class Request:
    trainer: str
    budget: float
    share: float = P.DEFAULT_SHARE
    ns: list[int] | None = None
    b_p: int | None = None
    seeds: int = 1
    seed: int = 0
    hardware: P.Hardware = field(default_factory=P.Hardware)
    min_steps: int = P.MIN_STEPS
    schedule: str | None = None
    budget_note: str = ""
    lr: float | None = None
    """BASE: the lr at the reference batch (None: ``isosim.integrations.lr.DEFAULT_BASE``, TRL's default)"""
    lr_rule: str = LR.DEFAULT_RULE
    """sqrt or constant (:mod:`isosim.integrations.lr`)"""
    lr_tuned_at: int | None = None
    """the n at which the user tuned ``lr`` (at ``lr_tuned_b_p``): the rule scales every run from the batch
    ``lr_tuned_b_p x lr_tuned_at`` (None: ``lr`` is the lr at 1024 rollouts a step)"""
    lr_tuned_b_p: int | None = None
    """the B_p at which the user tuned ``lr`` (None: the plan's, so that n = ``lr_tuned_at``'s runs get ``lr``
    exactly)"""
    lr_defaulted: bool = False
    """``lr`` and ``lr_tuned_at`` are TRL's defaults, set because ``--lr`` was not given (:func:`trl_default_lr`)"""
    lr_tuned_assumed: bool = False
    """``--lr`` was given without ``--lr-tuned-at`` for TRL: taken as tuned at TRL's default num_generations"""


def trl_default_lr(req: "Request") -> "Request":
    """A TRL request's lr the way a TRL user holds it: without ``--lr``, TRL's default learning_rate at
    TRL's default num_generations (``--lr 1e-6 --lr-tuned-at 8``), so that n = 8's runs are the run a
    TRL user makes without isosim; ``--lr`` without ``--lr-tuned-at``, that lr at the same n = 8 (the
    user's lr, kept exactly by the runs of the n it was most likely tuned at, not halved there by a
    reference batch of 1,024 rollouts)."""
    from dataclasses import replace

    if req.trainer != "trl" or req.lr_tuned_at is not None:
        return req
    if req.lr is not None:
        return replace(req, lr_tuned_at=LR.TRL_DEFAULT_N, lr_tuned_assumed=True)
    return replace(req, lr=LR.DEFAULT_BASE, lr_tuned_at=LR.TRL_DEFAULT_N, lr_defaulted=True)


def lr_of(req: Request, b_p: int) -> tuple[float, str, float]:
    """(BASE, rule, reference batch) of every run of the request at ``b_p`` prompts a step."""
    ref = (float((req.lr_tuned_b_p or b_p) * req.lr_tuned_at) if req.lr_tuned_at is not None
           else float(LR.LR_REF_BATCH))
    return (LR.DEFAULT_BASE if req.lr is None else req.lr), req.lr_rule, ref


def _tuned_where(req: Request) -> str:
    """``n = N`` (at the plan's B_p), or ``n = N at B_p = B`` where ``--lr-tuned-b-p`` gave another."""
    return f"n = {req.lr_tuned_at}" + ("" if req.lr_tuned_b_p is None else f" at B_p = {req.lr_tuned_b_p}")


def _exactly(req: Request, b_p: int) -> str:
    """Which runs get ``--lr`` exactly: the tuned n's at the plan's B_p; none at another B_p (unless one
    has the tuned batch's rollouts a step)."""
    if req.lr_tuned_b_p is None or req.lr_tuned_b_p == b_p:
        return "that n's runs get it exactly"
    return (f"this plan's B_p is {b_p}, so no run has that batch unless its B_p x n is "
            f"{req.lr_tuned_b_p * req.lr_tuned_at}: each n's lr is the rule's from there")


def lr_where(req: Request, b_p: int) -> str:
    """Where the request's BASE lr holds, in words."""
    base, _, ref = lr_of(req, b_p)
    if req.lr_defaulted:
        return f"{base:g} at n = {req.lr_tuned_at} (B_p x n = {ref:g}: TRL's default num_generations)"
    if req.lr_tuned_assumed:
        return (f"{base:g} at n = {req.lr_tuned_at} (B_p x n = {ref:g}: taken as tuned at TRL's default "
                "num_generations; --lr-tuned-at N if you tuned it at another n)")
    if req.lr_tuned_at is not None:
        return f"{base:g} at {_tuned_where(req)} (B_p x n = {ref:g}, where it was tuned: --lr-tuned-at)"
    return f"{base:g} at B_p x n = {LR.LR_REF_BATCH}"


def check_request(req: Request) -> None:
    if req.trainer not in P.TRAINERS:
        raise IsosimError(f"--for must be one of {', '.join(P.TRAINERS)}, got {req.trainer!r}")
    P.check_budget(req.budget, req.share)
    P.check_lr(req.lr, req.lr_rule)
    if req.lr_tuned_at is not None:
        if req.lr is None:
            raise IsosimError("--lr-tuned-at says where --lr was tuned: give --lr too")
        if req.lr_tuned_at < 2:
            raise IsosimError(f"--lr-tuned-at is the n your lr was tuned at (2 or more), got {req.lr_tuned_at}")
    if req.lr_tuned_b_p is not None:
        if req.lr_tuned_at is None:
            raise IsosimError("--lr-tuned-b-p is the B_p of --lr-tuned-at's runs: give --lr and --lr-tuned-at too")
        if req.lr_tuned_b_p < 1:
            raise IsosimError(f"--lr-tuned-b-p is the B_p your lr was tuned at (1 or more), got {req.lr_tuned_b_p}")
    req.hardware.check()
    if not 1 <= req.seeds <= P.MAX_SEEDS:
        raise IsosimError(f"--seeds must be between 1 and {P.MAX_SEEDS} runs per n, got {req.seeds}")
    if req.min_steps < 1:
        raise IsosimError(f"--min-steps must be >= 1, got {req.min_steps}")
    if req.trainer == "isosim" and req.hardware.nodes > 1:
        raise IsosimError("--for isosim plans single-node runs; for several nodes per run use isosim validate "
                          "--launcher slurm --nodes N (it fills in each node's rank)")
    for n in req.ns or []:
        P.check_n(n)
    if req.ns is not None and len(set(req.ns)) < 2:
        raise IsosimError(f"--n {req.ns}: the cheap sweep compares at least two n")


def build(req: Request, out: Path) -> dict[str, Any]:
    """The sweep's runs (refused with one line where a trainer rule or the step count forbids one)."""
    check_request(req)
    cheap = req.share * req.budget
    b_p = req.b_p
    notes: list[str] = []
    if req.ns is None:  # the recommended grid: powers of two from 2 with enough steps at the cheap share
        b_p, notes = P.resolve_b_p(req.trainer, [2, 4, 8, 16, 32, 64, 128, 256], b_p, req.hardware.processes,
                                   req.hardware.per_device)
        ns = P.default_grid(cheap, b_p, req.min_steps)
        notes.append(f"n: powers of two from 2 with >= {req.min_steps} steps in the cheap part (--n sets them)")
    else:
        ns = sorted(set(req.ns))
        b_p, notes = P.resolve_b_p(req.trainer, ns, b_p, req.hardware.processes, req.hardware.per_device)
    if req.hardware.nodes > 1:
        notes.append(f"{req.hardware.nodes} nodes: set MACHINE_RANK (0..{req.hardware.nodes - 1}) and MAIN_PROCESS_IP "
                     "(the first node's address) on each node before its launch line" if req.trainer == "trl" else
                     f"{req.hardware.nodes} nodes: start a Ray cluster over them before the launch lines (verl)")
    runs = []
    for n in ns:
        P.check_split(req.trainer, n, b_p, req.hardware.processes)
        steps = P.check_steps(n, b_p, cheap, req.min_steps, req.share, req.budget)
        for seed in range(req.seed, req.seed + req.seeds):
            name = P.run_name(n, seed)
            runs.append(P.make_run(req.trainer, n, b_p, steps, seed, req.hardware, str(out / "runs" / name),
                                   lr=lr_of(req, b_p)))
    return {"b_p": b_p, "ns": ns, "cheap": cheap, "runs": runs, "notes": notes}


# ----------------------------------------------------------------------------------------------
# Launch lines
# ----------------------------------------------------------------------------------------------
def _accelerate(hw: P.Hardware) -> list[str]:
    cmd = ["accelerate", "launch", "--num_processes", str(hw.processes)]
    if hw.nodes > 1:
        cmd += ["--num_machines", str(hw.nodes), "--machine_rank", "$MACHINE_RANK",
                "--main_process_ip", "$MAIN_PROCESS_IP", "--main_process_port", "29500"]
    return cmd


ROOT_LINE = 'ROOT="$(cd "$(dirname "${{BASH_SOURCE[0]}}")"{up} && pwd)"  # the plan folder, wherever it now is'
"""launch.sh's first command: ``$ROOT``, the folder its paths are written from (the plan's folder, found
from where launch.sh itself is), so that the folder can be moved or copied to the training machine"""


def shell_word(token: str, root: Path | None = None) -> str:
    """``token`` as one shell word; with ``root``, a path under it written from ``"$ROOT"`` (``KEY=PATH``
    tokens too: verl's overrides), so the line works wherever the folder is moved. ``$VAR`` tokens stay."""
    if token.startswith("$"):
        return token
    if root is not None:
        base = str(root)
        i = token.find(base)
        end = i + len(base)
        if i >= 0 and (end == len(token) or token[end] == "/"):
            head, tail = token[:i], token[end:]
            return (shlex.quote(head) if head else "") + '"$ROOT"' + (shlex.quote(tail) if tail else "")
    return shlex.quote(token)


def launch_line(trainer: str, run: P.Run, hw: P.Hardware, out: Path, run_dir: Path, extra: str = "",
                relocatable: bool = False) -> str:
    """The shell line that trains ``run`` (``"$@"``: the user's model and data arguments; ``extra``
    after them, so that it wins where both name the model). With ``relocatable`` (a launch.sh's line),
    every path under ``out`` is written from ``"$ROOT"`` (:data:`ROOT_LINE`). The run's output folder is
    on the line too (TRL's ``--output_dir``, isosim's ``--out``: a flag wins over the settings file), so
    that a moved folder's runs write into it, not where the settings file says."""
    root = out if relocatable else None
    settings = run_dir / SETTINGS_FILE[trainer]
    more = " " + " ".join(shell_word(t, root) for t in shlex.split(extra)) if extra.strip() else ""
    skip = ""
    if trainer == "trl":
        from isosim.integrations.trl_script import FINISHED

        cmd = _accelerate(hw) + [str(out / "train_grpo.py"), "--config", str(settings)]
        cmd += ["--output_dir", str(run.settings["output_dir"])] if "output_dir" in run.settings else []
        if relocatable and "output_dir" in run.settings:  # a rerun of launch.sh skips the runs that finished
            skip = f"[ -e {shell_word(str(Path(run.settings['output_dir']) / FINISHED), root)} ] || "
    elif trainer == "verl":
        overrides = " ".join(shell_word(o, root) for o in verl_overrides(run.settings))
        return f"TENSORBOARD_DIR={shell_word(str(run_dir), root)} python3 -m verl.trainer.main_ppo {overrides} \"$@\"{more}"
    else:
        cmd = (_accelerate(hw) + ["-m"] if hw.processes > 1 else ["python", "-m"]) + [
            "llm_runs.training.train", "--config", str(settings)]
        cmd += ["--out", str(run.settings["out"])] if "out" in run.settings else []
    line = " ".join(shell_word(c, root) for c in cmd)
    return f"{skip}{line} \"$@\"{more}"


def verl_overrides(settings: dict[str, Any]) -> list[str]:
    """Hydra's ``key=value`` overrides (lists as ``[a,b]``), unquoted: one per line in
    overrides.txt, shell-quoted in the launch line."""
    def value(v: Any) -> str:
        return "[" + ",".join(map(str, v)) + "]" if isinstance(v, list) else str(v)
    return [f"{k}={value(v)}" for k, v in settings.items()]


def settings_text(trainer: str, settings: dict[str, Any]) -> str:
    if trainer == "trl":
        import yaml

        return yaml.safe_dump(settings, sort_keys=False)
    if trainer == "verl":
        return "\n".join(verl_overrides(settings)) + "\n"
    return json.dumps(settings, indent=1) + "\n"


Files = dict[Path, str]
"""a folder's files before they are written: path -> text (:func:`commit`)"""


def run_files(trainer: str, run: P.Run, hw: P.Hardware, out: Path, run_dir: Path, extra: str = "") -> tuple[Files, str]:
    """The run's settings file and its launch.sh line (paths from ``"$ROOT"``, ``out``)."""
    return ({run_dir / SETTINGS_FILE[trainer]: settings_text(trainer, run.settings)},
            launch_line(trainer, run, hw, out, run_dir, extra, relocatable=True))


def _script(lines: list[str], trainer: str, path: Path, root: Path) -> str:
    """``path`` (a launch.sh): ``$ROOT`` (``root``, found from where the script is), then the ``lines``
    one after another, with the line that runs it."""
    import os

    up = os.path.relpath(root, path.parent)
    return ("#!/usr/bin/env bash\n# one run after another; your model and data arguments follow, e.g.\n"
            f"#   bash {shlex.quote(str(path))} {USER_ARGS[trainer]}\nset -euo pipefail\n"
            + ROOT_LINE.format(up="" if up == "." else "/" + shlex.quote(up)) + "\n" + "\n".join(lines) + "\n")


SLURM = '''"""The sweep as one SLURM job array through submitit: python submit_slurm.py MODEL_AND_DATA_ARGS..."""
import sys

import submitit

COMMANDS = {commands!r}
executor = submitit.AutoExecutor(folder={folder!r})
executor.update_parameters(nodes={nodes}, tasks_per_node=1, gpus_per_node={gpus}, timeout_min=24 * 60,
                           slurm_array_parallelism=len(COMMANDS))
with executor.batch():  # one job array, one job per run
    jobs = [executor.submit(submitit.helpers.CommandFunction(c + sys.argv[1:])) for c in COMMANDS]
print("submitted", ", ".join(j.job_id for j in jobs))
'''


def support_files(trainer: str, out: Path, runs: list[P.Run], hw: P.Hardware) -> Files:
    if trainer == "trl":
        from isosim.integrations import trl_script

        return {out / "train_grpo.py": Path(trl_script.__file__).read_text()}
    if trainer == "isosim":
        commands = [shlex.split(launch_line(trainer, r, hw, out, out / "runs" / r.name).replace(' "$@"', ""))
                    for r in runs]
        return {out / "submit_slurm.py": SLURM.format(commands=commands, folder=str(out / "slurm"),
                                                      nodes=hw.nodes, gpus=hw.processes // hw.nodes)}
    return {}


def _stage(out: Path, files: Files) -> Path:
    """``files`` written into a fresh staging folder beside ``out`` (:func:`isosim.files.tmp_name`:
    a later run removes it where a kill left it), with the permissions a plain mkdir gives."""
    import os
    import shutil

    from isosim.files import atomic_write_text, tmp_name

    stage = tmp_name(out)
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        for path, text in files.items():
            target = stage / path.relative_to(out)
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target, text)
        umask = os.umask(0)
        os.umask(umask)
        stage.chmod(0o777 & ~umask)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return stage


def commit(out: Path, files: Files, replace: bool = False) -> None:
    """Write ``files`` (every path under ``out``) so that a failure leaves nothing behind: staged
    whole beside ``out``, then renamed onto it where ``out`` is absent or empty. Where ``out``
    holds files: with ``replace``, the old folder is moved aside, the staged one renamed in and the
    old one removed (the folder is the new one whole, never a mixture); without, each file is
    written atomically into it (:func:`isosim.files.atomic_write_text`; the full run's folder)."""
    import os
    import shutil

    from isosim.files import atomic_write_text, fsync_dir, remove_stale_tmp

    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_tmp(out.parent, out.name)  # a staging folder a kill left
    if out.is_dir() and any(out.iterdir()) and not replace:
        remove_stale_tmp(out)
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        return
    stage = _stage(out, files)
    try:
        if out.is_dir() and any(out.iterdir()):
            old = out.with_name(f".{out.name}.old.{os.getpid()}.tmp")
            os.replace(out, old)
            os.replace(stage, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(stage, out)  # onto an empty folder too (rename(2) replaces an empty directory)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


PLAN_OWN = ("README.md", PLAN_FILE, RUNS_FILE, "launch.sh", "train_grpo.py", "submit_slurm.py")
"""the files of a plan's folder (besides each run's settings and schedule/)"""


def _listing(out: Path, limit: int = 3) -> str:
    """A few names of what ``out`` holds (its top level only: it may be a large folder of the user's)."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir())
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _request_record(req: Request) -> dict[str, Any]:
    return json.loads(json.dumps({**asdict(req), "hardware": asdict(req.hardware)}))


def check_plan_folder(out: Path, req: Request, force: bool) -> None:
    """Refuse, before any work, a ``--out`` that holds anything but this very plan: a user's files,
    another plan (another trainer, budget or any other setting) or a plan whose runs have started
    (records, logs); ``force`` replaces the folder whole instead. An empty or absent folder, or one
    that holds this plan's files alone, is fine (:func:`check_plan_files` compares them)."""
    if force or not out.is_dir() or not any(out.iterdir()):
        return
    fix = "pass --out NEW_FOLDER, or --force to replace the folder whole (its files are deleted)"
    plan_file = out / PLAN_FILE
    if not plan_file.is_file():
        raise IsosimError(f"--out {out} holds files that are not an isosim plan ({_listing(out)}): {fix}")
    try:
        record = json.loads(plan_file.read_text())["request"]
    except (OSError, ValueError, KeyError, TypeError):
        raise IsosimError(f"--out {out} holds an unreadable {PLAN_FILE}: {fix}") from None
    new = _request_record(req)
    differ = [k for k in new if record.get(k) != new[k]]
    if differ:
        shown = "; ".join(f"{k} {record.get(k)!r} there, {new[k]!r} here" for k in differ[:3])
        raise IsosimError(f"--out {out} holds another plan ({shown}): {fix}")
    own = set(PLAN_OWN)
    started = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()
                     and not (p.parent == out and p.name in own)
                     and not (p.parent.parent == out / "runs" and p.name in SETTINGS_FILE.values())
                     and not p.is_relative_to(out / "schedule"))
    if started:
        more = f" and {len(started) - 3} more" if len(started) > 3 else ""
        raise IsosimError(f"--out {out} holds this plan with files it did not write, its runs' records or logs "
                          f"({', '.join(started[:3])}{more}): {fix}")


def check_plan_files(out: Path, files: Files, force: bool) -> None:
    """The last check before :func:`commit` replaces a folder: every file there is one this plan
    writes, with the same text (a rerun of the same plan), unless ``force``."""
    if force or not out.is_dir():
        return
    there = {p for p in out.rglob("*") if p.is_file()}
    extra = sorted(str(p.relative_to(out)) for p in there if p not in files)
    changed = sorted(str(p.relative_to(out)) for p in there if p in files and p.read_text() != files[p])
    if extra or changed:
        what = (f"files this plan does not write ({', '.join(extra[:3])})" if extra
                else f"edited files ({', '.join(changed[:3])})")
        raise IsosimError(f"--out {out} holds {what}: pass --out NEW_FOLDER, or --force to replace the folder whole "
                          "(its files are deleted)")


def sweep_files(req: Request, sweep: dict[str, Any], out: Path, schedule: dict | None = None) -> tuple[Files, list[str]]:
    """Every file of the sweep's folder, and the launch lines (nothing written)."""
    hw, trainer = req.hardware, req.trainer
    files: Files = {}
    lines = []
    for r in sweep["runs"]:
        f, line = run_files(trainer, r, hw, out, out / "runs" / r.name)
        files.update(f)
        lines.append(line)
    files.update(support_files(trainer, out, sweep["runs"], hw))
    files[out / "launch.sh"] = _script(lines, trainer, out / "launch.sh", out)
    files[out / RUNS_FILE] = "run,n,b_p,seed,lr\n" + "".join(
        f"{r.name},{r.n},{r.b_p},{r.seed},{'' if r.lr is None else repr(r.lr)}\n" for r in sweep["runs"])
    sched_lines: list[str] = []
    if schedule:
        f, sched_lines = schedule_files(req, sweep, out, schedule)
        files.update(f)
    record = {"request": {**asdict(req), "hardware": asdict(hw)}, "b_p": sweep["b_p"], "ns": sweep["ns"],
              "cheap_rollouts": sweep["cheap"], "notes": sweep["notes"], "runs": [P.summary(r) for r in sweep["runs"]],
              "schedule": schedule}
    files[out / PLAN_FILE] = json.dumps(record, indent=1) + "\n"
    files[out / "README.md"] = readme(req, sweep, out, lines, sched_lines, schedule)
    return files, lines


def write_sweep(req: Request, sweep: dict[str, Any], out: Path, schedule: dict | None = None,
                force: bool = False) -> list[str]:
    """Write the sweep's folder whole, or nothing (:func:`commit`); return the lines to print. A
    folder that holds anything but this plan's own files is refused (:func:`check_plan_files`)
    unless ``force``, which replaces it whole."""
    files, lines = sweep_files(req, sweep, out, schedule)
    check_plan_files(out, files, force)
    commit(out, files, replace=True)
    return lines


def schedule_files(req: Request, sweep: dict[str, Any], out: Path, view: dict) -> tuple[Files, list[str]]:
    """The two stages at the full budget: stage 2 starts from stage 1's saved model."""
    hw, b_p, trainer = req.hardware, sweep["b_p"], req.trainer
    (n1, s1), (n2, _) = [(st["n"], st["share"]) for st in view["stages"]]
    m1 = P.steps_for(req.budget * s1, n1, b_p)
    m2 = P.steps_for(req.budget - m1 * b_p * n1, n2, b_p)
    folder = out / "schedule"
    lr = lr_of(req, b_p)
    one = P.make_run(trainer, n1, b_p, m1, req.seed, hw, str(folder / f"stage1-n{n1}"), name=f"stage1-n{n1}", lr=lr)
    two = P.make_run(trainer, n2, b_p, m2, req.seed, hw, str(folder / f"stage2-n{n2}"), name=f"stage2-n{n2}", lr=lr)
    # stage 1 saves its model where stage 2 loads it: train_grpo.py saves to output_dir; verl writes
    # a Hugging Face copy into its last checkpoint; isosim's runner into final_model/
    first = folder / one.name
    if trainer == "verl":
        one.settings.update({"trainer.save_freq": m1,
                             "actor_rollout_ref.actor.checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"]})
        start = f" actor_rollout_ref.model.path={first}/checkpoints/global_step_{m1}/actor/huggingface"
    elif trainer == "isosim":
        one.settings["save_final_model"] = True
        start = f" --model {first}/final_model"
    else:
        start = f" --model_name_or_path {first}"
    files, line1 = run_files(trainer, one, hw, out, first)
    f2, line2 = run_files(trainer, two, hw, out, folder / two.name, start)
    files.update(f2)
    files[folder / "launch.sh"] = _script([line1, line2], trainer, folder / "launch.sh", out)
    return files, [line1, line2]


def readme(req: Request, sweep: dict[str, Any], out: Path, lines: list[str], sched_lines: list[str],
           schedule: dict | None) -> str:
    runs, hw, t = sweep["runs"], req.hardware, req.trainer
    first = runs[0]
    table = "\n".join(f"| {r.name} | {r.n} | {r.b_p} | {r.steps} | {r.rollouts:,} | {r.lr:.3g} | "
                      f"{'; '.join(r.notes) or '-'} |" for r in runs)
    back = f"isosim recommend --runs {out / 'runs'} --budget {req.budget:.6g} --for {t}"
    what = {"trl": "TRL GRPOTrainer (train_grpo.py: GRPOTrainer with isosim's RecordsCallback, which writes "
                   "records.jsonl into each run's folder; TensorBoard logs land there too)",
            "verl": "verl (python -m verl.trainer.main_ppo with each run's overrides; TensorBoard logs in each run's folder)",
            "isosim": "isosim's runner (python -m llm_runs.training.train; submit_slurm.py sends the sweep to SLURM)"}[t]
    text = [f"# Cheap isocompute sweep for {t}",
            "",
            f"Budget C = {req.budget:.6g} rollouts{req.budget_note}; each run spends the cheap share {req.share:g} of it "
            f"(at most {sweep['cheap']:.6g} rollouts), every n at B_p = {sweep['b_p']} prompts per update, "
            f"{len(runs)} run(s) on {hw.processes} process(es) over {hw.nodes} node(s), at most {hw.per_device} "
            "completions per device in a training micro-batch"
            + (f"; generation is not split so: each process generates its B_p x n / processes completions at once "
               f"(up to {max(r.b_p * r.n for r in runs) // hw.processes:,} for n = {max(r.n for r in runs)}), so the "
               "largest n needs the most memory for sampling" if t in ("trl", "verl") else "") + ".",
            "", f"Trainer: {what}.", "", *[f"- {n}" for n in sweep["notes"]], "",
            "| run | n | B_p | steps | rollouts | lr | memory |", "|---|---|---|---|---|---|---|", table, "",
            *lr_md(req, sweep["b_p"]), "", "## 0. Install", "", *INSTALL[t], "", "## 1. Run the sweep", "",
            "Each line of `launch.sh` trains one run; add your own model and data arguments after it:", "",
            "```", f"bash {out / 'launch.sh'} {USER_ARGS[t]}", "```", "",
            "The first run's line (`$ROOT`: this folder, found from where launch.sh is, so the folder can be moved "
            "or copied to the training machine):", "",
            "```", lines[0], "```", ""]
    if t == "verl":
        text += ["verl logs no batch settings: isosim reads n and B_p of each run from `isosim_runs.csv`.", ""]
    text += ["## 2. Read the runs back and write the full run", "", "```", back, "```", "",
             "It prints the pick, its tie band and whether n matters here, and writes the pick's full-budget "
             f"settings for {t} (B_p = {sweep['b_p']}, steps to C) under `{out / 'full'}` with their launch line.", ""]
    if schedule:
        text += ["## Schedule", "", _schedule_md(schedule), "",
                 "`schedule/launch.sh` (the same arguments as the sweep's) runs both stages; stage 2 starts from "
                 "stage 1's saved model, named after your arguments so that it wins"
                 + (" (verl: leave actor_rollout_ref.model.path out of stage 2's arguments; Hydra takes one value)"
                    if t == "verl" else "") + ":", "",
                 "```", *sched_lines, "```", ""]
    text += [f"First run's settings are in `{Path('runs') / first.name / SETTINGS_FILE[t]}`; "
             f"`{PLAN_FILE}` holds the whole plan.", ""]
    return "\n".join(text)


INSTALL = {
    "trl": ["On the training machine, in a clone of isosim: `pip install -e '.[trl]'` (the `trl` extra: TRL and "
            "TensorBoard; `train_grpo.py` imports isosim's records callback) and `pip install math-verify` for TRL's "
            "`accuracy_reward`. Reading the runs back needs nothing more.", "",
            "`--reward_funcs accuracy_reward` is TRL's own reward (`trl.rewards.accuracy_reward`): it checks each "
            "completion against the dataset's `solution` column with math-verify. Any reward of yours goes as "
            "`module.function`, importable from the folder you launch in (e.g. `--reward_funcs my_rewards.accuracy`)."],
    "verl": ["On the training machine: verl itself (the launch lines need no isosim). Where you read the runs back, "
             "in a clone of isosim: `pip install -e '.[tensorboard]'` (verl logs TensorBoard events, which isosim reads "
             "with TensorBoard)."],
    "isosim": ["On the training machine, in a clone of isosim: `pip install -e '.[llm]'` (`.[llm,slurm]` for "
               "`submit_slurm.py`)."],
}
"""what to install where, per trainer (the extras of pyproject.toml)"""

LR_KEY = {"trl": "`learning_rate` in each run's config.yaml", "verl": "`actor_rollout_ref.actor.optim.lr` in each "
          "run's overrides", "isosim": "`lr` (with `base_lr`, `lr_rule`, `lr_ref_batch`) in each run's config.json"}


def default_base(trainer: str) -> str:
    """What the BASE is where ``--lr`` is not given, in the trainer's terms (verl's own default differs)."""
    if trainer == "trl":
        return f"TRL's default learning_rate, {LR.DEFAULT_BASE:g}"
    return (f"isosim's default BASE, {LR.DEFAULT_BASE:g} (the IsoCompute paper's base lr), taken as the lr at the "
            "reference batch")


def lr_md(req: Request, b_p: int) -> list[str]:
    """The plan README's learning-rate section: which rule, from which BASE, and why."""
    base, rule, ref = lr_of(req, b_p)
    given = "given by --lr" if req.lr is not None and not req.lr_defaulted else f"--lr not given: {default_base(req.trainer)}"
    if req.lr_defaulted:
        given += f", at TRL's default num_generations, n = {req.lr_tuned_at}: that n's runs get it exactly"
    elif req.lr_tuned_assumed:
        given += (f", taken as tuned at TRL's default num_generations, n = {req.lr_tuned_at} (--lr-tuned-at N if "
                  "you tuned it at another n): that n's runs get it exactly")
    elif req.lr_tuned_at is not None:
        given += (f", tuned at {_tuned_where(req)} (--lr-tuned-at"
                  + ("" if req.lr_tuned_b_p is None else ", --lr-tuned-b-p") + f"): {_exactly(req, b_p)}")
    formula = (f"lr = {base:g} x sqrt(B_p x n / {ref:g})" if rule == "sqrt" else f"lr = {base:g} for every n")
    text = ["## Learning rate", "",
            f"Each run's lr is written in its settings ({LR_KEY[req.trainer]}) by the **{rule}** rule (--lr-rule) from "
            f"BASE = {base:g} ({given}) at the reference batch of B_p x n = {ref:g} rollouts a step: "
            f"{formula}.", "",
            f"Why sqrt is the default: {LR.MEASURED}."]
    if rule == "constant":
        text += ["", "You chose one lr for every n (what TRL and verl do by default): the sweep then compares n at that "
                 "lr, and `recommend --runs` reads the rule back and says what it did to small n on that learner."]
    return text


def _schedule_md(view: dict) -> str:
    sim = view["simulator"]
    rows = "\n".join(f"| {arm} | {a['steps']} | {a['val_mean']:.4f} +- {a['val_se']:.4f} |"
                     for arm, a in sim["arms"].items())
    return (f"The simulator's view ({sim['note']}; preset {sim['preset']}, {sim['seeds']} seeds):\n\n"
            f"| arm | steps | validation pass rate |\n|---|---|---|\n{rows}\n\n{sim['verdict']}.")


# ----------------------------------------------------------------------------------------------
# The way back: the pick's full-budget run
# ----------------------------------------------------------------------------------------------
def find_plan(runs: Path) -> Path | None:
    for folder in (runs, runs.parent, runs.parent.parent):
        if (folder / PLAN_FILE).is_file():
            return folder
    return None


def hardware_of(plan_dir: Path | None) -> tuple[P.Hardware, dict[str, Any]]:
    if plan_dir is None:
        return P.Hardware(), {}
    try:
        record = json.loads((plan_dir / PLAN_FILE).read_text())
        return P.Hardware(**record["request"]["hardware"]), record
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IsosimError(f"{plan_dir / PLAN_FILE}: cannot read the plan ({exc})") from None


def full_folder(runs: Path) -> Path:
    """Where ``recommend --runs RUNS --for`` writes the pick's full run: the plan's ``full/`` folder,
    or ``<runs>-full`` where no plan is found; absolute, so that its launch lines work from anywhere."""
    runs = Path(runs).resolve()
    plan_dir = find_plan(runs)
    return (plan_dir / "full") if plan_dir else runs.with_name(runs.name + "-full")


def write_full(trainer: str, runs: Path, n: int, b_p: int, budget: float,
               lr: tuple[float, str] | None = None, force: bool = False) -> dict[str, Any]:
    """The pick's run at the full budget, in the trainer's settings, in :func:`full_folder`;
    ``lr``: (BASE, rule) of its learning rate. Every path written is absolute. A file there that is
    not as isosim last wrote it (the user's edit of a settings file, say) is not overwritten
    without ``force`` (:func:`isosim.files.refuse_overwrite`; the folder's ledger records what was written)."""
    from isosim.files import LEDGER, ledger_text, refuse_overwrite

    if trainer not in P.TRAINERS:
        raise IsosimError(f"--for must be one of {', '.join(P.TRAINERS)}, got {trainer!r}")
    runs = Path(runs).resolve()
    plan_dir = find_plan(runs)
    hw, record = hardware_of(plan_dir)
    out = full_folder(runs)
    seed = int(record.get("request", {}).get("seed", 0))
    steps = P.steps_for(budget, n, b_p)
    name = f"full-n{n}"
    run = P.make_run(trainer, n, b_p, steps, seed, hw, str(out / name), name=name, lr=lr)
    every = P.checkpointed(trainer, run)  # a long run: launched again after an interruption, it resumes
    planned_for = record.get("request", {}).get("trainer")
    if planned_for and planned_for != trainer:
        run.notes.append(f"the runs were planned for {planned_for} (isosim_plan.json); this full run is written for "
                         f"{trainer}, so it trains with another trainer than the cheap runs did")
    own_script = trainer == "trl" and not (plan_dir and (plan_dir / "train_grpo.py").is_file())
    root = out if own_script else (plan_dir or out)  # the folder launch.sh's paths are written from
    files, line = run_files(trainer, run, hw, root, out / name)
    if own_script:
        files.update(support_files(trainer, out, [run], hw))
    files[out / "launch.sh"] = _script([line], trainer, out / "launch.sh", root)
    line = launch_line(trainer, run, hw, root, out / name)  # as it runs here: every path absolute
    refuse_overwrite(out, files, force, f"--for {trainer}")
    files[out / LEDGER] = ledger_text(out, {p: text.encode("utf-8") for p, text in files.items()})
    commit(out, files)
    return {"folder": str(out), "settings": str(out / name / SETTINGS_FILE[trainer]), "launch": line,
            "steps": steps, "rollouts": run.rollouts, "processes": hw.processes, "notes": run.notes, "lr": run.lr,
            "checkpoint_every": every}


def plan_settings(runs: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """n, b_p and seed of the logged runs ``names`` from the plan's run table (found at ``runs``
    or up to two folders above), matched on the run's folder name; {} where there is no plan."""
    from isosim.integrations._runs import read_runs_file

    plan_dir = find_plan(Path(runs))
    if plan_dir is None or not (plan_dir / RUNS_FILE).is_file():
        return {}
    table = read_runs_file(plan_dir / RUNS_FILE)
    return {name: table[name.split("/")[-1]] for name in names if name.split("/")[-1] in table}


# ----------------------------------------------------------------------------------------------
# What the commands print
# ----------------------------------------------------------------------------------------------
KEY_SETTINGS = {
    "trl": ("num_generations", "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps",
            "learning_rate"),
    "verl": ("data.train_batch_size", "actor_rollout_ref.rollout.n",
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "trainer.total_training_steps",
             "actor_rollout_ref.actor.optim.lr"),
    "isosim": ("n", "b_p", "budget", "lr"),
}


def _key_settings(trainer: str, run: P.Run) -> str:
    def text(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    return " ".join(f"{k.rsplit('.', 1)[-1]}={text(run.settings[k])}" for k in KEY_SETTINGS[trainer] if k in run.settings)


def plan_lines(req: Request, sweep: dict[str, Any], out: Path, lines: list[str], view: dict | None) -> list[str]:
    runs = sweep["runs"]
    text = [f"cheap sweep for {req.trainer}: n = {', '.join(map(str, sweep['ns']))} at B_p = {sweep['b_p']}, "
            f"each run at most {sweep['cheap']:.4g} rollouts ({req.share:g} of C = {req.budget:.4g}), "
            f"{req.hardware.processes} process(es)  ->  {out}"]
    text += [f"  note: {n}" for n in sweep["notes"]]
    _, rule, _ = lr_of(req, sweep["b_p"])
    text.append(f"  lr: the {rule} rule from {lr_where(req, sweep['b_p'])}"
                + ("" if req.lr is not None and not req.lr_defaulted else f" (--lr not given: {default_base(req.trainer)})")
                + f"; why, in {out / 'README.md'}")
    for r in runs:
        text.append(f"  {r.name}: {r.steps} steps of {r.b_p * r.n} rollouts | {_key_settings(req.trainer, r)}")
    if view:
        sim = view["simulator"]
        text.append(f"schedule {req.schedule}: {sim['verdict']} ({sim['note']})")
        for arm, a in sim["arms"].items():
            text.append(f"  {arm:>18}: validation pass rate {a['val_mean']:.4f} +- {a['val_se']:.4f}")
        text.append(f"  its two stages at C: {out / 'schedule' / 'launch.sh'}")
    text += [f"run: bash {out / 'launch.sh'} {USER_ARGS[req.trainer]}",
             f"then: isosim recommend --runs {out / 'runs'} --budget {req.budget:.6g} --for {req.trainer}",
             f"(what to run and what next: {out / 'README.md'})"]
    return text


def full_lines(r: dict[str, Any], full: dict[str, Any], trainer: str) -> list[str]:
    band, ns = r.get("tie_band") or [], list(r.get("n", {}))
    matters = ("n matters little here: every n read is in the tie band" if len(band) >= len(ns)
               else f"n matters here: {len(band)} of the {len(ns)} n read are in the tie band")
    text = [matters,
            f"full run for {trainer}: n = {r['pick']}, B_p = {r['b_p']}, {full['steps']} steps "
            f"({full['rollouts']:,} rollouts of C = {r['budget']:.4g}) on {full['processes']} process(es)"]
    text += [f"  note: {n}" for n in full["notes"]]
    if full.get("lr") is not None:
        text.append(f"  lr {full['lr']:.3g}: the cheap runs' rule for n = {r['pick']} (see the lr lines above)")
    if full.get("checkpoint_every"):
        text.append(f"  checkpoints every {full['checkpoint_every']} steps (the last two kept): launched again after an "
                    "interruption, the run resumes from the newest")
    text += [f"settings: {full['settings']}", f"launch: {full['launch']}"]
    return text
