"""The loop from a real model to a tested allocation: calibrate -> explore -> recommend -> validate.

A tiny random Llama (llm_runs.sampling.tiny) and a handful of arithmetic problems stand in for a real
model and data set: these tests check files, schemas, resumption and one-line errors, not
numbers. Everything runs through the ``isosim`` command as a user runs it, except the unit
checks of the SLURM job specs and of calibration resumption.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("math_verify")

from llm_helpers import crc_reward  # noqa: E402

from isosim.sim.profiles import read_profile  # noqa: E402

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[1]
# Small run settings shared by every validate call (a few steps of a few sequences each).
RUN_SETS = ["val_size=4", "eval_n=2", "eval_k=2", "max_new_tokens=8", "eval_points=1", "save_every=1",
            "lr=1e-3", "micro_batch_size=32", "warmup_steps=0"]


@pytest.fixture(scope="module")
def assets(tiny_assets):
    out = tiny_assets("loop", 24)
    root = out["root"]
    out["env"] = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MPLBACKEND": "Agg",
                  "ISOSIM_CACHE": str(root / "cache"), "HOME": str(root), "HF_HUB_OFFLINE": "1",
                  "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return out


def isosim(assets, *args, timeout=600, **kw):
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout, env=assets["env"], **kw)


def isosim_bg(assets, *args):
    """Started in its own session, so the test can kill it with everything it launched."""
    return subprocess.Popen([sys.executable, "-c", "import cli; cli.main()", *map(str, args)], cwd=ROOT,
                            env=assets["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def isosim_here(assets, monkeypatch, capsys, *args):
    """The command in this process (no interpreter start-up): for fast error paths."""
    import cli

    for k, v in assets["env"].items():
        if k not in ("PATH", "HOME", "PYTHONPATH"):
            monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "argv", ["isosim", *map(str, args)])
    capsys.readouterr()
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return Result(code, out, err)


def one_line_error(res, *words):
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-2000:])
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


# --------------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def calibrated(assets):
    out = assets["root"] / "cal" / "profile.json"
    res = isosim(assets, "calibrate", "--model", assets["model"], "--data", assets["data"], "--k", 4,
                 "--limit", 12, "--max-new-tokens", 8, "--out", out, "--splits", assets["root"] / "cal" / "splits")
    assert res.returncode == 0, res.stderr[-3000:]
    return out, res


def test_calibrate_writes_profile_histogram_splits(calibrated, assets):
    out, res = calibrated
    data = json.loads(out.read_text())
    assert data["k"] == 4 and len(data["rates"]) == len(data["ids"]) == 12
    assert all(0 <= r <= 1 for r in data["rates"])
    for key in ("model", "data", "sampler", "temperature", "max_new_tokens", "seed", "n_problems", "mean_rate"):
        assert key in data, key
    read_profile(out)  # what explore --profile reads
    from llm_runs.problems.data import read_calibration

    cal = read_calibration(out)  # what llm_runs --calibration reads
    assert set(cal["rates"]) == set(data["ids"]) and cal["k"] == 4
    assert (out.parent / "profile_hist.png").stat().st_size > 1000
    for name in ("easy", "hard"):
        rows = [json.loads(x) for x in (out.parent / "splits" / f"{name}.jsonl").read_text().splitlines()]
        assert all(set(r) == {"id", "problem", "answer"} for r in rows)
    assert (out.parent / "profile.json.partial.jsonl").is_file()
    assert "profile:" in res.stdout


def test_calibrate_resumes_from_partial_file(assets, tmp_path):
    from llm_runs.launch.calibrate import CalibrateSettings, calibrate, partial_path

    s = CalibrateSettings(model=assets["model"], data=assets["data"], k=2, limit=6, max_new_tokens=6, batch_size=4)
    out = tmp_path / "p.json"
    calibrate(s, out=out, reward_fn=crc_reward, log=lambda m: None)
    full = json.loads(out.read_text())["rates"]
    part = partial_path(out)
    lines = part.read_text().splitlines()
    assert len(lines) == 1 + 6 and "settings" in json.loads(lines[0])
    # killed after two chunks (of 2 problems), in the middle of writing the third
    part.write_text("\n".join(lines[:5]) + "\n" + lines[5][:9])
    out.unlink()
    logs: list[str] = []
    calibrate(s, out=out, reward_fn=crc_reward, log=logs.append)
    assert any("resuming, 4 of 6" in m for m in logs), logs
    assert json.loads(out.read_text())["rates"] == full  # chunk seeds make the resumed result identical
    assert len(part.read_text().splitlines()) == 7
    # other settings must not be mixed into the same partial file
    from isosim.errors import IsosimError

    with pytest.raises(IsosimError, match="other settings"):
        calibrate(CalibrateSettings(model=assets["model"], data=assets["data"], k=3, limit=6, max_new_tokens=6),
                  out=out, reward_fn=crc_reward, log=lambda m: None)


# --------------------------------------------------------------------------------------------
# explore and recommend on the measured profile
# --------------------------------------------------------------------------------------------
def test_explore_and_recommend_read_the_profile(calibrated, assets):
    profile, _ = calibrated
    out = assets["root"] / "explore"
    res = isosim(assets, "explore", "--profile", profile, "--quick", "--seeds", 1, "--n-boot", 0,
                 "--budget-max", 2e4, "--out", out)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "n_star" in json.loads((out / "frontier.json").read_text())
    # the budget validate uses below: its simulated sweep is cached and reused there
    res = isosim(assets, "recommend", "--budget", 128, "--profile", profile, "--quick", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    rec = json.loads(res.stdout)
    for key in ("n", "b_p", "m", "lr", "kl", "entropy", "n_sat", "predicted", "simulated_config", "recipe_mismatch"):
        assert key in rec, key
    assert rec["b_p"] * rec["n"] * rec["m"] <= 128


@pytest.mark.parametrize("args,words", [
    (["--budget", "10"], ["below one step"]),
    (["--budget", "1e5", "--max-batch", "15"], ["max batch 15", "--max-batch"]),  # the smallest step is B_p 8 x n 2
    (["--budget", "1e5", "--profile", "PROFILE_BAD"], ["profile file", "not valid JSON"]),
    (["--budget", "1e5", "--profile", "PROFILE_MISSING"], ["profile file", "no such file"]),
])
def test_recommend_bad_input_one_line_exit_2(assets, monkeypatch, capsys, args, words):
    bad = assets["root"] / "bad.json"
    bad.write_text("{not json")
    args = [{"PROFILE_BAD": str(bad), "PROFILE_MISSING": str(assets["root"] / "nope.json")}.get(a, a) for a in args]
    one_line_error(isosim_here(assets, monkeypatch, capsys, "recommend", "--quick", *args), *words)


# --------------------------------------------------------------------------------------------
# validate: dry runs, SLURM specs, and a local run that is interrupted and resumed
# --------------------------------------------------------------------------------------------
def validate_args(assets, profile, out, *extra, b_p=4):
    sets = [x for s in RUN_SETS for x in ("--set", s)]
    return ["validate", "--model", assets["model"], "--data", assets["data"], "--budget", 128, "--profile", profile,
            "--b-p", b_p, "--min-steps", 3, "--quick", "--n-boot", 0, "--out", out, *sets, *extra]


def test_validate_slurm_dry_run_prints_submitit_and_accelerate(calibrated, assets, monkeypatch, capsys):
    profile, _ = calibrated
    out = assets["root"] / "val_slurm"
    res = isosim_here(assets, monkeypatch, capsys, *validate_args(assets, profile, out, "--launcher", "slurm", "--dry-run",
                                        "--partition", "gpu", "--gpus-per-node", 4, "--time-min", 120))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "submitit.SlurmExecutor" in res.stdout and "'gpus_per_node': 4" in res.stdout
    cmds = [ln.strip() for ln in res.stdout.splitlines() if "-m accelerate.commands.launch" in ln]
    assert len(cmds) == 3 and all("-m llm_runs.training.train --config" in c for c in cmds)
    assert "nothing launched" in res.stdout
    assert not list(out.glob("runs/*/records.jsonl"))  # nothing ran
    plan = json.loads((out / "plan.json").read_text())
    assert plan["ns"] == sorted(plan["ns"]) and len(plan["ns"]) == 3 and plan["b_p"] == 4
    assert all(128 // (4 * n) >= 3 for n in plan["ns"])  # every run gets >= min_steps updates
    # 8 processes cannot split B_p = 4: refused when planning, before anything is queued
    out8 = assets["root"] / "val_slurm8"
    res = isosim_here(assets, monkeypatch, capsys, *validate_args(assets, profile, out8, "--launcher", "slurm", "--dry-run",
                                        "--gpus-per-node", 8))
    one_line_error(res, "not a multiple of the 8 processes")
    assert "submitit" not in res.stdout


def test_plan_brackets_n_sat_and_clips_to_min_steps():
    from isosim.errors import IsosimError
    from llm_runs.launch.validate import plan_ns

    assert plan_ns(16, 10**6, 32)[0] == [4, 16, 64]  # n_sat / 4, n_sat, 4 n_sat
    assert plan_ns(100, 10**6, 32)[0] == [32, 128, 512]  # powers of two
    ns, notes = plan_ns(4, 128, 4, min_steps=4)  # 1 -> 2 (GRPO needs n >= 2), 16 -> 8 (4 steps)
    assert ns == [2, 4, 8] and len(notes) == 2
    ns, notes = plan_ns(256, 256, 4, min_steps=4)  # everything clipped to 16: fill below
    assert ns == [4, 8, 16] and any("added" in m for m in notes)
    assert all(256 // (4 * n) >= 4 for n in ns)
    with pytest.raises(IsosimError, match="too small"):
        plan_ns(4, 16, 4, min_steps=4)


def test_slurm_job_specs_are_valid_submitit_and_accelerate(assets, tmp_path):
    from accelerate.commands.launch import launch_command_parser
    from submitit.slurm.slurm import _make_sbatch_string

    from llm_runs.config import parse_args
    from llm_runs.launch import validate as val

    predicted = {"n_sat": 8.0, "n_star": 8, "b_p": 4, "recipe": "hard", "budget": 256.0}
    plan = val.make_plan(model=assets["model"], data=assets["data"], budget=256, predicted=predicted,
                         settings=val.base_settings(None, val.parse_sets(RUN_SETS)), out=str(tmp_path), min_steps=2)
    val.write_plan(plan)
    assert plan.ns == [2, 8, 32]
    opts = val.SlurmOptions(partition="gpu", nodes=2, gpus_per_node=4, time_min=90, mem_gb=200, account="proj")
    spec = val.slurm_job_specs(plan, opts)
    assert len(spec["jobs"]) == 3 and spec["skipped"] == []
    script = _make_sbatch_string(command="python -u -m submitit.core._submit", folder=spec["folder"],
                                 map_count=len(spec["jobs"]), **spec["executor"])
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=4", "#SBATCH --nodes=2",
                 "#SBATCH --ntasks-per-node=1", "#SBATCH --time=90", "#SBATCH --mem=200GB", "#SBATCH --array=0-2%3",
                 "#SBATCH --account=proj"):
        assert line in script, line
    for job, run in zip(spec["jobs"], plan.runs):
        cmd = [c.replace("{machine_rank}", "0").replace("{main_process_ip}", "node1") for c in job["command"]]
        assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]  # this interpreter's accelerate
        args = launch_command_parser().parse_args(cmd[3:])
        assert args.module and args.training_script == "llm_runs.training.train"
        assert args.num_processes == 8 and args.num_machines == 2 and args.multi_gpu
        assert args.machine_rank == 0 and args.main_process_ip == "node1"
        cfg = parse_args(args.training_script_args)  # the command's own arguments make a valid run
        assert (cfg.n, cfg.b_p, cfg.budget, cfg.out) == (run.n, 4, 256, run.dir)
        assert cfg.recipe == "hard"
    # a job's command is rebuilt on the node: placeholders only for several nodes
    one = val.accelerate_command(plan.runs[0], val.SlurmOptions(gpus_per_node=1))
    assert "{machine_rank}" not in one and "--multi_gpu" not in one


def test_validate_rejects_bad_input(calibrated, assets, monkeypatch, capsys):
    profile, _ = calibrated
    out = assets["root"] / "val_bad"

    def run(*args):
        return isosim_here(assets, monkeypatch, capsys, *args)

    one_line_error(run(*validate_args(assets, profile, out, "--set", "n=4", "--dry-run")), "set by the plan")
    one_line_error(run(*validate_args(assets, profile, out, "--set", "no_such_key=1", "--dry-run")), "no_such_key")
    one_line_error(run(*validate_args(assets, profile, out, "--launcher", "pbs", "--dry-run")), "--launcher")
    one_line_error(run("validate", "--model", assets["model"], "--data", assets["data"], "--budget", 128,
                          "--b-p", 8, "--n", "2,32", "--min-steps", 1, "--quick", "--set", "val_size=4", "--out", out, "--dry-run"),
                   "--n 32", "below one step")


def test_validate_local_resumes_without_rerunning_finished_runs(calibrated, assets, monkeypatch, capsys):
    profile, _ = calibrated
    out = assets["root"] / "val"
    # two runs (8 and 4 steps) keep it short; the n_sat plan is tested above
    args = validate_args(assets, profile, out, "--n", "2,4", b_p=8)
    # --- first attempt: killed while the second run is half done
    proc = isosim_bg(assets, *args)
    deadline = time.time() + 400
    runs = None
    try:
        while time.time() < deadline and proc.poll() is None:
            if runs is None and (out / "plan.json").is_file():
                runs = [Path(r["dir"]) for r in json.loads((out / "plan.json").read_text())["runs"]]
            if runs and (runs[1] / "checkpoint" / "trainer_state.json").is_file():
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out_text = proc.communicate()[0]
    assert runs is not None, out_text[-3000:]
    first_log = (runs[0] / "train.log").read_text()
    second_state = json.loads((runs[1] / "checkpoint" / "trainer_state.json").read_text())
    total = [r["steps"] for r in json.loads((out / "plan.json").read_text())["runs"]]
    assert "run already complete" not in first_log
    assert 0 < second_state["step"] < total[1], "the kill came too late to leave a half-done run"
    assert not (out / "validation.md").exists()
    # --- rerun: run 1 is skipped, run 2 resumes from its checkpoint, run 3 runs
    res = isosim(assets, *args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"{runs[0].name} (n=" in res.stdout and "finished earlier, not rerun" in res.stdout
    assert (runs[0] / "train.log").read_text() == first_log  # not launched again
    assert "resumed from" in (runs[1] / "train.log").read_text()
    for run, m in zip(runs, total):
        rows = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
        steps_seen = [r["step"] for r in rows]
        assert steps_seen == sorted(set(steps_seen)) and steps_seen[-1] == m  # nothing lost or repeated
    # --- the report
    result = json.loads((out / "validation.json").read_text())
    v = result["verdict"]
    for key in ("predicted_n_star", "predicted_n_sat", "observed_best_n", "saturation", "agreement", "sentence",
                "per_n", "base_reward"):
        assert key in v, key
    assert v["agreement"] in ("agrees", "consistent, unresolved", "disagrees", "inconclusive")
    assert v["saturation"] in ("seen", "not seen", "unresolved")
    assert set(v["per_n"]) == {str(n) for n in result["plan"]["ns"]}
    md = (out / "validation.md").read_text()
    for heading in ("## Verdict", "## Prediction", "## Plan", "## Observed"):
        assert heading in md
    fr = result["frontier"]
    if fr is not None:  # the frontier table thinned as analyze prints it, a value read between evaluations marked
        from isosim.frontier.report import interpolated, summary_rows

        assert "| budget | observed n* | tie band | frontier reward | learning |" in md
        assert all(f"| {' | '.join(row)} |" in md for row in summary_rows(fr, 8))
        assert ("* interpolated: read between a run's evaluations" in md) == any(interpolated(fr))
    for fig in ("reward_curves.png", "n_star_predicted_vs_observed.png"):
        assert (out / "figures" / fig).stat().st_size > 1000
    # --- another plan in the same folder is refused
    again = validate_args(assets, profile, out, "--n", "2,4", "--seeds", 2, b_p=8)
    one_line_error(isosim_here(assets, monkeypatch, capsys, *again), "other settings")
