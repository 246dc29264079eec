"""isosim plan: the cheap sweep in TRL, verl and isosim settings, their rules, refusals and files."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from isosim.errors import IsosimError
from isosim.integrations import plan as P
from isosim.integrations import plan_files as F

ROOT = Path(__file__).resolve().parents[1]
VERL_KEYS = {line for line in (ROOT / "tests" / "fixtures" / "verl_0.9.1_ppo_trainer_keys.txt").read_text().splitlines()
             if line and not line.startswith("#")}


def isosim(*args, cwd=None):
    """The command in a child process, from ``cwd`` (the repository's cli.py on its path wherever it runs)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd or ROOT, env=env)


def check_trl_arithmetic(s: dict, n: int, b_p: int, hw: P.Hardware) -> None:
    """One update per generation batch of B_p x n completions, micro-batches within the cap."""
    P.check_trl(s, hw.processes)
    assert s["num_generations"] == n and s["num_iterations"] == 1
    assert s["steps_per_generation"] == s["gradient_accumulation_steps"]
    assert s["per_device_train_batch_size"] * hw.processes * s["steps_per_generation"] == b_p * n
    assert s["per_device_train_batch_size"] <= hw.per_device


def check_verl_arithmetic(s: dict, n: int, b_p: int, hw: P.Hardware) -> None:
    P.check_verl(s)
    assert s["data.train_batch_size"] == s["actor_rollout_ref.actor.ppo_mini_batch_size"] == b_p
    assert s["actor_rollout_ref.rollout.n"] == n and s["actor_rollout_ref.actor.ppo_epochs"] == 1
    assert s["trainer.n_gpus_per_node"] * s["trainer.nnodes"] == hw.processes
    assert s["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] <= hw.per_device
    assert not set(s) - VERL_KEYS  # every override is a key of verl 0.9.1's trainer config


@pytest.mark.parametrize("processes", [1, 7, 8])
@pytest.mark.parametrize("trainer", ["trl", "verl", "isosim"])
def test_every_n_from_2_to_256_gets_valid_settings(trainer, processes):
    hw = P.Hardware(processes=processes, per_device=8)
    for n in range(2, 257):
        b_p, _ = P.resolve_b_p(trainer, [n], None, processes)
        run = P.make_run(trainer, n, b_p, 10, 0, hw, "/runs/x")
        assert run.rollouts == 10 * b_p * n
        if trainer == "trl":
            check_trl_arithmetic(run.settings, n, b_p, hw)
        elif trainer == "verl":
            check_verl_arithmetic(run.settings, n, b_p, hw)
        else:
            assert run.settings["b_p"] % processes == 0 and run.settings["budget"] == run.rollouts


def test_memory_cap_forces_gradient_accumulation():
    hw = P.Hardware(processes=8, per_device=3)
    run = P.make_run("trl", 16, 32, 5, 0, hw, "/runs/x")  # 512 completions, 64 per process, <= 3 a micro-batch
    s = run.settings
    assert s["per_device_train_batch_size"] == 2 and s["gradient_accumulation_steps"] == 32
    check_trl_arithmetic(s, 16, 32, hw)
    assert "32 micro-batches of 2 completions" in run.notes[0]
    v = P.make_run("verl", 16, 32, 5, 0, hw, "/runs/x").settings
    assert v["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == 2
    check_verl_arithmetic(v, 16, 32, hw)
    no_cap = P.make_run("trl", 16, 32, 5, 0, P.Hardware(processes=8, per_device=64), "/runs/x").settings
    assert no_cap["gradient_accumulation_steps"] == 1 and no_cap["per_device_train_batch_size"] == 64


def test_seven_processes_default_b_p_is_a_multiple_of_seven():
    b_p, notes = P.resolve_b_p("trl", [2, 4, 8, 16], None, 7)
    assert b_p == 35 and "multiple of 7" in notes[0]
    assert P.resolve_b_p("trl", [2, 4, 8], None, 8) == (32, [])


@pytest.mark.parametrize("trainer,rule", [("trl", "TRL: the generation batch"), ("verl", "verl: data.train_batch_size x rollout.n"),
                                          ("isosim", "isosim: B_p must be a multiple")])
def test_seven_processes_refusal_names_rule_and_nearest_settings(trainer, rule):
    with pytest.raises(IsosimError) as e:
        P.check_split(trainer, 4, 32, 7)
    msg = str(e.value)
    assert rule in msg and "nearest valid: --b-p 28 or --b-p 35" in msg and "\n" not in msg
    if trainer != "isosim":
        assert "n = 7 or 14 at B_p = 32" in msg  # the open-r1 advice: num_generations 7 on 7 processes
        for b_p in (28, 35):
            P.check_split(trainer, 4, b_p, 7)  # the settings named are valid
        P.check_split(trainer, 7, 32, 7)


@pytest.mark.parametrize("args,expected", [
    (["--budget", "1e6", "--n", "0,4"], "n = 0: GRPO needs at least 2 completions"),
    (["--budget", "1e6", "--n", "1,4"], "n = 1: GRPO needs at least 2"),
    (["--budget", "-5"], "--budget must be a positive number"),
    (["--budget", "1e6", "--processes", "7", "--b-p", "32", "--n", "4,8"], "nearest valid: --b-p 28 or --b-p 35"),
    (["--budget", "1e6", "--n", "4,256"], "n = 256: the cheap part (0.05 of C = 5e+04 rollouts) gives 6 step(s)"),
    (["--budget", "1e6", "--processes", "8", "--nodes", "3"], "must split evenly over --nodes 3"),
    (["--budget", "1e6", "--processes", "8", "--nodes", "2", "--for", "isosim"], "--for isosim plans single-node runs"),
    (["--budget", "1e6", "--max-per-device", "0"], "--max-per-device must be >= 1"),
    (["--budget", "1e6", "--share", "1.5"], "--share must be between 0 and 1"),
    (["--budget", "1e6", "--n", "4,x"], "expected comma-separated integers"),
    (["--budget", "1e6", "--gpu-hours", "3"], "not both"),
    (["--gpu-hours", "3"], "go together"),
    (["--budget", "1e6", "--schedule", "8:1.5,32"], "share of the rollouts must be between 0 and 1"),
    (["--budget", "1e6", "--processes", "7", "--b-p", "32", "--n", "7,14", "--schedule", "8:0.5,14"],
     "n = 8: B_p x n = 32 x 8"),
])
def test_bad_input_one_line_exit_2(tmp_path, args, expected):
    res = isosim("plan", "--for", "trl", *args, "--out", tmp_path / "o")
    assert res.returncode == 2, res.stderr
    assert expected in res.stderr and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "o" / "launch.sh").exists()


def test_steps_refusal_names_settings_that_work():
    with pytest.raises(IsosimError) as e:
        P.check_steps(256, 32, 5e4, 10, 0.05, 1e6)
    assert "--share 0.082" in str(e.value) and "--b-p 19" in str(e.value)
    assert P.check_steps(256, 19, 5e4, 10, 0.05, 1e6) >= 10
    assert P.check_steps(256, 32, 0.082 * 1e6, 10, 0.082, 1e6) >= 10


def test_default_grid_powers_of_two_with_enough_steps():
    assert P.default_grid(5e4, 32) == [2, 4, 8, 16, 32, 64, 128]
    assert P.default_grid(1e9, 32) == [2, 4, 8, 16, 32, 64, 128, 256]
    with pytest.raises(IsosimError, match="lower --b-p to at most 3"):
        P.default_grid(64, 32)


SUBMITIT_STUB = """
import json, os
_log = {"submitted": []}
class AutoExecutor:
    def __init__(self, folder):
        _log["folder"] = folder
    def update_parameters(self, **kw):
        _log["parameters"] = kw
    def batch(self):
        import contextlib
        return contextlib.nullcontext()
    def submit(self, fn):
        _log["submitted"].append(fn.command)
        with open(os.environ["SUBMITIT_LOG"], "w") as f:
            json.dump(_log, f)
        return type("Job", (), {"job_id": str(len(_log["submitted"]))})()
class helpers:
    class CommandFunction:
        def __init__(self, command):
            self.command = command
"""
"""a stand-in for submitit that writes down what submit_slurm.py asks SLURM for"""


def cheap_runs(budget: float, share: float, b_p: int, ns: list[int], seeds: int) -> list[tuple[str, int, int, int, int]]:
    """(name, n, seed, steps, rollouts) of each run of a cheap sweep, worked out here: as many whole
    updates of B_p x n as the cheap share of the budget holds."""
    return [(f"n{n}-s{s}", n, s, int(share * budget // (b_p * n)), int(share * budget // (b_p * n)) * b_p * n)
            for n in ns for s in range(seeds)]


def submitted_by(script: Path, args: list[str], tmp_path: Path) -> dict:
    """What ``python script ARGS`` submits to SLURM, run against :data:`SUBMITIT_STUB`."""
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "submitit.py").write_text(SUBMITIT_STUB)
    log = tmp_path / "submitted.json"
    res = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(stub), "SUBMITIT_LOG": str(log)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "submitted " + ", ".join(str(i + 1) for i in range(len(json.loads(log.read_text())["submitted"])))
    return json.loads(log.read_text())


def launch_lines(script: Path, root: Path) -> list[str]:
    """A launch.sh's run lines with ``"$ROOT"`` (the folder the script finds itself in) spelled out as ``root``."""
    text = script.read_text()
    assert F.ROOT_LINE.split("=")[0] + "=" in text  # ROOT= is set before any line uses it
    return [x.replace('"$ROOT"', shlex.quote(str(root))) for x in text.splitlines()
            if x and not x.startswith("#") and x != "set -euo pipefail" and not x.startswith("ROOT=")]


STUB = """#!/usr/bin/env bash
printf '%s\\n' "$(basename "$0")" "TENSORBOARD_DIR=${TENSORBOARD_DIR:-}" "$@" >> "$STUB_LOG"
"""


@pytest.mark.parametrize("trainer", ["trl", "verl", "isosim"])
def test_a_moved_plan_folder_launches_from_where_it_is_now(tmp_path, trainer):
    """A plan written on one machine and copied to another (another path): launch.sh finds its folder
    itself, so every path its runs are given (the script, the settings, the output folder; verl's
    TensorBoard and checkpoint folders) is under the new place, none under the old one."""
    import shutil

    old = tmp_path / "planned here" / "sweep"  # a space: the paths must stay one word each
    res = isosim("plan", "--for", trainer, "--budget", "2e5", "--n", "4,16", "--out", old)
    assert res.returncode == 0, res.stderr
    new = tmp_path / "trained there" / "sweep"
    new.parent.mkdir()
    shutil.move(str(old), str(new))
    stub = tmp_path / "bin"
    stub.mkdir()
    for exe in ("accelerate", "python", "python3"):
        (stub / exe).write_text(STUB)
        (stub / exe).chmod(0o755)
    log = tmp_path / "argv.txt"

    def launch() -> list[str]:
        log.write_text("")
        run = subprocess.run(["bash", str(new / "launch.sh"), "--model_name_or_path", "M"], capture_output=True,
                             text=True, timeout=60,
                             env={**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "STUB_LOG": str(log)})
        assert run.returncode == 0, run.stderr
        return log.read_text().splitlines()

    words = launch()
    paths = [w.split("=", 1)[-1] for w in words if "/" in w]
    assert paths and not any(str(old) in w for w in words), [w for w in words if str(old) in w][:3]
    assert all(p.startswith(str(new)) for p in paths if p.startswith(str(tmp_path))), paths
    outs = {"trl": "--output_dir", "isosim": "--out"}
    if trainer in outs:
        given = [words[i + 1] for i, w in enumerate(words) if w == outs[trainer]]
        assert given == [str(new / "runs" / r) for r in ("n4-s0", "n16-s0")]
    else:
        assert [w for w in words if w.startswith("TENSORBOARD_DIR=")] == [
            f"TENSORBOARD_DIR={new / 'runs' / r}" for r in ("n4-s0", "n16-s0")]
    assert words.count("M") == 2  # the user's arguments reach every run
    if trainer == "trl":  # a run train_grpo.py marked finished is not trained again when launch.sh is rerun
        from isosim.integrations.trl_script import FINISHED

        (new / "runs" / "n4-s0" / FINISHED).write_text("{}\n")
        words = launch()
        assert [words[i + 1] for i, w in enumerate(words) if w == "--output_dir"] == [str(new / "runs" / "n16-s0")]


@pytest.mark.parametrize("trainer", ["trl", "verl", "isosim"])
def test_plan_writes_folder_and_readme(tmp_path, trainer):
    out = tmp_path / "sweep"
    res = isosim("plan", "--for", trainer, "--budget", "2e5", "--n", "4,16", "--processes", "8",
                 "--max-per-device", "4", "--seeds", "2", "--out", out)
    assert res.returncode == 0, res.stderr
    record = json.loads((out / F.PLAN_FILE).read_text())
    # B_p 32 (a multiple of the 8 processes); 5 % of 2e5 = 1e4 rollouts: n = 4 78 steps, n = 16 19
    want = cheap_runs(2e5, 0.05, 32, [4, 16], 2)
    assert [(r["name"], r["n"], r["seed"], r["steps"], r["rollouts"]) for r in record["runs"]] == want
    assert [w[3:] for w in want[::2]] == [(78, 9984), (19, 9728)] and record["b_p"] == 32
    # the default, sqrt rule: TRL's 1e-6 at its num_generations 8 (B_p x 8) for trl, at 1,024 rollouts for the others
    ref = 32 * 8 if trainer == "trl" else 1024
    lrs = [1e-6 * (32 * w[1] / ref) ** 0.5 for w in want]
    assert (out / F.RUNS_FILE).read_text().splitlines() == ["run,n,b_p,seed,lr"] + [
        f"{w[0]},{w[1]},32,{w[2]},{lr!r}" for w, lr in zip(want, lrs)]
    lines = launch_lines(out / "launch.sh", out)
    assert len(lines) == 4 and all(line.endswith('"$@"') for line in lines)
    for r, (name, n, seed, steps, rollouts) in zip(record["runs"], want):
        settings = out / "runs" / r["name"] / F.SETTINGS_FILE[trainer]
        assert (str(settings) in "\n".join(lines)) == (trainer != "verl")  # verl: inline overrides
        if trainer == "trl":
            cfg = yaml.safe_load(settings.read_text())
            check_trl_arithmetic(cfg, n, 32, P.Hardware(8, 1, 4))
            assert (cfg["max_steps"], cfg["seed"], cfg["output_dir"]) == (steps, seed, str(out / "runs" / name))
        elif trainer == "verl":
            items = dict(x.split("=", 1) for x in settings.read_text().splitlines())
            assert set(items) <= VERL_KEYS and items["actor_rollout_ref.rollout.n"] == str(n)
            assert (items["data.train_batch_size"], items["trainer.total_training_steps"]) == ("32", str(steps))
            assert items["trainer.logger"] == "[console,tensorboard]"
            # the launch line passes the same overrides as separate words, quoted for the shell
            words = shlex.split(next(x for x in lines if f"TENSORBOARD_DIR={out / 'runs' / r['name']}" in x))
            assert words[1:4] == ["python3", "-m", "verl.trainer.main_ppo"] and words[-1] == "$@"
            assert dict(w.split("=", 1) for w in words[4:-1]) == items
        else:
            assert json.loads(settings.read_text()) == {"n": n, "b_p": 32, "budget": rollouts, "seed": seed,
                                                        "out": str(out / "runs" / name), "lr": lrs[want.index((name, n, seed, steps, rollouts))],
                                                        "base_lr": 1e-6, "lr_rule": "sqrt", "lr_ref_batch": 1024}
    readme = (out / "README.md").read_text()
    assert f"isosim recommend --runs {out / 'runs'} --budget 200000 --for {trainer}" in readme
    # the memory the table's micro-batch does not bound: generating B_p x n / processes at once (n = 16: 64)
    assert ("generates its B_p x n / processes completions at once (up to 64 for n = 16)" in readme) == (trainer != "isosim")
    for name, n, _, steps, rollouts in want:  # the README's table is the plan's
        assert f"| {name} | {n} | 32 | {steps} | {rollouts:,} |" in readme
    assert (out / "train_grpo.py").exists() == (trainer == "trl")
    assert (out / "submit_slurm.py").exists() == (trainer == "isosim")
    if trainer == "isosim":
        assert lines[0].startswith("accelerate launch --num_processes 8 -m llm_runs.training.train --config ")
        # the SLURM script submits each launch line, with the user's arguments, as one job array
        got = submitted_by(out / "submit_slurm.py", ["--model", "M"], tmp_path)
        assert got["submitted"] == [shlex.split(line)[:-1] + ["--model", "M"] for line in lines]
        assert got["folder"] == str(out / "slurm")
        assert {k: got["parameters"][k] for k in ("nodes", "gpus_per_node", "slurm_array_parallelism")} == {
            "nodes": 1, "gpus_per_node": 8, "slurm_array_parallelism": 4}


def test_trl_configs_load_into_grpoconfig_on_1_7_8_processes(tmp_path):
    """The written configs pass TRL's own GRPOConfig checks (process count patched; own process)."""
    pytest.importorskip("trl")
    batches = {}
    for processes in (1, 7, 8):
        out = tmp_path / f"p{processes}"
        res = isosim("plan", "--for", "trl", "--budget", "1e6", "--n", "2,7,8,64,256", "--share", "0.5",
                     "--processes", processes, "--max-per-device", "3", "--out", out)
        assert res.returncode == 0, res.stderr
        paths = sorted(out.glob("runs/*/config.yaml"))
        got = subprocess.run([sys.executable, str(ROOT / "tests" / "plan_grpo_config_helper.py"), str(processes),
                              *map(str, paths)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert got.returncode == 0, got.stderr[-2000:]
        rows = [json.loads(line) for line in got.stdout.splitlines() if line.startswith("{")]
        assert len(rows) == 5 and not [r for r in rows if "error" in r]
        b_p = json.loads((out / F.PLAN_FILE).read_text())["b_p"]
        for r in rows:
            assert r["generation_batch_size"] == b_p * r["num_generations"]
            # one lr for the whole run, as TRL reads the file (its default would decay it to 0 over max_steps)
            assert (r["lr_scheduler_type"], r["warmup_steps"] or 0) == ("constant", 0)
        batches[processes] = b_p
    assert batches == {1: 32, 7: 42, 8: 32}  # 7: 35 would give n = 7 micro-batches of one completion


def test_schedule_parse_and_simulator_view():
    from isosim.predict import schedule as S

    assert S.parse_schedule("8:0.5,32") == [(8, 0.5), (32, 0.5)]
    for bad in ("8,32", "8:0.5", "8:0.5,32:1", "8:x,32", "8:0,32", "1:0.5,8", "8:0.5,8"):
        with pytest.raises(IsosimError):
            S.parse_schedule(bad)
    view = S.compare([(4, 0.5), (16, 0.5)], [2, 4, 8, 16, 64], 3000, 8, seeds=2)
    # 64: beyond 2 x 16; stage 1: 1500 // 32 = 46 steps, stage 2: (3000 - 46 x 32) // 128 = 11; each
    # constant n: 3000 // (8 n) steps
    stages = {"n = 4 then 16": [(4, 46), (16, 11)], **{f"n = {n}": [(n, 3000 // (8 * n))] for n in (2, 4, 8, 16)}}
    assert view["schedule"] == [{"n": 4, "steps": 46}, {"n": 16, "steps": 11}]
    assert {arm: a["steps"] for arm, a in view["arms"].items()} == {arm: sum(m for _, m in st) for arm, st in stages.items()}
    # each arm's mean and se are its seeds' runs of those stages, and the schedule's difference is paired
    vals = {arm: np.array([S.run_stages("easy", st, 8, seed) for seed in (0, 1)]) for arm, st in stages.items()}
    for arm, v in vals.items():
        assert view["arms"][arm]["val_mean"] == pytest.approx(v.mean(), rel=1e-12)
        assert view["arms"][arm]["val_se"] == pytest.approx(v.std(ddof=1) / np.sqrt(2), rel=1e-9)
    best = max((a for a in vals if a != "n = 4 then 16"), key=lambda a: vals[a].mean())
    assert view["best_constant"] == best
    assert view["schedule_minus_best"] == pytest.approx((vals["n = 4 then 16"] - vals[best]).mean(), rel=1e-12)
    assert "simulator's view" in view["note"]


def test_a_schedule_stage_continues_the_run():
    """The loop starts from the base policy's held-out pass rate, computed here from the problems; a
    second stage of the same n is the same run as one stage of the summed steps (policy, optimizer
    state and problem draws carry over); each stage's lr is the batch-size rule's; the draws are seeded."""
    import torch

    from isosim.predict import schedule as S
    from isosim.sim.problems import build, stack

    cfg = S._config("easy", 4, 8, 0)
    pop = stack([build(cfg, memorize=cfg.memorize > 0)])
    val = slice(cfg.n_train, cfg.n_train + cfg.n_val)
    base = float((torch.softmax(pop.z0[0, val], -1) * pop.correct[0, val]).sum(-1).mean())
    assert S.run_stages("easy", [(4, 0)], 8, 0) == pytest.approx(base, rel=1e-12)
    assert S.run_stages("easy", [(4, 3), (4, 2)], 8, 0) == pytest.approx(S.run_stages("easy", [(4, 5)], 8, 0), rel=1e-12)
    lrs = []

    class Recorded(torch.optim.AdamW):  # the easy preset's optimizer
        def step(self, *a, **k):
            lrs.append(self.param_groups[0]["lr"])
            return super().step(*a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.optim, "AdamW", Recorded)
        again = S.run_stages("easy", [(4, 3), (16, 2)], 8, 0)
    # the preset's sqrt rule from its lr .2 at 1024 rollouts an update: each stage at its own B_p x n
    assert (cfg.optimizer, cfg.lr, cfg.lr_rule, cfg.b_ref) == ("adamw", 0.2, "sqrt", 1024)
    assert lrs == pytest.approx([0.2 * (8 * 4 / 1024) ** 0.5] * 3 + [0.2 * (8 * 16 / 1024) ** 0.5] * 2, rel=1e-12)
    assert again > base  # five updates learn
    assert again == S.run_stages("easy", [(4, 3), (16, 2)], 8, 0)  # seeded
    assert again != S.run_stages("easy", [(4, 3), (16, 2)], 8, 1)


def test_plan_with_schedule_writes_stages(tmp_path):
    out = tmp_path / "s"
    res = isosim("plan", "--for", "trl", "--budget", "4000", "--n", "2,4", "--b-p", "8", "--share", "0.25",
                 "--schedule", "2:0.5,8", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "schedule 2:0.5,8:" in res.stdout and "simulator's view" in res.stdout
    s1 = yaml.safe_load((out / "schedule" / "stage1-n2" / "config.yaml").read_text())
    s2 = yaml.safe_load((out / "schedule" / "stage2-n8" / "config.yaml").read_text())
    assert (s1["num_generations"], s1["max_steps"], s2["num_generations"], s2["max_steps"]) == (2, 125, 8, 31)
    launch = launch_lines(out / "schedule" / "launch.sh", out)  # $ROOT: the plan folder, one up from schedule/
    assert 'ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")"/.. && pwd)"' in (out / "schedule" / "launch.sh").read_text()
    assert launch[-1].endswith(f"\"$@\" --model_name_or_path {out / 'schedule' / 'stage1-n2'}")
    assert "## Schedule" in (out / "README.md").read_text()


def _records(root: Path, ns: dict[int, float], b_p: int, steps: int) -> None:
    for n, slope in ns.items():
        d = root / f"n{n}-s0"
        d.mkdir(parents=True, exist_ok=True)
        rows = [{"run_id": d.name, "n": n, "b_p": b_p, "seed": 0, "step": s, "rollouts": s * b_p * n,
                 "val_avg": 0.2 + slope * (s * b_p * n) ** 0.5 / 100} for s in range(0, steps + 1, max(steps // 8, 1))]
        (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_recommend_for_trl_writes_the_picks_full_run(tmp_path):
    out = tmp_path / "sweep"
    assert isosim("plan", "--for", "trl", "--budget", "1e5", "--n", "4,16", "--b-p", "8", "--processes", "8",
                  "--out", out).returncode == 0
    _records(out / "runs", {4: 1.0, 16: 0.5}, 8, 60)
    res = isosim("recommend", "--runs", out / "runs", "--budget", "1e5", "--for", "trl")
    assert res.returncode == 0, res.stderr
    assert "full run for trl: n = 4, B_p = 8, 3125 steps" in res.stdout
    cfg = yaml.safe_load((out / "full" / "full-n4" / "config.yaml").read_text())
    assert cfg["max_steps"] == 3125 and cfg["output_dir"] == str(out / "full" / "full-n4")
    # the long run saves ten checkpoints (the last two kept) and resumes from the newest; the cheap ones save none
    assert (cfg["save_strategy"], cfg["save_steps"], cfg["save_total_limit"]) == ("steps", 312, 2)
    assert "checkpoints every 312 steps (the last two kept): launched again after an interruption" in res.stdout
    assert yaml.safe_load((out / "runs" / "n4-s0" / "config.yaml").read_text())["save_strategy"] == "no"
    check_trl_arithmetic(cfg, 4, 8, P.Hardware(8))  # the plan's 8 processes
    assert str(out / "train_grpo.py") in "\n".join(launch_lines(out / "full" / "launch.sh", out))
    assert "planned for" not in res.stdout
    # the same TRL runs, their full run asked for verl: written, and said to change trainer
    res = isosim("recommend", "--runs", out / "runs", "--budget", "1e5", "--for", "verl", "--force")
    assert res.returncode == 0, res.stderr
    assert "note: the runs were planned for trl (isosim_plan.json); this full run is written for verl" in res.stdout


def test_recommend_for_refuses_unknown_trainer_and_needs_runs(tmp_path):
    _records(tmp_path / "runs", {4: 1.0, 16: 0.5}, 8, 60)
    res = isosim("recommend", "--runs", tmp_path / "runs", "--budget", "1e5", "--for", "deepspeed")
    assert res.returncode == 2 and "--for must be one of trl, verl, isosim" in res.stderr
    res = isosim("recommend", "--budget", "1e5", "--for", "trl")
    assert res.returncode == 2 and "--for writes the pick of cheap runs: give --runs" in res.stderr


def test_verl_tensorboard_logs_read_with_the_plans_run_table(tmp_path):
    """verl logs no n or B_p: the plan's isosim_runs.csv supplies them; the full run is verl overrides."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    out = tmp_path / "sweep"
    assert isosim("plan", "--for", "verl", "--budget", "1e5", "--n", "4,16", "--b-p", "8", "--processes", "8",
                  "--out", out).returncode == 0
    for n, slope in {4: 0.5, 16: 1.0}.items():  # each run to its planned 4,608 rollouts (5 % of C, whole steps)
        w = SummaryWriter(str(out / "runs" / f"n{n}-s0"))  # TENSORBOARD_DIR of the launch line
        last = 4608 // (8 * n)
        for step in range(0, last + 1, last // 9):
            w.add_scalar("critic/score/mean", 0.2 + slope * step * 8 * n / 46080, step)
            w.add_scalar("val-core/math/acc/mean@4", 0.2 + slope * step * 8 * n / 46080, step)
        w.close()
    from isosim.integrations import load_runs

    df, what = load_runs(out / "runs")
    assert "n, B_p from the plan's isosim_runs.csv" in what
    assert sorted(df["n"].unique()) == [4, 16] and set(df["b_p"]) == {8}
    assert (df["rollouts"] == df["step"] * 8 * df["n"]).all()
    res = isosim("recommend", "--runs", out / "runs", "--budget", "1e5", "--for", "verl")
    assert res.returncode == 0, res.stderr
    items = dict(x.split("=", 1) for x in (out / "full" / "full-n16" / "overrides.txt").read_text().splitlines())
    assert set(items) <= VERL_KEYS
    assert items["actor_rollout_ref.rollout.n"] == "16" and items["trainer.total_training_steps"] == str(int(1e5 // 128))
    assert items["trainer.n_gpus_per_node"] == "8"
    # the long run saves ten checkpoints (the last two kept) and verl resumes from the newest on a relaunch
    assert (items["trainer.save_freq"], items["trainer.resume_mode"], items["trainer.max_actor_ckpt_to_keep"]) == (
        str(int(1e5 // 128) // 10), "auto", "2")
    cheap = dict(x.split("=", 1) for x in (out / "runs" / "n16-s0" / "overrides.txt").read_text().splitlines())
    assert cheap["trainer.save_freq"] == "-1"
