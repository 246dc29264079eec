"""Whether per-problem allocation pays: each rule against uniform, simulated at equal compute.

For a simulated setting (a dict of SimConfig fields) and a grid of ``n``, every rule of
:data:`isosim.sim.allocation.RULES` runs to the top budget ``C`` on the same seeds (each seed's
problems are the same for every rule, so the comparison is paired), and uniform runs on to
``extend x C``. Per rule:

* ``gain``: its reward at ``C`` minus uniform's, with the standard error over the paired seeds
  (``se``): at each ``n`` (``per_n``) and frontier to frontier (each side at its best ``n``);
* ``ratio``: the compute uniform needs to reach the rule's reward at ``C``, over ``C``, read off
  uniform's own seed-mean curve (its frontier over ``n`` for the frontier ratio); below 1 when the
  rule is worse, ``None`` (reported ``> extend``) when uniform never gets there by ``extend x C``;
* ``n_star``: the ``n`` with the best seed-mean reward at ``C``.

The reward is the seed-mean exact validation avg@k (``val_avg``) unless another metric is named.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from isosim.errors import IsosimError
from isosim.sim.allocation import RULES, check_rule

EXTEND = 4.0
"""how far past the top budget uniform runs, in multiples of it (the largest ratio measured)"""
PAYS_SE = 2.0
"""a gain is told from zero when it exceeds this many standard errors"""
PAYS_MIN = 0.005
"""... and a rule is predicted to pay when its frontier gain also exceeds this (half a point of
pass rate, what ``isosim recommend`` counts as a tie)"""


def configs(base: dict[str, Any], n_values: Sequence[int], budget: float, seeds: Sequence[int],
            rules: Sequence[str] = RULES, extend: float = EXTEND) -> list:
    """The runs of a comparison: every rule and ``n`` and seed to ``budget``, and uniform also to
    ``extend x budget``."""
    from isosim.sim.config import SimConfig

    for r in rules:
        check_rule(r)
    base = {k: v for k, v in base.items() if k not in ("n", "seed", "budget", "steps", "allocation", "data_seed")}
    out = []
    for rule in dict.fromkeys(("uniform", *rules)):
        for n in n_values:
            for s in seeds:
                out.append(SimConfig(**base, n=int(n), seed=int(s), budget=float(budget), allocation=rule))
                if rule == "uniform" and extend > 1:
                    out.append(SimConfig(**base, n=int(n), seed=int(s), budget=float(budget) * extend))
    return out


def _at(df: pd.DataFrame, budget: float, metric: str) -> pd.Series:
    """Each run's ``metric`` at its last record within ``budget`` (its value at ``budget``)."""
    sub = df[df["rollouts"] <= budget * (1 + 1e-9)]
    return sub.sort_values("rollouts").groupby("run_id").tail(1).set_index("run_id")[metric]


