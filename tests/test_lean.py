"""The lean path for small Llama-style models (llm_runs.sampling.lean and
llm_runs.training.lean_forward): the same draws as generate, the same log-probs and gradients as
the model's own forward, the same records as today's path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llm_helpers import read_jsonl  # noqa: E402

from llm_runs.organism import build as organism  # noqa: E402
from llm_runs.problems.data import build_prompt  # noqa: E402
from llm_runs.sampling import lean, models  # noqa: E402
from llm_runs.sampling.samplers import HFSampler  # noqa: E402
from llm_runs.training import grpo, lean_forward  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_organism(tmp_path_factory):
    out = tmp_path_factory.mktemp("organism")
    organism.build(out, organism.OrganismSettings.for_scale("quick", sft_steps=40, threads=1), log=lambda m: None)
    return out


def _gqa_model(path: Path) -> Path:
    """A random Llama with grouped-query attention (4 query heads on 2 key/value heads) and biases."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_runs.sampling.tiny import make_tokenizer

    tok = make_tokenizer(256)
    cfg = LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, attention_bias=True,
                      max_position_embeddings=256, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(1)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _load(path):
    tok = models.load_tokenizer(str(path))
    model = models.load_model(str(path))
    return tok, model, models.eos_ids(tok, model)


def _prompts(tok, pool: Path, k: int) -> list[list[int]]:
    rows = [json.loads(x) for x in pool.read_text().splitlines()[:k]]
    return [build_prompt(tok, r["problem"], "plain", "") for r in rows]


@pytest.mark.parametrize("which", ["organism", "gqa"])
@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.6, 1.0), (1.0, 0.9)])
def test_lean_sampler_draws_what_generate_draws(quick_organism, tmp_path, which, temperature, top_p):
    path = quick_organism / "model" if which == "organism" else _gqa_model(tmp_path / "gqa")
    tok, model, eos = _load(path)
    prompts = _prompts(tok, quick_organism / "pool.jsonl", 6)
    for batch_size in (4096, 7):  # one chunk, and chunks that split a group
        a = HFSampler(model, tok, eos, batch_size=batch_size).generate(prompts, 5, temperature, top_p, 12, seed=3)
        b = lean.LeanSampler(model, tok, eos, batch_size=batch_size).generate(prompts, 5, temperature, top_p, 12,
                                                                              seed=3)
        assert b.prompt_ids == a.prompt_ids
        same = [x == y for x, y in zip(a.completion_ids, b.completion_ids)]
        assert sum(same) >= len(same) - 1  # a float near-tie may flip one draw; none seen so far
        if all(same):
            assert b.truncated == a.truncated
        assert b.texts == tok.batch_decode(b.completion_ids, skip_special_tokens=True)
        for ok, la, lb in zip(same, a.logprobs, b.logprobs):
            if ok:
                assert len(la) == len(lb) and max((abs(u - v) for u, v in zip(la, lb)), default=0.0) < 1e-4
    if which == "organism":  # the organism stops: some completions end at eos before 12 tokens
        assert any(not t for t in b.truncated)


@pytest.mark.parametrize("which", ["organism", "gqa"])
def test_lean_forward_matches_the_models_forward(quick_organism, tmp_path, which):
    path = quick_organism / "model" if which == "organism" else _gqa_model(tmp_path / "gqa")
    tok, model, eos = _load(path)
    b = lean.LeanSampler(model, tok, eos, 4096).generate(_prompts(tok, quick_organism / "pool.jsonl", 8), 6, 1.0,
                                                         1.0, 12, seed=1)
    packed = grpo.pack(b.prompt_ids, b.completion_ids, tok.pad_token_id)
    W = packed["response_ids"].shape[1]
    logits = model(input_ids=packed["input_ids"], attention_mask=packed["attention_mask"],
                   position_ids=packed["position_ids"], use_cache=False, logits_to_keep=W + 1).logits[:, :-1]
    lp, ent = grpo.token_logprobs_and_entropy(logits, packed["response_ids"], 0.7)
    check = (lp.detach(), ent.detach())
    lp2, ent2, ids, mask = lean_forward.response_logprobs(lean.LlamaParts(model), b.prompt_ids, b.completion_ids,
                                                 tok.pad_token_id, 0.7, True)
    m = packed["response_mask"]
    assert torch.equal(ids, packed["response_ids"]) and torch.equal(mask, m)
    assert float(((check[0] - lp2.detach()).abs() * m).max()) < 1e-4
    assert float(((check[1] - ent2.detach()).abs() * m).max()) < 1e-4
    params = [p for p in model.parameters()]
    g1 = torch.autograd.grad(((lp + ent) * m).sum(), params, allow_unused=True)
    g2 = torch.autograd.grad(((lp2 + ent2) * m).sum(), params, allow_unused=True)
    for a, c in zip(g1, g2):
        if a is not None:
            assert float((a - c).abs().max()) <= 1e-4 * (float(a.abs().max()) + 1e-6)
    # many length buckets (the sweep's large n) give the same values
    lp3 = lean_forward.response_logprobs(lean.LlamaParts(model), b.prompt_ids, b.completion_ids, tok.pad_token_id, 0.7,
                                 False, bucket_rows=4)[0]
    assert float(((lp3.detach() - lp2.detach()).abs() * m).max()) < 1e-5


