"""The adaptive search's settings: the budget, the grid of n, where it starts and the knobs of its
rules (see :mod:`isosim.validation.adaptive` for the rules themselves)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from isosim.errors import IsosimError

POLICIES = ("adaptive", "lines", "sbi")
SBI_RUNGS = (1 / 32, 1 / 16, 1 / 8, 1 / 4)
"""the "sbi" search's rungs, as shares of C: those of successive halving from C / 32, up to C / 4
(the reader was scored on cheap parts of 2.5 to 20 % of C; at 25 % it is trained and read alike)"""
FIRST_ROUND_RULES = {"trend": "optimistic", "peak_stop": False, "spawns_per_rung": 0, "noise_past_takeoff": False,
                     "matched_steps": False}
"""the settings a decision log that does not name these keys was decided under (it continues
under them)"""


@dataclass(frozen=True)
class Settings:
    budget: float
    grid: tuple[int, ...]
    start: tuple[int, ...]
    first_rung: float = 1 / 32
    eta: float = 2.0
    z: float = 2.0
    eval_samples: int | None = None
    """V * N of the validation (problems x samples each), for the sampling error; None: unknown"""
    window_octaves: float = 1.0
    guard_takeoff: bool = True
    """never stop a run whose last evaluations curve upwards in ln rollouts beyond noise (still
    taking off: its slope understates what it will gain)"""
    refine: bool = True
    """start the untried grid n between the leader and its better tried neighbour"""
    tie_stop: bool = True
    """also stop a run that cannot beat the leader at C by more than one evaluation's noise
    (sigma * sqrt 2): choosing either of two such runs costs less than the noise can show"""
    trend: str = "peak"
    """how a run is carried to C: "peak" (a peaked run down its falling line, any other at its
    level, plus the slope where it favours the trailing run), "optimistic" (level, plus the
    favourable slope; the rule of :data:`FIRST_ROUND_RULES`), "signed" (every run down or up its
    line, leader by projection) or "half" (half a rising run's straight-line gain, a falling run
    down its line); the last two score worse on the committed sweeps (studies/LOG.md)"""
    peak_stop: bool = True
    """a run whose level has fallen below its own best evaluation beyond noise has peaked: it
    stops (unless it leads) and the next larger untried n starts"""
    spawns_per_rung: int = 1
    """at most this many new n start at one rung (0: no limit)"""
    noise_past_takeoff: bool = False
    """read the roughness only from evaluations past the take-off (:func:`isosim.validation.adaptive.curves.past_takeoff`); off by
    default: it lowers sigma, which starts more runs"""
    matched_steps: bool = False
    """never stop a run of larger n than the leader that is at least as good as the leader was
    after the same number of steps; off by default: it keeps runs of larger n to late rungs"""
    policy: str = "adaptive"
    """"adaptive" (the rules above); "lines": every grid n to C / 4, the two whose local lines
    carried to C are best continue to C / 2, the better evaluation there wins (:func:`lines_settings`;
    about 1.2 runs of overhead, for training sets small enough that runs peak; studies/LOG.md);
    "sbi": successive halving at :data:`SBI_RUNGS` ranked by the simulation-trained reader's
    prediction at C (:func:`sbi_settings`, :mod:`isosim.validation.adaptive.sbi_search`)"""
    b_p: int | None = None
    """prompts per step of every run (the "sbi" reader reads updates at C: C / (B_p n))"""
    bank: str | None = None
    """"sbi": the bank of simulated sweeps the reader learns from (None: the committed one,
    :data:`isosim.predict.from_runs.BANK`)"""

    def __post_init__(self) -> None:
        if not (self.budget > 0 and math.isfinite(self.budget)):
            raise IsosimError(f"budget must be a positive number of rollouts, got {self.budget}")
        if not self.grid:
            raise IsosimError("the grid of n is empty")
        if any(int(n) < 1 for n in self.grid):
            raise IsosimError(f"grid n must be >= 1, got {list(self.grid)}")
        bad = sorted(set(self.start) - set(self.grid))
        if bad:
            raise IsosimError(f"start n {bad} not in the grid {sorted(self.grid)}")
        if not self.start:
            raise IsosimError("no n to start with")
        if not 0 < self.first_rung < 1:
            raise IsosimError(f"first_rung must be a fraction of the budget in (0, 1), got {self.first_rung}")
        if self.eta <= 1:
            raise IsosimError(f"eta must be > 1, got {self.eta}")
        if self.trend not in ("signed", "optimistic", "peak", "half"):
            raise IsosimError(f"trend must be 'peak', 'optimistic', 'signed' or 'half', got {self.trend!r}")
        if self.policy not in POLICIES:
            raise IsosimError(f"policy must be 'adaptive', 'lines' or 'sbi', got {self.policy!r}")
        if self.policy in ("lines", "sbi") and sorted(self.start) != sorted(set(self.grid)):
            raise IsosimError(f"the {self.policy!r} policy starts every grid n (see {self.policy}_settings)")
        if self.policy == "sbi" and not (self.b_p and int(self.b_p) >= 1):
            raise IsosimError(f"the 'sbi' policy needs the runs' B_p (b_p >= 1), got {self.b_p}")

    def rungs(self) -> list[float]:
        """Decision points in rollouts, below the budget: C * first_rung * eta^k < C ("lines":
        C / 4 and C / 2; "sbi": :data:`SBI_RUNGS` of C)."""
        if self.policy == "lines":
            return [self.budget / 4, self.budget / 2]
        if self.policy == "sbi":
            return [self.budget * f for f in SBI_RUNGS]
        out, r = [], self.budget * self.first_rung
        while r < self.budget * (1 - 1e-9):
            out.append(r)
            r *= self.eta
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["grid"], d["start"] = list(self.grid), list(self.start)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Settings:
        """Settings from a decision log; keys the log does not name take :data:`FIRST_ROUND_RULES`
        (no peak rule, no cap on new n), so a search continues under the rules it began with."""
        d = {**FIRST_ROUND_RULES, **d}
        d["grid"], d["start"] = tuple(int(n) for n in d["grid"]), tuple(int(n) for n in d["start"])
        return cls(**d)


def spread_start(grid: Sequence[int], predicted: int | None = None) -> list[int]:
    """The starting n: the predicted n and the grid n two octaves either side (clipped to the
    grid); without a prediction, the smallest, middle and largest grid n."""
    g = sorted(set(int(n) for n in grid))
    if predicted is None:
        return sorted({g[0], g[len(g) // 2], g[-1]})
    near = min(g, key=lambda n: (abs(math.log2(n) - math.log2(predicted)), n))
    i = g.index(near)
    return sorted({g[max(0, i - 2)], near, g[min(len(g) - 1, i + 2)]})


def lines_settings(budget: float, grid: Sequence[int], eval_samples: int | None = None) -> Settings:
    """Settings of the "lines" policy: every grid n starts; decisions at C / 4 and C / 2."""
    g = tuple(sorted(set(int(n) for n in grid)))
    return Settings(budget=budget, grid=g, start=g, eval_samples=eval_samples, policy="lines")



def sbi_settings(budget: float, grid: Sequence[int], b_p: int, eval_samples: int | None = None,
                 bank: str | None = None) -> Settings:
    """Settings of the "sbi" policy: every grid n starts; decisions at :data:`SBI_RUNGS` of C."""
    g = tuple(sorted(set(int(n) for n in grid)))
    return Settings(budget=budget, grid=g, start=g, eval_samples=eval_samples, policy="sbi", b_p=int(b_p),
                    bank=None if bank is None else str(bank))
