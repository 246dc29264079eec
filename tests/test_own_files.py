"""Nothing of the user's overwritten, every output written whole or refused in one line: plan's
folder (another plan, a user's files, started runs), predict's and calibrate's files, --out empty
or too long, a full disk, the full run's folder, bounds on flags that would exhaust memory, the
explore lock over the whole command, and temporary leftovers of killed writers removed."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import test_outputs as TO  # tests/test_outputs.py: the unprivileged child
import test_plan as TP  # tests/test_plan.py: plan's subprocess runner and records
from cli_helpers import one_line_error, run  # tests/cli_helpers.py
from isosim.integrations import plan as P
from isosim.integrations import plan_files as F
from test_outputs import runs_dir  # noqa: F401  (the fixture: two tiny isosim runs)

ROOT = Path(__file__).resolve().parents[1]
EASY_RUNS = ROOT / "studies/results/organism/real/easy"
HARD = ROOT / "studies/results/organism_hard/hard-128"


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------
# plan --out: another plan, a user's files, started runs
# --------------------------------------------------------------------------------------------
PLAN = ["plan", "--for", "trl", "--budget", "2e6"]


@pytest.mark.parametrize("other, words", [
    (["plan", "--for", "verl", "--budget", "2e6"], ["another plan", "trainer"]),
    (["plan", "--for", "trl", "--budget", "1e6"], ["another plan", "budget"]),
    (None, ["records or logs", "runs/n2-s0/records.jsonl"]),  # this plan, its runs started
])
def test_plan_refuses_a_folder_of_another_plan_or_its_started_runs(other, words, tmp_path, monkeypatch, capsys):
    out = tmp_path / "sweep"
    code, _, err = run(monkeypatch, capsys, *(other or PLAN), "--out", out)
    assert code == 0, err
    if other is None:
        (out / "runs" / "n2-s0" / "records.jsonl").write_text('{"step": 0}\n')
    before = _tree(out)
    code, _, err = run(monkeypatch, capsys, *PLAN, "--out", out)
    one_line_error(code, err, str(out), *words, "--force")
    assert _tree(out) == before
    code, _, err = run(monkeypatch, capsys, *PLAN, "--out", out, "--force")  # replaced whole: no old file left
    assert code == 0, err
    assert "records.jsonl" not in str(list(out.rglob("*"))) and "overrides.txt" not in str(list(out.rglob("*")))
    assert json.loads((out / F.PLAN_FILE).read_text())["request"]["trainer"] == "trl"
    assert [p.name for p in tmp_path.iterdir()] == ["sweep"]  # no staging or old folder left beside it


def test_plan_refuses_a_folder_of_a_users_files(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    code, _, err = run(monkeypatch, capsys, *PLAN, "--out", out)
    one_line_error(code, err, str(out), "not an isosim plan", "README.md")
    assert _tree(out) == {"README.md": "my notes\n"}


def test_plan_rerun_of_the_same_plan_is_fine(tmp_path, monkeypatch, capsys):
    out = tmp_path / "sweep"
    assert run(monkeypatch, capsys, *PLAN, "--out", out)[0] == 0
    before = _tree(out)
    code, _, err = run(monkeypatch, capsys, *PLAN, "--out", out)
    assert code == 0, err
    assert _tree(out) == before


def test_plan_force_that_fails_midway_leaves_the_old_folder_whole(tmp_path, monkeypatch, capsys):
    """--force stages the new folder first: a failure while writing it leaves the old one as it was."""
    from isosim import files

    out = tmp_path / "sweep"
    assert run(monkeypatch, capsys, "plan", "--for", "verl", "--budget", "2e6", "--out", out)[0] == 0
    before = _tree(out)
    real, calls = files.atomic_write_text, []

    def fail_on_the_third(path, text):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.EIO, "input/output error", str(path))
        return real(path, text)

    monkeypatch.setattr(files, "atomic_write_text", fail_on_the_third)
    with pytest.raises(OSError):
        run(monkeypatch, capsys, *PLAN, "--out", out, "--force")
    assert _tree(out) == before and [p.name for p in tmp_path.iterdir()] == ["sweep"]


def test_a_staging_folder_a_kill_left_is_removed_by_the_next_plan(tmp_path, monkeypatch, capsys):
    dead = tmp_path / ".sweep.999999999.tmp"  # no process has that pid
    (dead / "runs").mkdir(parents=True)
    alive = tmp_path / f".sweep.{os.getppid()}.tmp"  # a writer still running keeps its staging folder
    alive.mkdir()
    assert run(monkeypatch, capsys, *PLAN, "--out", tmp_path / "sweep")[0] == 0
    assert not dead.exists() and alive.exists()


def test_launch_sh_names_itself(tmp_path, monkeypatch, capsys):
    out = tmp_path / "sweep"
    assert run(monkeypatch, capsys, *PLAN, "--schedule", "8:0.5,32", "--out", out)[0] == 0
    for script in (out / "launch.sh", out / "schedule" / "launch.sh"):
        text = script.read_text()
        assert "{this file}" not in text and f"#   bash {script} --model_name_or_path" in text


# --------------------------------------------------------------------------------------------
# plan's settings: B_p, lr, budget
# --------------------------------------------------------------------------------------------
def test_verl_on_six_gpus_chooses_a_b_p_whose_micro_batches_are_full():
    """33 (the default rounded up to a multiple of 3) leaves n = 2 eleven micro-batches of one
    completion; 36 splits every n into micro-batches of 6 or 8."""
    grid = [2, 4, 8, 16, 32, 64, 128, 256]
    b_p, notes = P.resolve_b_p("verl", grid, None, 6)
    assert b_p == 36 and "33 would leave" in notes[0]
    hw = P.Hardware(processes=6)
    for n in grid:
        per_device, micro = P.micro_batch(n, b_p, hw)
        assert per_device >= 6 and per_device * micro * 6 == b_p * n
        P.check_verl(P.make_run("verl", n, b_p, 10, 0, hw, "/x").settings)
    assert P.resolve_b_p("trl", grid, None, 8) == (32, [])  # nothing changes where 32 already splits


@pytest.mark.parametrize("args, words", [
    (["--lr", "5"], ["--lr 5", "at most 0.01"]),
    (["--budget", "1e30"], ["1e+30", "at most 1e+13"]),
])
def test_plan_refuses_an_implausible_lr_or_budget(args, words, tmp_path, monkeypatch, capsys):
    base = ["plan", "--for", "trl", "--budget", "2e6"]
    if args[0] == "--budget":
        base = base[:3]
    code, _, err = run(monkeypatch, capsys, *base, *args, "--out", tmp_path / "o")
    one_line_error(code, err, *words)
    assert not (tmp_path / "o").exists()


def test_verls_readme_does_not_call_the_base_lr_trls_default(tmp_path, monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "plan", "--for", "verl", "--budget", "2e6", "--out", tmp_path / "v")
    assert code == 0
    assert "TRL's default" not in (tmp_path / "v" / "README.md").read_text() and "TRL's default" not in out
    run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--out", tmp_path / "t")
    assert "TRL's default learning_rate" in (tmp_path / "t" / "README.md").read_text()


# --------------------------------------------------------------------------------------------
# recommend --for: absolute paths, its folder checked first
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("planned", [True, False])
def test_recommend_for_with_a_relative_runs_writes_absolute_paths(planned, tmp_path):
    runs = tmp_path / "sweep" / "runs"
    if planned:
        assert TP.isosim("plan", "--for", "trl", "--budget", "1e5", "--n", "4,16", "--b-p", "8",
                         "--out", tmp_path / "sweep").returncode == 0
    TP._records(runs, {4: 1.0, 16: 0.5}, 8, 60)
    res = TP.isosim("recommend", "--runs", "sweep/runs", "--budget", "1e5", "--for", "trl", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    full = tmp_path / "sweep" / ("full" if planned else "runs-full")
    cfg = yaml.safe_load((full / "full-n4" / "config.yaml").read_text())
    assert cfg["output_dir"] == str(full / "full-n4")
    launch = "\n".join(TP.launch_lines(full / "launch.sh", tmp_path / "sweep" if planned else full))
    assert f"--config {full / 'full-n4' / 'config.yaml'}" in launch  # "$ROOT" (where launch.sh is) spelled out
    assert f"bash {full / 'launch.sh'}" in (full / "launch.sh").read_text()
    assert f"--config {full / 'full-n4' / 'config.yaml'}" in res.stdout  # the printed line: absolute, as it runs here


def test_recommend_for_refuses_a_full_folder_it_cannot_write_before_reading_the_runs(tmp_path, monkeypatch,
                                                                                      capsys):
    from isosim.predict import choice

    TP._records(tmp_path / "runs", {4: 1.0, 16: 0.5}, 8, 60)
    (tmp_path / "runs-full").write_text("a file of mine\n")

    def no_reading(*a, **kw):
        raise AssertionError("the runs were read")

    monkeypatch.setattr(choice, "recommend_runs", no_reading)
    code, _, err = run(monkeypatch, capsys, "recommend", "--runs", tmp_path / "runs", "--budget", "1e5", "--for", "trl")
    one_line_error(code, err, str(tmp_path / "runs-full"), "is a file, not a folder")


def test_recommend_for_into_an_unwritable_folder_is_one_line_before_the_work(tmp_path):
    prefix = TO._without_override()
    if prefix is None:
        pytest.skip("no way here to drop root's override of file permissions (setpriv --bounding-set)")
    locked = tmp_path / "locked"
    TP._records(locked / "runs", {4: 1.0, 16: 0.5}, 8, 60)
    locked.chmod(0o555)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", "import cli; cli.main()", "recommend", "--runs",
                               str(locked / "runs"), "--budget", "1e5", "--for", "trl"], capture_output=True,
                              text=True, env=env, timeout=300, cwd=tmp_path)
    finally:
        locked.chmod(0o755)
    one_line_error(proc.returncode, proc.stderr, str(locked), "not writable")
    assert "pick" not in proc.stdout  # refused before the runs were read


# --------------------------------------------------------------------------------------------
# predict and calibrate never overwrite a file without --force
# --------------------------------------------------------------------------------------------
def _no_prediction(monkeypatch):
    from isosim.predict import extrapolate

    def refuse(*a, **kw):
        raise AssertionError("a prediction was made")

    monkeypatch.setattr(extrapolate, "predict_from_cheap", refuse)


PREDICT = ["predict", "--runs", EASY_RUNS, "--max-rollouts", "5e3", "--budget", "4e4", "--n-boot", "0"]


@pytest.mark.parametrize("key, words", [(None, ["exists", "--key", "--force"]), ("a", ["already holds --key a"])])
def test_predict_keeps_an_existing_file_without_force(key, words, tmp_path, monkeypatch, capsys):
    out = tmp_path / "p.json"
    out.write_text(json.dumps({"a": {"n_star": 1}, "b": {"n_star": 2}}))
    _no_prediction(monkeypatch)
    code, _, err = run(monkeypatch, capsys, *PREDICT, "--out", out, *(["--key", key] if key else []))
    one_line_error(code, err, str(out), *words)
    assert json.loads(out.read_text()) == {"a": {"n_star": 1}, "b": {"n_star": 2}}


def test_predict_adds_a_new_key_and_keeps_the_others(tmp_path, monkeypatch, capsys):
    out = tmp_path / "p.json"
    out.write_text(json.dumps({"a": {"n_star": 1}, "b": {"n_star": 2}}))
    code, _, err = run(monkeypatch, capsys, *PREDICT, "--out", out, "--key", "c")
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert set(doc) == {"a", "b", "c"} and doc["a"] == {"n_star": 1}
    code, _, err = run(monkeypatch, capsys, *PREDICT, "--out", out, "--key", "a", "--force")
    assert code == 0, err
    assert json.loads(out.read_text())["a"] != {"n_star": 1}


@pytest.mark.parametrize("args", [["--dynamics", HARD, "--profile", "p.json"], ["--model", "x", "--data", "y"]])
def test_calibrate_keeps_an_existing_file_without_force(args, tmp_path, monkeypatch, capsys):
    out = tmp_path / "profile.json"
    out.write_text('{"rates": [0.5]}\n')
    code, _, err = run(monkeypatch, capsys, "calibrate", *args, "--out", out)
    one_line_error(code, err, str(out), "exists", "--force")
    assert out.read_text() == '{"rates": [0.5]}\n'
    if "--model" in args:  # a measurement's own file, with its partial record beside it, resumes
        from isosim.errors import IsosimError
        from llm_runs.launch import calibrate

        def reached(*a, **kw):
            raise IsosimError("the measurement was reached")

        monkeypatch.setattr(calibrate, "calibrate_settings", reached)
        (tmp_path / "profile.json.partial.jsonl").write_text("")
        code, _, err = run(monkeypatch, capsys, "calibrate", *args, "--out", out)
        one_line_error(code, err, "the measurement was reached")


# --------------------------------------------------------------------------------------------
# --out empty, too long; a full disk
# --------------------------------------------------------------------------------------------
def _every_out_command(runs: Path, out: str) -> list[list[str]]:
    data = ROOT / "studies/results/organism/splits/easy.jsonl"
    return [["explore", "--quick", "--out", out], ["analyze", str(runs), "--out", out],
            ["plan", "--for", "trl", "--budget", "2e6", "--out", out],
            ["validate", "--model", "organism", "--data", str(data), "--budget", "4096", "--dry-run", "--quick",
             "--out", out],
            ["predict", "--runs", str(runs), "--max-rollouts", "64", "--budget", "256", "--out", out],
            ["calibrate", "--dynamics", str(runs), "--profile", "p.json", "--out", out]]


def test_an_empty_out_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for args in _every_out_command(tmp_path, ""):
        code, _, err = run(monkeypatch, capsys, *args)
        one_line_error(code, err, "--out is empty")
    code, _, err = run(monkeypatch, capsys, "analyze", tmp_path, "--out=")
    one_line_error(code, err, "--out is empty")
    assert not list(tmp_path.iterdir())


def test_an_out_too_long_is_one_line_in_every_command(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("a" * 300, "b/" * 2100):  # a name longer than NAME_MAX; a path longer than PATH_MAX
        for args in _every_out_command(TO.ROOT / "studies/results/organism_hard/hard-128", str(tmp_path / name)):
            code, _, err = run(monkeypatch, capsys, *args)
            one_line_error(code, err, "long")
    assert not list(tmp_path.iterdir())


def test_a_full_disk_is_one_line(tmp_path, monkeypatch, capsys):
    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)  # every write of the atomic writer ends in fsync
    code, _, err = run(monkeypatch, capsys, *PLAN, "--out", tmp_path / "sweep")
    one_line_error(code, err, "no space left on the device")
    assert not list(tmp_path.iterdir())  # no staging folder, no half plan


def test_a_full_disk_outside_the_atomic_writer_is_one_line(tmp_path, monkeypatch, capsys, runs_dir):
    from isosim.frontier import report

    def no_space(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "o" / "x"))

    monkeypatch.setattr(report, "build_report", no_space)
    code, _, err = run(monkeypatch, capsys, "analyze", runs_dir, "--out", tmp_path / "o", "--n-boot", "0")
    one_line_error(code, err, str(tmp_path / "o" / "x"), "no space left on the device")


# --------------------------------------------------------------------------------------------
# bounds that keep memory and time finite, refused before any work
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["explore", "--quick", "--n-boot", "99999999999"], ["--n-boot", "10000"]),
    (["analyze", HARD, "--n-boot", "99999999999"], ["--n-boot", "10000"]),
    (["predict", "--runs", HARD, "--max-rollouts", "1e4", "--budget", "2e5", "--n-boot", "99999999999"], ["--n-boot"]),
    (["recommend", "--budget", "1e6", "--train-size", "99999999999"], ["--train-size", "1000000"]),
    (["validate", "--model", "organism", "--data", "x.jsonl", "--budget", "4096", "--train-size", "99999999999"],
     ["--train-size", "1000000"]),
    (["explore", "--seeds", "99999999999"], ["--seeds", "1000"]),
    (["plan", "--for", "trl", "--budget", "2e6", "--seeds", "99999999999"], ["--seeds", "1000"]),  # hung
    (["validate", "--model", "organism", "--data", "x.jsonl", "--budget", "4096", "--seeds", "99999999999"],
     ["--seeds", "1000"]),
    (["explore", "--preset", "hard:nan,easy:0.5", "--quick"], ["hard:nan,easy:0.5", "weight"]),
    (["explore", "--preset", "beta:nan,1", "--quick"], ["beta:nan,1", "finite"]),
    (["explore", "--quick", "--tol", "inf"], ["--tol", "finite"]),
    (["analyze", HARD, "--tol", "inf"], ["--tol", "finite"]),
    (["predict", "--runs", HARD, "--max-rollouts", "1e4", "--budget", "1e30"], ["--budget", "at most 1e+13"]),
])
def test_flags_that_would_exhaust_memory_or_mislead_are_refused_before_any_work(args, words, tmp_path, monkeypatch,
                                                                                 capsys):
    from isosim.frontier import report
    from isosim.sweeps import sweep

    def refuse(*a, **kw):
        raise AssertionError("work started")

    monkeypatch.setattr(sweep, "run_sweep", refuse)
    monkeypatch.setattr(report, "build_report", refuse)
    _no_prediction(monkeypatch)
    monkeypatch.chdir(tmp_path)
    out = ["--out", str(tmp_path / ("o.json" if args[0] == "predict" else "o"))] if args[0] != "recommend" else []
    code, _, err = run(monkeypatch, capsys, *args, *out)
    one_line_error(code, err, *words)
    assert not (tmp_path / "o").exists()


def test_validate_data_that_is_a_folder_says_so(tmp_path, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "validate", "--model", "organism", "--data", tmp_path, "--budget", "4096",
                       "--dry-run", "--out", tmp_path / "o")
    one_line_error(code, err, f"--data {tmp_path}: a folder, not a data file")


# --------------------------------------------------------------------------------------------
# explore's lock covers the whole command; leftovers of killed writers
# --------------------------------------------------------------------------------------------
TRY_LOCK = """
import sys
from pathlib import Path
from isosim.errors import IsosimError
from isosim.sweeps import store
try:
    with store._store_lock(Path(sys.argv[1])):
        print("free")
