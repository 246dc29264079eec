"""The plane's document (``studies/results/plane.json``): every block recomputed from the records.

:func:`document` builds the rows (:func:`isosim.validation.plane.build`), adds the methods chosen
leave-one-sweep-out (:func:`loso_reader_rows`), and summarises them per sweep, over the six 2e5
sweeps (``overall``), over the held-out long sweeps (``held_out``) and over all of them
(``all_sweeps``: the six's replays and the long sweeps' above 2e5), and, apart, over the second
organism's sweeps (``second_learner``: every method, its hindsight line and the frozen method's
verdicts; empty until its runs are finished) and its sweep at one lr for every n (``constant_lr``,
the same block), in both readings, with the
best fixed n in hindsight beside each block (a reference line, not a method), the frozen method's
verdicts, the replays it misses, the picks committed before the long sweeps ran (``prospective``),
and the leave-one-sweep-out audit of every method (``loso``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isosim.validation import plane as pl
from isosim.validation import plane_methods as pm
from isosim.validation import readings as rd

READERS = ("lc-sigmoid", "steps", "steps-near", "steps-offset", "steps-sigmoid", "sbi", "sbi-band", "sbi-band1")
"""the cheap-part readers on the plane"""
ISOSIM_READERS = ("steps", "steps-near", "steps-offset", "steps-sigmoid", "sbi", "sbi-band", "sbi-band1")
"""the isosim readers the freeze rule chose among (studies/LOG.md, 2026-12-04, the plane)"""
COMPARE = ("cheap leader @0.05", "successive halving (C/16)", "successive halving (C/32)", "fixed n = 8")
APART = tuple(pl.APART_BLOCKS.values())
"""the blocks of the second learner's sweeps (the sqrt rule; one lr for every n), scored apart"""
LOSO_SHARE = 0.05
LOSO_READER = "isosim reader, chosen without the scored sweep @0.05"
TIE = 0.0002
"""the freeze rule's tie: readers within this mean regret of the lowest go to the lower overhead"""

AUDIT = {
    "constants (fixed n, paper's n)": ("nothing", "yes"),
    "cheap leader, successive halving, hyperband, lines, adaptive (spread)":
        ("the replayed seed's runs, revealed up to what the rule spends; nothing fitted", "yes"),
    "lc-sigmoid, steps, steps-near, steps-offset, steps-sigmoid":
        ("curves fitted to the replayed seed's cheap part alone", "yes"),
    "sbi, sbi-band, sbi-band1, adaptive (sbi)":
        ("k-nearest neighbours over a bank of simulated sweeps (sbi_bank.json: simulator settings drawn from a "
         "prior, profiles profile_t06.json = base-model pass rates, or the hard / easy presets; no measured record) "
         "and the replayed seed's cheap part; k, the band and the choice of sbi-band as the frozen method were made "
         "on the six 2e5 sweeps' plane",
         "fitting yes; the selection in-sample on the six 2e5 sweeps and their long twins (prospective only on the "
         "long sweeps' budgets above 2e5); its leave-one-sweep-out counterpart: '" + LOSO_READER + "'"),
    "profile-only, adaptive (default)":
        ("the simulator's hard / easy presets (tuned on the paper's findings, round 6) and the base profile", "yes"),
    "isosim predict":
        ("extrapolate:shift on the sweep's own cheap part (every n and seed to 5 % of its top budget); the method "
         "chosen by the scoreboard's rule over the six 2e5 sweeps", "fitting yes; the choice re-made without the "
         "scored sweep (and its twin) is the same on every sweep (see isosim_predict_choice)"),
    "dynamics fit":
        ("isosim calibrate --dynamics on the sweep's own cheap part (every n and seed to 5 %), the presets", "yes"),
    "simfit (every calibration; the frozen one: " + "simfit (no gap) n=8 @5% wide, stay)":
        ("the sweep's cheap run(s) of the calibration, a bank simulated on its setting (base profile, training and "
         "validation sizes, B_p, warm-up; no record), a prior and tie band from the other sweeps' full fits (the "
         "scored sweep and its twin left out)",
         "fitting yes; the choice of the frozen calibration among twelve was made after scoring all twelve on the "
         "nine sweeps (in-sample); prospective only on the second learner (organism_hard)"),
    "simfit lr-aware (the frozen calibration read under the runs' lr rule)":
        ("what the frozen simfit calibration reads, and the runs' lr rule (config.json lr_rule); under the sqrt "
         "rule it is the frozen calibration, pick for pick; under another rule the step's exponent shifts by the "
         "rule's and a decay for the excess walk is fitted to the same cheap run",
         "fitting yes; the mechanism was chosen after the constant-lr sweep's cheap part (every n to 5e4) and its "
         "pilot had been seen, and frozen before any of its records past 5e4 (isosim/predict/simfit_lr.py)"),
    "the adaptive rules (rungs, windows, thresholds)":
        ("revised after replays on these sweeps (studies/LOG.md, 2026-12-04, second round)", "design in-sample"),
}


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return pl.summarise(list(rows))


