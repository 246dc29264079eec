# %% [markdown]
# # Adaptive choice of n, replayed on the committed organism sweeps
#
# `isosim validate --adaptive` decides from records as they arrive (``isosim.validation.adaptive``). Here the
# same decision code runs over the committed sweeps: a run's records are revealed only up to the
# rollouts the policy asked it to spend. Every seed is replayed on its own (the policy sees one
# seed's runs), at every budget of the sweep's frontier grid from 2e4 rollouts up (25 log-spaced
# budgets from 64 to the sweep's largest, as in ``llm_runs.organism_compare``). Scored per replay:
# chosen n; regret at C = seed-mean val avg@4 of the sweep's best n at C minus that of the chosen
# n (each run's value at C interpolated in ln rollouts between its evaluations); the seed noise =
# standard error of a seed-mean at C (seed-to-seed spread pooled over n); overhead = rollouts on
# runs not chosen / C. Policies: adaptive started at isosim's prediction (the profile-only
# prediction committed before the sweeps ran, ``organism_prediction.json``, where the split has
# one), adaptive started at a spread over the grid, plain successive halving on the same grid (on
# its first-round rungs C/16, C/8, ...: the baseline), the same halving on the adaptive policy's
# rungs (C/32, ...: an extra column, not the baseline), and one run at the predicted n.
# References (not policies; they pay for every run, ``ad.REFERENCES``): the n chosen with every
# grid n run to C/2 or C/4, read at its level or carried to C along its local line, and the seed's
# own best run at C. They bound what any reading of the curves can do before C/2 (or C/4).
#
# Sweeps: ``studies/results/organism/real/SPLIT`` and any ``studies/results/organism_f8/**/SPLIT``
# folder of ``nN_bpB_sS/records.jsonl`` runs (picked up when they land). Run:
# ``python studies/scoring/adaptive_replay.py`` (seconds) -> ``studies/results/adaptive_replay.json``
# (``ISOSIM_STUDY_OUT`` moves the output as for every study; the sweeps are read from here).

# %%
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]  # studies/
sys.path.insert(0, str(ROOT.parent))  # isosim from this tree

from isosim.validation import adaptive as ad  # noqa: E402
from isosim.validation import readings as rd  # noqa: E402
from isosim.validation.scoreboard import unfinished  # noqa: E402
from isosim.files import write_json  # noqa: E402

RESULTS = ROOT / "results"
MIN_BUDGET = 2e4


def find_sweeps(results: Path = RESULTS) -> dict[str, Path]:
    """Folders holding ``n*_bp*_s*/records.jsonl`` runs, named by their path under results/."""
    found = {}
    for base in (results / "organism" / "real", results / "organism_f8"):
        if not base.is_dir():
            continue
        for rec in sorted(base.rglob("n*_bp*_s*/records.jsonl")):
            folder = rec.parent.parent
            found[str(folder.relative_to(results))] = folder
    return found


def prediction_for(name: str, results: Path = RESULTS):
    """isosim's committed profile-only prediction n*(C) for an organism split, or for a set-size
    sweep (``organism_f8/prediction.json``, keyed by sweep); None elsewhere."""
    split = Path(name).name
    if name.startswith("organism/real/"):
        path = results / "organism_prediction.json"
    elif name.startswith("organism_f8/"):
        path = results / "organism_f8" / "prediction.json"
    else:
        return None
    if not path.is_file():
        return None
    pred = json.loads(path.read_text()).get(split)
    if not pred:
        return None
    b, n = np.log(pred["budgets"]), pred["n_star"]
    return lambda budget: int(n[int(np.argmin(np.abs(b - math.log(budget))))])


def with_best_reading(sw: dict, rows: list[dict]) -> list[dict]:
    """Each row's regret is in the final reading (value at C); add the best reading's (best
    validated value up to C, :mod:`isosim.validation.readings`) under ``best_reading``."""
    truths: dict[float, dict] = {}
    for r in rows:
        b = r["budget"]
        if b not in truths:
            grid = ad.grid_at(list(sw["runs"]), b, sw["b_p"])
            truths[b] = rd.truth_at({n: sw["runs"][n] for n in grid}, b, "best")
        r["reading"] = "final"
        r["best_reading"] = rd.regret(truths[b], r["chosen"])
    return rows


def summarise(rows: list[dict]) -> dict:
    out = {}
    for pol in sorted({r["policy"] for r in rows}):
        rs = [r for r in rows if r["policy"] == pol]
        out[pol] = {"replays": len(rs), "within_2se": sum(r["within_2se"] for r in rs),
                    "mean_regret": float(np.mean([r["regret"] for r in rs])),
                    "max_regret_over_se": float(np.max([r["regret_over_se"] for r in rs])),
                    "mean_overhead": float(np.mean([r["overhead"] for r in rs])),
                    "max_overhead": float(np.max([r["overhead"] for r in rs])),
                    "in_tie_band": sum(r["chosen"] in r["tie_band"] for r in rs),
                    # the sweep-level reading: mean regret against twice the mean seed se
                    "mean_seed_se": float(np.mean([r["seed_se"] for r in rs])),
                    "mean_regret_within_2_mean_se": bool(np.mean([r["regret"] for r in rs])
                                                         <= 2 * np.mean([r["seed_se"] for r in rs]) + 1e-12),
                    "reading": "final (value at C)"}
        if all("best_reading" in r for r in rs):
            out[pol]["best_reading"] = {"mean_regret": float(np.mean([r["best_reading"]["regret"] for r in rs])),
                                        "within_2se": sum(r["best_reading"]["within_2se"] for r in rs),
                                        "in_tie_band": sum(r["best_reading"]["in_tie_band"] for r in rs)}
    return out


