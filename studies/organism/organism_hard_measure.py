"""The second learner's sweeps read out: ``studies/results/organism_hard/measured.json`` (the sqrt
rule) and ``studies/results/organism_hard_const/measured.json`` (one lr for every n).

For a sweep of ``--model organism-hard`` (its hard split, 128 training problems, T 0.6,
n = 2..256, B_p 16, seeds 0 and 1, 1e6 rollouts a run), in both readings
(:mod:`isosim.validation.readings`):

- n* with its tie band (n within 2 seed se of the best) at 1e4, 3e4, 1e5, 3e5 and 1e6 rollouts,
  the path of n*(C) (the crossing budgets: where the best n changes) and the cheap leader's
  regret at the top budget (:func:`isosim.validation.crossing.measure`);
- the test of budget dependence: the slope of log2 n* against log10 C over those budgets, with a
  seed-bootstrap interval (:func:`isosim.validation.crossing.slope`);
- every committed prediction of the sweep (the entries its ``manifest.json`` lists: the
  profile-only prediction in both readings and its frontier n*, fixed n = 8, the frozen
  ``sbi-band`` reader and the cheap leader at 5 % of C, the frozen simfit method per seed) scored
  at its budget in each reading: regret (seed-mean value of the best n minus the pick's), regret
  in seed se, within 2 se, in the tie band;
- with ``--against`` (the constant-lr sweep's default: the sqrt-rule sweep of the same learner),
  the two rules side by side: each n's seed-mean value at 1e5, 3e5 and 1e6 under each rule, and a
  fixed n = 8's regret under each (:func:`rule_table`); and, where the sweep has the lr-aware
  method's picks, the bar it is held to (:func:`bar`): at each budget and reading, its regret
  against a fixed n = 8's and the cheap leader's at 5 % of C, and the goal (where n = 8 is more
  than 2 se from the best, beat it by 2 se; elsewhere tie it).

    python studies/organism/organism_hard_measure.py                 # every run at 1e6: the committed file
    python studies/organism/organism_hard_measure.py --sweep organism-hard-128-const   # the constant-lr sweep
    python studies/organism/organism_hard_measure.py --sweep organism-hard-256-const8  # one lr for every n, n = 8's
    python studies/organism/organism_hard_measure.py --partial --out /tmp/partial.json   # runs still training

For the first organism's sweep at one lr for every n, set where it suits n = 8
(``organism-hard-256-const8``), the read-out adds the lr-read model's bar (:func:`lr_acceptance`):
each of its two forms, frozen before the sweep's records past 5e4, against a fixed n = 8 and the
se of the difference from hindsight in the six budget-readings, with the 07a27e7 method and the
cheap leader at 5 % of C scored beside them; pooled seeds (``recommend --runs``'s answer) and each
seed's own pick.

Without ``--partial`` it refuses (one line, exit 2) while any run is short of the largest budget.
With it, the output goes only to the ``--out`` named (never a committed read-out, never under
``studies/results``), is marked partial, and holds the budgets every run has reached.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # isosim from this tree

from isosim.errors import IsosimError  # noqa: E402
from isosim.files import write_json  # noqa: E402
from isosim.validation import crossing  # noqa: E402
from isosim.validation import readings as rd  # noqa: E402
from isosim.validation.adaptive import load_sweep  # noqa: E402

STUDIES = ROOT / "studies" / "results"
RESULTS = STUDIES / "organism_hard"
COMMITTED = RESULTS / "measured.json"
MANIFEST = RESULTS / "manifest.json"
SWEEP = "organism-hard-128"
CONST = STUDIES / "organism_hard_const"
CONST8 = STUDIES / "organism_const8"
SWEEPS = {SWEEP: {"runs": RESULTS / "hard-128", "manifest": MANIFEST, "out": COMMITTED, "against": None},
          "organism-hard-128-const": {"runs": CONST / "hard-128", "manifest": CONST / "manifest.json",
                                      "out": CONST / "measured.json", "against": RESULTS / "hard-128"},
          "organism-hard-256-const8": {"runs": CONST8 / "hard-256", "manifest": CONST8 / "manifest.json",
                                       "out": CONST8 / "measured.json", "against": None}}
"""each sweep's key -> its runs, manifest, committed read-out and the sweep it is set against (the one-lr-for-n = 8
sweep has none: no other rule was run on its problems)"""
BUDGETS = (1e4, 3e4, 1e5, 3e5, 1e6)
TABLE_BUDGETS = (1e5, 3e5, 1e6)
"""the budgets of the rule table and of the bar (those the predictions were committed at)"""
LR_AWARE = "simfit lr-aware"
"""the label of the lr-aware method's picks (its prediction entry's ``method`` starts so)"""
LR_AWARE_CHEAP = {8: 0.05}
"""the lr-aware method's cheap runs (n -> share of C: its prediction entry's ``cheap_runs``)"""
CHEAP_LEADER = "cheap leader (level) @0.05"
MAX_OVERHEAD = 0.05
N_BOOT = 4000
BOOT_SEED = 0
SHARE = 0.05
BOOT_NOTE = ("each n's seeds are resampled with replacement, independently of the other n's; with 2 seeds per n a "
             "resample of one n is one of 4 seed pairs, two of them one seed twice (no spread): the interval is "
             "coarse, a statement about these two seeds, not a confidence interval of the learner's slope")


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def short_runs(runs: Mapping[int, Mapping[int, rd.Curve]], budget: float) -> dict[str, float]:
    """Runs with no value at ``budget`` (ending more than the readings' tolerance short of it):
    ``nN_sS`` -> their last rollouts."""
    return {f"n{n}_s{s}": float(c[-1][0]) for n, seeds in sorted(runs.items()) for s, c in sorted(seeds.items())
            if math.isnan(rd.final_at(c, budget))}


def measure(runs: Mapping[int, Mapping[int, rd.Curve]], budgets: Sequence[float], n_boot: int, boot_seed: int,
            share: float = SHARE) -> dict[str, Any]:
    """Per reading: :func:`isosim.validation.crossing.measure` at ``budgets`` and the slope of
    log2 n* against log10 C with its seed bootstrap (``n_boot`` resamples, RNG seeded
    ``boot_seed``, one generator per reading)."""
    out = {}
    for i, reading in enumerate((rd.HEADLINE, *[r for r in rd.READINGS if r != rd.HEADLINE])):
        m = crossing.measure(runs, budgets, reading, share)
        m["slope"] = crossing.slope(runs, budgets, reading, n_boot, np.random.default_rng([boot_seed, i]))
        m["slope"]["note"] = BOOT_NOTE
        m["crossings"] = [{"budget": p["from_budget"], "n_star": p["n_star"]} for p in m["n_star_path"][1:]]
        out[reading] = m
    return out


def _entry_sha256(entry: Any) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _nearest(budgets: Sequence[float], picks: Sequence[Any], budget: float) -> int:
    return int(picks[int(np.argmin(np.abs(np.log(budgets) - math.log(budget))))])


def picks_of(entry: Mapping[str, Any], reads: str) -> list[dict[str, Any]]:
    """Every pick a committed prediction entry makes: label, reading, budget, n (the manifest's
    ``reads`` names the entry's kind, ``scripts/prediction_manifest.py``)."""
    out = []

    def add(label: str, reading: str, budgets: Sequence[float], ns: Sequence[Any]) -> None:
        out.extend({"label": label, "reading": reading, "budget": float(b), "pick": int(n)} for b, n in zip(budgets, ns))

    if reads == "profile only":
        for reading in rd.READINGS:
            table = entry["readings"][reading]
            add("profile-only (simulated sweep's n*)", reading, [t["budget"] for t in table], [t["n_star"] for t in table])
            budgets = [t["budget"] for t in table]
            add("profile-only (frontier n*)", reading, budgets,
                [_nearest(entry["budgets"], entry["n_star"], b) for b in budgets])
            fixed = entry.get("fixed_n")
            if fixed:
                add(f"fixed n = {fixed['n']}", reading, fixed["budgets"], [fixed["n"]] * len(fixed["budgets"]))
    elif reads == "cheap readers":
        for label, per in entry["picks"].items():
            for reading in rd.READINGS:
                add(f"{label} @{entry['share']:g}", reading, entry["budgets"], per[reading])
    elif reads == "lr-read":  # every form of the lr-read prediction, per seed and with both seeds pooled
        for form, per in entry["picks"].items():
            for reading in rd.READINGS:
                for seed, ns in sorted(per[reading].items()):
                    add(f"{form} ({seed})", reading, entry["budgets"], ns)
                add(f"{form} (both seeds pooled)", reading, entry["budgets"], entry["pooled_seeds_picks"][form][reading])
    elif reads == "simfit":
        for reading in rd.READINGS:
            for seed, ns in sorted(entry["picks"][reading].items()):
                add(f"{entry['method']} ({seed})", reading, entry["budgets"], ns)
            if "pooled_seeds_picks" in entry:  # both seeds' cheap runs in one fit: recommend --runs's answer
                add(f"{entry['method']} (both seeds pooled)", reading, entry["budgets"], entry["pooled_seeds_picks"][reading])
    else:
        raise IsosimError(f"a prediction that reads {reads!r} is not one this read-out knows how to score")
    return out


def committed_predictions(manifest: Path, sweep: str, root: Path = ROOT) -> list[dict[str, Any]]:
    """Every pick of every prediction entry ``manifest`` lists for ``sweep`` (files named relative
    to ``root``), each entry checked against the manifest's hash of it."""
    doc = json.loads(Path(manifest).read_text())
    if sweep not in doc.get("sweeps", {}):
        raise IsosimError(f"{manifest}: no sweep {sweep!r} (it has {', '.join(doc.get('sweeps', {})) or 'none'})")
    out = []
    for p in doc["sweeps"][sweep]["predictions"]:
        entry = json.loads((Path(root) / p["file"]).read_text())[p["key"]]
        if _entry_sha256(entry) != p["entry_sha256"]:
            raise IsosimError(f"{p['file']} [{p['key']}] is not the entry {manifest} records (its hash differs)")
        for pick in picks_of(entry, p["reads"]):
            out.append({"file": p["file"], "reads": p["reads"], "prospective": p.get("prospective"), **pick})
    return out


def score(runs: Mapping[int, Mapping[int, rd.Curve]], picks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Each pick against the measured truth at its budget and reading; picks at budgets some run
    has not reached are listed apart."""
    scored, pending, truths = [], [], {}
    for p in picks:
        key = (p["budget"], p["reading"])
        if short_runs(runs, p["budget"]):
            pending.append(dict(p))
            continue
        if key not in truths:
            truths[key] = rd.truth_at(runs, p["budget"], p["reading"])
        t = truths[key]
        if str(p["pick"]) not in t["mean"]:
            raise IsosimError(f"{p['label']} picks n = {p['pick']}, which the sweep did not run")
        r = rd.regret(t, p["pick"])
        scored.append({**p, "best_n": t["best"], "tie_band": t["tie_band"], "regret": r["regret"],
                       "seed_se": r["seed_se"], "regret_in_se": r["regret"] / r["seed_se"] if r["seed_se"] > 0 else math.nan,
                       "within_2se": r["within_2se"], "in_tie_band": r["in_tie_band"]})
    summary = {}
    for label in dict.fromkeys(s["label"] for s in scored):
        for reading in rd.READINGS:
            rs = [s for s in scored if s["label"] == label and s["reading"] == reading]
            if rs:
                summary.setdefault(label, {})[reading] = {
                    "budgets": [s["budget"] for s in rs], "mean_regret": float(np.mean([s["regret"] for s in rs])),
                    "mean_regret_in_se": float(np.mean([s["regret_in_se"] for s in rs])),
                    "in_tie_band": int(sum(s["in_tie_band"] for s in rs))}
    return {"scored": scored, "summary": summary, "not_reached": pending}


def lr_rule_of(folder: Path) -> str:
    """The lr rule every run under ``folder`` was trained with (config.json ``lr_rule``, read as the
    plane reads it: :func:`isosim.validation.plane_methods.lr_rule`; one rule)."""
    from isosim.validation.plane_methods import lr_rule

    rules = {lr_rule(json.loads(p.read_text())) for p in sorted(Path(folder).glob("n*_bp*_s*/config.json"))}
    if len(rules) != 1:
        raise IsosimError(f"{folder}: the runs hold lr rules {sorted(rules) or 'none'}, not one")
    return rules.pop()


def rule_table(sweeps: Mapping[str, Mapping[int, Mapping[int, rd.Curve]]], budgets: Sequence[float] = TABLE_BUDGETS,
               fixed: int = 8) -> dict[str, Any]:
    """One learner under several lr rules (rule -> runs), per reading and budget: each n's seed-mean
    value, the best n, the seed se, and a fixed n's regret (in value and in seed se)."""
    out: dict[str, Any] = {"budgets": [float(b) for b in budgets], "rules": list(sweeps), "fixed_n": fixed}
    for reading in rd.READINGS:
        rows = []
        for b in budgets:
            for rule, runs in sweeps.items():
                t = rd.truth_at(runs, b, reading)
                r = rd.regret(t, fixed) if str(fixed) in t["mean"] else None
                rows.append({"budget": float(b), "rule": rule, "mean": t["mean"], "best": t["best"],
                             "seed_se": t["seed_se"], "tie_band": t["tie_band"],
                             "fixed_regret": None if r is None else r["regret"],
                             "fixed_regret_in_se": None if r is None or not r["seed_se"] > 0 else r["regret"] / r["seed_se"],
                             "fixed_within_2se": None if r is None else r["within_2se"]})
        out[reading] = rows
    return out


def markdown_table(table: Mapping[str, Any], reading: str = rd.HEADLINE) -> str:
    """:func:`rule_table` as a Markdown table: one row per n, one column per budget and rule (the
    best n's value in bold), and a last row of the fixed n's regret (seed se) per column."""
    rows = table[reading]
    cols = [(r["budget"], r["rule"]) for r in rows]
    ns = sorted({int(n) for r in rows for n in r["mean"]})
    head = "| n | " + " | ".join(f"{b:.0e} {rule}" for b, rule in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 1)]
    for n in ns:
        cells = []
        for r in rows:
            v = r["mean"].get(str(n))
            cells.append("" if v is None else (f"**{v:.3f}**" if n == r["best"] else f"{v:.3f}"))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    fixed = table["fixed_n"]
    lines.append(f"| n = {fixed}'s regret (se) | " + " | ".join(
        "" if r["fixed_regret"] is None else f"{r['fixed_regret']:.3f} ({r['fixed_regret_in_se']:.1f})" for r in rows) + " |")
    return "\n".join(lines)


def bar(scored: Sequence[Mapping[str, Any]], budgets: Sequence[float] = TABLE_BUDGETS, fixed: str = "fixed n = 8",
        leader: str = CHEAP_LEADER, method: str = LR_AWARE) -> dict[str, Any]:
    """The lr-aware method's bar at each budget and reading, from the scored picks: its regret (the
    mean over the seeds' own picks, as the plane scores a replay; and the pick from both seeds' runs
    pooled, as ``recommend --runs`` gives it), against ``fixed``'s and ``leader``'s; ``meets`` when it
    is no higher than either, at overhead <= 0.05 (the cheap runs of :data:`LR_AWARE_CHEAP`, counted
    where the pick is another n). The goal: where ``fixed`` is more than 2 se below the best, beat it by at
    least 2 se; where it is within 2 se, tie it (within 2 se of the best)."""
    rows = []
    for reading in rd.READINGS:
        for b in budgets:
            at = [x for x in scored if x["reading"] == reading and x["budget"] == float(b)]
            seeds = [x for x in at if x["label"].startswith(method) and "(seed " in x["label"]]
            pooled = [x for x in at if x["label"].startswith(method) and x["label"].endswith("(both seeds pooled)")]
            ref = {k: next((x for x in at if x["label"] == k), None) for k in (fixed, leader)}
            if not seeds or any(v is None for v in ref.values()):
                continue
            se = seeds[0]["seed_se"]
            reg = float(np.mean([x["regret"] for x in seeds]))
            over = float(np.mean([sum(share for n, share in LR_AWARE_CHEAP.items() if n != x["pick"]) for x in seeds]))
            gap = ref[fixed]["regret"] - reg
            fixed_matters = ref[fixed]["regret"] > 2 * se + 1e-12
            rows.append({
                "reading": reading, "budget": float(b), "seed_se": se,
                "method": {"picks": [x["pick"] for x in seeds], "regret": reg, "overhead": over,
                           "pooled": None if not pooled else {"pick": pooled[0]["pick"], "regret": pooled[0]["regret"]}},
                fixed: {"pick": ref[fixed]["pick"], "regret": ref[fixed]["regret"]},
                leader: {"pick": ref[leader]["pick"], "regret": ref[leader]["regret"]},
                "best_n": seeds[0]["best_n"],
                "meets": bool(over <= MAX_OVERHEAD + 1e-12 and reg <= ref[fixed]["regret"] + 1e-12
                              and reg <= ref[leader]["regret"] + 1e-12),
                "gain_over_fixed_in_se": gap / se if se > 0 else math.nan,
                "fixed_more_than_2se_behind": fixed_matters,
                "goal": bool(gap >= 2 * se - 1e-12) if fixed_matters else bool(reg <= 2 * se + 1e-12)})
    return {"method": method, "compared_with": [fixed, leader], "max_overhead": MAX_OVERHEAD, "rows": rows,
            "meets_everywhere": bool(rows) and all(r["meets"] for r in rows),
            "goal_everywhere": bool(rows) and all(r["goal"] for r in rows)}


LR_READ_FORMS = ("lr-read one n", "lr-read every n")
"""the lr-read model's two forms, frozen before the one-lr-for-n = 8 sweep's records past 5e4"""
LR_READ_BESIDE = ("07a27e7", "cheap leader @5%")
"""scored beside them: the method frozen at 07a27e7 and the cheap leader at 5 % of C"""
FIXED_N = 8


def _gap_se(runs: Mapping[int, Mapping[int, rd.Curve]], budget: float, reading: str, best: int, pick: int) -> float:
    """The se of the difference of two n's seed means (:func:`isosim.validation.readings.difference_se`);
    for the best n against itself, that of two seed means of its own number of seeds."""
    if int(pick) == int(best):
        return float(rd.difference_se(runs, budget, {int(best): 1.0}, reading)["se"] * math.sqrt(2.0))
    return float(rd.difference_se(runs, budget, {int(best): 1.0, int(pick): -1.0}, reading)["se"])


def lr_acceptance(runs: Mapping[int, Mapping[int, rd.Curve]], scored: Sequence[Mapping[str, Any]],
                  budgets: Sequence[float] = TABLE_BUDGETS, forms: Sequence[str] = LR_READ_FORMS + LR_READ_BESIDE,
                  fixed: int = FIXED_N) -> dict[str, Any]:
    """The bar of the lr-read model on the sweep it was frozen for, in every budget-reading (the
    budgets x the two readings): each form's regret against a fixed n = ``fixed``'s, and against
    the se of the difference between the best n's seed mean and the pick's (a gap between two n).

    Two versions of each form are read: ``pooled``, the pick from both seeds' cheap runs in one fit
    (what ``recommend --runs`` answers given the sweep's runs: the primary one), and ``seeds``, the
    mean regret of each seed's own pick (as the plane scores a replay). A version *meets* the bar
    when its regret is no higher than the fixed n's in every budget-reading and within 1 se of the
    difference of hindsight in all but at most one."""
    cells_at = [(reading, float(b)) for reading in rd.READINGS for b in budgets]
    truths = {(reading, b): rd.truth_at(runs, b, reading) for reading, b in cells_at}
    fixed_at = {key: (rd.regret(t, fixed)["regret"], _gap_se(runs, key[1], key[0], int(t["best"]), fixed))
                for key, t in truths.items()}

    def cell(form: str, version: str, reading: str, b: float) -> dict[str, Any] | None:
        at = [x for x in scored if x["reading"] == reading and x["budget"] == b]
        mine = ([x for x in at if x["label"] == f"{form} (both seeds pooled)"] if version == "pooled" else
                [x for x in at if x["label"].startswith(f"{form} (seed ")])
        if not mine:
            return None
        best = int(truths[(reading, b)]["best"])
        reg = float(np.mean([x["regret"] for x in mine]))
        se = float(np.mean([_gap_se(runs, b, reading, best, x["pick"]) for x in mine]))
        ref, ref_se = fixed_at[(reading, b)]
        return {"form": form, "version": version, "reading": reading, "budget": b, "best_n": best,
                "picks": [int(x["pick"]) for x in mine], "regret": reg, "difference_se": se,
                "regret_in_difference_se": reg / se if se > 0 else math.nan,
                f"n = {fixed} regret": float(ref),
                f"n = {fixed} regret_in_difference_se": float(ref / ref_se) if ref_se > 0 else math.nan,
                "no_higher_than_fixed": bool(reg <= ref + 1e-12), "within_1se": bool(reg <= se + 1e-12)}

    rows, summary = [], {}
    for form in forms:
        for version in ("pooled", "seeds"):
            cells = [c for c in (cell(form, version, reading, b) for reading, b in cells_at) if c is not None]
            if not cells:
                continue
            rows.extend(cells)
            k = len(cells)
            no_higher = sum(c["no_higher_than_fixed"] for c in cells)
            within = sum(c["within_1se"] for c in cells)
            summary.setdefault(form, {})[version] = {
                "cells": k, "no_higher_than_fixed": no_higher, "within_1se": within,
                "mean_regret": float(np.mean([c["regret"] for c in cells])),
                "meets": bool(no_higher == k and within >= k - 1)}
    return {"fixed_n": fixed, "budgets": [float(b) for b in budgets], "frozen_forms": list(LR_READ_FORMS),
            "rule": "regret no higher than the fixed n's in every budget-reading, within 1 se of the difference "
                    "of hindsight in all but at most one", "rows": rows, "summary": summary}


def build(folder: Path, budgets: Sequence[float] = BUDGETS, partial: bool = False, manifest: Path | None = MANIFEST,
          sweep: str = SWEEP, n_boot: int = N_BOOT, boot_seed: int = BOOT_SEED, root: Path = ROOT,
          against: Path | None = None) -> dict[str, Any]:
    """measured.json's content for the runs under ``folder`` (see the module docstring; the
    manifest's files are named relative to ``root``; ``against``: another sweep of the same learner
    at another lr rule, set beside it in ``rules``)."""
    budgets = sorted(float(b) for b in budgets)
    sw = load_sweep(folder)
    runs = sw["runs"]
    short = short_runs(runs, budgets[-1])
    doc: dict[str, Any] = {"sweep": sweep, "runs_folder": _rel(folder), "partial": bool(short)}
    if short and not partial:
        raise IsosimError(f"{len(short)} run(s) short of {budgets[-1]:.3g} rollouts (e.g. "
                          f"{', '.join(f'{k} at {v:.3g}' for k, v in list(short.items())[:3])}); "
                          "rerun when they finish, or pass --partial --out PATH")
    kept = [b for b in budgets if not short_runs(runs, b)]
    if short:
        doc["partial_note"] = (f"PARTIAL: {len(short)} run(s) still short of {budgets[-1]:.3g} rollouts; read at the "
                               f"budgets every run has reached ({', '.join(f'{b:.3g}' for b in kept) or 'none'}); "
                               "not the committed read-out")
        doc["runs_short"] = short
        doc["budgets_left_out"] = [b for b in budgets if b not in kept]
    if len(kept) < 2:
        raise IsosimError(f"fewer than two of the budgets {', '.join(f'{b:.3g}' for b in budgets)} are reached by "
                          "every run: no n*(C) to read")
    doc.update({"budgets": kept, "n_values": sorted(runs), "seeds": sw["seeds"], "b_p": sw["b_p"],
                "readings": measure(runs, kept, n_boot, boot_seed)})
    if manifest is not None:
        doc["predictions"] = score(runs, committed_predictions(manifest, sweep, root))
        if any(x["label"].startswith(LR_AWARE) for x in doc["predictions"]["scored"]):
            doc["bar"] = bar(doc["predictions"]["scored"], [b for b in TABLE_BUDGETS if b in kept])
        if any(x["reads"] == "lr-read" for x in doc["predictions"]["scored"]):
            doc["lr_read_bar"] = lr_acceptance(runs, doc["predictions"]["scored"], [b for b in TABLE_BUDGETS if b in kept])
    if against is not None:
        other = load_sweep(against)["runs"]
        rule, other_rule = lr_rule_of(folder), lr_rule_of(against)
        if rule == other_rule:
            raise IsosimError(f"--against {against}: its runs have the same lr rule as {folder}'s")
        table_at = [b for b in TABLE_BUDGETS if b in kept and not short_runs(other, b)]
        if table_at:
            rules = {rule: runs, other_rule: other}
            doc["rules"] = {"runs": {rule: _rel(folder), other_rule: _rel(against)},
                            **rule_table(dict(sorted(rules.items(), reverse=True)), table_at)}
    doc["bootstrap"] = {"resamples": n_boot, "rng_seed": [boot_seed, "reading index (best 0, final 1)"]}
    return doc


def _floats(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise IsosimError(f"--budgets takes budgets separated by commas, e.g. 1e4,3e4,1e5; got {text!r}") from None
    if len(vals) < 2 or any(v <= 0 for v in vals):
        raise IsosimError(f"--budgets needs at least two positive budgets, got {text!r}")
    return vals


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sweep", default=SWEEP, help=f"the sweep's key in the manifest ({', '.join(SWEEPS)}: each "
                   "names its runs, manifest, read-out and --against)")
    p.add_argument("--runs", default="", help="the sweep's folder of nN_bpB_sS runs (default: the --sweep's)")
    p.add_argument("--budgets", default=",".join(f"{b:g}" for b in BUDGETS))
    p.add_argument("--manifest", default="", help="the predictions to score (default: the --sweep's); 'none': score none")
    p.add_argument("--against", default="", help="another lr rule's sweep of the same learner (default: the --sweep's); "
                   "'none': no rule table")
    p.add_argument("--n-boot", type=int, default=N_BOOT)
    p.add_argument("--boot-seed", type=int, default=BOOT_SEED)
    p.add_argument("--partial", action="store_true", help="read runs still short of the largest budget (needs --out)")
    p.add_argument("--out", default="", help="where to write (default: the --sweep's committed read-out; with "
                   "--partial: required, outside studies/results)")
    a = p.parse_args(argv)
    try:
        preset = SWEEPS.get(a.sweep, {"runs": None, "manifest": None, "out": None, "against": None})
        committed = preset["out"]
        if not a.out and committed is None:
            raise IsosimError(f"--sweep {a.sweep!r} has no committed read-out: pass --out (known: {', '.join(SWEEPS)})")
        out = Path(a.out) if a.out else committed
        if a.partial and (not a.out or out.resolve().is_relative_to(STUDIES.resolve())):
            raise IsosimError(f"--partial writes only to an --out path of your own, never {_rel(committed or COMMITTED)} "
                              "or anything under studies/results")
        if a.n_boot < 100:
            raise IsosimError(f"--n-boot must be at least 100, got {a.n_boot}")
        folder = Path(a.runs) if a.runs else preset["runs"]
        if folder is None or not folder.is_dir():
            raise IsosimError(f"--runs {folder}: no such folder" if folder else f"--sweep {a.sweep!r} needs --runs")
        manifest = None if a.manifest == "none" else Path(a.manifest) if a.manifest else preset["manifest"]
        against = None if a.against == "none" else Path(a.against) if a.against else preset["against"]
        if against is not None and not against.is_dir():
            raise IsosimError(f"--against {against}: no such folder")
        doc = build(folder, _floats(a.budgets), a.partial, manifest, a.sweep, a.n_boot, a.boot_seed, against=against)
    except IsosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    doc["command"] = "python studies/organism/organism_hard_measure.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_json(out, doc)
    report(doc, out)
    return 0


def report(doc: Mapping[str, Any], out: Path) -> None:
    if doc["partial"]:
        print(doc["partial_note"])
    for reading, m in doc["readings"].items():
        table = ", ".join(f"{t['budget']:.0e} {t['n_star']} {t['tie_band']}" for t in m["n_star"])
        s = m["slope"]
        cross = ", ".join(f"{c['n_star']} from {c['budget']:.3g}" for c in m["crossings"]) or "none"
        print(f"{reading}: n* {table}; n* changes: {cross}; slope {s['point']:.3f} octaves/decade "
              f"[{s['interval'][0]:.3f}, {s['interval'][1]:.3f}] ({s['resamples']} seed resamples; "
              f"above 0 in {s['share_above_zero']:.0%})")
    pred = doc.get("predictions")
    if pred:
        for label, per in pred["summary"].items():
            print(f"  {label}: " + "; ".join(f"{r} regret {v['mean_regret']:.4f} ({v['mean_regret_in_se']:.1f} se), "
                                             f"{v['in_tie_band']}/{len(v['budgets'])} in the tie band"
                                             for r, v in per.items()))
        if pred["not_reached"]:
            print(f"  {len(pred['not_reached'])} prediction pick(s) at budgets not reached yet")
    if doc.get("bar"):
        for r in doc["bar"]["rows"]:
            m = r["method"]
            print(f"  bar {r['reading']} {r['budget']:.0e}: lr-aware picks {m['picks']} regret {m['regret']:.4f}, "
                  f"n = 8 {r['fixed n = 8']['regret']:.4f}, cheap leader {r[CHEAP_LEADER]['pick']} "
                  f"{r[CHEAP_LEADER]['regret']:.4f}; se {r['seed_se']:.4f}; meets {r['meets']}, goal {r['goal']}")
    if doc.get("lr_read_bar"):
        for form, per in doc["lr_read_bar"]["summary"].items():
            print(f"  lr-read bar, {form}: " + "; ".join(
                f"{v} {s['no_higher_than_fixed']}/{s['cells']} no higher than n = {doc['lr_read_bar']['fixed_n']}, "
                f"{s['within_1se']}/{s['cells']} within 1 se of a difference, meets {s['meets']}" for v, s in per.items()))
    if doc.get("rules"):
        for reading in rd.READINGS:
            print(f"{reading} reading:")
            print(markdown_table(doc["rules"], reading))
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
