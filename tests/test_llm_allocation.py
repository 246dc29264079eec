"""Per-problem rollout allocation in the trainer (``--allocation``): groups of unequal size, the
same rollouts per step as uniform, the counts in the records, exact resume, and analysis."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
torch = pytest.importorskip("torch")

from llm_helpers import cli_args, interrupt_after, problem_reward, read_jsonl, strip_volatile  # noqa: E402

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.config import parse_args  # noqa: E402
from llm_runs.training import grpo  # noqa: E402
from llm_runs.training.train import GRPOTrainer  # noqa: E402

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def assets(tiny_assets):
    return tiny_assets("alloc", 40)


def argv(assets, out, **over):
    # 8 training problems, 4 a step: each is sampled again every other step, so the estimator
    # has a history to allocate from by step 3
    return cli_args({"model": assets["model"], "data": assets["data"], "val-size": 8, "max-train-problems": 8,
                     "n": 8, "b-p": 4, "budget": 320, "max-new-tokens": 16, "eval-n": 4, "eval-points": 4,
                     "save-every": 2, "lr": 1e-3, "out": str(out), "micro-batch-size": 16,
                     "allocation": "knapsack"}, **over)


# --- advantages of groups of unequal size ----------------------------------------------------

def _brute_force(rewards, sizes, kind):
    """Each group's advantages one number at a time: (r - mean) / (stdev + eps), or r - mean."""
    out, start = [], 0
    for k in sizes:
        group = [float(x) for x in rewards[start:start + k]]
        start += k
        if k <= 1:
            out += [0.0] * k
            continue
        mean = statistics.fmean(group)
        for r in group:
            out.append((r - mean) / (statistics.stdev(group) + grpo.ADV_EPS) if kind == "grpo" else r - mean)
    return out


@pytest.mark.parametrize("kind", ["grpo", "drgrpo"])
@pytest.mark.parametrize("binary", [True, False])
def test_unequal_group_advantages_match_a_brute_force_computation(kind, binary):
    gen = torch.Generator().manual_seed(3)
    sizes = [5, 1, 2, 9, 3, 2, 0, 16, 4, 5]
    total = sum(sizes)
    rewards = (torch.rand(total, generator=gen) < 0.4).float() if binary else torch.randn(total, generator=gen)
    rewards[8:17] = 1.0 if binary else 0.25  # the group of 9 (rewards 8..16) has zero variance
    got = grpo.unequal_group_advantages(rewards, sizes, kind)
    want = torch.tensor(_brute_force(rewards.tolist(), sizes, kind))
    assert got.shape == (total,) and torch.isfinite(got).all()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert got[8:17].abs().max() == 0  # no signal in a zero-variance group
    # each group's advantages sum to zero (the baseline is its own mean)
    for part in torch.split(got, sizes):
        assert abs(float(part.sum())) < 1e-4