except IsosimError:
    print("in use")
"""


def test_explores_lock_is_held_while_it_writes_the_report(tmp_path, monkeypatch, capsys):
    """A second explore on the folder while the first writes its figures is refused, instead of
    tidying away the first one's temporary files (which killed it)."""
    from isosim.frontier import report

    out, seen = tmp_path / "e", []
    real = report.build_report

    def build_and_probe(df, out_dir, **kw):
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        seen.append(subprocess.run([sys.executable, "-c", TRY_LOCK, str(out_dir)], capture_output=True, text=True,
                                   env=env, timeout=120).stdout.strip())
        return real(df, out_dir, **kw)

    monkeypatch.setattr(report, "build_report", build_and_probe)
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--n-boot", "0", "--out", out)
    assert code == 0, err
    assert seen == ["in use"]


def test_a_report_removes_temporary_files_of_killed_writers_only(tmp_path, runs_dir, monkeypatch, capsys):
    """analyze, explore and validate's analysis/ all write through build_report."""
    out = tmp_path / "o"
    out.mkdir()
    dead = out / ".frontier.png.999999999.tmp"
    dead.write_bytes(b"half a figure")
    alive = out / f".frontier.png.{os.getppid()}.tmp"
    alive.write_bytes(b"being written")
    code, _, err = run(monkeypatch, capsys, "analyze", runs_dir, "--out", out, "--n-boot", "0")
    assert code == 0, err
    assert not dead.exists() and alive.exists()


