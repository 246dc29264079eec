"""isosim: compute-optimal rollout allocation for LLM RL, simulated and checked.

Three lines from a notebook::

    from isosim import SimConfig, simulate
    df = simulate([SimConfig(n=n, budget=2e5, seed=s) for n in (4, 16, 64) for s in range(2)])
    df.groupby("n").val_avg.last()

Importing isosim loads numpy, pandas and torch; never transformers, vLLM or accelerate.
"""

from isosim.config import SimConfig
from isosim.errors import IsosimError
from isosim.presets import get_preset


def simulate(*args, **kwargs):
    """Run simulated GRPO (see :func:`isosim.engine.simulate`)."""
    from isosim.engine import simulate as _simulate

    return _simulate(*args, **kwargs)


__all__ = ["SimConfig", "IsosimError", "get_preset", "simulate"]
__version__ = "0.1.0"
