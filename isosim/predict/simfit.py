"""The simulator fitted to the least real data: a bank of simulated curves over the step size,
a three-number fit, every n simulated to C.

A *bank* (:func:`build_bank`) is one batched simulation of a setting (profile, training and
validation sizes, B_p, warm-up, recipe) for every ``n`` of a grid at every step size of
:data:`LR_GRID`, to the largest budget wanted; it keeps each ``n``'s seed-mean validation gain over
step 0 at log-spaced rollout counts. The simulated learner's dynamics then have three numbers
(:data:`PARAMS`):

- ``log_lr``: the step size at the reference batch (1,024 rollouts a step),
- ``power``: how the step size grows with the rollout batch ``B_p * n`` (0: one lr for every n,
  Adam's flat regime; 0.5: the square-root rule),
- ``log_h``: the scale of the gain (the ceiling the real learner reaches relative to the simulated
  one),
- ``log_gap``, ``log_d0``: a train-validation gap that grows with the distance a run has travelled
  per training problem, ``D = steps * lr_n * B_p / n_train`` (Adam moves about lr a step): the
  validation value loses ``gap * ln(1 + D / d0)``. The engine's linear policy does not overfit
  (its skill directions transfer whatever the number of epochs), so this term is read on top of
  the bank, not simulated; at equal rollouts a small n takes more steps and travels further per
  problem, so on a small training set the gap favours a larger n.

A run of ``n`` is predicted as ``v0 + h * gain_n(r; lr_n) - gap * ln(1 + D / d0)`` with
``lr_n = lr * (B_p n / 1024) ** power``, the bank's curve interpolated in log lr. :func:`fit` finds the three numbers by least squares
(:func:`scipy.optimize.least_squares`) on whatever real points it is given, pulled towards a prior
(a Gaussian on each number): with no real points it returns the prior, with one cheap run it moves
the step size and the ceiling, with two it can also move the exponent. :func:`pick` reads every
``n`` of the grid at a budget in either reading and returns the best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from isosim.errors import IsosimError

LR_GRID = tuple(float(x) for x in np.geomspace(1 / 32, 32, 11))
"""step sizes simulated in a bank (multiples of 2 from 1/32 to 32; the bank's lr is the step lr)"""
EVAL_POINTS = 40
"""log-spaced evaluations of each banked run"""
B_REF = 1024
PARAMS = ("log_lr", "power", "log_h", "log_gap", "log_d0")
BOUNDS = {"log_lr": (math.log(LR_GRID[0]), math.log(LR_GRID[-1])), "power": (-0.25, 1.0), "log_h": (math.log(0.1), math.log(10.0)),
          "log_gap": (math.log(1e-4), math.log(0.3)), "log_d0": (math.log(1e-2), math.log(1e5))}
NOISE = 0.03
"""sd of one real seed's validation value about the model (evaluation plus seed noise), fixed a priori"""


def build_bank(settings: Mapping[str, Any], n_values: Sequence[int], budget: float, seeds: Sequence[int] = (0, 1),
               lr_grid: Sequence[float] = LR_GRID) -> dict[str, Any]:
    """Simulate ``settings`` (SimConfig fields; ``lr_rule`` is set to constant and ``lr`` to each
    grid value: the bank's lr is the step lr) for every n and lr, ``budget`` rollouts, in one call."""
    from isosim.sim.config import SimConfig
    from isosim.sim.engine import simulate

    base = {k: v for k, v in settings.items() if k not in ("n", "budget", "steps", "seed", "lr", "lr_rule", "lr_power",
                                                           "eval_points", "name")}
    cfgs = [SimConfig(**base, n=int(n), budget=float(budget), seed=int(s), lr=float(lr), lr_rule="constant",
                      eval_points=EVAL_POINTS, name=f"lr{i}")
            for n in n_values for i, lr in enumerate(lr_grid) for s in seeds]
    df = simulate(cfgs)
    out: dict[str, Any] = {"lr_grid": [float(x) for x in lr_grid], "budget": float(budget), "seeds": [int(s) for s in seeds],
                           "b_p": int(base["b_p"]), "curves": {}}
    for n in n_values:
        sub = df[df["n"] == n]
        gains, rollouts = [], None
        for i in range(len(lr_grid)):
            mean = sub[sub["name"] == f"lr{i}"].groupby("rollouts")["val_avg"].mean()
            rollouts = mean.index.to_numpy(float)
            gains.append((mean.to_numpy(float) - float(mean.iloc[0])).round(6).tolist())
        out["curves"][str(int(n))] = {"rollouts": rollouts.tolist(), "gain": gains}
    out["step0"] = float(df[df["step"] == 0]["val_avg"].mean())
    out["n_train"] = int(base["n_train"])
    return out


def _theta(x: Mapping[str, float] | Sequence[float]) -> dict[str, float]:
    return dict(x) if isinstance(x, Mapping) else dict(zip(PARAMS, (float(v) for v in x)))


def step_lr(theta: Mapping[str, float], n: int, b_p: int) -> float:
    return math.exp(theta["log_lr"]) * (b_p * n / B_REF) ** theta["power"]


def gain_curve(bank: Mapping[str, Any], n: int, lr: float) -> tuple[np.ndarray, np.ndarray]:
    """The banked gain of ``n`` at step size ``lr`` (linear in log lr between grid values, clipped
    to the grid): (rollouts, gain)."""
    c = bank["curves"].get(str(int(n)))
    if c is None:
        raise IsosimError(f"the bank holds no n = {n} (n = {', '.join(bank['curves'])})")
    grid = np.log(bank["lr_grid"])
    x = float(np.clip(math.log(lr), grid[0], grid[-1]))
    i = int(np.clip(np.searchsorted(grid, x) - 1, 0, len(grid) - 2))
    w = (x - grid[i]) / (grid[i + 1] - grid[i])
    g = np.asarray(c["gain"], float)
    return np.asarray(c["rollouts"], float), (1 - w) * g[i] + w * g[i + 1]


def predict_at(bank: Mapping[str, Any], theta: Mapping[str, float], n: int, rollouts: np.ndarray, v0: float = 0.0) -> np.ndarray:
    """Predicted value of a run of ``n`` at ``rollouts`` (linear in log rollouts between banked points)."""
    lr = step_lr(theta, n, bank["b_p"])
    r, g = gain_curve(bank, n, lr)
    keep = r > 0
    rollouts = np.asarray(rollouts, float)
    x = np.log(np.maximum(rollouts, 1.0))
    val = np.interp(x, np.log(r[keep]), g[keep], left=0.0)
    val = np.where(rollouts <= 0, 0.0, val)
    out = v0 + math.exp(theta["log_h"]) * val
    if "log_gap" in theta:
        dist = np.maximum(rollouts, 0.0) / n * lr / bank["n_train"]  # steps * lr * B_p / n_train
        out = out - math.exp(theta["log_gap"]) * np.log1p(dist / math.exp(theta["log_d0"]))
    return out


def value(bank: Mapping[str, Any], theta: Mapping[str, float], n: int, budget: float, reading: str = "best") -> float:
    """Predicted gain of ``n`` at ``budget`` in a reading (``best``: the largest up to C)."""
    r, _ = gain_curve(bank, n, 1.0)
    pts = np.append(r[(r > 0) & (r < budget)], budget)
    v = predict_at(bank, theta, n, pts)
    return float(v.max() if reading == "best" else v[-1])


def pick(bank: Mapping[str, Any], theta: Mapping[str, float], grid: Sequence[int], budget: float, reading: str = "best") -> int:
    vals = {int(n): value(bank, theta, n, budget, reading) for n in grid}
    return max(vals, key=lambda n: (round(vals[n], 6), -n))


def fit(bank: Mapping[str, Any], points: Sequence[tuple[int, float, float]], prior: Mapping[str, tuple[float, float]],
        free: Sequence[str] = PARAMS, noise: float = NOISE) -> dict[str, Any]:
    """Least squares of the real ``points`` ((n, rollouts, value) with rollouts > 0) against the
    model, plus a Gaussian ``prior`` (mean, sd) on every number it names (a prior without
    ``log_gap`` / ``log_d0`` is the model without the gap); numbers not in ``free`` stay at the
    prior mean. ``v0`` (the common step-0 value) is taken from the points at rollouts 0 when they
    are given, else fitted. Returns theta, v0 and the fit's residual rms."""
    from scipy.optimize import least_squares

    start = {p: prior[p][0] for p in PARAMS if p in prior}
    zero = [v for n, r, v in points if r <= 0]
    later = [(n, r, v) for n, r, v in points if r > 0]
    free = [p for p in free if p in start]
    if not later or not free:
        return {"theta": start, "v0": float(np.mean(zero)) if zero else None, "rms": None, "points": len(later)}
    fit_v0 = not zero
    v0 = float(np.mean(zero)) if zero else float(min(v for _, _, v in later))
    by_n: dict[int, list[tuple[float, float]]] = {}
    for n, r, v in later:
        by_n.setdefault(int(n), []).append((float(r), float(v)))

    def unpack(x: np.ndarray) -> tuple[dict[str, float], float]:
        th = dict(start)
        th.update(zip(free, (float(v) for v in x[:len(free)])))
        return th, (float(x[-1]) if fit_v0 else v0)

    def residuals(x: np.ndarray) -> np.ndarray:
        th, base = unpack(x)
        res = []
        for n, pts in by_n.items():
            r = np.array([p[0] for p in pts])
            res.append((predict_at(bank, th, n, r, base) - np.array([p[1] for p in pts])) / noise)
        res.append(np.array([(th[p] - prior[p][0]) / prior[p][1] for p in free]))
        return np.concatenate(res)

    x0 = np.array([start[p] for p in free] + ([v0] if fit_v0 else []))
    lo = [BOUNDS[p][0] for p in free] + ([-1.0] if fit_v0 else [])
    hi = [BOUNDS[p][1] for p in free] + ([2.0] if fit_v0 else [])
    x0 = np.clip(x0, np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=1.0)
    th, base = unpack(res.x)
    data_res = residuals(res.x)[:len(later)] * noise
    return {"theta": th, "v0": base, "rms": float(np.sqrt(np.mean(data_res ** 2))), "points": len(later)}


def simulate_every_n(overrides: Mapping[str, Any], profile: str, n_values: Sequence[int], budget: float, *, b_p: int,
                     n_train: int, n_val: int, measured: Mapping[int, float], seeds: Sequence[int] = (0, 1)) -> dict[str, Any]:
    """Every n of ``n_values`` simulated to ``budget`` with calibrated settings (``overrides``, the
    ``dynamics`` block of ``isosim calibrate --dynamics``); ``measured`` maps the n that real cheap
    runs measured to the rollouts they reached. Per n: measured or simulated, and the simulated
    seed-mean value at C in both readings; the pick per reading and its tie band (the n within 2
    simulated seed se of the best: where the band holds every n, n does not matter here)."""
    from isosim.sim.config import SimConfig
    from isosim.sim.engine import simulate

    if budget < b_p * max(n_values):
        raise IsosimError(f"--budget {budget:g} is below one step of n = {max(n_values)} (B_p {b_p})")
    base = {k: v for k, v in overrides.items() if k not in ("n", "b_p", "budget", "steps", "seed", "name", "eval_points")}
    cfgs = [SimConfig(**base, profile=str(profile), n=int(n), b_p=int(b_p), budget=float(budget), n_train=int(n_train),
                      n_val=int(n_val), seed=int(s), eval_points=EVAL_POINTS) for n in n_values for s in seeds]
    df = simulate(cfgs)
    out: dict[str, Any] = {"budget": float(budget), "b_p": int(b_p), "seeds": [int(s) for s in seeds], "n": {}}
    devs = []
    for n in n_values:
        sub = df[df["n"] == n]
        mean = sub.groupby("rollouts")["val_avg"].mean()
        last = sub.sort_values("step").groupby("seed").tail(1)["val_avg"].to_numpy(float)
        devs.extend(last - last.mean())
        out["n"][str(int(n))] = {"measured_to": float(measured[n]) if n in measured else None,
                                 "source": "measured (cheap run) + simulated to C" if n in measured else "simulated",
                                 "best": float(mean.max()), "final": float(mean.iloc[-1])}
    dof = len(devs) - len(n_values)
    se = math.sqrt(float(np.sum(np.square(devs))) / dof / len(seeds)) if dof > 0 else 0.0
    out["seed_se"] = se
    for reading in ("best", "final"):
        vals = {int(n): out["n"][str(int(n))][reading] for n in n_values}
        top = max(vals.values())
        out[f"pick_{reading}"] = int(max(vals, key=lambda n: (round(vals[n], 6), -n)))
        out[f"tie_band_{reading}"] = sorted(n for n, v in vals.items() if v >= top - 2 * se)
    return out
