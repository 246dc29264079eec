"""The checks behind scripts/gpu_check.sh; ``python scripts/gpu_check.py NAME`` runs one and prints one line.

Needs only torch (CUDA), transformers and accelerate: no vLLM, no network, no install (the
repository is put on sys.path).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CPU_OK = os.environ.get("GPU_CHECK_ALLOW_CPU") == "1"  # self-test of the script on a machine without a GPU


def _tiny(root: Path) -> str:
    from llm_runs.sampling.tiny import make_tiny_model

    return str(make_tiny_model(root / "tiny", hidden_size=128, num_heads=2))


def _data(root: Path) -> str:
    from llm_runs.problems.make_arith import make_problems

    path = root / "arith.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in make_problems(64, seed=0)))
    return str(path)


def crc_reward(texts, golds):
    return [float(zlib.crc32(t.encode()) % 2) for t in texts]


def check_env() -> str:
    import torch

    assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
    import accelerate
    import transformers

    return (f"torch {torch.__version__} (CUDA {torch.version.cuda}), {torch.cuda.get_device_name(0)}, "
            f"transformers {transformers.__version__}, accelerate {accelerate.__version__}")


def check_bf16_train() -> str:
    """bf16 autocast trainer + hf sampler on CUDA: 3 steps, finite losses, sampler/trainer gap."""
    import torch

    from llm_runs.config import RunConfig
    from llm_runs.training.train import GRPOTrainer

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg = RunConfig(model=_tiny(root), data=_data(root), val_size=4, n=4, b_p=4, budget=48, max_new_tokens=16,
                        max_prompt_tokens=256, eval_n=4, eval_points=2, lr=1e-3, precision="bf16",
                        out=str(root / "run"), recipe="easy")
        trainer = GRPOTrainer(cfg, reward_fn=crc_reward, log=lambda s: None)
        t = time.perf_counter()
        rows = trainer.train()
        steps = [json.loads(x) for x in (root / "run" / "metrics.jsonl").read_text().splitlines()]
        assert CPU_OK or str(trainer.accelerator.device).startswith("cuda")
        assert trainer.accelerator.mixed_precision == "bf16"
        assert len(steps) == 3 and all(torch.isfinite(torch.tensor(s["loss/total"])) for s in steps)
        gaps = [s["sampler_logprob_gap_max"] for s in steps]
        return (f"3 steps in {time.perf_counter() - t:.1f}s, {len(rows)} records, "
                f"sampler/trainer gap max {max(gaps):.2e} mean {steps[-1]['sampler_logprob_gap_mean']:.2e} (bf16)")


def check_fsdp2() -> str:
    """FSDP2 in one process (run under accelerate launch): fp32 gradient reduction under bf16, micro-batch
    accumulation under no_sync, the gathered weights the vLLM sync would send, and the gradient
    against a plain fp32 model."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    from llm_runs.sampling.models import load_model
    from llm_runs.sampling.vllm_sampler import iter_full_parameters
    from llm_runs.training import grpo
    from llm_runs.training.train import fp32_gradient_reduction

    with tempfile.TemporaryDirectory() as tmp:
        path = _tiny(Path(tmp))
        acc = Accelerator(mixed_precision="bf16")
        assert acc.distributed_type == DistributedType.FSDP, f"not under FSDP: {acc.distributed_type}"
        policy = fp32_gradient_reduction(acc.state.fsdp_plugin)
        model = load_model(path)
        ref = load_model(path).to(acc.device)
        opt = torch.optim.AdamW(model.parameters(), lr=0.0)
        model, opt = acc.prepare(model, opt)
        torch.manual_seed(0)
        batches = [torch.randint(10, 100, (2, 24), device=acc.device) for _ in range(4)]
        for k, ids in enumerate(batches):
            ctx = acc.no_sync(model) if k < len(batches) - 1 else torch.enable_grad()
            with ctx:
                with acc.autocast():
                    logits = model(input_ids=ids).logits[:, :-1]
                logp, _ = grpo.token_logprobs_and_entropy(logits, ids[:, 1:], 1.0, with_entropy=False)
                acc.backward(-logp.mean() / len(batches))
        for ids in batches:
            with torch.autocast(acc.device.type, dtype=torch.bfloat16):
                logits = ref(input_ids=ids).logits[:, :-1]
            logp, _ = grpo.token_logprobs_and_entropy(logits, ids[:, 1:], 1.0, with_entropy=False)
            (-logp.mean() / len(batches)).backward()
        ref_grads = {n: p.grad for n, p in ref.named_parameters()}
        worst, dtypes = 0.0, set()
        for name, p in model.named_parameters():
            g = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
            dtypes.add(str(g.dtype))
            r = ref_grads[name.replace("_fsdp_wrapped_module.", "").replace("module.", "")]
            worst = max(worst, float((g.float() - r.float()).norm() / (r.float().norm() + 1e-12)))
        full = dict(iter_full_parameters(model, acc))
        same = all(torch.equal(full[n].float().cpu(), p.detach().float().cpu()) for n, p in ref.named_parameters())
        assert policy.reduce_dtype == torch.float32 and dtypes == {"torch.float32"}, dtypes
        assert same, "gathered weights differ from the model's"
        assert worst < 5e-2, f"gradient differs from the unsharded model's by {worst:.2e} (relative)"
        return f"grads {sorted(dtypes)}, relative grad diff vs unsharded {worst:.1e}, gathered weights exact"


def check_sim_cuda() -> str:
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", "import cli; cli.main()", "explore", "--preset", "easy", "--quick",
                            "--device", "cpu" if CPU_OK else "cuda", "--n-boot", "20", "--out", str(Path(tmp) / "sim")], cwd=ROOT,
                           capture_output=True, text=True, timeout=400, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 0, (r.stderr or r.stdout).strip().splitlines()[-1:]
        last = [x for x in r.stdout.splitlines() if "n*" in x or "n_sat" in x][:1]
        return f"explore --quick --device cuda in {time.perf_counter() - t:.0f}s {' '.join(last)[:150]}"


CHECKS = {"env": check_env, "bf16_train": check_bf16_train, "fsdp2": check_fsdp2, "sim_cuda": check_sim_cuda}

if __name__ == "__main__":
    name = sys.argv[1]
    try:
        detail = CHECKS[name]()
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"PASS {name}: {detail}", flush=True)
    except ModuleNotFoundError as exc:
        print(f"SKIP {name}: missing module {exc.name}", flush=True)
    except Exception as exc:  # one line per check, whatever failed
        msg = " ".join(str(exc).split())[:300]
        print(f"FAIL {name}: {type(exc).__name__}: {msg}", flush=True)