def test_buckets_cover_every_row_once():
    lengths = [1, 24, 3, 3, 12, 7, 24, 2] * 20
    buckets = lean_forward._buckets(lengths, min_rows=8)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    assert len(buckets) > 1
    for b in buckets[:-1]:
        assert min(lengths[i] for i in b) >= 0.7 * max(lengths[i] for i in b) or len(b) <= 8


def _run(pool, out, seed, **over):
    from llm_runs.config import RunConfig
    from llm_runs.training.train import GRPOTrainer

    cfg = RunConfig(model=str(pool.parent / "model"), data=str(pool), out=str(out), n=4, b_p=8, budget=8 * 4 * 8,
                    seed=seed, val_size=40, prompt_template="plain", instruction="", answer_fallback="last-number",
                    temperature=1.0, max_new_tokens=12, sampler_batch_size=4096, micro_batch_size=4096,
                    precision="fp32", eval_n=4, eval_k=2, eval_points=2, base_lr=3e-3, **{"recipe": "easy", **over})
    return GRPOTrainer(cfg, log=lambda m: None).train()


EXACT = ("step", "rollouts", "tokens", "train_reward", "val_avg", "val_best", "val_worst", "response_len",
         "val_response_len")
CLOSE = ("entropy", "kl", "sampler_logprob_gap_mean")


def test_lean_path_gives_todays_records(quick_organism, tmp_path):
    """Same seed, same records: the lean sampler draws the same tokens (so every count-based column
    is equal) and the lean forward computes the same loss to float rounding; over 2 seeds."""
    pool = quick_organism / "pool.jsonl"
    for seed in (0, 1):
        old = _run(pool, tmp_path / f"old{seed}", seed)
        for name, over in (("sampler", {"sampler": "lean"}), ("both", {"sampler": "lean", "train_forward": "lean"})):
            new = _run(pool, tmp_path / f"{name}{seed}", seed, **over)
            assert len(new) == len(old) >= 3
            for a, b in zip(old, new):
                assert {k: a[k] for k in EXACT} == {k: b[k] for k in EXACT}
                for k in CLOSE:
                    if a[k] is not None:
                        assert b[k] == pytest.approx(a[k], rel=1e-3, abs=1e-5), k
            assert new[-1]["sampler"] == over["sampler"]


def test_lean_path_gives_todays_records_on_the_hard_recipe(quick_organism, tmp_path):
    """No KL, no entropy bonus: no reference forward, the entropy only a statistic."""
    pool = quick_organism / "pool.jsonl"
    old = _run(pool, tmp_path / "old", 0, recipe="hard")
    new = _run(pool, tmp_path / "new", 0, recipe="hard", sampler="lean", train_forward="lean")
    for a, b in zip(old, new):
        assert {k: a[k] for k in EXACT} == {k: b[k] for k in EXACT}
        assert b["kl"] is None and a["kl"] is None
        if a["entropy"] is not None:  # the step-0 record has no step statistics
            assert b["entropy"] == pytest.approx(a["entropy"], rel=1e-3)
    assert new[-1]["entropy"] is not None


def test_runs_saved_before_train_forward_existed_still_resume():
    from llm_runs.training.runlog import config_diff

    assert config_diff({"seed": 0}, {"seed": 0, "train_forward": "hf"}) == []
    assert config_diff({"seed": 0}, {"seed": 0, "train_forward": "lean"})


def test_gpu_organism_script_dry_run(tmp_path):
    env = {"OUT": str(tmp_path / "out"), "PATH": "/usr/bin:/bin", "PYTHON": sys.executable,
           "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(ROOT / "scripts/gpu_organism.sh"), "--dry-run"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["runs"] >= 2
    assert summary["rollouts"] > 0 and summary["rollouts_per_s"] > 0
    for run in summary["per_run"]:
        rows = read_jsonl(tmp_path / "out" / "runs" / run["run_id"] / "records.jsonl")
        assert rows[-1]["rollouts"] == run["rollouts"] and rows[-1]["sampler"] == "lean"
