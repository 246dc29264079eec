"""Runs from other trainers into `isosim analyze`: TensorBoard (TRL, verl), W&B CSV exports, and the
TRL callback, with real writers (TRL's GRPOTrainer on a tiny model, torch's SummaryWriter)."""

import itertools
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isosim.errors import IsosimError
from isosim.sim.estimators import avg_at_k, best_at_k, summarize, worst_at_k
from isosim.integrations import default_metric, load_runs

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def isosim(*args):
    """The command as a user runs it (a fresh process)."""
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg",
                               "OMP_NUM_THREADS": "1"})


def run_cli(capsys, *args):
    """The command in this process (faster); returns (exit code, stdout, stderr)."""
    import cli

    argv = sys.argv
    sys.argv = ["isosim", *map(str, args)]
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = argv
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_exit_2(capsys, *args, needle):
    code, _, err = run_cli(capsys, *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("isosim: error:"), err
    assert needle in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------------------------
# Estimators: the unbiased formulas against enumeration of every k-subset
# ----------------------------------------------------------------------------------------------
def test_estimators_match_enumeration_of_k_subsets():
    N = 6
    for c, k in itertools.product(range(N + 1), range(1, N + 1)):
        draws = [1] * c + [0] * (N - c)
        subsets = list(itertools.combinations(draws, k))
        assert best_at_k(np.array([c]), N, k)[0] == pytest.approx(np.mean([max(s) for s in subsets]))
        assert worst_at_k(np.array([c]), N, k)[0] == pytest.approx(np.mean([min(s) for s in subsets]))
        assert avg_at_k(np.array([c]), N)[0] == pytest.approx(c / N)
    s = summarize(np.array([0, 3, 6]), 6, 2)
    assert s["val_best"] == pytest.approx((0 + (1 - 3 / 15) + 1) / 3)
    assert s["val_worst"] == pytest.approx((0 + 3 / 15 + 1) / 3) and s["k"] == 2
    with pytest.raises(ValueError):
        best_at_k(np.array([1]), 4, 5)


def test_trl_allocation_from_grpo_config():
    from isosim.integrations._runs import trl_allocation

    # TRL >= 0.18 logs the resolved generation batch (all processes): one generation per optimizer step
    cfg = {"num_generations": 8, "generation_batch_size": 64, "steps_per_generation": 4,
           "gradient_accumulation_steps": 4, "num_iterations": 1, "seed": 3, "learning_rate": 1e-6}
    assert trl_allocation(cfg) == {"n": 8, "b_p": 8, "rollouts_per_step": 64.0, "seed": 3, "lr": 1e-6}
    # each generation batch reused for num_iterations = 2 optimizer passes: half the new rollouts per step
    assert trl_allocation({**cfg, "num_iterations": 2})["rollouts_per_step"] == 32.0
    # a generation every 2 micro-batches, an optimizer step every 4: two generation batches per step
    assert trl_allocation({**cfg, "steps_per_generation": 2, "generation_batch_size": 32})["rollouts_per_step"] == 64.0
    # older TRL: no generation_batch_size, read as one process
    old = {"num_generations": 4, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2}
    assert trl_allocation(old) == {"n": 4, "b_p": 4, "rollouts_per_step": 16.0}
    assert "n" not in trl_allocation({"per_device_train_batch_size": 8})  # not a GRPO run


def test_callback_evaluation_is_seeded_and_leaves_training_rng_alone(tmp_path):
    pytest.importorskip("transformers")
    import torch
    from types import SimpleNamespace

    from isosim.integrations.trl import RecordsCallback
    from llm_runs.sampling.tiny import make_tiny_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = make_tiny_model(tmp_path / "tiny", vocab_size=128, hidden_size=16, num_layers=1, num_heads=2)
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    seen = []

    def even_first(prompts, completions, completion_ids, answer, **kw):
        seen.append((prompts[0], completions[0], answer[0]))
        return [1.0 if ids and ids[0] % 2 == 0 else 0.0 for ids in completion_ids]

    chat = [{"prompt": [{"role": "user", "content": f"{a}+1?"}], "answer": str(a + 1)} for a in range(5)]
    cb = RecordsCallback(eval_dataset=chat, reward_funcs=even_first, samples=6, k=3, batch_size=2)
    args = SimpleNamespace(temperature=1.0, max_completion_length=4, top_p=1.0, top_k=0)
    torch.manual_seed(123)
    first = cb.evaluate(model, tok, args, step=5)
    after = torch.rand(3)
    torch.manual_seed(123)
    assert cb.evaluate(model, tok, args, step=5) == first  # same weights, same step: same samples
    assert torch.equal(torch.rand(3), after)  # the training random stream is untouched
    assert cb.evaluate(model, tok, args, step=6) != first  # another step draws other samples
    assert first["k"] == 3 and 0 < first["val_worst"] < first["val_avg"] < first["val_best"] < 1
    prompt, completion, answer = seen[0]
    assert prompt == chat[0]["prompt"] and answer == "1"  # columns reach the reward function, as in TRL
    assert isinstance(completion, list) and completion[0]["role"] == "assistant"  # conversational completions
    model.train()
    cb.evaluate(model, tok, args, step=7)
    assert model.training  # evaluation switches to eval mode and back


def test_import_isosim_imports_no_trainer_library():
    code = ("import sys, isosim, isosim.integrations, isosim.integrations.wandb, isosim.integrations.tensorboard;"
            "bad = [m for m in ('transformers', 'trl', 'tensorboard', 'wandb', 'accelerate') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr


# ----------------------------------------------------------------------------------------------
# W&B exports
# ----------------------------------------------------------------------------------------------
def test_wandb_panel_export_with_runs_file(capsys, tmp_path):
    csv = tmp_path / "panel.csv"
    shutil.copy(FIXTURES / "wandb_panel_train_reward.csv", csv)
    # no validation logged: refused in one line, never a silent switch to the training reward
    assert_one_line_exit_2(capsys, "analyze", csv, "--runs", FIXTURES / "wandb_runs.csv", "--n-boot", "0",
                           "--out", tmp_path / "refused", needle="log no validation (val_avg); they log train_reward: read it with --metric train_reward")
    code, out, err = run_cli(capsys, "analyze", csv, "--runs", FIXTURES / "wandb_runs.csv", "--n-boot", "0",
                             "--metric", "train_reward", "--out", tmp_path / "panel_analysis")
    assert code == 0, err
    said = " ".join(out.split())
    assert said.startswith(f"{csv}: 3 runs from W&B export panel.csv, n = 2, 4, 8; ")
    # grpo-n8 stopped at step 45 of the 60 the others ran: named, and every n read where it stopped
    assert ("run(s) stopped short of their planned budget: grpo-n8 at 1,440 of 1,920 rollouts; every n is read at "
            "1,440 rollouts, the budget every run reached; metric train_reward") in said
    data = json.loads((tmp_path / "panel_analysis" / "frontier.json").read_text())
    assert data["n_values"] == [2, 4, 8] and data["metric"] == "train_reward"
    assert data["budgets"][-1] == 1440
    df, _ = load_runs(csv, runs_file=FIXTURES / "wandb_runs.csv")
    # __MIN/__MAX columns are not runs; blank cells after a run's last step are no rows
    assert sorted(df["run_id"].unique()) == ["grpo-n2", "grpo-n4", "grpo-n8"]
    assert df.groupby("run_id")["step"].max().to_dict() == {"grpo-n2": 60, "grpo-n4": 60, "grpo-n8": 45}
    raw = pd.read_csv(csv)
    n8 = df[df.run_id == "grpo-n8"].set_index("step")
    assert np.allclose(n8["rollouts"], n8.index * 8 * 4)
    assert np.allclose(n8["train_reward"], raw.set_index("Step").loc[n8.index, "grpo-n8 - train/reward"])
    # the same with --set per run instead of the runs file
    df2, _ = load_runs(csv, sets=["grpo-n2:n=2,b_p=16", "grpo-n4:n=4,b_p=8", "grpo-n8:n=8,b_p=4"])
    pd.testing.assert_frame_equal(df.reset_index(drop=True), df2.reset_index(drop=True))


def test_wandb_history_csv_with_config_columns(tmp_path):
    rows = []
    for name, n in (("a", 2), ("b", 8)):
        for step in range(1, 11):
            # W&B's _step counts log calls; the Hugging Face Trainer logs its own step as train/global_step
            rows.append({"name": name, "_step": 2 * step + 1, "train/global_step": step, "_runtime": 3.0 * step,
                         "train/reward": 0.1 * math.log(step + n),
                         "train/completions/mean_length": 10.0 + step, "num_generations": n,
                         "generation_batch_size": 32, "seed": 3})
    pd.DataFrame(rows).to_csv(tmp_path / "history.csv", index=False)
    df, text = load_runs(tmp_path)  # a folder holding one export
    assert text == "2 runs from W&B export in " + tmp_path.name + ", n = 2, 8"
    b = df[df.run_id == "b"].sort_values("step")
    assert set(b["b_p"]) == {4} and set(b["seed"]) == {3}
    assert np.allclose(b["rollouts"], b["step"] * 32)
    assert np.allclose(b["tokens"], np.cumsum((10.0 + b["step"]) * 32))
    assert list(b["step"]) == list(range(1, 11)) and "_step" not in df.columns and "_runtime" not in df.columns


def test_wandb_bad_inputs_one_line_exit_2(capsys, tmp_path):
    nostep = tmp_path / "nostep.csv"
    pd.DataFrame({"run": ["x"], "train/reward": [0.5]}).to_csv(nostep, index=False)
    assert_one_line_exit_2(capsys, "analyze", nostep, needle="no step column")
    panel = FIXTURES / "wandb_panel_train_reward.csv"
    assert_one_line_exit_2(capsys, "analyze", panel, "--set", "n=4", "--set", "n=8", "--out", tmp_path / "o",
                           needle="conflicting values for n")
    assert_one_line_exit_2(capsys, "analyze", panel, "--set", "grpo-n2:n=2,b_p=16", "--set", "grpo-n2:b_p=8",
                           "--out", tmp_path / "o", needle="conflicting values for b_p")
    assert_one_line_exit_2(capsys, "analyze", panel, "--out", tmp_path / "o", needle="--set grpo-n2:n=N,b_p=B")
    assert_one_line_exit_2(capsys, "analyze", panel, "--set", "nobody:n=2,b_p=2", "--out", tmp_path / "o",
                           needle="no run named 'nobody'")
    assert_one_line_exit_2(capsys, "analyze", panel, "--set", "n=two", "--out", tmp_path / "o", needle="not a number")
    assert_one_line_exit_2(capsys, "analyze", panel, "--set", "n=4,b_p=4", "--map", "train_reward=train/nope",
                           "--out", tmp_path / "o", needle="no run logs 'train/nope'")
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------------
# TensorBoard: verl's tags and unrelated event files, written by torch's SummaryWriter
# ----------------------------------------------------------------------------------------------
def _write_verl_run(folder: Path, n: int, b_p: int, steps: int = 12) -> None:
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(folder))
    for s in range(steps + 1):
        if s % 4 == 0:  # validation every 4 steps and before training, as verl's test_freq
            p = 0.3 + 0.01 * s * math.log2(n)  # a share: at most .78 (n = 16, step 12)
            w.add_scalar("val-core/openai/gsm8k/reward/mean@4", p, s)
            w.add_scalar("val-core/openai/gsm8k/reward/best@4/mean", 1 - (1 - p) ** 4, s)
            w.add_scalar("val-aux/openai/gsm8k/reward/worst@4/mean", p ** 4, s)
            w.add_scalar("val-aux/openai/gsm8k/reward/best@2/mean", 1 - (1 - p) ** 2, s)
        if s > 0:
            w.add_scalar("critic/score/mean", 0.2 + 0.01 * s, s)
            w.add_scalar("critic/rewards/mean", 0.19 + 0.01 * s, s)
            w.add_scalar("response_length/mean", 100.0 + s, s)
            w.add_scalar("actor/entropy", 1.0 / s, s)
            w.add_scalar("training/global_step", s, s)
    w.close()


def test_tensorboard_verl_runs_with_set(capsys, tmp_path):
    pytest.importorskip("tensorboard")
    root = tmp_path / "tensorboard_log" / "gsm8k"
    _write_verl_run(root / "qwen_n4", 4, 64)
    _write_verl_run(root / "qwen_n16", 16, 16)
    assert_one_line_exit_2(capsys, "analyze", root, needle="--set qwen_n16:n=N,b_p=B")
    code, out, err = run_cli(capsys, "analyze", root, "--set", "qwen_n4:n=4,b_p=64", "--set", "qwen_n16:n=16,b_p=16",
                             "--n-boot", "0", "--out", root)
    assert code == 0, err
    # the training steps between validations hold no val_avg: named as every reader names such rows
    assert "2 runs from TensorBoard logs, n = 4, 16; left out" in out and "; metric val_avg" in out
    assert json.loads((root / "frontier.json").read_text())["n_values"] == [4, 16]
    df, _ = load_runs(root, sets=["qwen_n4:n=4,b_p=64", "qwen_n16:n=16,b_p=16"])
    r = df[df.run_id == "qwen_n4"].set_index("step")
    assert list(r.index) == list(range(13))  # validation at step 0 too
    assert set(r["k"]) == {4}  # the largest @N
    assert r.loc[8, "val_best"] == pytest.approx(1 - (1 - r.loc[8, "val_avg"]) ** 4, rel=1e-6)
    assert r.loc[8, "val_worst"] == pytest.approx(r.loc[8, "val_avg"] ** 4, rel=1e-6)
    assert r.loc[5, "train_reward"] == pytest.approx(0.25)  # critic/score/mean, not critic/rewards/mean
    assert r.loc[12, "rollouts"] == 12 * 4 * 64
    assert r.loc[3, "tokens"] == pytest.approx(256 * (101 + 102 + 103))
    assert math.isnan(r.loc[0, "train_reward"]) and r.loc[0, "rollouts"] == 0
    # --map overrides a default tag
    df2, _ = load_runs(root, sets=["n=4,b_p=64"], maps=["train_reward=critic/rewards/mean"])
    assert df2.set_index(["run_id", "step"]).loc[("qwen_n4", 5), "train_reward"] == pytest.approx(0.24)


def test_unrelated_event_files_one_line_exit_2(capsys, tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    for name in ("resnet", "vit"):
        w = SummaryWriter(str(tmp_path / "imagenet" / name))
        for s in range(5):
            w.add_scalar("loss", 1.0 / (s + 1), s)
            w.add_scalar("accuracy", 0.1 * s, s)
        w.close()
    line = assert_one_line_exit_2(capsys, "analyze", tmp_path / "imagenet", needle="2 runs in TensorBoard logs, but none logs a reward")
    assert "its columns: accuracy, loss" in line and "--map train_reward=accuracy" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_exit_2(capsys, "analyze", empty, needle="no TensorBoard event files")


# ----------------------------------------------------------------------------------------------
# TRL's GRPOTrainer on a tiny model, twice, with TensorBoard logging and the isosim callback
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trl_runs(tmp_path_factory):
    """Two GRPOTrainer runs (num_generations 2 and 4, 6 steps, TensorBoard + RecordsCallback) in a
    fresh process (see tests/trl_grpo_helper.py): ~10 s."""
    pytest.importorskip("trl")
    pytest.importorskip("tensorboard")
    root = tmp_path_factory.mktemp("trl")
    res = subprocess.run([sys.executable, str(Path(__file__).parent / "trl_grpo_helper.py"), str(root), "2", "4"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    return root / "runs"


def test_trl_callback_records(trl_runs):
    for n in (2, 4):
        rows = [json.loads(line) for line in (trl_runs / f"grpo-n{n}" / "records.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [0, 1, 2, 6]  # step 0, 3 log-spaced points, the last step
        assert all(r["n"] == n and r["b_p"] == 8 // n and r["rollouts"] == 8 * r["step"] for r in rows)
        assert all(r["k"] == 2 and 0 <= r["val_worst"] <= r["val_avg"] <= r["val_best"] <= 1 for r in rows)
        # 6 held-out prompts x 4 samples: avg@k is a multiple of 1/24
        assert all(abs(r["val_avg"] * 24 - round(r["val_avg"] * 24)) < 1e-9 for r in rows)
        assert "train_reward" not in rows[0] and all(0 <= r["train_reward"] <= 1 for r in rows[1:])
        assert rows[0]["tokens"] == 0 and all(b["tokens"] > a["tokens"] for a, b in zip(rows, rows[1:]))


def test_trl_callback_resume_keeps_rows_and_drops_unknown_tokens(trl_runs):
    rows = [json.loads(line) for line in (trl_runs.parent / "resumed" / "records.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 6]  # rows up to step 3 kept, none written twice
    fresh = [json.loads(line) for line in (trl_runs / "grpo-n2" / "records.jsonl").read_text().splitlines()]
    # the same seeds and settings wrote the same rows before the save
    assert [{**r, "run_id": ""} for r in rows[:3]] == [{**r, "run_id": ""} for r in fresh[:3]]
    # the logs between the last row (step 2) and the checkpoint (step 3) were seen before the resume
    # only: the token count after it is unknown, not undercounted
    assert rows[3]["tokens"] is None and rows[3]["rollouts"] == 48


def test_trl_runs_analyze_without_flags(trl_runs):
    # the callback's records.jsonl and TensorBoard logs side by side: the records are read
    res = isosim("analyze", trl_runs, "--n-boot", "0", "--out", trl_runs)
    assert res.returncode == 0, res.stderr
    assert "2 runs from isosim records (records.jsonl), n = 2, 4; metric val_avg" in res.stdout
    assert json.loads((trl_runs / "frontier.json").read_text())["n_values"] == [2, 4]
    assert "not read" not in res.stdout


def test_records_beside_tensorboard_only_runs_are_named(trl_runs, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(trl_runs / "grpo-n2", mixed / "grpo-n2")
    shutil.copytree(trl_runs / "grpo-n4", mixed / "grpo-n4", ignore=shutil.ignore_patterns("records.jsonl"))
    df, text = load_runs(mixed)
    assert sorted(df["run_id"].unique()) == ["grpo-n2"]
    assert text.endswith("(not read: 1 run folder with TensorBoard logs but no records.jsonl, e.g. grpo-n4; "
                         "analyze those separately)")


def test_trl_tensorboard_logs_alone(capsys, trl_runs, tmp_path):
    tb_only = tmp_path / "tb"
    for run in ("grpo-n2", "grpo-n4"):
        shutil.copytree(trl_runs / run, tb_only / run, ignore=shutil.ignore_patterns("records.jsonl"))
    code, out, err = run_cli(capsys, "analyze", tb_only, "--n-boot", "0", "--metric", "train_reward", "--out", tb_only)
    assert code == 0, err
    assert "2 runs from TensorBoard logs, n = 2, 4; metric train_reward" in out
    data = json.loads((tb_only / "frontier.json").read_text())
    assert data["n_values"] == [2, 4] and data["b_p_values"] == [2, 4]
    tb, _ = load_runs(tb_only)
    with pytest.raises(IsosimError, match="log no validation"):
        default_metric(tb)  # no silent switch to the training reward
    for run in ("grpo-n2", "grpo-n4"):
        t = tb[tb.run_id == run].set_index("step")
        assert list(t.index) == [1, 2, 4, 6]  # the callback forced logs at 1, 2 and 6; logging_steps gives 4
        assert np.allclose(t["rollouts"], 8 * t.index)
        cb = pd.read_json(trl_runs / run / "records.jsonl", lines=True).set_index("step")
        common = [1, 2, 6]
        # both read the same log calls: same reward, same token count
        assert np.allclose(t.loc[common, "train_reward"], cb.loc[common, "train_reward"])
        assert np.allclose(t.loc[common, "tokens"], cb.loc[common, "tokens"])


def test_native_records_refuse_map_and_set(capsys, trl_runs):
    assert_one_line_exit_2(capsys, "analyze", trl_runs, "--set", "n=2,b_p=4", needle="needs no --map, --set")


def test_bad_map_and_runs_file(tmp_path):
    with pytest.raises(IsosimError, match="unknown column"):
        load_runs(FIXTURES / "wandb_panel_train_reward.csv", maps=["reward=train/reward"])
    bad = tmp_path / "runs.csv"
    bad.write_text("name,n\nx,2\n")
    with pytest.raises(IsosimError, match="'run' column"):
        load_runs(FIXTURES / "wandb_panel_train_reward.csv", runs_file=bad)


def test_a_validate_folder_is_read_as_its_runs_not_as_a_sweep_store(tmp_path):
    from isosim.frontier.report import is_sweep_store

    (tmp_path / "plan.json").write_text(json.dumps({"request": {}, "runs": [], "ns": [2, 4]}))
    for n in (2, 4):
        run = tmp_path / "runs" / f"n{n}_bp4_s0"
        run.mkdir(parents=True)
        rows = [{"run_id": run.name, "n": n, "b_p": 4, "seed": 0, "step": s, "rollouts": 4.0 * n * s,
                 "val_avg": 0.1 * s} for s in range(3)]
        (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not is_sweep_store(tmp_path)
    df, line = load_runs(tmp_path)
    assert sorted(df["n"].unique()) == [2, 4] and len(df) == 6 and "records.jsonl" in line
    (tmp_path / "plan.json").write_text(json.dumps({"format": 1}))
    assert is_sweep_store(tmp_path)  # a sweep plan carries its format number