def live_check(results: Path, sweeps: dict[str, Path]) -> list[dict]:
    """Each committed live ``--adaptive`` search (``adaptive_live*/``, or one folder per rule below
    it) against the sweep of its setting at its budget: the sweep's best n and tie band there, and
    whether the chosen n is in the band. The sweep is ``organism/real/SPLIT``, or
    ``organism_f8/SPLIT-SIZE`` when the runs kept SIZE training problems."""
    out = []
    for res_path in sorted(results.glob("adaptive_live*/**/result.json")):
        folder = res_path.parent
        res = json.loads(res_path.read_text())
        cfg = json.loads((folder / "plan.json").read_text())["runs"][0]["config"]
        split, size = Path(cfg["data"]).stem, cfg.get("max_train_problems")
        name = f"organism_f8/{split}-{size}" if size else f"organism/real/{split}"
        if name not in sweeps:
            continue
        truth = ad.truth_at(ad.load_sweep(sweeps[name])["runs"], res["budget"])
        out.append({"folder": str(folder.relative_to(results)), "sweep": name, "rule": res["settings"].get("policy", "adaptive"),
                    "budget": res["budget"], "chosen": res["chosen"], "overhead": res["overhead"],
                    "final": res["final"], "spent": res["spent"], "sweep_best": truth["best"],
                    "sweep_tie_band": truth["tie_band"], "sweep_seed_se": truth["seed_se"], "sweep_mean": truth["mean"],
                    "chosen_in_tie_band": res["chosen"] in truth["tie_band"],
                    "regret": truth["mean"][str(truth["best"])] - truth["mean"][str(res["chosen"])]})
    return out


def main(results: Path = RESULTS, out: Path | None = None) -> dict:
    sweeps = find_sweeps(results)
    report: dict = {"rules": ad.__doc__.split("\n\n")[1].strip() if ad.__doc__ else "", "min_budget": MIN_BUDGET,
                    "sweeps": {}, "not_scored_yet": {}, "rows": [], "reference_rows": []}
    for name, folder in sweeps.items():
        short = unfinished(folder)  # a committed cheap part: listed, not scored
        if short:
            report["not_scored_yet"][name] = f"{len(short)} run(s) short of their budget"
            continue
        sw = ad.load_sweep(folder)
        grid = ad.default_budgets(sw["max_budget"])
        budgets = [b for b in grid if b >= MIN_BUDGET]
        rows = with_best_reading(sw, ad.score_sweep(sw, budgets, predicted=prediction_for(name, results)))
        for r in rows:
            r["sweep"] = name
        refs = with_best_reading(sw, ad.score_references(sw, budgets))
        for r in refs:
            r["sweep"] = name
        report["sweeps"][name] = {"n": sorted(sw["runs"]), "seeds": sw["seeds"], "b_p": sw["b_p"],
                                  "budgets": budgets, "eval_samples": sw["eval_samples"],
                                  "summary": summarise(rows), "references": summarise(refs)}
        report["rows"] += rows
        report["reference_rows"] += refs
    report["summary"] = summarise(report["rows"])
    report["references"] = summarise(report["reference_rows"]) if report["reference_rows"] else {}
    report["live"] = live_check(results, sweeps)
    write_json(out or results / "adaptive_replay.json", report)
    return report


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # common.py
    from common import setup  # noqa: E402

    # (seconds at any scale: --quick writes the same numbers under results/quick/)
    _quick, _scale, _fig_dir, json_path = setup("adaptive_replay", "adaptive choice of n, replayed on the sweeps")
    rep = main(out=json_path)
    for name, s in list(rep["sweeps"].items()) + [("all", {"summary": rep["summary"], "references": rep["references"]})]:
        print(name)
        for pol, v in list(s["summary"].items()) + [("ref: " + k, v) for k, v in s["references"].items()]:
            print(f"  {pol:40s} regret<=2se {v['within_2se']}/{v['replays']}  tie band {v['in_tie_band']}/"
                  f"{v['replays']}  mean regret {v['mean_regret']:.4f} (2 x mean se {2 * v['mean_seed_se']:.4f})  "
                  f"max regret/se {v['max_regret_over_se']:.2f}  overhead mean {v['mean_overhead']:.2f} "
                  f"max {v['max_overhead']:.2f}  [final reading]"
                  + (f"  best reading: regret<=2se {v['best_reading']['within_2se']}/{v['replays']} mean regret "
                     f"{v['best_reading']['mean_regret']:.4f}" if "best_reading" in v else ""))
    for live in rep["live"]:
        print("live:", {k: live[k] for k in ("folder", "rule", "budget", "chosen", "overhead", "sweep_best",
                                             "sweep_tie_band", "chosen_in_tie_band", "regret")})
