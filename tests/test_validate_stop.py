"""``isosim validate`` stopped mid-evaluation: it exits within seconds, leaves no training process
behind, and a rerun resumes to the end; the parent prints progress while a run trains."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_helpers import read_jsonl, strip_volatile  # noqa: E402

from llm_runs.organism import build as organism  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for leftover processes")


@pytest.fixture(scope="module")
def quick_organism(tmp_path_factory):
    out = tmp_path_factory.mktemp("organism")
    organism.build(out, organism.OrganismSettings.for_scale("quick", sft_steps=40, threads=1), log=lambda m: None)
    return out


def _processes_naming(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append(int(entry.name))
    return found


def _validate(org: Path, out: Path) -> list[str]:
    # evaluations of 100 problems x 16 samples in chunks of 16: ~100 sampler calls, seconds long
    sets = ["prompt_template=plain", "instruction=", "answer_fallback=last-number", "max_new_tokens=12",
            "val_size=100", "eval_n=16", "eval_k=4", "eval_points=0", "sampler=lean", "train_forward=lean",
            "sampler_batch_size=16", "micro_batch_size=4096", "precision=fp32", "temperature=1.0",
            "base_lr=3e-3", "save_every=2"]
    return [sys.executable, "-c", "import cli; cli.main()", "validate", "--model", str(org / "model"),
            "--data", str(org / "pool.jsonl"), "--budget", "128", "--n", "2", "--b-p", "8", "--min-steps", "1",
            "--quick", "--n-boot", "0", "--out", str(out), *[a for s in sets for a in ("--set", s)]]


def _wait_for_step_0_evaluation(proc: subprocess.Popen, out: Path) -> Path:
    """Wait (up to 10 min) until the run's train.log says it is evaluating step 0, or ``proc`` ends;
    the train.log's path."""
    train_log = out / "runs" / "n2_bp8_s0" / "train.log"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if train_log.is_file() and "evaluating at step 0" in train_log.read_text():
            break
        time.sleep(0.05)
    return train_log


