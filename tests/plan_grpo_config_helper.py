"""Load isosim plan's TRL configs into TRL's own ``GRPOConfig``, as if on P processes:
``python tests/plan_grpo_config_helper.py P CONFIG.yaml ...`` prints one JSON object per config
(the generation batch and steps per generation GRPOConfig derived, or the error it raised).

``GRPOConfig.__post_init__`` reads the process count from ``world_size`` (accelerate's state); it
is patched to P so that the checks for 7 or 8 processes run on this one CPU process. Run in its
own process by tests/test_plan.py: constructing training arguments sets up accelerate's global
state, which must not leak into the other tests' process.
"""

import json
import sys

import yaml
from trl import GRPOConfig


def main(processes: int, paths: list[str]) -> None:
    GRPOConfig.world_size = property(lambda self: processes)
    for path in paths:
        kwargs = yaml.safe_load(open(path))
        try:
            cfg = GRPOConfig(**kwargs, use_cpu=True)
            out = {"path": path, "generation_batch_size": cfg.generation_batch_size,
                   "steps_per_generation": cfg.steps_per_generation, "num_generations": cfg.num_generations,
                   "max_steps": cfg.max_steps, "lr_scheduler_type": str(getattr(cfg.lr_scheduler_type, "value",
                                                                                  cfg.lr_scheduler_type)),
                   "warmup_steps": cfg.warmup_steps}
        except ValueError as exc:
            out = {"path": path, "error": str(exc)}
        print(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
