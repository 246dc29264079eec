"""The "sbi" search (``policy="sbi"``, ``isosim validate --adaptive --search sbi``): successive
halving whose ranking is the simulation-trained reader's prediction at C.

Every grid n starts. At each rung of :data:`~isosim.validation.adaptive.rules.SBI_RUNGS` (C / 32,
C / 16, C / 8, C / 4; every surviving n has run to the same rollouts, its last evaluation at or
below the rung, as in successive halving) the reader of :mod:`isosim.predict.sbi`, trained on the
bank's simulated cheap parts of the same share (rung / C) and read as the frozen method reads
(``sbi-band``: only the n within 2 evaluation sds of the cheap leader are candidates), carries
every surviving curve to C: each n's expected regret at C, as a share of the best n's gain from
step 0. Only then is anything stopped: the better half by predicted value continues (ties to the
smaller n), the others stop; at the last rung, or once one n is left, the best predicted n is
chosen and continues to C. On a grid of seven n the last choice falls at C / 8, and the rollouts
spent are those of successive halving from C / 32 on the same grid: the two differ only in the
ranking (last evaluation there, the reader's prediction at C here).

Every rung's decision logs, per surviving n, its last evaluation (``level``), the reader's value
(``predicted``: minus the expected relative regret, :data:`isosim.predict.sbi.OUT_OF_BAND` lower
outside the band), its expected relative regret and standard error, and the band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from isosim.validation.adaptive.curves import Curve, spent

READER = "sbi-band"
"""the frozen reader (``studies/results/plane_method.json``): its band of the cheap leader"""


def bank_path(bank: str | None) -> str:
    from isosim.predict.from_runs import BANK

    return str(bank) if bank is not None else str(BANK)


def read_rung(curves: Mapping[int, Curve], budget: float, share: float, b_p: int, eval_samples: int | None,
              bank: str | None = None) -> dict[str, dict[str, Any]]:
    """The reader's prediction at C for every curve of ``curves`` (each revealed to ``share`` C):
    per n (a string key) its value, expected relative regret and its se, and whether it is in the
    cheap leader's band."""
    from isosim.predict import sbi

    rdr = sbi.reader(bank_path(bank), share)
    value = rdr.read(curves, b_p, budget, sbi.BANDS[READER], eval_samples)
    reg = {n: rdr.regret(f) for n, f in sbi.features(curves, b_p, budget).items()}
    return {"predicted": {str(n): value[n] for n in curves},
            "expected_regret": {str(n): reg[n][0] for n in curves},
            "expected_regret_se": {str(n): reg[n][1] if math.isfinite(reg[n][1]) else None for n in curves},
            "in_band": {str(n): bool(abs(value[n] + reg[n][0]) < 1e-9) for n in curves}}


def update(pol: Any, curves: Mapping[int, Curve], start: int) -> list[dict[str, Any]]:
    """Decide one rung of the "sbi" search ``pol`` (an :class:`~isosim.validation.adaptive.search.Adaptive`
    whose policy is "sbi"; the caller has checked every requested run has records)."""
    s, r = pol.settings, pol.rung
    active = list(pol.active)
    last_rung = pol.rung_i == len(pol.rungs) - 1
    if len(active) == 1:
        pol._choose(active[0], curves, r, f"n={active[0]} is the only run")
        return pol.decisions[start:]
    share = r / s.budget
    read = read_rung({n: curves[n] for n in active}, s.budget, share, int(s.b_p), s.eval_samples, s.bank)
    value = {n: read["predicted"][str(n)] for n in active}
    ranked = sorted(active, key=lambda n: (-value[n], n))
    keep = 1 if last_rung else max(1, math.ceil(len(active) / s.eta))
    pol._log({"event": "rung", "rung": r, "rung_index": pol.rung_i, "active": active, "share": share,
              "level": {str(n): float(curves[n][-1][1]) for n in active}, **read,
              "reader": {"method": READER, "bank": bank_path(s.bank)}, "leader": ranked[0],
              "spent": {str(n): spent(curves[n]) for n in active}})
    for n in ranked[keep:]:
        pol._log({"event": "stop", "n": n, "rung": r, "spent": spent(curves[n]), "kind": "dominated",
                  "why": f"the reader's expected regret at C ({read['expected_regret'][str(n)]:.3f} of the best n's "
                         f"gain" + ("" if read["in_band"][str(n)] else ", outside the cheap leader's band")
                         + f") ranks it below the {keep} kept (best n={ranked[0]}, "
                           f"{read['expected_regret'][str(ranked[0])]:.3f})"})
    if keep == 1:
        why = (f"the reader's best prediction at C from {share:.4g} C: expected regret "
               f"{read['expected_regret'][str(ranked[0])]:.3f} of the best n's gain")
        pol._choose(ranked[0], curves, r, why)
    else:
        pol._log({"event": "advance", "rung_index": pol.rung_i + 1, "rung": pol.rungs[pol.rung_i + 1],
                  "active": list(pol.active)})
    return pol.decisions[start:]
