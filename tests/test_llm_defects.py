"""Regression tests for the vLLM-path defects that need no vLLM: a fake engine that models sleep
levels, seeds, DeepSpeed / FSDP set-up, the loss head's memory, and a checkpoint on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("math_verify")
torch = pytest.importorskip("torch")

from llm_helpers import cli_args, crc_reward, interrupt_after, read_jsonl, strip_volatile  # noqa: E402

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.config import parse_args  # noqa: E402
from llm_runs.training.train import GRPOTrainer, main  # noqa: E402

pytestmark = pytest.mark.llm
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def assets(tiny_assets):
    return tiny_assets("defects", 120)


def argv(assets, out, **over):
    return cli_args({"model": assets["model"], "data": assets["data"], "val-size": 8, "n": 4, "b-p": 4,
                     "budget": 48, "max-new-tokens": 12, "eval-n": 4, "eval-points": 3, "save-every": 2,
                     "lr": 1e-3, "out": str(out), "micro-batch-size": 8, "recipe": "hard"}, **over)


# --- defect 2: level-2 sleep discards the weights; the next use must sync them ----------------


class FakeLLM:
    """Models vLLM's sleep levels: level 2 discards the weights (and the KV cache); generate on a
    sleeping engine or on discarded weights fails. Records the weights each generate used."""

    def __init__(self, eos: int):
        self.eos = eos
        self.weights: dict[str, torch.Tensor] | None = {}  # {} = the checkpoint's weights
        self.awake = {"weights": True, "kv_cache": True}
        self.generated_with: list[dict[str, torch.Tensor]] = []
        self.calls: list[str] = []

    def sleep(self, level: int = 1) -> None:
        self.calls.append(f"sleep{level}")
        self.awake = {"weights": False, "kv_cache": False}
        if level == 2:
            self.weights = None

    def wake_up(self, tags=None) -> None:
        self.calls.append(f"wake{tags}")
        for t in tags or ["weights", "kv_cache"]:
            self.awake[t] = True

    def collective_rpc(self, method, args=(), kwargs=None):
        if method == "reload_weights":
            assert self.awake["weights"], "reload into sleeping weights"
            self.weights = {n: t.detach().clone() for n, t in kwargs["weights_iterator"]}
            self.calls.append("reload")
        return [0]

    def reset_prefix_cache(self) -> None:
        pass

    def generate(self, prompts, sampling_params, use_tqdm=False):
        if not all(self.awake.values()) or self.weights is None:
            raise RuntimeError("generate on a sleeping engine / discarded weights")
        self.generated_with.append(self.weights)
        outs = []
        for params in sampling_params:
            comps = []
            for j in range(params.n):
                g = torch.Generator().manual_seed(params.seed + j)
                ids = torch.randint(10, 60, (3,), generator=g).tolist() + [self.eos]
                comps.append(SimpleNamespace(index=j, token_ids=ids, text="".join(chr(65 + i % 26) for i in ids),
                                             finish_reason="stop",
                                             logprobs=[{t: SimpleNamespace(logprob=-1.0)} for t in ids]))
            outs.append(SimpleNamespace(outputs=comps))
        return outs


def test_sleeping_engine_is_resynced_after_eval_train_and_resume(assets, tmp_path):
    from llm_runs.sampling.vllm_sampler import VLLMSampler

    out = tmp_path / "run"
    cfg = parse_args(argv(assets, out, budget=48, save_every=2))  # 3 steps, evaluations at 0, 1, 2 (?), 3
    for attempt in range(2):  # a run stopped after step 2, then its resume from the checkpoint
        trainer = GRPOTrainer(cfg, reward_fn=crc_reward, log=lambda s: None)
        trainer.setup()
        vcfg = SimpleNamespace(**{**cfg.to_dict(), "vllm_sleep": True})
        fake = FakeLLM(trainer.eos_ids[0])
        trainer.sampler = VLLMSampler(trainer.model_path, trainer.tokenizer, trainer.eos_ids, cfg=vcfg,
                                      accelerator=trainer.accelerator, engine=fake, sleep_supported=True)
        real_generate = fake.generate

        def checked(*a, _t=trainer, _real=real_generate, **k):  # every generate sees the trainer's weights
            out_ = _real(*a, **k)
            used = fake.generated_with[-1]
            assert all(torch.equal(used[n], p.detach()) for n, p in _t.model.named_parameters())
            return out_

        fake.generate = checked
        if attempt == 0:
            real_step = trainer.train_step

            def two_steps(_t=trainer, _real=real_step):
                if _t.step == 2:
                    raise KeyboardInterrupt  # a kill after step 2's checkpoint
                return _real()

            trainer.train_step = two_steps
            with pytest.raises(KeyboardInterrupt):
                trainer.train()
        else:
            assert trainer.step == 2  # resumed
            trainer.train()
            assert fake.calls[-1] == "sleep2"  # closed asleep
        assert len(fake.generated_with) >= 2
    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows][0] == 0 and rows[-1]["step"] == 3


def test_request_seeds_give_every_sample_its_own_stream():
    from llm_runs.sampling.vllm_sampler import request_seeds

    n, prompts = 4, 8
    per_prompt = request_seeds(1000, prompts, n)
    per_sample = [s + j for s in per_prompt for j in range(n)]  # vLLM: child j gets seed + j
    assert len(set(per_sample)) == prompts * n


# --- defect 3 (DeepSpeed) and 6 (FSDP reduces gradients in bf16) ------------------------------


def test_deepspeed_is_refused_with_the_reason():
    from accelerate.utils import DistributedType

    from llm_runs.training.train import check_distributed

    with pytest.raises(IsosimError, match="DeepSpeed is not supported.*optimizer step on every micro-batch"):
        check_distributed(DistributedType.DEEPSPEED, "vllm")
    check_distributed(DistributedType.FSDP, "vllm")
    check_distributed(DistributedType.MULTI_GPU, "hf")


@pytest.mark.parametrize("version", [1, 2])
def test_fsdp_bf16_reduces_and_accumulates_gradients_in_fp32(version):
    from accelerate.utils import FullyShardedDataParallelPlugin

    from llm_runs.training.train import fp32_gradient_reduction

    plugin = FullyShardedDataParallelPlugin(fsdp_version=version)
    plugin.set_mixed_precision("bf16")  # what Accelerator(mixed_precision="bf16") does
    assert plugin.mixed_precision_policy.reduce_dtype == torch.bfloat16
    fp32_gradient_reduction(plugin)
    assert plugin.mixed_precision_policy.param_dtype == torch.bfloat16
    assert plugin.mixed_precision_policy.reduce_dtype == torch.float32


# --- defect 7: the loss head holds no fp32 copy of the full logits ------------------------------


def test_loss_head_keeps_no_full_fp32_logits_for_backward(monkeypatch):
    from llm_runs.training import grpo

    torch.manual_seed(0)
    S, T, V = 2, 64, 512
    logits = torch.randn(S, T, V, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, V, (S, T))
    monkeypatch.setattr(grpo, "LOGIT_CHUNK_ELEMENTS", 16 * V)  # 16 positions per chunk

    saved = []

    def pack(t):
        view = t.untyped_storage().data_ptr() == logits.untyped_storage().data_ptr()  # no new memory
        saved.append(0 if view else t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logp, ent = grpo.token_logprobs_and_entropy(logits, targets, 0.7, with_entropy=True)
    full_fp32 = S * T * V * 4
    assert sum(saved) < full_fp32 / 4, sum(saved)  # unchunked: several full fp32 copies
    (logp.sum() + ent.sum()).backward()
    g = logits.grad.clone()
    # the same values and gradients as the direct computation
    x = logits.detach().float().requires_grad_(True)
    z = x / 0.7
    lse = torch.logsumexp(z, -1)
    ref_lp = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    ref_ent = lse - (torch.softmax(z, -1) * z).sum(-1)
    (ref_lp.sum() + ref_ent.sum()).backward()
    assert torch.allclose(logp, ref_lp, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-5)
    assert torch.allclose(g.float(), x.grad.to(torch.bfloat16).float(), atol=1e-2)


# --- defect 4: a process left with no sequences still runs forward + backward -------------------


def test_update_with_no_local_sequences_runs_a_real_forward(assets, tmp_path):
    cfg = parse_args(argv(assets, tmp_path / "run", budget=16))
    trainer = GRPOTrainer(cfg, reward_fn=crc_reward, log=lambda s: None)
    trainer.setup()
    trainer._sum = lambda values: [1.0 if i < 2 else float(v) for i, v in enumerate(values)]  # others have data
    trainer._max = lambda v: max(float(v), 1.0)
    calls = []
    real = trainer._forward
    trainer._forward = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    before = [p.detach().clone() for p in trainer.model.parameters()]
    stats = trainer.update([], [], [], [], filler=([5, 6, 7], [8, 9, 2], [-1.0, -1.0, -1.0]))
    assert calls, "no forward pass: DDP/FSDP would wait for this process forever"
    assert all(p.grad is None for p in trainer.model.parameters())  # zeroed after the (weight-0) step
    assert stats["optim/skipped"] == 0.0
    # weight 0: only weight decay moved the parameters (lr * wd * w)
    for b, p in zip(before, trainer.model.parameters()):
        assert torch.allclose(p.detach(), b * (1 - cfg.lr * cfg.weight_decay), atol=1e-7)
    trainer.close()


# --- defect 8 (trainer side): checkpoint on the scheduler's signal ------------------------------


def test_sigterm_checkpoints_the_current_step_and_resume_is_identical(assets, tmp_path):
    over = dict(budget=80, save_every=100, eval_points=4)  # without the signal: a checkpoint only at the end
    ref = tmp_path / "ref"
    assert main(argv(assets, ref, **over)) == 0
    # the hf sampler records its agreement with the trainer too (fp32: float noise only)
    steps = read_jsonl(ref / "metrics.jsonl")
    assert len(steps) == 5 and all(0 <= s["sampler_logprob_gap_max"] < 1e-3 for s in steps)
    assert all(0 <= s["sampler_logprob_gap_mean"] <= s["sampler_logprob_gap_max"] for s in steps)
    rows = read_jsonl(ref / "records.jsonl")
    assert rows[0]["sampler_logprob_gap_max"] is None and all(r["sampler_logprob_gap_max"] < 1e-3 for r in rows[1:])
    out = tmp_path / "term"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the same threads as the reference: the same float sums
    metrics = out / "metrics.jsonl"
    proc = interrupt_after([sys.executable, "-m", "llm_runs.training.train", *argv(assets, out, **over)], metrics, 2,
                           signal.SIGTERM, cwd=ROOT, env=env, timeout=180)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read().decode()[-2000:]
    state = json.loads((out / "checkpoint" / "trainer_state.json").read_text())
    assert state["step"] == len(read_jsonl(metrics)) >= 2  # every finished step is in the checkpoint
    assert main(argv(assets, out, **over)) == 0
    assert strip_volatile(read_jsonl(out / "records.jsonl")) == strip_volatile(read_jsonl(ref / "records.jsonl"))
    assert strip_volatile(read_jsonl(out / "metrics.jsonl")) == strip_volatile(read_jsonl(ref / "metrics.jsonl"))


def test_two_processes_when_one_has_every_group_filtered(assets, tmp_path):
    """Two CPU processes (gloo, DDP): process 1's groups all have zero variance and are filtered.
    Before the fix process 1 ran a backward without a forward and both processes hung."""
    conf = dict(model=assets["model"], data=assets["data"], val_size=4, n=4, b_p=4, budget=32, max_new_tokens=8,
                eval_n=4, eval_points=0, recipe="hard", filter_zero_variance=True, micro_batch_size=4,
                out=str(tmp_path / "run"))
    (tmp_path / "c.json").write_text(json.dumps(conf))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29561",
           str(ROOT / "tests" / "ddp_filter_helper.py"), "--config", str(tmp_path / "c.json")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the two processes hung (a process without sequences skipped its forward pass)")
    assert proc.returncode == 0, err[-2000:]
    line = next(x for x in out.splitlines() if x.startswith("rank 0 done"))
    assert "steps [1, 2]" in line, out
    filtered = json.loads(line.split("filtered ")[1])
    assert all(f >= 0.5 for f in filtered)  # at least process 1's two groups of four, every step


# --- defect 9: calibrate --sampler vllm sizes the engine from its prompts and takes a memory share --


def test_calibrate_vllm_context_fits_the_longest_prompt(assets, tmp_path, monkeypatch):
    from llm_runs.launch.calibrate import CalibrateSettings, calibrate
    from llm_runs.sampling import samplers

    long_problem = "What is " + " + ".join(["1"] * 700) + "?"  # > 1024 tokens with the character tokenizer
    data = tmp_path / "p.jsonl"
    data.write_text(json.dumps({"id": "long", "problem": long_problem, "answer": "700"}) + "\n"
                    + json.dumps({"id": "short", "problem": "1+1?", "answer": "2"}) + "\n")
    seen = {}

    class Fake:
        def generate(self, prompts, n, temperature, top_p, max_new_tokens, seed):
            seen["longest"] = max(len(p) for p in prompts)
            return samplers.SampleBatch(texts=["\\boxed{2}"] * (len(prompts) * n),
                                        completion_ids=[[1]] * (len(prompts) * n))

        def close(self):
            pass

    def fake_make_sampler(kind, *, cfg, **kw):
        seen["cfg"] = cfg
        return Fake()

    monkeypatch.setattr(samplers, "make_sampler", fake_make_sampler)
    s = CalibrateSettings(model=assets["model"], data=str(data), k=2, sampler="vllm", max_new_tokens=64,
                          batch_size=8, vllm_gpu_memory_utilization=0.15)
    calibrate(s, out=tmp_path / "profile.json", log=lambda m: None)
    cfg = seen["cfg"]
    assert seen["longest"] > 1024
    assert cfg.max_prompt_tokens + cfg.max_new_tokens >= seen["longest"] + 64  # vLLM's max_model_len
    assert cfg.vllm_gpu_memory_utilization == 0.15