def test_stale_temporary_names_are_those_of_dead_writers():
    from isosim.files import is_stale_tmp, tmp_name

    assert not is_stale_tmp(tmp_name(Path("/x/frontier.json")))  # this process
    assert is_stale_tmp("/x/.frontier.json.999999999.tmp") and is_stale_tmp("/x/.sweep.old.999999999.tmp")
    assert not is_stale_tmp("/x/frontier.json") and not is_stale_tmp(f"/x/.a.{os.getppid()}.tmp")
    assert not is_stale_tmp("/x/.my-notes.tmp")  # no pid: not isosim's, left alone


# --------------------------------------------------------------------------------------------
# the words users follow
# --------------------------------------------------------------------------------------------
README = (ROOT / "README.md").read_text()


def test_way_2_installs_the_trl_extra_before_launch_sh():
    """launch.sh runs train_grpo.py, which imports trl and isosim's callback: without the extra it dies."""
    lines = README.splitlines()
    launch = next(i for i, ln in enumerate(lines) if ln.startswith("bash sweep/launch.sh"))
    install = [i for i, ln in enumerate(lines) if "pip install -e '.[trl]'" in ln]
    assert install and install[0] < launch


def test_every_number_points_to_the_one_lr_table_too():
    sentence = README[README.index("Every number:"):][:300]
    assert "docs/validation.md" in sentence and "docs/organism.md" in sentence and "one-lr table" in sentence


