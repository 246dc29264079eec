"""The vLLM sampler: needs vLLM and a CUDA GPU (``pytest -m vllm``); skipped elsewhere."""

from __future__ import annotations

import importlib.util
import json

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed (pip install 'isosim[vllm]')"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from llm_runs.tiny import make_tiny_model

    return str(make_tiny_model(tmp_path_factory.mktemp("vllm") / "tiny", hidden_size=64, num_heads=4))


def _sampler(path, **over):
    from accelerate import Accelerator

    from llm_runs.config import RunConfig
    from llm_runs.models import load_tokenizer
    from llm_runs.vllm_sampler import VLLMSampler

    cfg = RunConfig(data="x.jsonl", budget=64, n=4, b_p=4, max_new_tokens=16, max_prompt_tokens=64,
                    vllm_gpu_memory_utilization=0.2, **over)
    tok = load_tokenizer(path)
    return VLLMSampler(path, tok, [tok.eos_token_id], cfg=cfg, accelerator=Accelerator()), tok


def test_vllm_logprobs_match_the_trainer_after_a_weight_sync(tiny):
    from llm_runs import grpo
    from llm_runs.models import load_model

    sampler, tok = _sampler(tiny)
    model = load_model(tiny).cuda()
    with torch.no_grad():  # perturb the weights: the engine must see the new ones after a sync
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sampler.sync_weights(model)
    prompts = [tok("What is 2+3?")["input_ids"], tok("Hi")["input_ids"]]
    batch = sampler.generate(prompts, n=4, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=1)
    assert len(batch) == 8 and batch.prompt_ids[0] == prompts[0] and batch.prompt_ids[4] == prompts[1]
    t = grpo.pack(batch.prompt_ids, batch.completion_ids, tok.pad_token_id, device="cuda")
    width = t["response_ids"].shape[1]
    with torch.no_grad():
        out = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"], position_ids=t["position_ids"],
                    logits_to_keep=width + 1)
    logp, _ = grpo.token_logprobs_and_entropy(out.logits[:, :-1], t["response_ids"], 1.0, with_entropy=False)
    diff = (logp - grpo.pad_values(batch.logprobs, width, device="cuda")) * t["response_mask"]
    assert diff.abs().max().item() < 0.1  # bf16 engine vs fp32 trainer: close, not equal (TIS covers it)
    sampler.release()
    sampler.close()


def test_vllm_end_to_end_run(tiny, tmp_path):
    from llm_runs.make_arith import make_problems
    from llm_runs.train import main

    data = tmp_path / "arith.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in make_problems(64, seed=0)))
    args = ["--model", tiny, "--data", str(data), "--val-size", "8", "--n", "4", "--b-p", "4", "--budget", "32",
            "--max-new-tokens", "16", "--max-prompt-tokens", "64", "--eval-n", "4", "--sampler", "vllm",
            "--vllm-gpu-memory-utilization", "0.2", "--out", str(tmp_path / "run")]
    assert main(args) == 0
    rows = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