def frozen(results: Path) -> dict:
    path = results / "plane_method.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def verdicts(overall: Mapping[str, Any], method: str) -> dict:
    """Does ``method`` dominate each of ``COMPARE`` (and the cheap leader at its own share) in each reading?"""
    if method not in overall:
        return {}
    share = method.split("@")[-1] if "@" in method else None
    others = list(COMPARE) + ([f"cheap leader @{share}"] if share and f"cheap leader @{share}" not in COMPARE else [])
    return {f"{method} vs {b}": {r: pl.dominates(overall[method], overall[b], r) for r in rd.READINGS}
            for b in others if b in overall}


def prospective(results: Path, scored: set[str]) -> dict:
    """The picks committed before the long sweeps passed their cheap part
    (``results/plane_predictions_long.json``: the frozen method and the cheap leader, each from both
    seeds' cheap parts), scored at their budget in both readings on every long sweep that is done."""
    from isosim.validation.adaptive import load_sweep

    path = results / "plane_predictions_long.json"
    if not path.is_file():
        return {}
    out = {}
    for key, preds in json.loads(path.read_text())["sweeps"].items():
        name = f"{pl.LONG}/{pl.LONG_SWEEPS[key]}" if key in pl.LONG_SWEEPS else None
        if name not in scored:
            continue
        runs = load_sweep(results / name)["runs"]
        entry = {}
        for label, p in preds.items():
            truths = {r: rd.truth_at(runs, p["budget"], r) for r in rd.READINGS}
            entry[label] = {"pick": p["pick"], "budget": p["budget"],
                            **{r: {**rd.regret(t, p["pick"]), "best_n": t["best"], "tie_band": t["tie_band"]}
                               for r, t in truths.items()}}
        out[name] = entry
    return out


def choose_reader(rows: Sequence[Mapping[str, Any]], share: float = LOSO_SHARE) -> tuple[str, dict[str, Any]]:
    """The freeze rule on ``rows``: among the isosim readers at ``share``, the lowest mean best-reading
    regret; readers within :data:`TIE` of it go to the lower overhead (then the lower regret)."""
    tag = f" @{share:g}"
    labels = sorted({r["method"] for r in rows if r["method"].split(tag)[0] in ISOSIM_READERS and tag in r["method"]})
    s = summarise([r for r in rows if r["method"] in labels])
    low = min(v[rd.HEADLINE]["mean_regret"] for v in s.values())
    tied = [m for m in labels if s[m][rd.HEADLINE]["mean_regret"] <= low + TIE + 1e-12]
    best = min(tied, key=lambda m: (round(s[m]["mean_overhead"], 12), s[m][rd.HEADLINE]["mean_regret"], m))
    return best, {m: {"mean_regret": s[m][rd.HEADLINE]["mean_regret"], "mean_overhead": s[m]["mean_overhead"]} for m in tied}


def loso_reader_rows(doc: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict], dict]:
    """For each sweep, the freeze rule applied to the six 2e5 sweeps' rows without it and its twin;
    the chosen reader's rows on that sweep, relabelled :data:`LOSO_READER`."""
    six = {k for k, v in doc["sweeps"].items() if not v["held_out"] and not pl.apart(k)}
    out, chosen = [], {}
    for name in doc["sweeps"]:
        training = set(pm.loso_training(name, {k: None for k in six}))
        label, tied = choose_reader([r for r in rows if r["sweep"] in training])
        chosen[name] = {"reader": label, "trained_on": sorted(training), "tied": tied}
        out += [{**r, "method": LOSO_READER} for r in rows if r["sweep"] == name and r["method"] == label]
    return out, chosen