def _curve(df: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Seed-mean ``metric`` against rollouts of the runs in ``df`` (they share evaluation steps)."""
    m = df.groupby("rollouts")[metric].mean()
    return m.index.to_numpy(dtype=float), m.to_numpy(dtype=float)


def crossing(c: np.ndarray, r: np.ndarray, target: float) -> float | None:
    """The first compute at which the curve ``r(c)`` reaches ``target`` (linear in log c between
    records; ``None`` if it never does)."""
    ok = np.nonzero(r >= target)[0]
    if not ok.size:
        return None
    i = int(ok[0])
    if i == 0 or c[i - 1] <= 0:
        return float(c[i])
    lo, hi = math.log(c[i - 1]), math.log(c[i])
    frac = (target - r[i - 1]) / (r[i] - r[i - 1]) if r[i] != r[i - 1] else 1.0
    return float(math.exp(lo + frac * (hi - lo)))


def _envelope(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The best of several curves at every compute any of them recorded (each curve interpolated
    in log compute, and counted only between its first and last record)."""
    grid = np.unique(np.concatenate([c[c > 0] for c, _ in curves]))
    best = np.full(grid.shape, -np.inf)
    for c, r in curves:
        keep = c > 0
        lc, rr = np.log(c[keep]), r[keep]
        inside = (np.log(grid) >= lc[0]) & (np.log(grid) <= lc[-1])
        best[inside] = np.maximum(best[inside], np.interp(np.log(grid[inside]), lc, rr))
    return grid, best


def summarise(df: pd.DataFrame, cfgs: list, budget: float, extend: float = EXTEND,
              metric: str = "val_avg") -> dict[str, Any]:
    """Per rule: gain, se, ratio and n* at ``budget`` (see the module docstring) from the records
    ``df`` of the comparison ``cfgs``."""
    runs = pd.DataFrame([{"run_id": c.run_id, "rule": c.allocation, "n": c.n, "seed": c.seed,
                          "long": c.budget > budget * (1 + 1e-9)} for c in cfgs]).set_index("run_id")
    if metric not in df:
        raise IsosimError(f"no column {metric!r} in the records")
    top = runs[~runs["long"]].assign(value=_at(df, budget, metric))
    table = top.pivot_table(index=["n", "seed"], columns="rule", values="value")
    n_values = sorted(runs["n"].unique().tolist())
    long_ids = runs.index[runs["long"]]
    uni_curves = {n: _curve(df[df["run_id"].isin(long_ids[runs.loc[long_ids, "n"] == n])], metric)
                  for n in n_values} if len(long_ids) else {}
    env = _envelope(list(uni_curves.values())) if uni_curves else None
    mean = table.groupby(level="n").mean()
    uni_best_n = int(mean["uniform"].idxmax())
    out: dict[str, Any] = {"budget": float(budget), "extend": float(extend), "metric": metric,
                           "n_values": [int(n) for n in n_values], "seeds": int(table.index.get_level_values("seed").nunique()),
                           "rules": {}}
    for rule in [r for r in RULES if r in table.columns]:
        best_n = int(mean[rule].idxmax())
        per_n = {}
        for n in n_values:
            d = (table.loc[n, rule] - table.loc[n, "uniform"]).to_numpy()
            ratio = None
            if n in uni_curves:
                hit = crossing(*uni_curves[n], float(mean.loc[n, rule]))
                ratio = None if hit is None else hit / budget
            per_n[str(int(n))] = {"reward": float(mean.loc[n, rule]), "uniform": float(mean.loc[n, "uniform"]),
                                  "gain": float(d.mean()), "se": _se(d), "ratio": ratio,
                                  "significant": _significant(d)}
        seeds = table.index.get_level_values("seed").unique()
        d = np.array([table.loc[(best_n, s), rule] - table.loc[(uni_best_n, s), "uniform"] for s in seeds])
        ratio = None
        if env is not None:
            hit = crossing(*env, float(mean.loc[best_n, rule]))
            ratio = None if hit is None else hit / budget
        out["rules"][rule] = {"n_star": best_n, "reward": float(mean.loc[best_n, rule]),
                              "gain": float(d.mean()), "se": _se(d), "ratio": ratio,
                              "significant": _significant(d), "per_n": per_n}
    return out


def _se(d: np.ndarray) -> float | None:
    return float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else None


def _significant(d: np.ndarray) -> bool:
    """Whether the paired differences ``d`` tell the rule from uniform (beyond ``PAYS_SE`` se)."""
    se = _se(d)
    return bool(se is not None and abs(d.mean()) > PAYS_SE * se)


def compare(base: dict[str, Any], n_values: Sequence[int], budget: float, seeds: Sequence[int] = (0, 1, 2, 3),
            rules: Sequence[str] = RULES, extend: float = EXTEND, metric: str = "val_avg",
            simulate: Callable | None = None) -> dict[str, Any]:
    """Simulate the comparison of ``base`` (SimConfig fields) and summarise it."""
    if simulate is None:
        from isosim.sim.engine import simulate
    cfgs = configs(base, n_values, budget, seeds, rules, extend)
    return summarise(simulate(cfgs), cfgs, budget, extend, metric)


def best_rule(summary: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The rule (other than uniform) with the largest frontier gain."""
    rules = {k: v for k, v in summary["rules"].items() if k != "uniform"}
    if not rules:
        raise IsosimError("no allocation rule other than uniform in the comparison")
    name = max(rules, key=lambda k: rules[k]["gain"])
    return name, rules[name]


def ratio_text(ratio: float | None, extend: float, significant: bool = True) -> str:
    """A compute-equivalence ratio for people: ``2.31x``, ``> 4x`` (uniform never matched) or,
    where the rule's reward cannot be told from uniform's, ``~1x (n.s.)`` (on a flat curve the
    crossing of an equal reward is anywhere)."""
    if not significant:
        return "~1x (n.s.)"
    return f"> {extend:g}x" if ratio is None else f"{ratio:.2f}x"


def verdict(summary: dict[str, Any]) -> str:
    """One line: whether the best rule is predicted to pay, by how much, and how sure."""
    name, r = best_rule(summary)
    se = r["se"] or 0.0
    pays = r["gain"] > PAYS_SE * se and r["gain"] > PAYS_MIN
    gain = f"{r['gain']:+.4f} {summary['metric']} (se {se:.4f})"
    ratio = ratio_text(r["ratio"], summary["extend"], r.get("significant", True))
    if pays:
        return (f"per-problem allocation is predicted to pay: {name} (n* {r['n_star']}) gains {gain} at "
                f"C = {summary['budget']:.3g}; uniform needs {ratio} the compute to match it")
    return (f"per-problem allocation is not predicted to pay: the best rule, {name} (n* {r['n_star']}), "
            f"gains {gain} at C = {summary['budget']:.3g} (compute-equivalence {ratio})")


# ----------------------------------------------------------------------------------------
# For the user: isosim recommend
# ----------------------------------------------------------------------------------------
RESULTS = Path(__file__).resolve().parents[2] / "studies" / "results"
STUDY = RESULTS / "allocation.json"
ORGANISM = RESULTS / "organism_allocation"
"""the organism check: ``prediction.json`` (committed before the runs) and ``measured.json``"""
ADVICE_SEEDS = (0, 1)
ADVICE_EXTEND = 2.0


def advice(base: dict[str, Any], n: int, budget: float, *, preset: str | None, train_size: int | None,
           study: Path = STUDY, cache: Path | None = None, simulate: Callable | None = None) -> dict[str, Any]:
    """Whether per-problem allocation is predicted to pay for this setting and budget.

    A preset (no profile) with its training-set size in the committed study reads the study (at
    the study's budget, which it names); anything else simulates every rule against uniform at the
    recommended ``n`` and the budget (seeds :data:`ADVICE_SEEDS`, uniform on to
    :data:`ADVICE_EXTEND` x the budget), cached in ``cache`` by the runs' ids."""
    if preset is not None:
        try:
            doc = json.loads(Path(study).read_text(encoding="utf-8"))
            summary = doc["settings"][f"{preset}/{int(train_size)}"]
        except (OSError, ValueError, KeyError, TypeError):
            summary = None
        if summary is not None:
            return {"source": f"committed study {_shown(study)} (C = {summary['budget']:.3g}, its n grid)",
                    "summary": summary, "verdict": verdict(summary)}
    cfgs = configs(base, [n], budget, ADVICE_SEEDS, extend=ADVICE_EXTEND)
    key = hashlib.sha1(" ".join(sorted(c.run_id for c in cfgs)).encode()).hexdigest()[:12]
    path = None if cache is None else Path(cache) / f"allocation-{key}.json"
    if path is not None and path.is_file():
        summary = json.loads(path.read_text(encoding="utf-8"))
    else:
        if simulate is None:
            from isosim.sim.engine import simulate
        summary = summarise(simulate(cfgs), cfgs, budget, ADVICE_EXTEND)
        if path is not None:
            from isosim.files import write_json

            write_json(path, summary, indent=1)
    return {"source": f"simulated at n = {n}, C = {budget:.3g}, {len(ADVICE_SEEDS)} seeds",
            "summary": summary, "verdict": verdict(summary)}


def _shown(path: Path) -> str:
    path = Path(path)
    return str(path.relative_to(RESULTS.parent.parent)) if path.is_relative_to(RESULTS.parent.parent) else str(path)


def organism_record(folder: Path = ORGANISM) -> dict[str, Any]:
    """The simulator's track record on the organism: its committed prediction per setting and,
    once the runs are in, what they measured (``measured.json``; empty until then)."""
    out: dict[str, Any] = {}
    for name in ("prediction", "measured"):
        try:
            doc = json.loads((Path(folder) / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        settings = doc.get("settings", doc) if isinstance(doc, dict) else {}
        for key, entry in settings.items():
            if not isinstance(entry, dict):
                continue
            got = entry.get("predicted", entry) if name == "prediction" else entry.get("measured", entry)
            if isinstance(got, dict):
                out.setdefault(key, {})[name] = {k: got.get(k) for k in ("rule", "gain", "se", "ratio", "significant")
                                                 if k in got}
    return out


def advice_lines(a: dict[str, Any] | None, record: dict[str, Any] | None = None) -> list[str]:
    """What ``isosim recommend`` prints about per-problem allocation."""
    if not a:
        return []
    s = a["summary"]
    lines = [f"per-problem allocation ({a['source']}): {a['verdict']}"]
    for rule, r in s["rules"].items():
        if rule != "uniform":
            lines.append(f"  {rule:9s} gain {r['gain']:+.4f} (se {(r['se'] or 0.0):.4f}), uniform needs "
                         f"{ratio_text(r['ratio'], s['extend'], r.get('significant', True))} the compute")
    # ---- the organism track record (studies/results/organism_allocation) ------------------
    record = organism_record() if record is None else record
    if not record:
        lines.append("  organism track record: none yet (studies/results/organism_allocation)")
    for key, v in record.items():
        p, m = v.get("prediction", {}), v.get("measured")
        txt = (f"  organism {key}: predicted {p.get('rule')} {_num(p.get('gain'))} (se {_num(p.get('se'), 4, '')}), "
               f"ratio {ratio_text(p.get('ratio'), EXTEND, p.get('significant', True))}")
        if m:
            txt += (f"; measured {_num(m.get('gain'))} (se {_num(m.get('se'), 4, '')}), ratio "
                    + (f"{m['ratio']:.2f}x" if isinstance(m.get("ratio"), (int, float)) else str(m.get("ratio"))))
        else:
            txt += "; not measured yet"
        lines.append(txt)
    return lines


def _num(x, digits: int = 4, sign: str = "+") -> str:
    return f"{x:{sign}.{digits}f}" if isinstance(x, (int, float)) else "?"