def test_sigterm_mid_evaluation_stops_validate_and_its_run_and_a_rerun_resumes(quick_organism, tmp_path):
    out = tmp_path / "v"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(_validate(quick_organism, out), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    train_log = _wait_for_step_0_evaluation(proc, out)
    assert proc.poll() is None, proc.stdout.read()
    trainers = _processes_naming(str(out / "runs" / "n2_bp8_s0" / "config.json"))
    assert trainers, "the training process was not found"
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "SIGTERM: stopping the run" in output and "rerun the same command to resume" in output
    assert not _processes_naming(str(out / "runs")), "a training process outlived validate"
    log = train_log.read_text()
    assert "during the evaluation at step 0: nothing to keep before the first step" in log, log[-2000:]
    assert not (out / "runs" / "n2_bp8_s0" / "records.jsonl").read_text().strip(), "no record of a dropped evaluation"

    again = subprocess.run(_validate(quick_organism, out), cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    rows = read_jsonl(out / "runs" / "n2_bp8_s0" / "records.jsonl")
    assert [r["step"] for r in rows] == [0, 8]
    assert all(0 <= r["val_avg"] <= 1 for r in rows)
    assert (out / "validation.md").is_file()
    plan = json.loads((out / "plan.json").read_text())
    assert plan["runs"][0]["config"]["eval_n"] == 16


def test_validate_killed_outright_takes_its_run_with_it(quick_organism, tmp_path):
    """SIGKILL cannot be caught: the trainer learns of it from the kernel (its parent-death signal)."""
    out = tmp_path / "k"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(_validate(quick_organism, out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait_for_step_0_evaluation(proc, out)
    assert proc.poll() is None
    assert _processes_naming(str(out / "runs"))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.time() + 30
    while time.time() < deadline and _processes_naming(str(out / "runs")):
        time.sleep(0.1)
    assert not _processes_naming(str(out / "runs")), "the training process outlived a killed validate"


def test_a_long_evaluation_reports_its_progress(quick_organism, tmp_path, monkeypatch):
    from llm_runs.config import RunConfig
    from llm_runs.training import trainer_eval
    from llm_runs.training.train import GRPOTrainer

    monkeypatch.setattr(trainer_eval, "EVAL_PROGRESS_S", 0.0)
    cfg = RunConfig(model=str(quick_organism / "model"), data=str(quick_organism / "pool.jsonl"),
                    out=str(tmp_path / "run"), n=2, b_p=8, budget=16, val_size=20, eval_n=4, eval_k=2, eval_points=0,
                    prompt_template="plain", instruction="", answer_fallback="last-number", max_new_tokens=12,
                    sampler="lean", train_forward="lean", sampler_batch_size=8, precision="fp32")
    said = []
    rows = GRPOTrainer(cfg, log=said.append).train()
    assert [r["step"] for r in rows] == [0, 1]
    lines = [s for s in said if s.startswith("evaluating at step 0:") and "samples of this process" in s]
    assert [ln.split(": ")[1].split(" ")[0] for ln in lines] == [f"{8 * i}/80" for i in range(1, 10)]


def test_a_second_trainer_of_a_run_waits_for_the_first(tmp_path):
    """A rerun started while the stopped run still writes its checkpoint waits for it (OUT/.lock)."""
    import threading

    from llm_runs.training.runlog import run_lock

    said, order = [], []
    with run_lock(tmp_path / "run", log=said.append):
        def second():
            with run_lock(tmp_path / "run", log=said.append):
                order.append("second")

        t = threading.Thread(target=second)
        t.start()
        deadline = time.time() + 10
        while not said and time.time() < deadline:
            time.sleep(0.01)
        order.append("first")
    t.join(timeout=10)
    assert order == ["first", "second"]
    assert len(said) == 1 and "another process is training this run; waiting" in said[0]


@pytest.mark.parametrize("stop_at", ["middle", "last"])
def test_a_stop_mid_evaluation_after_a_step_keeps_the_step_and_evaluates_it_on_resume(
        stop_at, quick_organism, tmp_path, monkeypatch):
    """The step is checkpointed with its evaluation pending; the resume evaluates it first (same
    seed, same weights): the records equal an uninterrupted run's; validate's launcher does not
    count the run finished before then."""
    from llm_runs.config import RunConfig
    from llm_runs.launch.launchers import run_progress
    from llm_runs.launch.plan import RunSpec
    from llm_runs.training import trainer_eval
    from llm_runs.training.train import GRPOTrainer, eval_steps

    monkeypatch.setattr(trainer_eval, "EVAL_PROGRESS_S", 0.0)

    def cfg(name):
        return RunConfig(model=str(quick_organism / "model"), data=str(quick_organism / "pool.jsonl"),
                         out=str(tmp_path / name), n=2, b_p=8, budget=64, val_size=20, eval_n=4, eval_k=2,
                         eval_points=4, prompt_template="plain", instruction="", answer_fallback="last-number",
                         max_new_tokens=12, sampler="lean", train_forward="lean", sampler_batch_size=8,
                         precision="fp32", base_lr=3e-3, save_every=100)

    ref = GRPOTrainer(cfg("ref"), log=lambda m: None).train()
    evals = eval_steps(4, 4)
    step = 4 if stop_at == "last" else [s for s in evals if 0 < s < 4][0]
    trainer = GRPOTrainer(cfg("stopped"), log=lambda m: m.startswith(f"evaluating at step {step}: 8/")
                          and setattr(trainer, "_stop_signal", 15))
    trainer.train()
    assert trainer.interrupted
    state = json.loads((tmp_path / "stopped" / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == step and state["pending_eval"]["reward/mean"] is not None
    spec = RunSpec(name="stopped", n=2, b_p=8, seed=0, steps=4, lr=0.0, dir=str(tmp_path / "stopped"), config={})
    assert not run_progress(spec)["finished"]
    rows = GRPOTrainer(cfg("stopped"), log=lambda m: None).train()
    assert [r["step"] for r in ref] == evals, ref
    assert [r["step"] for r in rows] == evals, rows
    assert strip_volatile(rows) == strip_volatile(ref)
    assert run_progress(spec)["finished"]
    assert "pending_eval" not in json.loads((tmp_path / "stopped" / "checkpoint" / "trainer_state.json").read_text())