def isosim_predict_choice(results: Path, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The scoreboard's rule for ``isosim predict``'s method, re-made per sweep without it (and its
    twin), against the method its committed picks used."""
    from isosim.validation.scoreboard import ELIGIBLE, choose

    path = results / "scoreboard.json"
    if not path.is_file():
        return {}
    board = json.loads(path.read_text())
    keys = {f"{Path(v['runs']).parent.name}/{Path(v['runs']).name}": k for k, v in board["sweeps"].items()}
    used_long = {}
    cal = results / pl.LONG / "prediction_calibrated.json"
    if cal.is_file():
        used_long = {k: v.get("method") for k, v in json.loads(cal.read_text()).items()}
    out = {}
    for name in [k for k in doc["sweeps"] if not pl.apart(k)]:  # no isosim predict pick on the second learner
        twin = pm.TWINS.get(name) or {v: k for k, v in pm.TWINS.items()}.get(name)
        drop = {keys.get("/".join(Path(x).parts[-2:])) for x in (name, twin) if x}
        train = [k for k in board["sweeps"] if k not in drop]
        scores = {}
        for m in ELIGIBLE:
            ms = board["method_sweeps"].get(m, {})
            if all(k in ms and ms[k]["regret"] is not None for k in train):
                scores[m] = {"sweeps": len(train), "mean_regret_top": float(np.mean([ms[k]["regret"] for k in train])),
                             "octaves_max_scored": max((ms[k]["octaves_max"] or 0.0) for k in train),
                             "mean_regret_scored": float(np.mean([ms[k]["regret_mean"] for k in train
                                                                  if ms[k]["regret_mean"] is not None]))}
        committed = used_long.get(Path(name).name) if pl.held_out(name) else board["kept_method"]
        loso = choose(scores, len(train))
        out[name] = {"committed": committed, "loso_choice": loso, "same": loso == committed}
    return out


def hindsight_blocks(replays: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    return {r: pm.hindsight([s for s in replays if s["sweep"] in names], r) for r in rd.READINGS}


def document(results: Path, readers: tuple[str, ...] = READERS, stored: Mapping[str, Any] | None = None,
             methods: Mapping[str, pm.Method] | None = None) -> dict[str, Any]:
    """Every block of ``plane.json`` from the records under ``results`` (``stored``: a committed
    ``picks`` block, its cheap-part readers' picks taken instead of refitted)."""
    doc = pl.build(results, readers=readers, stored=stored, methods=methods)
    rows, seen = doc.pop("rows"), doc.pop("replays")
    loso_rows, loso_chosen = loso_reader_rows(doc, rows)
    rows = rows + loso_rows
    six = [k for k, v in doc["sweeps"].items() if not v["held_out"] and not pl.apart(k)]
    long = [k for k, v in doc["sweeps"].items() if v["held_out"]]
    for name, sw in doc["sweeps"].items():
        sw["summary"] = summarise([r for r in rows if r["sweep"] == name])
        sw["hindsight"] = hindsight_blocks(seen, [name])
    doc["overall"] = summarise([r for r in rows if r["sweep"] in six])
    doc["held_out"] = summarise([r for r in rows if r["sweep"] in long]) if long else {}
    doc["all_sweeps"] = summarise([r for r in rows if r["sweep"] in six + long])
    doc["hindsight"] = {"overall": hindsight_blocks(seen, six), "held_out": hindsight_blocks(seen, long) if long else {},
                        "all_sweeps": hindsight_blocks(seen, six + long)}
    registered = pm.REGISTRY if methods is None else methods
    doc["constants"] = {name: {"note": m.note, "not_in_grid": sorted(k for k, v in doc["sweeps"].items()
                                                                     if name.startswith("fixed n = ")
                                                                     and int(name.split("= ")[1]) not in v["grid"])}
                        for name, m in registered.items() if m.kind == "constant"}
    doc["registered"] = {name: {"kind": m.kind, "share": m.share, "pool_seeds": m.pool_seeds,
                                "fitted_on_other_sweeps": m.fit is not None, "note": m.note}
                         for name, m in registered.items()}
    doc["loso"] = {"rule": "a method scored on a sweep reads nothing of it but the cheap data it is allowed; "
                           "what it fits or is chosen on comes from the other sweeps, the scored sweep's twin (the "
                           "same runs, continued to 2e6) left out too",
                   "twins": dict(pm.TWINS),
                   "audit": {k: {"reads": v[0], "loso": v[1]} for k, v in AUDIT.items()},
                   "reader_choice": loso_chosen, "isosim_predict_choice": isosim_predict_choice(results, doc)}
    chosen = frozen(results).get("method_label")
    doc["isosim_method"] = chosen
    doc["dominance"] = verdicts(doc["overall"], chosen) if chosen else {}
    if chosen and doc["held_out"]:
        held = [r for r in rows if r["sweep"] in long]
        doc["held_out_dominance"] = verdicts(doc["held_out"], chosen)
        doc["held_out_covers"] = {reading: pl.covers(held, chosen, reading) for reading in rd.READINGS}
    doc["prospective"] = prospective(results, set(long))
    for block in APART:
        doc[block] = apart_summary(rows, seen, [k for k in doc["sweeps"] if pl.apart_block(k) == block], chosen)
    doc["simfit"] = simfit_bar(doc, rows)
    return doc


SIMFIT_BAR = ("fixed n = 8", "cheap leader @0.05")
"""the bar the calibrated simulator is held to: no higher mean regret than each, at overhead <= 0.05"""


def simfit_bar(doc: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per block (the six 2e5 sweeps, the held-out long ones, all nine; the second learner's two
    apart) and reading: does each simfit calibration (and the frozen one read under the runs' lr
    rule, :data:`isosim.validation.plane_methods.SIMFIT_LR`) with overhead <= 0.05 have mean regret
    no higher than :data:`SIMFIT_BAR`'s? With the replays on which it picked another n than 8 (a
    method that always picks 8 is the constant)."""
    from isosim.predict import lr_read as lrr

    out: dict[str, Any] = {"frozen": lrr.FROZEN, "frozen_at": lrr.frozen()["commit"], "compared_with": list(SIMFIT_BAR),
                           "max_overhead": 0.05, "blocks": {}}

    def in_block(name: str, block: str) -> bool:
        if block in APART or pl.apart(name):
            return block == pl.apart_block(name)
        return block == "all_sweeps" or doc["sweeps"][name]["held_out"] == (block == "held_out")

    for block in ("overall", "held_out", "all_sweeps", *APART):
        summary = (doc.get(block) or {}) if block not in APART else (doc.get(block) or {}).get("summary", {})
        entry = {}
        for label in [*pm.CALIBRATIONS, pm.SIMFIT_LR]:
            if label not in summary or any(b not in summary for b in SIMFIT_BAR):
                continue
            v = summary[label]
            scored = [r for r in rows if r["method"] == label and in_block(r["sweep"], block)]
            entry[label] = {"overhead": v["mean_overhead"],
                            "not_8": {r: int(sum(x[r]["chosen"] != 8 for x in scored)) for r in rd.READINGS}}
            for reading in rd.READINGS:
                reg = v[reading]["mean_regret"]
                vs = {b: reg - summary[b][reading]["mean_regret"] for b in SIMFIT_BAR}
                entry[label][reading] = {"mean_regret": reg, "minus": vs,
                                         "meets_bar": bool(v["mean_overhead"] <= 0.05 + 1e-12 and all(x <= 1e-12 for x in vs.values()))}
        out["blocks"][block] = entry
    return out


def apart_summary(rows: Sequence[Mapping[str, Any]], seen: Sequence[Mapping[str, Any]], names: Sequence[str],
                  chosen: str | None) -> dict[str, Any]:
    """Finished sweeps scored apart from the first learner's (the second organism's, at one lr rule):
    every method's summary in both readings, the best fixed n in hindsight, the frozen method's
    verdicts (empty: none done)."""
    if not names:
        return {}
    summary = summarise([r for r in rows if r["sweep"] in names])
    return {"sweeps": sorted(names), "summary": summary, "hindsight": hindsight_blocks(seen, names),
            "dominance": verdicts(summary, chosen) if chosen else {}}