def test_equal_groups_give_the_uniform_advantages_exactly():
    rewards = (torch.rand(6 * 8, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    for kind in ("grpo", "drgrpo"):
        assert torch.equal(grpo.unequal_group_advantages(rewards, [8] * 6, kind),
                           grpo.group_advantages(rewards, 8, 8, kind).reshape(-1))
    zero = grpo.unequal_zero_variance_groups(rewards, [8] * 6)
    assert torch.equal(zero, grpo.zero_variance_groups(rewards, 8))
    with pytest.raises(ValueError):
        grpo.unequal_group_advantages(rewards, [8] * 5, "grpo")


# --- samplers ------------------------------------------------------------------------------

def test_request_seeds_give_unequal_groups_disjoint_streams():
    from llm_runs.sampling.vllm_sampler import request_seeds

    sizes = [3, 1, 0, 5, 2]
    seeds = request_seeds(100, len(sizes), sizes)
    drawn = [s + j for s, k in zip(seeds, sizes) for j in range(k)]
    assert drawn == list(range(100, 100 + sum(sizes)))  # every sample its own seed, none shared
    assert request_seeds(100, 3, [4, 4, 4]) == request_seeds(100, 3, 4) == [100, 104, 108]


@pytest.mark.parametrize("which", ["hf", "lean"])
def test_samplers_take_unequal_n(assets, which):
    from llm_runs.sampling.lean import LeanSampler
    from llm_runs.sampling.models import eos_ids, load_model, load_tokenizer
    from llm_runs.sampling.samplers import HFSampler

    tok, model = load_tokenizer(assets["model"]), load_model(assets["model"])
    cls = HFSampler if which == "hf" else LeanSampler
    sampler = cls(model, tok, eos_ids(tok, model), batch_size=5)  # chunks cut through groups
    prompts = [tok(x)["input_ids"] for x in ("What is 2+3?", "Hi", "7*6=", "Count to three")]
    kw = dict(temperature=0.8, top_p=1.0, max_new_tokens=10, seed=11)
    a = sampler.generate(prompts, n=[3, 0, 1, 4], **kw)
    assert len(a) == 8 and len(a.texts) == 8
    assert a.prompt_ids == [prompts[0]] * 3 + [prompts[2]] + [prompts[3]] * 4  # prompt-major groups
    assert all(len(lp) == len(c) for lp, c in zip(a.logprobs, a.completion_ids))
    # a list of equal counts is the integer n, draw for draw
    b, c = sampler.generate(prompts, n=[2] * 4, **kw), sampler.generate(prompts, n=2, **kw)
    assert b.completion_ids == c.completion_ids and b.logprobs == c.logprobs
    with pytest.raises(ValueError):
        sampler.generate(prompts, n=[1, 2], **kw)


def test_lean_sampler_draws_what_hf_draws_with_unequal_n(assets):
    from llm_runs.sampling.lean import LeanSampler
    from llm_runs.sampling.models import eos_ids, load_model, load_tokenizer
    from llm_runs.sampling.samplers import HFSampler

    tok, model = load_tokenizer(assets["model"]), load_model(assets["model"])
    prompts = [tok(x)["input_ids"] for x in ("What is 2+3?", "Hi", "7*6=")]
    kw = dict(n=[5, 1, 3], temperature=1.0, top_p=1.0, max_new_tokens=10, seed=4)
    hf = HFSampler(model, tok, eos_ids(tok, model), batch_size=64).generate(prompts, **kw)
    lean = LeanSampler(model, tok, eos_ids(tok, model), batch_size=64).generate(prompts, **kw)
    assert lean.prompt_ids == hf.prompt_ids
    same = sum(a == b for a, b in zip(lean.completion_ids, hf.completion_ids))
    assert same >= len(hf) - 1  # (a near-tie may flip one draw: see tests/test_lean.py)


# --- the trainer ----------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["knapsack", "variance", "filter"])
def test_every_step_spends_b_p_times_n_and_the_records_hold_the_counts(assets, tmp_path, rule):
    cfg = parse_args(argv(assets, tmp_path / rule, allocation=rule))
    trainer = GRPOTrainer(cfg, reward_fn=problem_reward, log=lambda s: None)
    trainer.setup()
    sizes_seen = []
    real_update = trainer.update

    def spy(prompts, completions, logps, advantages, filler=None):
        sizes_seen.append(len(completions))
        return real_update(prompts, completions, logps, advantages, filler=filler)

    trainer.update = spy
    records = trainer.train()
    metrics = read_jsonl(tmp_path / rule / "metrics.jsonl")
    assert len(metrics) == cfg.total_steps == 10
    assert [m["rollouts"] for m in metrics] == [32 * (i + 1) for i in range(10)]  # b_p * n every step
    assert sizes_seen == [32] * 10  # every rollout enters the update
    for m in metrics:
        assert sum(m["alloc/counts"]) == 32 and len(m["alloc/counts"]) == 4
        assert m["alloc/n_min"] == min(m["alloc/counts"]) and m["alloc/n_max"] == max(m["alloc/counts"])
    if rule != "filter":  # filter keeps n per problem and chooses the problems instead
        assert any(len(set(m["alloc/counts"])) > 1 for m in metrics), "the rule never gave unequal n"
    assert records[0]["allocation"] == rule and records[0]["alloc_n_mean"] is None  # step 0: nothing sampled
    for r in records[1:]:
        assert r["allocation"] == rule and r["n"] == 8 and r["rollouts"] == 32 * r["step"]
        assert r["alloc_n_min"] <= 8 <= r["alloc_n_max"] and r["alloc_n_mean"] == pytest.approx(8.0)
        assert sum(r["alloc_n_counts"]) == 32
    last = [m for m in metrics if m["step"] == records[-1]["step"]][0]
    assert records[-1]["alloc_n_counts"] == last["alloc/counts"]


def test_uniform_records_keep_their_columns(assets, tmp_path):
    cfg = parse_args(argv(assets, tmp_path / "u", allocation="uniform", budget=64))
    rows = GRPOTrainer(cfg, reward_fn=problem_reward, log=lambda s: None).train()
    assert not [k for r in rows for k in r if k.startswith("alloc")]
    assert not [k for m in read_jsonl(tmp_path / "u" / "metrics.jsonl") for k in m if k.startswith("alloc")]
    state = json.loads((tmp_path / "u" / "checkpoint" / "trainer_state.json").read_text())
    assert "allocation" not in state


def test_kill_and_resume_gives_the_records_of_an_uninterrupted_run(assets, tmp_path):
    helper = [sys.executable, str(ROOT / "tests" / "llm_alloc_helper.py")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    ref = tmp_path / "ref"
    subprocess.run([*helper, *argv(assets, ref)], cwd=ROOT, env=env, check=True, timeout=600)
    out = tmp_path / "killed"
    metrics = out / "metrics.jsonl"
    proc = interrupt_after([*helper, *argv(assets, out)], metrics, 5, signal.SIGKILL, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    state = json.loads((out / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] in (4, 6) and state["allocation"]["rule"] == "knapsack"
    assert sum(state["allocation"]["estimator"]["trials"]) > 0  # the estimator's history is saved
    subprocess.run([*helper, *argv(assets, out)], cwd=ROOT, env=env, check=True, timeout=600)
    ref_metrics, got_metrics = read_jsonl(ref / "metrics.jsonl"), read_jsonl(metrics)
    assert any(len(set(m["alloc/counts"])) > 1 for m in ref_metrics)  # the resumed plans were not trivial
    assert strip_volatile(got_metrics) == strip_volatile(ref_metrics)
    assert strip_volatile(read_jsonl(out / "records.jsonl")) == strip_volatile(read_jsonl(ref / "records.jsonl"))


def test_bad_allocation_settings_are_one_line_errors(assets, tmp_path):
    with pytest.raises(IsosimError, match="invalid choice"):
        parse_args(argv(assets, tmp_path / "x", allocation="greedy"))
    with pytest.raises(IsosimError, match="decoupled baseline"):
        parse_args(argv(assets, tmp_path / "x", n_est=16))
    with pytest.raises(IsosimError, match="filter_zero_variance"):
        parse_args(argv(assets, tmp_path / "x", filter_zero_variance=True))
    # a run folder of one rule does not resume as another
    parse_args(argv(assets, tmp_path / "y", budget=32))
    assert GRPOTrainer(parse_args(argv(assets, tmp_path / "y", budget=32)), reward_fn=problem_reward,
                       log=lambda s: None).train()
    with pytest.raises(IsosimError, match="allocation"):
        GRPOTrainer(parse_args(argv(assets, tmp_path / "y", budget=32, allocation="variance")),
                    reward_fn=problem_reward, log=lambda s: None).setup()


def test_allocation_through_validate_and_f8_settings(tmp_path):
    from llm_runs.config import RunConfig
    from llm_runs.launch.validate import base_settings, parse_sets
    from llm_runs.organism.f8 import run_config

    planned = {"data": "x.jsonl", "n": 4, "b_p": 2, "budget": 8}
    assert RunConfig.from_dict({**base_settings(None, parse_sets(["allocation=band"])), **planned}).allocation == "band"
    with pytest.raises(IsosimError, match="allocation must be one of"):
        RunConfig.from_dict({**base_settings(None, parse_sets(["allocation=greedy"])), **planned})
    cfg = run_config("hard-128-t06", 32, 0, 200000, "m", tmp_path / "n32_bp16_s0", {"allocation": "knapsack"})
    assert RunConfig.from_dict(cfg).allocation == "knapsack"


def _isosim(*args):
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})


def test_two_runs_with_an_allocation_rule_and_their_analysis(assets, tmp_path):
    """The smoke test: two seeds of a rule through the trainer's command line (math-verify
    rewards), then ``isosim analyze`` reads their per-problem n; a folder mixing rules is refused."""
    from llm_runs.training.train import main

    sweep = tmp_path / "sweep"
    for seed in (0, 1):
        assert main(argv(assets, sweep / f"n8_s{seed}", seed=seed, budget=96, answer_fallback="last-number")) == 0
    rows = read_jsonl(sweep / "n8_s1" / "records.jsonl")
    assert [r["rollouts"] for r in rows] == [0, 32, 64, 96] and rows[-1]["allocation"] == "knapsack"
    res = _isosim("analyze", sweep, "--n-boot", "0", "--out", tmp_path / "a")
    assert res.returncode == 0, res.stderr
    assert "allocation knapsack (2 runs): per-problem n" in " ".join(res.stdout.split())
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for name in ("n8_s0", "n8_s1"):
        os.symlink(sweep / name, mixed / name)
    assert main(argv(assets, mixed / "n8_s2", seed=2, budget=96, allocation="uniform")) == 0
    res = _isosim("analyze", mixed, "--n-boot", "0", "--out", tmp_path / "b")
    assert res.returncode == 2 and "mix allocation rules (knapsack, uniform)" in res.stderr
    assert "Traceback" not in res.stderr
