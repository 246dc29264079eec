"""Replays over complete records: a search revealed each run up to what it asked for, plain
successive halving on the same rungs, and the reference readers that pay for every run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from isosim.errors import IsosimError
from isosim.validation.adaptive.curves import Curve, local_fit, reveal, spent, value_at
from isosim.validation.adaptive.rules import Settings
from isosim.validation.adaptive.search import Adaptive


def replay(full: Mapping[int, Curve], settings: Settings) -> dict[str, Any]:
    """Run the adaptive policy over complete curves, revealing each up to what it was asked to
    spend. Returns chosen n, overhead, the decisions and the rollouts spent per n."""
    pol = Adaptive(settings)
    seen: dict[int, list[tuple[float, float]]] = {}
    for _ in range(1000):
        req = pol.requests()
        if not req:
            break
        for n, target in req.items():
            if n not in full:
                raise IsosimError(f"replay: no records for n={n}")
            seen[n] = reveal(full[n], target)
        pol.update(seen)
    spentd = {n: spent(c) for n, c in seen.items()}
    return {"chosen": pol.chosen, "overhead": pol.overhead(), "spent": spentd, "decisions": pol.decisions,
            "tried": sorted(pol.tried)}


def successive_halving(full: Mapping[int, Curve], settings: Settings) -> dict[str, Any]:
    """Plain successive halving on the same rungs: every grid n starts; at each rung the better
    half (by the last evaluation reached, ties to the smaller n) continues; the last one left
    (or the best at the last rung) continues to C."""
    s = settings
    alive = sorted(s.grid)
    seen: dict[int, list[tuple[float, float]]] = {}
    stopped: dict[int, float] = {}
    rungs = s.rungs()
    for i, r in enumerate(rungs):
        for n in alive:
            seen[n] = reveal(full[n], r)
        keep = 1 if i == len(rungs) - 1 else max(1, math.ceil(len(alive) / s.eta))
        ranked = sorted(alive, key=lambda n: (-seen[n][-1][1], n))
        for n in ranked[keep:]:
            stopped[n] = spent(seen[n])
        alive = sorted(ranked[:keep])
        if len(alive) == 1:
            break
    chosen = alive[0]
    seen[chosen] = reveal(full[chosen], s.budget)
    return {"chosen": chosen, "overhead": float(sum(stopped.values()) / s.budget),
            "spent": {n: spent(c) for n, c in seen.items()}}



REFERENCES = {"every n to C/2, best level": (2.0, "level"), "every n to C/2, best line to C": (2.0, "line"),
              "every n to C/4, best level": (4.0, "level"), "every n to C/4, best line to C": (4.0, "line"),
              "every n to C, best at C (this seed)": (1.0, "level"),
              "every n to C/4, best two lines to C/2, best level": (4.0, "line2")}
"""reference readers (not policies: they pay for every run): what could be chosen with every grid n
run to C / frac, read at its last evaluation ("level") or carried to C along its local line
("line"); at frac 1 the seed's own best run at C, which no search can beat on that seed. "line2":
the two best lines at C / 4 continue to C / 2, where the better level is chosen (of the six
two-stage readings scored, the cheapest under the regret bar on every committed sweep;
studies/LOG.md)"""


def informed_choice(full: Mapping[int, Curve], budget: float, frac: float = 2.0, reading: str = "level",
                    window_octaves: float = 1.0) -> dict[str, Any]:
    """The n a reader chooses with every run of ``full`` revealed up to ``budget / frac`` rollouts
    (see :func:`reveal`), and the overhead that costs (rollouts of the runs not chosen / budget).
    ``reading`` "level": the best last evaluation; "line": the best local line (``window_octaves``
    below the last evaluation, :func:`local_fit`) carried to the budget; "line2": the two best
    lines continue to ``budget * 2 / frac`` and the better level there is chosen."""
    if frac < 1:
        raise IsosimError(f"frac must be >= 1 (runs revealed up to budget / frac), got {frac}")
    if reading not in ("level", "line", "line2"):
        raise IsosimError(f"reading must be 'level', 'line' or 'line2', got {reading!r}")
    seen = {n: reveal(c, budget / frac) for n, c in full.items()}
    if reading == "line2":  # the two best lines go on to budget / (frac / 2); the better level wins
        first = informed_choice(full, budget, frac, "line", window_octaves)
        lines = first["value"]
        top = sorted(full, key=lambda n: (-lines[n], n))[:2]
        for n in top:
            seen[n] = reveal(full[n], budget * 2 / frac)
        value = {n: seen[n][-1][1] for n in top}
        chosen = max(value, key=lambda n: (value[n], -n))
        return {"chosen": int(chosen), "value": value,
                "overhead": float(sum(spent(c) for n, c in seen.items() if n != chosen) / budget)}
    if frac == 1:
        value = {n: value_at(full[n], budget) for n in full}
    elif reading == "level":
        value = {n: c[-1][1] for n, c in seen.items()}
    else:
        value = {n: local_fit(c, budget, window_octaves)[0] for n, c in seen.items()}
    value = {n: v if math.isfinite(v) else -math.inf for n, v in value.items()}
    chosen = max(value, key=lambda n: (value[n], -n))
    return {"chosen": int(chosen), "value": value,
            "overhead": float(sum(spent(c) for n, c in seen.items() if n != chosen) / budget)}

