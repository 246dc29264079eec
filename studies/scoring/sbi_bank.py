# %% [markdown]
# # A bank of simulated sweeps from a broad prior over the simulator's settings
#
# For the simulation-based reader of the plane (``isosim.validation.plane``, method ``sbi``): each
# draw is one sweep (n = 2..128, B_p 16, 2e5 rollouts, one seed, 13 log-spaced evaluations) with
# training-set size, difficulty profile, learning rate, skill transfer, memorisation and
# typicality drawn from the prior below. Written as compact curves to
# ``studies/results/sbi_bank.json``. Run: ``python studies/scoring/sbi_bank.py [DRAWS]``.

# %%
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))

from isosim import simulate  # noqa: E402
from isosim.sim.config import SimConfig  # noqa: E402

GRID = (2, 4, 8, 16, 32, 64, 128)
PROFILES = (str(ROOT / "results" / "organism_f8" / "profile_t06.json"), "hard", "easy")


def draw(rng: np.random.Generator) -> dict:
    return {"n_train": int(2 ** rng.uniform(6, 11)), "profile": PROFILES[int(rng.integers(len(PROFILES)))],
            "lr": float(np.exp(rng.uniform(np.log(0.05), np.log(0.8)))), "skill": float(rng.uniform(0.3, 2.0)),
            "memorize": float(rng.uniform(0, 1)), "typicality": float(rng.uniform(0, 1)), "n_val": 300}


def sweep(params: dict, seed: int) -> dict:
    cfgs = [SimConfig(**params, n=n, b_p=16, budget=2e5, seed=seed, eval_points=13, k=4) for n in GRID]
    df = simulate(cfgs)
    curves = {}
    for n, g in df.groupby("n"):
        g = g.sort_values("rollouts")
        curves[str(int(n))] = [[float(r), round(float(v), 5)] for r, v in zip(g["rollouts"], g["val_avg"]) if np.isfinite(v)]
    return {"params": params, "seed": seed, "curves": curves}


if __name__ == "__main__":
    draws = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    out = ROOT / "results" / "sbi_bank.json"
    bank = json.loads(out.read_text()) if out.is_file() else []
    rng = np.random.default_rng(20261204)
    params = [draw(rng) for _ in range(draws)]
    t0 = time.time()
    for i in range(len(bank), draws):
        p = params[i]
        p = {k: (round(v, 5) if isinstance(v, float) else v) for k, v in p.items()}
        p["profile"] = Path(p["profile"]).name if p["profile"].endswith(".json") else p["profile"]
        full = {**params[i]}
        bank.append({**sweep(full, seed=i), "params": p})
        if i % 10 == 9 or i == draws - 1:
            out.write_text(json.dumps(bank, separators=(",", ":")))
            print(f"{i + 1} draws, {time.time() - t0:.0f} s", flush=True)
