"""Gymnasium interop, and the engine against a per-rollout GRPO loop through the vector env."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from isosim.sim.config import SimConfig
from isosim.sim.engine import simulate
from isosim.sim.env import ENV_ID, BanditEnv, BanditVectorEnv
from isosim.sim.reference import train_per_rollout

CFG = SimConfig(n_train=16, n_val=16, b_p=4, n=8, steps=30, lr=4.0, eval_points=30, data_seed=0)


def test_env_passes_gymnasium_checker():
    env = gym.make(ENV_ID, config=CFG)
    check_env(env.unwrapped)
    obs, info = env.reset(seed=0)
    assert 0 <= obs < 16 and 0 < info["base_pass"] < 1
    _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    assert reward in (0.0, 1.0) and terminated and not truncated


def test_env_rewards_are_the_populations_correct_responses():
    env = BanditEnv(config=CFG)
    obs, _ = env.reset(seed=0, options={"problem": 3})
    rewards = [env.step(a)[1] for a in range(CFG.responses)]
    assert rewards == env.correct[3].tolist() and sum(rewards) >= 1


def test_vector_env_groups_and_same_step_autoreset():
    venv = gym.make_vec(ENV_ID, num_envs=12, vectorization_mode="vector_entry_point", config=CFG, group_size=3)
    assert isinstance(venv, BanditVectorEnv)
    assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, _ = venv.reset(seed=1)
    groups = obs.reshape(4, 3)
    assert (groups == groups[:, :1]).all() and len(set(groups[:, 0])) == 4
    obs2, rewards, term, trunc, info = venv.step(np.zeros(12, dtype=int))
    assert term.all() and not trunc.any()
    np.testing.assert_array_equal(info["final_obs"], obs)
    assert not np.array_equal(obs2, obs)  # the next problems come back in the same step
    np.testing.assert_array_equal(rewards, venv.correct[obs, 0])


def test_engine_matches_per_rollout_grpo_in_distribution():
    """Same problems and loss, independent randomness: mean learning curves agree within noise."""
    seeds = range(12)
    eng = simulate([CFG.replace(seed=s) for s in seeds])
    ref = [train_per_rollout(CFG.replace(seed=s)) for s in seeds]
    for step in (10, 30):
        e = eng[eng.step == step].train_reward.to_numpy()
        r = np.array([x[x.step == step].train_reward.iloc[0] for x in ref])
        se = np.sqrt(e.var(ddof=1) / len(e) + r.var(ddof=1) / len(r))
        assert abs(e.mean() - r.mean()) < 4 * se + 1e-3, (step, e.mean(), r.mean(), se)
    start = eng[eng.step == 0].train_reward.mean()
    assert eng[eng.step == 30].train_reward.mean() > start + 0.02  # and both actually learn


def test_vector_env_rejects_partial_groups():
    with pytest.raises(ValueError, match="multiple of group_size"):
        BanditVectorEnv(10, config=CFG, group_size=3)


def test_import_isosim_registers_the_env_without_loading_it():
    """The README's snippet, in a fresh interpreter: ``import isosim`` is enough for gymnasium.make."""
    import subprocess
    import sys

    code = ("import sys, isosim, gymnasium; assert 'isosim.sim.env' not in sys.modules and 'torch' not in sys.modules; "
            "e = gymnasium.make('isosim/Bandit-v0'); obs, _ = e.reset(seed=0); "
            "v = gymnasium.make_vec('isosim/Bandit-v0', num_envs=4, vectorization_mode='vector_entry_point'); "
            "print(type(e.unwrapped).__name__, type(v).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["BanditEnv", "BanditVectorEnv"]
