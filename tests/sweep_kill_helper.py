"""Helpers of tests/test_sweep.py: a fake engine, and a script that runs a sweep to be killed.

Run as a script (the kill-and-resume tests start it in a subprocess)::

    python tests/sweep_kill_helper.py OUT_DIR PLAN_JSON {fake,real} DELAY CHUNK_SIZE

It prints ``ready`` once its imports are done, then runs ``run_sweep`` with the fake engine or
the real one (``isosim.sim.engine.simulate``), each engine call delayed by DELAY seconds so that a
kill can land between chunks as well as inside one.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

if __name__ == "__main__":  # the script runs from anywhere; the package lives one level up
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from isosim.sim.config import SimConfig  # noqa: E402


def fake_records(cfg: SimConfig) -> pd.DataFrame:
    """Deterministic records of one run: a few evaluation points, metrics from a run_id-seeded rng."""
    m = cfg.total_steps
    steps = sorted({0, m // 4, m // 2, m})
    rng = np.random.default_rng(int(hashlib.sha1(cfg.run_id.encode()).hexdigest()[:12], 16))
    val = np.sort(rng.uniform(0.0, 1.0, len(steps)))
    return pd.DataFrame({
        "run_id": cfg.run_id,
        "n": cfg.n,
        "b_p": cfg.b_p,
        "seed": cfg.seed,
        "step": steps,
        "rollouts": [float(s * cfg.b_p * cfg.rollouts_per_step) for s in steps],
        "tokens": np.nan,
        "train_reward": val ** 0.5,
        "val_avg": val,
        "val_best": np.minimum(1.0, val * 1.5),
        "val_worst": val ** 2,
        "profile": cfg.profile,
        "lr": cfg.step_lr,
    })


class FakeEngine:
    """A stand-in for ``isosim.sim.engine.simulate`` that counts its calls.

    ``delay``: seconds to sleep per call; ``duplicate``: repeat each run's last row (to test
    deduplication); ``drop_last``: leave the last run of each call out (to test validation).
    """

    def __init__(self, delay: float = 0.0, duplicate: bool = False, drop_last: bool = False) -> None:
        self.delay = delay
        self.duplicate = duplicate
        self.drop_last = drop_last
        self.calls: list[list[str]] = []

    def __call__(self, configs: Sequence[SimConfig], *, device: str = "cpu",
                 progress: Callable[[float], None] | None = None) -> pd.DataFrame:
        self.calls.append([c.run_id for c in configs])
        if self.delay:
            time.sleep(self.delay)
        runs = list(configs)[:-1] if self.drop_last else list(configs)
        frames = []
        for cfg in runs:
            df = fake_records(cfg)
            if self.duplicate:
                df = pd.concat([df, df.tail(1)], ignore_index=True)
            frames.append(df)
            if progress is not None:
                progress(float(cfg.total_steps * cfg.b_p * cfg.rollouts_per_step))
        return pd.concat(frames, ignore_index=True)

    @property
    def runs_simulated(self) -> int:
        """Runs simulated over all calls."""
        return sum(len(c) for c in self.calls)


def delayed(simulate: Callable[..., pd.DataFrame], delay: float) -> Callable[..., pd.DataFrame]:
    """``simulate`` with a sleep before each call."""
    def wrapped(configs, **kwargs):
        time.sleep(delay)
        return simulate(configs, **kwargs)
    return wrapped


def main(argv: list[str]) -> None:
    from isosim.sweeps.sweep import SweepPlan, run_sweep

    out_dir, plan_path, engine, delay, chunk_size = argv
    plan = SweepPlan.from_json(Path(plan_path).read_text())
    if engine == "fake":
        simulate = FakeEngine(delay=float(delay))
    else:
        from isosim.sim.engine import simulate as real

        simulate = delayed(real, float(delay))
    import pyarrow.parquet  # noqa: F401  (imported now, so that the first chunk is not slower)

    print("ready", flush=True)
    run_sweep(plan, out_dir, chunk_size=int(chunk_size), progress=False, simulate_fn=simulate)
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
