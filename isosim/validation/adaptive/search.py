"""The adaptive search's state and decisions (:class:`Adaptive`), rebuilt from its decision log, and
the figure of one search (:func:`plot_search`). The same code decides live runs (``isosim validate
--adaptive``) and replays over committed records (:mod:`isosim.validation.adaptive.replay`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError
from isosim.validation.adaptive.curves import (Curve, accelerating, local_fit, noise, roughness, spent,
                                               value_at_steps)
from isosim.validation.adaptive import sbi_search
from isosim.validation.adaptive.rules import Settings

BOUNDARY = ("start", "spawn", "advance", "choose", "done")
"""decision events that end an update (the state between two updates is fully described)"""


@dataclass
class Adaptive:
    """The adaptive search's state, rebuilt from its decisions; :meth:`requests` says which run
    must reach how many rollouts, :meth:`update` decides once they have."""

    settings: Settings
    decisions: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        s = self.settings
        self.rungs = s.rungs()
        if not self.rungs:
            raise IsosimError("no decision rung below the budget")
        self.active: list[int] = []
        self.tried: set[int] = set()
        self.stopped: dict[int, float] = {}
        self.rung_i = 0
        self.chosen: int | None = None
        self.done = False
        self.dominated: set[int] = set()  # stopped beyond noise (not merely tied)
        self.levels: dict[int, float] = {}  # each run's level at the last rung it was read
        self.peaked: set[int] = set()  # runs read as peaked (falling beyond noise) at some rung
        past, self.decisions = list(self.decisions), []
        # one update's decisions are a unit: a log cut inside one (a kill while writing) is
        # trimmed back to the last complete update, which is then decided again
        ends = [i for i, d in enumerate(past) if d.get("event") in BOUNDARY]
        past = past[: ends[-1] + 1] if ends else []
        if not past:
            self._log({"event": "start", "n": sorted(s.start), "rung": self.rungs[0], "settings": s.to_json(),
                       "why": "the starting spread"})
        for d in past:
            self._log(d)

    # -- state from decisions ---------------------------------------------------------------
    def _log(self, d: dict[str, Any]) -> dict[str, Any]:
        ev = d["event"]
        if ev == "start":
            self.active = sorted(int(n) for n in d["n"])
            self.tried |= set(self.active)
        elif ev == "spawn":
            self.active = sorted(set(self.active) | {int(d["n"])})
            self.tried.add(int(d["n"]))
        elif ev == "stop":
            self.active.remove(int(d["n"]))
            self.stopped[int(d["n"])] = float(d["spent"])
            if d.get("kind", "dominated") == "dominated":
                self.dominated.add(int(d["n"]))
        elif ev == "rung":
            self.levels.update({int(k): float(v) for k, v in d["level"].items()})
            self.peaked |= {int(n) for n in d.get("peaked", ())}
        elif ev == "advance":
            self.rung_i = int(d["rung_index"])
        elif ev == "choose":
            self.chosen = int(d["n"])
            for n in list(self.active):
                if n != self.chosen:
                    self.active.remove(n)
                    self.stopped[n] = float(d["spent"][str(n)])
        elif ev == "done":
            self.done = True
        else:
            raise IsosimError(f"unknown decision event {ev!r}")
        self.decisions.append(d)
        return d

    @property
    def rung(self) -> float:
        return self.rungs[self.rung_i]

    def requests(self) -> dict[int, float]:
        """Run n -> rollouts it must reach before the next decision (empty when done)."""
        if self.done:
            return {}
        if self.chosen is not None:
            return {self.chosen: self.settings.budget}
        return {n: self.rung for n in self.active}

    # -- deciding ---------------------------------------------------------------------------
    def update(self, curves: Mapping[int, Curve]) -> list[dict]:
        """Decide on the curves observed so far: every requested run has run to its target (its
        last evaluation at or below it, see :func:`reveal`)."""
        start = len(self.decisions)
        for n in self.requests():
            if not curves.get(n):
                raise IsosimError(f"no records of run n={n}")
        if self.done:
            return []
        if self.chosen is not None:
            self._log({"event": "done", "n": self.chosen, "spent": spent(curves.get(self.chosen, ())),
                       "overhead": self.overhead(), "why": f"n={self.chosen} reached the budget"})
            return self.decisions[start:]
        if self.settings.policy == "lines":
            return self._update_lines(curves, start)
        if self.settings.policy == "sbi":
            return sbi_search.update(self, curves, start)
        s, r = self.settings, self.rung
        last = {n: max(spent(curves[n]), 1.0) for n in self.active}
        left_n = {n: max(math.log(s.budget / last[n]), 0.0) for n in self.active}
        fits = {n: local_fit(curves[n], last[n], s.window_octaves) for n in self.active}
        level = {n: fits[n][0] for n in self.active}
        slope = {n: fits[n][1] for n in self.active}
        proj = {n: level[n] + slope[n] * left_n[n] for n in self.active}
        nz = noise([curves[n] for n in sorted(self.tried) if n in curves], list(level.values()), s.eval_samples,
                   takeoff=s.noise_past_takeoff)
        # each run's own roughness where it is larger (a run can be noisier than the others)
        own = {n: max(nz["sigma"], roughness([curves[n]], last=6, takeoff=s.noise_past_takeoff)[0]) for n in self.active}
        margin = s.z * nz["sigma"] * math.sqrt(2)
        signed = s.trend == "signed"
        at_c = {n: local_fit(curves[n], s.budget, s.window_octaves) for n in self.active}
        if signed:
            proj = {n: at_c[n][0] for n in self.active}
        best_eval = {n: max((v for r, v in curves[n] if r > 0 and math.isfinite(v)), default=level[n])
                     for n in self.active}
        # peaked: the level now is below the run's own best evaluation by more than z x the sd of
        # their difference (one evaluation against the fitted level)
        peaked = {n: s.peak_stop and slope[n] < 0 and
                  best_eval[n] - level[n] > s.z * own[n] * math.sqrt(1 + fits[n][2]) for n in self.active}
        # a peaked run is carried down its falling line (its level at C is below its level now);
        # any other run is read at its level (plus the favourable slope in the gap below)
        base = {n: level[n] + (slope[n] * left_n[n] if peaked[n] and s.trend == "peak" else 0.0)
                for n in self.active}
        if s.trend == "half":
            # concave past take-off: a rising run's slope is taken to fall linearly to zero by C
            # (half its straight-line gain); a falling run is carried down its line
            k_sl = {n: (0.5 if slope[n] > 0 else 1.0) for n in self.active}
            base = {n: level[n] + k_sl[n] * slope[n] * left_n[n] for n in self.active}
        key = proj if signed else base
        leader = max(self.active, key=lambda n: (key[n], -n))

        def gap(n: int) -> tuple[float, float]:
            """n's projected gap to the leader at C and its standard deviation: signed, the gap of
            the two lines at C; optimistic, the gap now plus the slope difference, if in n's
            favour, carried over the ln rollouts left."""
            lft, a, b = left_n[n], own[n] ** 2, own[leader] ** 2
            if signed:
                return proj[n] - proj[leader], math.sqrt(a * at_c[n][2] + b * at_c[leader][2])
            g, var = base[n] - base[leader], a * fits[n][2] + b * fits[leader][2]
            if s.trend == "half":
                var += lft ** 2 * (a * k_sl[n] ** 2 * fits[n][3] + b * k_sl[leader] ** 2 * fits[leader][3])
                return g, math.sqrt(var)
            if slope[n] > slope[leader] and not peaked[n]:
                g += (slope[n] - slope[leader]) * lft
                var += lft ** 2 * (a * fits[n][3] + b * fits[leader][3])
            return g, math.sqrt(var)

        gaps = {n: gap(n) for n in self.active if n != leader}
        rising = {n: accelerating(curves[n], own[n], s.z) for n in self.active}
        self._log({"event": "rung", "rung": r, "rung_index": self.rung_i, "active": list(self.active),
                   "level": {str(n): level[n] for n in self.active}, "slope": {str(n): slope[n] for n in self.active},
                   "projection": {str(n): proj[n] for n in self.active},
                   "gap": {str(n): list(v) for n, v in gaps.items()},
                   "accelerating": [n for n in self.active if rising[n]],
                   "peaked": [n for n in self.active if peaked[n]],
                   "spent": {str(n): spent(curves[n]) for n in self.active},
                   "noise": nz, "margin": margin, "leader": leader})
        tol = nz["sigma"] * math.sqrt(2) if s.tie_stop else 0.0
        nz["own"] = {str(n): own[n] for n in self.active}
        # matched steps: a run of larger n that is ahead of the leader at the same number of steps
        # (steps = rollouts / (n B_p)) trails at matched rollouts only for having taken fewer steps
        ahead = {n: s.matched_steps and n > leader and
                 level[n] >= value_at_steps(curves[leader], last[n] * leader / n) for n in self.active}
        for n, (g, sd) in gaps.items():
            if g + s.z * sd < tol and not (s.guard_takeoff and rising[n]) and not ahead[n]:
                self._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]),
                           "kind": "dominated" if g + s.z * sd < 0 else "tied",
                           "why": f"projected gap to the leader n={leader} at C {g:.4f} + {s.z:g} x its sd {sd:.4f} "
                                  f"< {tol:.4f} "
                                  f"(level {level[n]:.4f} vs {level[leader]:.4f}, slope {slope[n]:.4f} vs "
                                  f"{slope[leader]:.4f} per ln rollouts, {left_n[n]:.2f} left)"})
            elif peaked[n] and not (s.guard_takeoff and rising[n]):
                self._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]), "kind": "peaked",
                           "why": f"peaked: level {level[n]:.4f} is {best_eval[n] - level[n]:.4f} below its best "
                                  f"evaluation {best_eval[n]:.4f}, beyond {s.z:g} x its sd, and n={leader} leads"})
        grid = sorted(s.grid)
        lo, hi = min(self.active), max(self.active)
        smaller = [g for g in grid if g < lo and g not in self.tried]
        larger = [g for g in grid if g > hi and g not in self.tried]
        edge_lo, edge_hi = lo == min(self.tried), hi == max(self.tried)
        closing = hi != leader and hi in gaps and gaps[hi][0] > 0
        spawn, why = None, ""
        peak = sorted(self.peaked)
        if leader == lo and edge_lo and smaller and self.dominated and not peak:
            spawn, why = max(smaller), f"the smallest n tried (n={lo}) leads and a larger n was dominated"
        elif edge_hi and larger and ((leader == hi and self.dominated) or closing or (peak and hi not in peak)):
            spawn = min(larger)
            why = f"the largest n tried (n={hi}) " + (
                "leads and a smaller n was dominated" if leader == hi and self.dominated else
                f"is closing on the leader beyond the margin (projection {proj[hi]:.4f})" if closing else
                f"has not peaked while n={peak} did (a larger n takes fewer steps for the same rollouts)")
        elif self.dominated and s.refine:
            spawn, why = self._refine(leader, grid)
        if spawn is not None and s.spawns_per_rung and sum(
                d["event"] == "spawn" and d["rung"] == r for d in self.decisions) >= s.spawns_per_rung:
            spawn = None
        if spawn is not None:
            self._log({"event": "spawn", "n": spawn, "rung": r, "why": why + f": n={spawn} starts, catching up to "
                                                                             f"{r:.0f} rollouts"})
            return self.decisions[start:]
        if len(self.active) == 1:
            self._choose(leader, curves, r, f"n={leader} is the only run left")
        elif self.rung_i == len(self.rungs) - 1:
            pick, why = leader, f"best level at the last rung ({level[leader]:.4f})"
            over = [n for n in self.active if n in gaps and gaps[n][0] > s.z * gaps[n][1]]
            if over:
                pick = max(over, key=lambda n: (gaps[n][0], -n))
                why = (f"its projected gap over the leader n={leader} at C ({gaps[pick][0]:.4f}) exceeds "
                       f"{s.z:g} x its sd ({gaps[pick][1]:.4f})")
            self._choose(pick, curves, r, why)
        else:
            self._log({"event": "advance", "rung_index": self.rung_i + 1, "rung": self.rungs[self.rung_i + 1],
                       "active": list(self.active)})
        return self.decisions[start:]

    def _update_lines(self, curves: Mapping[int, Curve], start: int) -> list[dict]:
        """The "lines" policy: at C / 4 every run's local line is carried to C and the two best
        continue; at C / 2 the better last evaluation is chosen (ties to the smaller n)."""
        s, r = self.settings, self.rung
        fits = {n: local_fit(curves[n], s.budget, s.window_octaves) for n in self.active}  # the lines at C
        level = {n: float(curves[n][-1][1]) for n in self.active}
        line = {n: fits[n][0] for n in self.active}
        key = line if self.rung_i == 0 else level
        ranked = sorted(self.active, key=lambda n: (-key[n], n))
        self._log({"event": "rung", "rung": r, "rung_index": self.rung_i, "active": list(self.active),
                   "level": {str(n): level[n] for n in self.active},
                   "slope": {str(n): fits[n][1] for n in self.active},
                   "projection": {str(n): line[n] for n in self.active}, "leader": ranked[0],
                   "spent": {str(n): spent(curves[n]) for n in self.active}})
        if self.rung_i == 0 and len(ranked) > 2:
            for n in ranked[2:]:
                self._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]), "kind": "dominated",
                           "why": f"its line carried to C ({line[n]:.4f}) is below the two best "
                                  f"(n={ranked[0]} {line[ranked[0]]:.4f}, n={ranked[1]} {line[ranked[1]]:.4f})"})
        if self.rung_i == 0 and len(ranked) > 1:
            self._log({"event": "advance", "rung_index": 1, "rung": self.rungs[1], "active": list(self.active)})
        else:
            why = (f"the better evaluation at C/2 ({level[ranked[0]]:.4f} against "
                   f"{level[ranked[1]]:.4f} for n={ranked[1]})" if len(ranked) > 1 else f"n={ranked[0]} is the only run")
            self._choose(ranked[0], curves, r, why)
        return self.decisions[start:]

    def _refine(self, leader: int, grid: list[int]) -> tuple[int | None, str]:
        """The untried grid n next to the leader on the side of its better tried neighbour, when
        it lies in a gap of the tried n (so the answer is resolved to the grid's spacing)."""
        i = grid.index(leader)
        sides = []
        for step in (-1, 1):
            tried = [g for g in grid[i + step::step] if g in self.tried] if 0 <= i + step < len(grid) else []
            if tried:
                sides.append((self.levels.get(tried[0], float("-inf")), step, tried[0]))
        if not sides:
            return None, ""
        _, step, neighbour = max(sides)
        nxt = grid[i + step]
        if nxt in self.tried:
            return None, ""
        return nxt, (f"the leader n={leader} and its better tried neighbour n={neighbour} leave untried n between "
                     f"them, and a run was dominated")

    def _choose(self, n: int, curves: Mapping[int, Curve], r: float, why: str) -> None:
        self._log({"event": "choose", "n": n, "rung": r, "why": why,
                   "spent": {str(m): spent(curves[m]) for m in self.active}})

    def overhead(self) -> float:
        return float(sum(self.stopped.values()) / self.settings.budget)



def plot_search(curves: Mapping[int, Curve], decisions: Sequence[Mapping[str, Any]], path: str | Path,
                metric: str = "val_avg") -> Path:
    """Each run's curve as far as it ran (the chosen one bold), a cross where a run was stopped,
    the decision rungs and the budget; written as PNG (and SVG) at ``path``."""
    from isosim.frontier import plots

    ns = sorted(curves)
    cmap, norm = plots.n_colors(ns)
    fig, (ax,) = plots.figure()
    chosen = next((int(d["n"]) for d in decisions if d["event"] == "choose"), None)
    stops = {int(d["n"]): float(d["spent"]) for d in decisions if d["event"] == "stop"}
    spawns = {int(d["n"]) for d in decisions if d["event"] == "spawn"}
    for n in ns:
        pts = [(r, v) for r, v in curves[n] if r > 0]
        if not pts:
            continue
        color = cmap(norm(math.log2(n)))
        label = f"n = {n}" + (" (chosen)" if n == chosen else "") + (" (started later)" if n in spawns else "")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, lw=2.5 if n == chosen else 1.2,
                ms=3, label=label)
        if n in stops or (chosen is not None and n != chosen):
            ax.plot([pts[-1][0]], [pts[-1][1]], "x", color="crimson", ms=9, mew=2)
    budget = next(float(d["settings"]["budget"]) for d in decisions if d["event"] == "start")
    for r in sorted({float(d["rung"]) for d in decisions if d["event"] == "rung"}):
        ax.axvline(r, color="grey", ls=":", lw=0.8)
    ax.axvline(budget, color="black", ls="--", lw=0.8)
    plots.log_compute_axis(ax)
    ax.set_xlabel("rollouts")
    ax.set_ylabel(f"validation {metric}")
    ax.set_title("adaptive search: rungs (dotted), budget (dashed), stopped (x)", fontsize=9)
    ax.legend(fontsize=7)
    return plots.save(fig, path)[0]

