"""isosim: compute-optimal rollout allocation for LLM RL, simulated and checked.

Three lines from a notebook (the seed mean of each run's last evaluation, per n)::

    from isosim import SimConfig, simulate
    df = simulate([SimConfig(n=n, budget=2e5, seed=s) for n in (4, 16, 64) for s in range(2)])
    df.sort_values("step").groupby(["n", "seed"]).tail(1).groupby("n").val_avg.mean()

Importing isosim loads numpy and gymnasium (to register the ``isosim/Bandit-v0`` environment,
whose code is imported only by ``gymnasium.make``); torch and pandas load when a simulation runs;
never transformers, vLLM or accelerate.

The parts, lowest first (a part imports only from those before it; docs/architecture.md):
``errors``, ``files``, ``records`` (shared by all); ``sim`` (profiles, presets, settings, the
engine, the gymnasium environment); ``sweeps`` (plans and the resumable store); ``frontier``
(the analysis, figures and report); ``predict`` (recommend, dynamics calibration, fidelity) and
``integrations`` (TRL, TensorBoard, W&B); ``validation`` (the plan and verdict of real runs).
"""

from isosim.errors import IsosimError
from isosim.sim.config import SimConfig
from isosim.sim.presets import get_preset


def simulate(*args, **kwargs):
    """Run simulated GRPO (see :func:`isosim.sim.engine.simulate`)."""
    from isosim.sim.engine import simulate as _simulate

    return _simulate(*args, **kwargs)


def _register_env() -> None:
    """Register ``isosim/Bandit-v0`` with gymnasium by name: ``import isosim`` is enough for
    ``gymnasium.make("isosim/Bandit-v0")``; the environment module loads on first make."""
    try:
        import gymnasium
    except ImportError:  # pragma: no cover - gymnasium is a dependency
        return
    from isosim.sim.env_id import ENV_ID

    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="isosim.sim.env:BanditEnv",
                           vector_entry_point="isosim.sim.env:BanditVectorEnv")


_register_env()

__all__ = ["SimConfig", "IsosimError", "get_preset", "simulate"]
__version__ = "0.1.0"
