"""Validation plans that can test a prediction: B_max, a step minimum, n around n_sat, the recipe
that was simulated, and SLURM launches that fit the model (FSDP), checked before queueing."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("transformers")

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.launch import validate as val  # noqa: E402

DATA = "../shared/data/math_train.jsonl"  # not read by make_plan
QWEN = "Qwen/Qwen2.5-7B-Instruct"


def predicted(**kw):
    """A prediction as ``validate.predict`` returns it (no simulation)."""
    base = {"source": "preset easy", "budget": 2e6, "n_star": 256, "n_sat": 256.0, "n_tol": 64, "n_tie_hi": 512,
            "b_p": 256, "recipe": "easy", "advised_recipe": "easy", "recipe_mismatch": False, "hard_share": 0.0,
            "b_max": 65536}
    return {**base, **kw}


def plan(tmp_path, pred=None, **kw):
    args = {"model": QWEN, "data": DATA, "budget": 2_000_000, "predicted": pred or predicted(), "settings": {},
            "out": str(tmp_path)}
    return val.make_plan(**{**args, **kw})


def test_plan_respects_b_max_and_min_steps(tmp_path):
    p = plan(tmp_path)
    assert p.ns == [64, 256, 1024], "below, at and above n_sat"
    assert all(r.b_p * r.n <= 65536 for r in p.runs)
    assert all(r.steps >= 20 for r in p.runs)
    assert p.b_p < 256 and any("B_p lowered" in n for n in p.notes)
    # planted: the old planner (B_p 256, 4 steps, no B_max) breaks both limits at n = 1024
    ns, _ = val.plan_ns(256, 2_000_000, 256, min_steps=4)
    assert max(ns) * 256 > 65536


def test_hard_b_max_and_a_budget_too_small(tmp_path):
    p = plan(tmp_path, predicted(b_max=16384))
    assert all(r.b_p * r.n <= 16384 for r in p.runs) and all(r.steps >= 20 for r in p.runs)
    with pytest.raises(IsosimError, match="too small to test anything"):
        plan(tmp_path, budget=200)


def test_no_learning_prediction_centres_on_n_star_and_says_so(tmp_path):
    p = plan(tmp_path, predicted(n_sat=None, n_tol=16, n_star=16))
    assert 16 in p.ns and any("no learning" in n for n in p.notes)


def test_given_n_outside_the_limits_is_refused(tmp_path):
    with pytest.raises(IsosimError, match="B_max"):
        plan(tmp_path, b_p=128, n_list=[1024], budget=100_000_000)
    with pytest.raises(IsosimError, match="min-steps"):
        plan(tmp_path, b_p=64, n_list=[2048])


def test_runs_use_the_simulated_recipe_and_flag_a_mismatch(tmp_path):
    hard_set = predicted(advised_recipe="hard", recipe_mismatch=True, hard_share=0.9)
    p = plan(tmp_path, hard_set)
    assert {r.config["recipe"] for r in p.runs} == {"easy"}, "launched = simulated"
    assert any("paper advises the hard recipe" in n for n in p.notes)
    assert not any("RECIPE MISMATCH" in n for n in p.notes)
    forced = plan(tmp_path / "f", hard_set, settings={"recipe": "hard"})
    assert any("RECIPE MISMATCH" in n for n in forced.notes)
    assert val.launched_recipe({"recipe": "kl-only"}) == {"recipe": "easy", "entropy_coef": 0.0}


def test_model_size_and_distributed_kind(tmp_path):
    assert val.model_params(QWEN) == pytest.approx(7e9)
    assert val.model_params("HuggingFaceTB/SmolLM2-135M") == pytest.approx(1.35e8)
    assert val.model_params("gpt2") is None
    opts = val.SlurmOptions()
    assert val.distributed_kind(QWEN, opts)[0] == "fsdp"
    assert val.distributed_kind("Qwen/Qwen2.5-1.5B-Instruct", opts)[0] == "ddp"
    assert val.distributed_kind(QWEN, val.SlurmOptions(gpus_per_node=1))[0] == "single"
    settings, notes = val.slurm_settings(QWEN, {}, opts)
    assert settings["sampler"] == "vllm" and any("checkpoint" in n for n in notes)
    assert val.slurm_settings(QWEN, {"sampler": "hf"}, opts)[0]["sampler"] == "hf"  # the user's choice stays


def test_fsdp_command_from_this_interpreter_and_checks_before_queueing(tmp_path):
    opts = val.SlurmOptions()
    settings, _ = val.slurm_settings(QWEN, {}, opts)
    p = plan(tmp_path, settings=settings)
    cmd = val.accelerate_command(p.runs[0], opts)
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--config_file") + 1].endswith("configs/accelerate_fsdp_8gpu.yaml")
    assert "--multi_gpu" not in cmd
    val.check_slurm_plan(p, opts)  # B_p divisible by 8, vLLM under FSDP: fine
    with pytest.raises(IsosimError, match="not a multiple"):
        val.check_slurm_plan(p, val.SlurmOptions(gpus_per_node=3))
    hf = plan(tmp_path / "hf", settings={"sampler": "hf"})
    with pytest.raises(IsosimError, match="hf sampler cannot run under FSDP"):
        val.check_slurm_plan(hf, opts)
