"""Train TRL's GRPOTrainer on a tiny random model, once per num_generations, with TensorBoard
logging and isosim's RecordsCallback: ``python tests/trl_grpo_helper.py OUT_DIR 2 4`` writes
OUT_DIR/runs/grpo-n2, OUT_DIR/runs/grpo-n4 and OUT_DIR/resumed (n = 2, resumed from step 3).

Run in its own process by tests/test_integrations.py: the trainer sets up accelerate's global
state, which must not leak into the other tests' process.
"""

import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from isosim.integrations.trl import RecordsCallback
from llm_runs.sampling.tiny import make_tiny_model


def parity_reward(prompts, completions, **kwargs):
    """Deterministic in the completion, about half right for a random model: 0/1 like a verifier."""
    return [1.0 if c and ord(c[0]) % 2 == 0 else 0.0 for c in completions]


def main(root: Path, ns: list[int]) -> None:
    torch.set_num_threads(1)  # a model this small runs fastest on one thread
    model_dir = make_tiny_model(root / "tiny", seed=0, vocab_size=128, hidden_size=16, num_layers=1, num_heads=2)
    train = Dataset.from_list([{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(6) for b in range(6)])
    held_out = [{"prompt": f"{a}*{b}=", "answer": str(a * b)} for a in range(3) for b in range(2)]

    def trainer(out: Path, n: int, **kw) -> GRPOTrainer:
        args = GRPOConfig(output_dir=str(out), num_generations=n, per_device_train_batch_size=8,
                          max_completion_length=8, max_steps=6, logging_steps=4, learning_rate=1e-3, seed=0,
                          report_to=["tensorboard"], use_cpu=True, disable_tqdm=True, **kw)
        return GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), reward_funcs=parity_reward,
                           args=args, train_dataset=train, processing_class=AutoTokenizer.from_pretrained(model_dir),
                           callbacks=[RecordsCallback(eval_dataset=held_out, reward_funcs=parity_reward,
                                                      samples=4, k=2, points=3)])

    for n in ns:
        trainer(root / "runs" / f"grpo-n{n}", n, save_strategy="no").train()
    # a run saved at step 3 and resumed from there (outside runs/: analyze reads runs/ alone)
    trainer(root / "resumed", 2, save_strategy="steps", save_steps=3).train()
    trainer(root / "resumed", 2, save_strategy="no").train(resume_from_checkpoint=str(root / "resumed" / "checkpoint-3"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), [int(v) for v in sys.argv[2:]])
