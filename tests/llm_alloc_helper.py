"""A script of tests/test_llm_allocation.py: the trainer's entry point with
:func:`llm_helpers.problem_reward` as its reward (a subprocess that the kill-and-resume test kills)::

    python tests/llm_alloc_helper.py [llm_runs.training.train flags]
"""

from __future__ import annotations

import sys

from llm_helpers import problem_reward

from llm_runs.config import parse_args
from llm_runs.training.train import GRPOTrainer

if __name__ == "__main__":
    GRPOTrainer(parse_args(sys.argv[1:]), reward_fn=problem_reward, log=lambda s: None).train()
