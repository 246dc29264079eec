"""GRPO with TRL for one run of an isosim plan (``isosim plan --for trl`` copies this file as
``train_grpo.py`` into its output folder).

::

    accelerate launch --num_processes P train_grpo.py --config RUN/config.yaml \\
        --model_name_or_path MODEL --dataset_name DATA --reward_funcs accuracy_reward \\
        [--eval_dataset HELD_OUT]

``--config`` is the run's ``GRPOConfig`` (TRL's own YAML config, read by ``TrlParser``; any other
``GRPOConfig`` argument may be added on the command line or in the file). ``DATA`` and
``HELD_OUT``: a hub dataset name, a local folder, or a ``.jsonl`` / ``.json`` / ``.csv`` /
``.parquet`` file with a ``prompt`` column and the columns the reward functions read.
``--reward_funcs``: TRL's named rewards (``accuracy_reward``: math-verify against the dataset's
``solution`` column, ...) or dotted import paths (``module.function``, importable from the working folder). With a held-out set, isosim's
``RecordsCallback`` writes ``records.jsonl`` with validation avg@k / best@k / worst@k into the
run's ``output_dir``; without one it writes the training reward only. The model is saved to
``output_dir`` at the end (a later stage of a schedule starts from it), then ``FINISHED``
(``isosim_finished.json``): the plan's ``launch.sh`` skips a run that has it, so that rerunning the
sweep after one run failed does not train the finished ones again (a fresh start rewrites a run's
records). A run whose ``output_dir`` holds a ``checkpoint-STEP`` folder (the full-budget run saves
some: ``save_strategy: steps``) resumes from the newest one (or from ``--resume_from_checkpoint``).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

FILE_TYPES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
FINISHED = "isosim_finished.json"
"""written into ``output_dir`` once the run reached ``max_steps`` and its model was saved"""


@dataclass
class PlanArguments:
    model_name_or_path: str | None = field(default=None, metadata={"help": "hub id or local folder of the model"})
    dataset_name: str | None = field(default=None, metadata={"help": "training prompts: hub name, folder or file"})
    dataset_config: str | None = field(default=None, metadata={"help": "the hub dataset's configuration"})
    dataset_train_split: str = field(default="train", metadata={"help": "split of dataset_name to train on"})
    eval_dataset: str | None = field(default=None, metadata={"help": "held-out prompts (hub name, folder or file)"})
    eval_split: str = field(default="test", metadata={"help": "split of a hub eval_dataset"})
    eval_size: int = field(default=64, metadata={"help": "held-out prompts evaluated (the first ones)"})
    eval_samples: int = field(default=8, metadata={"help": "completions per held-out prompt"})
    correct_at: float = field(default=1.0, metadata={"help": "a completion is correct at this summed reward"})
    reward_funcs: list[str] | None = field(default=None, metadata={"help": "TRL reward names or module.function"})


def load_prompts(name: str, config: str | None = None, split: str = "train"):
    """A ``datasets.Dataset`` from a file, a local folder or a hub name."""
    from datasets import load_dataset

    path = Path(name)
    if path.is_file():
        kind = FILE_TYPES.get(path.suffix.lower())
        if kind is None:
            raise SystemExit(f"{name}: expected one of {', '.join(FILE_TYPES)}")
        return load_dataset(kind, data_files=str(path), split="train")
    return load_dataset(name, config, split=split)


def reward_function(name: str):
    from trl import rewards

    if hasattr(rewards, name):
        return getattr(rewards, name)
    if "." not in name:
        raise SystemExit(f"--reward_funcs {name}: not a TRL reward; give module.function")
    module, func = name.rsplit(".", 1)
    sys.path.insert(0, os.getcwd())
    return getattr(importlib.import_module(module), func)


def last_checkpoint(folder: str) -> str | None:
    """The newest ``checkpoint-STEP`` folder of a run's ``output_dir`` (an interrupted run that saved
    one), or None."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(folder) if Path(folder).is_dir() else None


def main(argv: list[str] | None = None) -> None:
    from trl import GRPOConfig, GRPOTrainer, TrlParser

    from isosim.integrations.trl import RecordsCallback

    parser = TrlParser((PlanArguments, GRPOConfig))
    script, training = parser.parse_args_and_config(args=argv)
    if not (script.model_name_or_path and script.dataset_name and script.reward_funcs):
        raise SystemExit("give --model_name_or_path, --dataset_name and --reward_funcs")
    funcs = [reward_function(f) for f in script.reward_funcs]
    train = load_prompts(script.dataset_name, script.dataset_config, script.dataset_train_split)
    held_out = None
    if script.eval_dataset:
        held_out = load_prompts(script.eval_dataset, split=script.eval_split)
        held_out = held_out.select(range(min(script.eval_size, len(held_out))))
    callback = RecordsCallback(eval_dataset=held_out, reward_funcs=funcs, samples=script.eval_samples,
                               correct_at=script.correct_at, seed=training.seed)
    trainer = GRPOTrainer(model=script.model_name_or_path, reward_funcs=funcs, args=training,
                          train_dataset=train, callbacks=[callback])
    resume = training.resume_from_checkpoint or last_checkpoint(training.output_dir)
    if resume and trainer.is_world_process_zero():
        print(f"train_grpo.py: resuming from {resume}", file=sys.stderr, flush=True)
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training.output_dir)
    done = trainer.state.global_step
    if trainer.is_world_process_zero() and training.max_steps > 0 and done >= training.max_steps:
        from isosim.files import write_json

        write_json(Path(training.output_dir, FINISHED), {"steps": done, "max_steps": training.max_steps})


if __name__ == "__main__":
    main()
