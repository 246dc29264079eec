"""Run under ``accelerate launch --num_processes 2`` (CPU, gloo): process 1's groups all have zero
reward variance and are filtered out, process 0's are kept. Prints one line per process."""

import os
import sys
import zlib

from llm_runs.config import parse_args
from llm_runs.training.train import GRPOTrainer


def reward(texts, golds):
    if os.environ.get("RANK", "0") == "1":
        return [0.0 for _ in texts]  # every group of this process has zero variance
    return [float(zlib.crc32(t.encode()) % 2) for t in texts]


if __name__ == "__main__":
    trainer = GRPOTrainer(parse_args(sys.argv[1:]), reward_fn=reward, log=lambda s: None)
    trainer.train()
    m = trainer.metrics_log.rows() if trainer.accelerator.is_main_process else []
    line = (f"rank {os.environ.get('RANK')} done: steps {[r['step'] for r in m]} "
            f"filtered {[r['reward/frac_filtered_groups'] for r in m]}\n")
    # One write() of the whole line: both ranks share the pipe, and a print's separate writes of
    # the text and its newline can interleave with the other rank's line.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())