def test_integrations_says_plan_writes_one_lr_per_n():
    text = " ".join((ROOT / "docs" / "integrations.md").read_text().split())
    assert "The learning rate and the rest stay yours (the same for every `n`)" not in text
    assert "`learning_rate`: one per `n`, by `--lr-rule`" in text


# ----------------------------------------------------------------------------------------------
# explore's report and recommend --for's full run: a file not as isosim wrote it is not overwritten
# ----------------------------------------------------------------------------------------------
def test_explore_keeps_a_users_frontier_json_and_rewrites_its_own(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "frontier.json").write_text('{"mine": true}\n')
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--n-boot", "0", "--out", out)
    one_line_error(code, err, "frontier.json", "not as isosim wrote it", "--force")
    assert (out / "frontier.json").read_text() == '{"mine": true}\n' and not (out / "manifest.json").exists()
    fresh = tmp_path / "fresh"
    assert run(monkeypatch, capsys, "explore", "--quick", "--n-boot", "0", "--out", fresh)[0] == 0
    assert run(monkeypatch, capsys, "explore", "--quick", "--n-boot", "0", "--out", fresh)[0] == 0  # its own: rerun fine
    png = (fresh / "frontier.png").read_bytes()
    (fresh / "frontier.png").write_bytes(png + b"edited")
    code, _, err = run(monkeypatch, capsys, "explore", "--quick", "--n-boot", "0", "--out", fresh)
    one_line_error(code, err, "frontier.png", "not as isosim wrote it", "--force")
    assert (fresh / "frontier.png").read_bytes() == png + b"edited"
    assert run(monkeypatch, capsys, "explore", "--quick", "--n-boot", "0", "--out", fresh, "--force")[0] == 0
    assert (fresh / "frontier.png").read_bytes() != png + b"edited"


def test_recommend_for_keeps_a_users_edit_of_the_full_runs_settings(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    TP._records(runs, {4: 1.0, 16: 0.5}, 8, 60)
    args = ("recommend", "--runs", runs, "--budget", "1e5", "--for", "trl")
    code, out, err = run(monkeypatch, capsys, *args)
    assert code == 0, err
    settings = sorted((tmp_path / "runs-full").glob("full-n*/config.yaml"))
    assert len(settings) == 1 and (tmp_path / "runs-full" / ".isosim-written.json").is_file()
    assert run(monkeypatch, capsys, *args)[0] == 0  # what isosim wrote, unchanged: rewritten
    edited = settings[0].read_text() + "# my change\n"
    settings[0].write_text(edited)
    code, out, err = run(monkeypatch, capsys, *args)
    one_line_error(code, err, "config.yaml", "not as isosim wrote it", "--force")
    assert "pick n = " in out  # the pick is still shown
    assert settings[0].read_text() == edited
    assert run(monkeypatch, capsys, *args, "--force")[0] == 0
    assert "my change" not in settings[0].read_text()
    code, _, err = run(monkeypatch, capsys, "recommend", "--runs", runs, "--budget", "1e5", "--force")
    one_line_error(code, err, "--force is for --for")
