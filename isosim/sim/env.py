"""Gymnasium interop: the simulator's problems as a one-step bandit environment.

* ``isosim/Bandit-v0``: observation = problem index, action = response index, reward = 1 if the
  response is correct, and every episode ends after one step.
* Its native vector env (``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``)
  hands out problems in GRPO groups: ``num_envs = b_p * group_size`` sub-envs, each block of
  ``group_size`` consecutive sub-envs sees the same problem, problems taken in epoch order. It
  uses the SAME_STEP autoreset mode: the observation returned by ``step`` is already the next
  problem, and ``info["final_obs"]`` holds the problem that was answered.

The problems are exactly those of ``isosim.sim.problems.build(config)`` (training split by default),
so a policy trained through these envs and one trained by the count-based engine face the same
population.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from isosim.sim.config import SimConfig
from isosim.sim.epochs import EpochSampler
from isosim.sim.problems import build

from isosim.sim.env_id import ENV_ID  # noqa: E402  (one name for the id, shared with isosim/__init__)


def _problems(config: SimConfig | None, split: str, overrides: dict):
    cfg = (config or SimConfig()).replace(**overrides) if overrides else (config or SimConfig())
    pop = build(cfg)
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', not {split!r}")
    sl = slice(0, cfg.n_train) if split == "train" else slice(cfg.n_train, None)
    return cfg, pop, sl


class BanditEnv(gym.Env):
    """One problem per episode; answer it with one response."""

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, config: SimConfig | None = None, split: str = "train", **overrides):
        self.config, pop, sl = _problems(config, split, overrides)
        self.correct = pop.correct[sl].numpy().astype(np.float32)
        self.base_pass = pop.p0[sl].numpy()
        self.observation_space = spaces.Discrete(self.correct.shape[0])
        self.action_space = spaces.Discrete(self.correct.shape[1])
        self._problem: int | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options and "problem" in options:
            self._problem = int(options["problem"])
        else:
            self._problem = int(self.np_random.integers(self.correct.shape[0]))
        return self._problem, {"base_pass": float(self.base_pass[self._problem])}

    def step(self, action):
        if self._problem is None:
            raise RuntimeError("call reset() before step()")
        reward = float(self.correct[self._problem, int(action)])
        return self._problem, reward, True, False, {}


class BanditVectorEnv(VectorEnv):
    """``b_p`` problems x ``group_size`` rollouts per step, as GRPO draws them."""

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, config: SimConfig | None = None, group_size: int = 1,
                 split: str = "train", **overrides):
        if group_size < 1 or num_envs % group_size:
            raise ValueError(f"num_envs ({num_envs}) must be a multiple of group_size ({group_size})")
        self.config, pop, sl = _problems(config, split, overrides)
        self.correct = pop.correct[sl].numpy().astype(np.float32)
        self.num_envs, self.group_size = num_envs, group_size
        self.single_observation_space = spaces.Discrete(self.correct.shape[0])
        self.single_action_space = spaces.Discrete(self.correct.shape[1])
        self.observation_space = spaces.MultiDiscrete(np.full(num_envs, self.correct.shape[0]))
        self.action_space = spaces.MultiDiscrete(np.full(num_envs, self.correct.shape[1]))
        self._epochs: EpochSampler | None = None
        self._obs: np.ndarray | None = None

    def _next_groups(self) -> np.ndarray:
        # epoch-wise shuffling, as the engine does (one sampler: isosim.sim.epochs)
        return np.repeat(self._epochs.next(self.num_envs // self.group_size), self.group_size)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        n = self.correct.shape[0]  # (the env's np_random as it is when an epoch starts, as gymnasium expects)
        self._epochs = EpochSampler(n, lambda epoch: self.np_random.permutation(n))
        self._obs = self._next_groups()
        return self._obs.copy(), {}

    def step(self, actions):
        if self._obs is None:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions, dtype=np.int64)
        rewards = self.correct[self._obs, actions].astype(np.float64)
        final = self._obs
        self._obs = self._next_groups()  # SAME_STEP autoreset: the next problems come back now
        done = np.ones(self.num_envs, dtype=bool)
        return self._obs.copy(), rewards, done, np.zeros(self.num_envs, dtype=bool), {"final_obs": final}


def register() -> None:
    """Register ``isosim/Bandit-v0`` (idempotent; ``import isosim`` registers it by name already)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=BanditEnv, vector_entry_point=BanditVectorEnv)


register()
