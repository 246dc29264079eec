"""Difficulty profiles: where the base policy's per-problem pass@1 comes from.

A profile is a distribution over pass@1 in [0, 1]. Every profile is built from a spec string,
so a run's configuration stays a plain value:

=================================  ===========================================================
``easy``                           uniform on [0.3, 0.6] (the paper's easy set, avg@16 band)
``very-easy``                      uniform on [0.6, 0.9]
``hard``                           0.0625 * Beta(0.6, 2.0): inside [0, 0.0625], many near 0
``extreme``                        log-uniform on [1e-5, 2e-4]: pass@128 below 2.6 %
``uniform:a,b``                    uniform on [a, b]
``beta:a,b``                       Beta(a, b)
``hard:0.5,easy:0.5``              a mix by proportion of any of the above named presets
``path/to/profile.json``           measured rates (``write_profile``; ``isosim calibrate``)
=================================  ===========================================================

A profile file may also carry a ``dynamics`` block (written by ``isosim calibrate --dynamics``,
:mod:`isosim.predict.dynamics`): SimConfig settings fitted to real learning curves of the same model and
data, ``{"preset": NAME, "overrides": {field: value}, "fitted": {field: value}}``. The rates alone
decide the problems; :func:`isosim.sweeps.plans.plan_for_preset` applies the overrides on top of the
preset when such a profile is given. A file without the block behaves as before.

A measured profile is resampled with replacement. A measured rate of 0 out of k samples does not
mean the problem is impossible, only that p is small; such rates are drawn from uniform(0, 1/(2k))
unless ``zeros="keep"`` (then they sit at the floor ``P_FLOOR``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isosim.errors import IsosimError

HARD_P = 1.0 / 16
"""base pass@1 below which a problem counts as hard (the paper's hard band is avg@16 <= 1/16)"""
P_FLOOR = 1e-7  # softmax logits stay finite: pass@1 is clipped to [P_FLOOR, 1 - P_FLOOR]

PRESETS: dict[str, str] = {
    "easy": "uniform:0.3,0.6",
    "very-easy": "uniform:0.6,0.9",
    "hard": "scaled-beta:0.0625,0.6,2.0",
    "extreme": "loguniform:1e-5,2e-4",
}


@dataclass(frozen=True)
class Profile:
    """A distribution of base pass@1 over problems, built by :func:`get_profile`."""

    spec: str
    kind: str
    params: tuple = ()
    parts: tuple = ()  # (weight, Profile) for mixes
    rates: np.ndarray | None = field(default=None, compare=False, repr=False)
    k: int | None = None
    zeros: str = "spread"
    dynamics: dict | None = field(default=None, compare=False, repr=False)
    """a file's ``dynamics`` block (SimConfig overrides fitted by ``isosim calibrate --dynamics``)"""

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``size`` pass rates, clipped to [P_FLOOR, 1 - P_FLOOR]."""
        return np.clip(self._draw(size, rng), P_FLOOR, 1.0 - P_FLOOR)

    def _draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "uniform":
            a, b = self.params
            return rng.uniform(a, b, size)
        if self.kind == "beta":
            a, b = self.params
            return rng.beta(a, b, size)
        if self.kind == "scaled-beta":
            s, a, b = self.params
            return s * rng.beta(a, b, size)
        if self.kind == "loguniform":
            a, b = self.params
            return np.exp(rng.uniform(np.log(a), np.log(b), size))
        if self.kind == "file":
            p = rng.choice(self.rates, size=size, replace=True)
            if self.zeros == "spread" and self.k:
                zero = p <= 0
                p[zero] = rng.uniform(0.0, 1.0 / (2 * self.k), int(zero.sum()))
            return p
        if self.kind == "mix":
            weights = np.array([w for w, _ in self.parts])
            which = rng.choice(len(self.parts), size=size, p=weights / weights.sum())
            out = np.empty(size)
            for i, (_, part) in enumerate(self.parts):
                sel = which == i
                out[sel] = part._draw(int(sel.sum()), rng)
            return out
        raise AssertionError(self.kind)


def _numbers(spec: str, body: str, count: int) -> tuple[float, ...]:
    try:
        vals = tuple(float(v) for v in body.split(","))
    except ValueError:
        raise IsosimError(f"profile {spec!r}: expected {count} numbers after ':'") from None
    if len(vals) != count:
        raise IsosimError(f"profile {spec!r}: expected {count} numbers after ':', got {len(vals)}")
    if not all(math.isfinite(v) for v in vals):
        raise IsosimError(f"profile {spec!r}: expected {count} finite numbers after ':'")
    return vals


def _parametric(spec: str) -> Profile:
    kind, _, body = spec.partition(":")
    if kind == "uniform":
        a, b = _numbers(spec, body, 2)
        if not 0.0 <= a <= b <= 1.0:
            raise IsosimError(f"profile {spec!r}: need 0 <= a <= b <= 1 (pass rates)")
        return Profile(spec, kind, (a, b))
    if kind == "beta":
        a, b = _numbers(spec, body, 2)
        if a <= 0 or b <= 0:
            raise IsosimError(f"profile {spec!r}: Beta parameters must be positive")
        return Profile(spec, kind, (a, b))
    if kind == "scaled-beta":
        s, a, b = _numbers(spec, body, 3)
        if not 0 < s <= 1 or a <= 0 or b <= 0:
            raise IsosimError(f"profile {spec!r}: need 0 < scale <= 1 and positive Beta parameters")
        return Profile(spec, kind, (s, a, b))
    if kind == "loguniform":
        a, b = _numbers(spec, body, 2)
        if not 0 < a <= b <= 1:
            raise IsosimError(f"profile {spec!r}: need 0 < a <= b <= 1")
        return Profile(spec, kind, (a, b))
    raise IsosimError(
        f"unknown profile {spec!r}: use a preset ({', '.join(PRESETS)}), a mix such as "
        "'hard:0.5,easy:0.5', 'beta:a,b', 'uniform:a,b' or a profile JSON file"
    )


def get_profile(spec: str, *, zeros: str = "spread") -> Profile:
    """Build a profile from a preset name, a mix, a parametric spec or a JSON file path."""
    if not isinstance(spec, str) or not spec.strip():
        raise IsosimError("profile: empty profile spec")
    spec = spec.strip()
    if spec in PRESETS:
        return Profile(spec, *_split(_parametric(PRESETS[spec])))
    if spec.endswith(".json") or Path(spec).is_file():
        return read_profile(spec, zeros=zeros)
    if "," in spec and all(":" in part for part in spec.split(",")) and spec.split(":")[0] in PRESETS:
        parts = []
        for item in spec.split(","):
            name, _, weight = item.partition(":")
            if name not in PRESETS:
                raise IsosimError(f"profile {spec!r}: unknown preset {name!r} in mix")
            try:
                w = float(weight)
            except ValueError:
                raise IsosimError(f"profile {spec!r}: weight of {name!r} is not a number") from None
            if not (math.isfinite(w) and w >= 0):
                raise IsosimError(f"profile {spec!r}: the weight of {name!r} must be a non-negative number "
                                  f"(got {weight}), e.g. 'hard:0.5,easy:0.5'")
            parts.append((w, get_profile(name)))
        total = sum(w for w, _ in parts)
        if abs(total - 1.0) > 1e-6:
            raise IsosimError(f"profile {spec!r}: the weights of a mix are the shares of its problems and must "
                              f"sum to 1 (they sum to {total:g}), e.g. 'hard:0.5,easy:0.5'")
        return Profile(spec, "mix", parts=tuple(parts))
    return _parametric(spec)


def _split(p: Profile) -> tuple:
    return p.kind, p.params


def read_profile(path: str | Path, *, zeros: str = "spread") -> Profile:
    """Read a measured profile: JSON with ``rates`` (list in [0, 1]) and ``k`` (samples each)."""
    path = Path(path)
    if not path.is_file():
        raise IsosimError(f"profile file {path}: no such file")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IsosimError(f"profile file {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or "rates" not in data:
        raise IsosimError(f"profile file {path}: expected a JSON object with a 'rates' list")
    try:
        rates = np.asarray(data["rates"], dtype=float)
    except (TypeError, ValueError):
        raise IsosimError(f"profile file {path}: 'rates' must be a list of numbers") from None
    if rates.ndim != 1 or rates.size == 0:
        raise IsosimError(f"profile file {path}: 'rates' must be a non-empty list of numbers")
    if not np.all(np.isfinite(rates)) or rates.min() < 0 or rates.max() > 1:
        raise IsosimError(f"profile file {path}: rates must lie in [0, 1]")
    k = data.get("k")
    if k is not None and (not isinstance(k, int) or k < 1):
        raise IsosimError(f"profile file {path}: 'k' must be a positive integer")
    if zeros not in ("spread", "keep"):
        raise IsosimError(f"profile: zeros must be 'spread' or 'keep', not {zeros!r}")
    dynamics = _dynamics_block(data.get("dynamics"), path)
    return Profile(str(path), "file", rates=rates, k=k, zeros=zeros, dynamics=dynamics)


def _dynamics_block(block, path: Path) -> dict | None:
    """Check the shape of a profile's ``dynamics`` block (its keys are checked against SimConfig
    where the overrides are applied, :func:`isosim.sweeps.plans.plan_for_preset`)."""
    if block is None:
        return None
    overrides = block.get("overrides") if isinstance(block, dict) else None
    if not isinstance(overrides, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, (int, float, str, bool))) for k, v in overrides.items()):
        raise IsosimError(f"profile file {path}: 'dynamics' must be an object with an 'overrides' object of "
                          "SimConfig settings (as isosim calibrate --dynamics writes)")
    return {"preset": block.get("preset"), "overrides": dict(overrides), "fitted": dict(block.get("fitted") or {})}


def write_profile(path: str | Path, rates, *, k: int, **provenance) -> Path:
    """Write a measured profile file (the format :func:`read_profile` reads)."""
    rates = [float(r) for r in rates]
    from isosim.files import write_json

    return write_json(path, {"rates": rates, "k": int(k), **provenance}, indent=1)
