"""The loop with the real TRL, offline, on a tiny random Llama: isosim plan --for trl -> the written
launch.sh (accelerate launch train_grpo.py: TRL's GRPOTrainer with isosim's records callback) ->
isosim recommend --runs --for trl -> the pick's full-budget config loads into GRPOConfig.

(studies/organism/trl_loop.py runs the same loop on the model organism, with its figure.)
"""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
REWARDS = '''
def parity(completions, **kwargs):
    """Deterministic in the completion, about half right for a random model: 0/1 like a verifier."""
    return [1.0 if c and ord(c[0]) % 2 == 0 else 0.0 for c in completions]
'''


def cheap_leader(last: dict[int, float]) -> int:
    """The n whose cheap run ended highest, ties to the smaller n (``recommend --runs``'s level reader)."""
    return max(sorted(last), key=lambda n: (last[n], -n))


def test_plan_run_with_trl_and_recommend_back(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    from llm_runs.sampling.tiny import make_tiny_model

    model = make_tiny_model(tmp_path / "tiny", seed=0, vocab_size=128, hidden_size=16, num_layers=1, num_heads=2)
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(6) for b in range(6)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "held_out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))
    (tmp_path / "tiny_rewards.py").write_text(REWARDS)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}

    def isosim(*args):
        return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)],
                              capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)

    out = tmp_path / "sweep"
    # C = 320 rollouts, 5 % each: n = 2 gets 4 steps of 4, n = 4 two of 8 (a memory cap of 4 completions:
    # n = 4 accumulates two micro-batches)
    res = isosim("plan", "--for", "trl", "--budget", 320, "--n", "2,4", "--b-p", 2, "--min-steps", 2,
                 "--max-per-device", 4, "--out", out)
    assert res.returncode == 0, res.stderr
    cfg4 = yaml.safe_load((out / "runs" / "n4-s0" / "config.yaml").read_text())
    assert (cfg4["per_device_train_batch_size"], cfg4["gradient_accumulation_steps"], cfg4["max_steps"]) == (4, 2, 2)

    run = subprocess.run(["bash", str(out / "launch.sh"), "--model_name_or_path", model,
                          "--dataset_name", tmp_path / "train.jsonl", "--eval_dataset", tmp_path / "held_out.jsonl",
                          "--eval_size", "4", "--eval_samples", "2", "--reward_funcs", "tiny_rewards.parity",
                          "--use_cpu", "true", "--max_completion_length", "4", "--learning_rate", "1e-3",
                          "--disable_tqdm", "true"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    # each finished run is marked; launch.sh run again trains neither again (their records stay as they are)
    from isosim.integrations.trl_script import FINISHED

    for n, steps in ((2, 4), (4, 2)):
        assert json.loads((out / "runs" / f"n{n}-s0" / FINISHED).read_text()) == {"steps": steps, "max_steps": steps}
    before = {p: p.read_bytes() for p in (out / "runs").glob("*/records.jsonl")}
    again = subprocess.run(["bash", str(out / "launch.sh"), "--model_name_or_path", model], capture_output=True,
                           text=True, cwd=tmp_path, env=env, timeout=120)
    assert again.returncode == 0 and {p: p.read_bytes() for p in before} == before, again.stderr[-2000:]
    last = {}
    for n, steps in ((2, 4), (4, 2)):
        recs = [json.loads(x) for x in (out / "runs" / f"n{n}-s0" / "records.jsonl").read_text().splitlines()]
        assert recs[0]["step"] == 0 and recs[-1]["step"] == steps
        assert all(r["n"] == n and r["b_p"] == 2 and r["rollouts"] == r["step"] * 2 * n for r in recs)
        assert all(0 <= r["val_avg"] <= 1 for r in recs)
        assert {r["rollouts"] for r in recs[1:]} >= {16}  # both runs end at their cheap 5 %: 16 rollouts
        last[n] = recs[-1]["val_avg"]

    # each run records what its values rest on: 4 held-out prompts x 2 samples; recommend reads the se
    # and the tie band from that size, names its metric and gives the se analyze gives
    assert all(r["val_size"] == 4 and r["eval_n"] == 2 for n in (2, 4)
               for r in map(json.loads, (out / "runs" / f"n{n}-s0" / "records.jsonl").read_text().splitlines()))
    said = isosim("recommend", "--runs", out / "runs", "--budget", 320, "--json")
    assert said.returncode == 0, said.stderr
    got = json.loads(said.stdout)
    assert got["eval_samples"] == 8 and got["metric"] == "val_avg" and got["seeds"] == [0]
    se = {int(n): v["expected_regret_se"] for n, v in got["n"].items()}
    regret = {int(n): v["expected_regret"] for n, v in got["n"].items()}
    assert got["tie_band"] == [n for n in sorted(regret) if regret[n] <= 2 * se[n] + 1e-12]
    value = got["n"][str(got["pick"])]["value"]
    assert se[2] == pytest.approx(math.sqrt(2 * min(max(value, 1e-3), 1 - 1e-3) * (1 - min(max(value, 1e-3), 1 - 1e-3)) / 8))
    text = isosim("recommend", "--runs", out / "runs", "--budget", 320).stdout
    ana = isosim("analyze", out / "runs", "--n-boot", 0, "--out", tmp_path / "analysis")
    assert ana.returncode == 0, ana.stderr
    for said_text in (text, ana.stdout):
        flat = " ".join(said_text.split())
        assert "metric val_avg" in flat and "4 prompts x 2 samples = 8 answers per evaluation (records)" in flat
        assert "one seed per n: no run-to-run spread is measured" in flat and "seed-to-seed spread" not in flat
    se_of = [float(re.search(r"evaluation noise alone, ([0-9.]+) at", " ".join(t.split())).group(1))
             for t in (text, ana.stdout)]
    assert se_of[0] == pytest.approx(se_of[1], rel=0.10), se_of

    back = isosim("recommend", "--runs", out / "runs", "--budget", 320, "--for", "trl")
    assert back.returncode == 0, back.stderr
    # recommend --runs's reader is the cheap leader: each n's last value, the higher (ties to the smaller n)
    pick = cheap_leader(last)
    assert f"pick n = {pick};" in back.stdout, (last, back.stdout)
    assert [p.name for p in (out / "full").glob("full-n*")] == [f"full-n{pick}"]
    full = out / "full" / f"full-n{pick}" / "config.yaml"
    assert f"full run for trl: n = {pick}, B_p = 2, {320 // (2 * pick)} steps" in back.stdout
    loaded = subprocess.run([sys.executable, str(ROOT / "tests" / "plan_grpo_config_helper.py"), "1", str(full)],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    got = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert "error" not in got
    assert got["generation_batch_size"] == 2 * pick and got["max_steps"] == 320 // (2 * pick)


FLAKY = '''
import os
from pathlib import Path


def flaky(completions, **kwargs):
    """tiny_rewards.parity that counts its calls in $CALLS and fails at call $FAIL_AT (an interrupted run)."""
    calls = Path(os.environ["CALLS"])
    k = (int(calls.read_text()) if calls.exists() else 0) + 1
    calls.write_text(str(k))
    if k == int(os.environ.get("FAIL_AT", "0")):
        raise RuntimeError("interrupted")
    return [1.0 if c and ord(c[0]) % 2 == 0 else 0.0 for c in completions]
'''


def test_an_interrupted_run_that_saved_a_checkpoint_resumes_from_it(tmp_path):
    """train_grpo.py launched again on a run whose output_dir holds checkpoints goes on from the newest:
    a run of 4 steps saving every 2, interrupted in step 3, trains steps 3 and 4 only when launched again,
    and is then marked finished (the full-budget run saves such checkpoints: save_strategy steps)."""
    pytest.importorskip("trl")
    from llm_runs.sampling.tiny import make_tiny_model

    from isosim.integrations.trl_script import FINISHED

    model = make_tiny_model(tmp_path / "tiny", seed=0, vocab_size=128, hidden_size=16, num_layers=1, num_heads=2)
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(6) for b in range(6)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tiny_rewards.py").write_text(FLAKY)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "CALLS": str(tmp_path / "calls"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = tmp_path / "sweep"
    plan = subprocess.run([sys.executable, "-c", "import cli; cli.main()", "plan", "--for", "trl", "--budget", "320",
                           "--n", "2,4", "--b-p", "2", "--min-steps", "2", "--max-per-device", "4", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert plan.returncode == 0, plan.stderr
    run_dir = out / "runs" / "n2-s0"
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["max_steps"] == 4

    def launch(**extra):
        return subprocess.run([sys.executable, str(out / "train_grpo.py"), "--config", str(run_dir / "config.yaml"),
                               "--model_name_or_path", model, "--dataset_name", str(tmp_path / "train.jsonl"),
                               "--reward_funcs", "tiny_rewards.flaky", "--use_cpu", "true",
                               "--max_completion_length", "4", "--disable_tqdm", "true",
                               "--save_strategy", "steps", "--save_steps", "2"],
                              capture_output=True, text=True, cwd=tmp_path, env={**env, **extra}, timeout=600)

    first = launch(FAIL_AT="3")
    assert first.returncode != 0 and "interrupted" in first.stderr
    assert (run_dir / "checkpoint-2").is_dir() and not (run_dir / FINISHED).exists()
    again = launch()
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from {run_dir / 'checkpoint-2'}" in again.stderr
    assert int((tmp_path / "calls").read_text()) == 3 + 2  # steps 3 and 4, not the whole run again
    assert json.loads((run_dir / FINISHED).read_text()) == {"steps": 4, "max_steps": 4}
