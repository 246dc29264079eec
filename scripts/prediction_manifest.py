"""The machine-checked record of each committed organism prediction: what it read, and when.

``python scripts/prediction_manifest.py`` writes two manifests, one per family of sweeps:

- ``studies/results/organism_f8/manifest.json``: the F8 sweeps (``organism_f8/<sweep>/``) and their
  predictions in ``organism_f8/prediction{,_calibrated,_dynamics}.json``;
- ``studies/results/organism/manifest.json``: the easy and hard Q1 sweeps
  (``organism/real/{easy,hard}/``) and ``organism_prediction{,_calibrated,_calibrated_distance,
  _extrapolated}.json``;
- ``studies/results/organism_long/manifest.json``: the long-budget sweeps whose records to 2e6
  are committed (``organism_long/<sweep>/``) and ``organism_long/prediction{,_calibrated}.json``;
- ``studies/results/organism_hard/manifest.json``: the second organism's (``--model organism-hard``)
  sweep ``organism_hard/hard-128/`` and ``organism_hard/prediction{,_cheap,_simfit}.json``; its ``status``
  says where its cheap part was committed;
- ``studies/results/organism_hard_const/manifest.json``: the same organism and recipe at a constant
  learning rate (``organism_hard_const/hard-128/``, once committed) and ``organism_hard_const/prediction{,_cheap,_simfit_lr}.json``.
- ``studies/results/organism_const8/manifest.json``: the first organism at one lr for every n, set where
  the sqrt rule puts n = 8 (``organism_const8/hard-256/``) and ``organism_const8/prediction{_cheap,_lr}.json``.
- under ``other_predictions``, the prediction files that are not frontier entries keyed by sweep
  (:data:`OTHER`): the plane's committed picks for the long sweeps (``plane_predictions_long.json``,
  in the long manifest), the whole-grid dynamics fits (``organism/prediction_dynamics_grid.json``,
  in the organism manifest) and the allocation rules' predicted gains
  (``organism_allocation/prediction.json``, in ``organism_allocation/manifest.json``).
  Every ``*prediction*.json`` under ``studies/results`` is in one manifest (a test lists them).

Per sweep: its runs folder and the commit that holds its full records (the last one that touched
the folder). Per prediction: the file and key, the sha256 of the entry (canonical JSON) and of
the file, what it read (``profile only``: the pass rates, no record of the sweep; ``isosim
predict`` or ``dynamics fit``: the sweep's records at or below ``cheap_budget`` rollouts, of the
runs of ``n_values``), the sha256 of those cheap records per run (the records.jsonl lines up to
the first one past the budget, as :func:`isosim.predict.dynamics.read_cheap_runs` reads them),
the first commit holding the prediction's numbers (under any key of the file: a sweep renamed
later keeps its first commit), and whether that commit comes before the records' commit in the
history (``prospective``) or after (a retrodiction). ``tests/test_prediction_records.py`` checks
every field against the files and the git history, and recomputes the predictions that take
seconds (``isosim predict``) from a copy of the records whose lines past the budget are corrupted.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from isosim.validation.plane import LONG_SWEEPS  # noqa: E402  (the long sweeps, the ones the plane holds out)

RESULTS = "studies/results"

FAMILIES = {
    f"{RESULTS}/organism_f8/manifest.json": {
        "sweeps": {s: f"{RESULTS}/organism_f8/{s}" for s in ("hard-128", "hard-512", "hard-1238-t06", "hard-256")},
        "files": [f"{RESULTS}/organism_f8/prediction.json", f"{RESULTS}/organism_f8/prediction_calibrated.json",
                  f"{RESULTS}/organism_f8/prediction_dynamics.json"],
        "keys": {},
    },
    f"{RESULTS}/organism/manifest.json": {
        "sweeps": {"easy": f"{RESULTS}/organism/real/easy", "hard": f"{RESULTS}/organism/real/hard"},
        "files": [f"{RESULTS}/organism_prediction.json", f"{RESULTS}/organism_prediction_calibrated.json",
                  f"{RESULTS}/organism_prediction_calibrated_distance.json",
                  f"{RESULTS}/organism_prediction_extrapolated.json"],
        "keys": {"easy": ("easy", "easy-3200"), "hard": ("hard", "hard-1238")},
    },
    f"{RESULTS}/organism_long/manifest.json": {
        "sweeps": {s: f"{RESULTS}/organism_long/{s}" for s in LONG_SWEEPS.values()},
        "files": [f"{RESULTS}/organism_long/prediction.json", f"{RESULTS}/organism_long/prediction_calibrated.json"],
        "keys": {},
    },
    f"{RESULTS}/organism_hard/manifest.json": {
        "sweeps": {"organism-hard-128": f"{RESULTS}/organism_hard/hard-128"},
        "files": [f"{RESULTS}/organism_hard/prediction.json", f"{RESULTS}/organism_hard/prediction_cheap.json",
                  f"{RESULTS}/organism_hard/prediction_simfit.json"],
        "keys": {},
        "status": {"organism-hard-128": (
            "complete: every run to 1e6 rollouts (the records commit). Its cheap part (every run to its first step "
            "past 5e4 rollouts) was committed first, at 38160eb, with the cheap readers' picks made from it; "
            "prediction.json came before any run, prediction_simfit.json after the cheap part and before any record "
            "past it")},
    },
    f"{RESULTS}/organism_hard_const/manifest.json": {
        "sweeps": {"organism-hard-128-const": f"{RESULTS}/organism_hard_const/hard-128"},
        "files": [f"{RESULTS}/organism_hard_const/prediction.json", f"{RESULTS}/organism_hard_const/prediction_cheap.json",
                  f"{RESULTS}/organism_hard_const/prediction_simfit_lr.json"],
        "keys": {},
        "status": {"organism-hard-128-const": (
            "complete: every run to 1e6 rollouts (the records commit). The second organism at a constant lr (every n "
            "at 3e-4), the lead of its pilot (studies/LOG.md, 2026-12-06). prediction.json came before any run; the "
            "cheap part (every run paused at its first step past 5e4 rollouts) was committed with the cheap readers' "
            "picks, rerun and recommitted (2b41ccd: every value equal, the wall-clock fields wall_s and eval_s aside; "
            "the cheap readers' entry recomputed unchanged); then prediction_simfit_lr.json (the lr-aware method, "
            "frozen) before any record past 5e4. Each committed cheap records file is a byte prefix of its finished one")},
    },
    f"{RESULTS}/organism_const8/manifest.json": {
        "sweeps": {"organism-hard-256-const8": f"{RESULTS}/organism_const8/hard-256"},
        "files": [f"{RESULTS}/organism_const8/prediction_cheap.json", f"{RESULTS}/organism_const8/prediction_lr.json"],
        "keys": {},
        "status": {"organism-hard-256-const8": (
            "the first organism on 256 problems of its hard split never swept (train_subset_seed 20261207), every n at "
            "one lr, 1.0607e-4: the sqrt rule's lr for n = 8. Its cheap part (every run paused at its first step past "
            "5e4 rollouts) was committed with the cheap readers' picks and prediction_lr.json (the method frozen at "
            "07a27e7 and the lr-read model in both forms, frozen with the lr grid's calibration before the cheap part "
            "was read) before any record past 5e4")},
    },
}
"""manifest path -> its sweeps (name -> runs folder), the prediction files, and the keys a sweep has
in them when they are not its name"""

FAMILIES[f"{RESULTS}/organism_allocation/manifest.json"] = {"sweeps": {}, "files": [], "keys": {}}


def _plane_long(doc: dict) -> list[tuple[str, str, Any]]:
    return [(f"{RESULTS}/organism_long/{LONG_SWEEPS[setting]}", f"{setting}: {label}",
             {k: e.get(k) for k in ("pick", "tie_band", "n")})
            for setting, methods in doc["sweeps"].items() for label, e in methods.items()]


def _dynamics_grid(doc: dict) -> list[tuple[str, str, Any]]:
    return [(f"{RESULTS}/organism/real/{key}", f"{key}: dynamics fit on the whole grid",
             {k: doc[key].get(k) for k in CORE}) for key in ("easy", "hard") if key in doc]


ALLOCATION_RUNS = {"easy-n4": "easy-all", "hard-128-t06-n32": "hard-128-t06"}


def _allocation(doc: dict) -> list[tuple[str, str, Any]]:
    return [(f"{RESULTS}/organism_allocation/{ALLOCATION_RUNS[key]}", f"{key}: allocation rules' gain",
             {k: e.get(k) for k in ("profile", "calibrated", "predicted")}) for key, e in doc["settings"].items()]


OTHER = {
    f"{RESULTS}/organism_long/manifest.json": {f"{RESULTS}/plane_predictions_long.json": _plane_long},
    f"{RESULTS}/organism/manifest.json": {f"{RESULTS}/organism/prediction_dynamics_grid.json": _dynamics_grid},
    f"{RESULTS}/organism_allocation/manifest.json": {f"{RESULTS}/organism_allocation/prediction.json": _allocation},
}
"""manifest path -> prediction files that are not frontier entries keyed by sweep (picks of the plane's
methods, the whole-grid dynamics fits, the allocation rules' predicted gains), each with the function
that splits it into (runs folder, label, the numbers that make the prediction)"""

NOTES = {
    ("organism_const8/prediction_lr.json", "organism-hard-256-const8"): (
        "what was known: the lr-read model's code was committed (2932c86) before any record of this sweep existed "
        "and its calibration (740f9ed: the lr grid, on organism_f8/hard-128's problems) before its cheap part was "
        "read, except that a progress check at 01:56 UTC printed n = 2's values at 3.3e3 rollouts (.507 / .407). "
        "None of this problem set's runs existed before; 58 of its 256 training problems are in organism_f8/hard-256's "
        "subset and 31 in hard-128's (sqrt rule, to 2e5; their n = 8 runs had this lr, on other problems); the grid "
        "showed the sqrt rule's lr over-stepping n = 8 and n = 64 at 2e5 on hard-128 (studies/LOG.md, 2026-12-07)"),
    ("organism_const8/prediction_cheap.json", "organism-hard-256-const8"): (
        "the cheap readers as frozen (sbi-band, level), from the cheap part alone (studies/LOG.md, 2026-12-07)"),
    ("organism_hard_const/prediction_simfit_lr.json", "organism-hard-128-const"): (
        "prospective for this folder's records only (committed before any of them past 5e4 existed; studies/LOG.md, "
        "2026-12-06, fourth session), not blind: n = 64's whole trajectory at this lr (3e-4) to 1e6 was committed "
        "before the method, in the sqrt-rule sweep (c9d3d38, organism_hard/hard-128: at B = 1024 both rules give "
        "3e-4; the same seeds, every evaluation equal to this folder's), and the constant-lr pilot (748744e, "
        "organism_hard/pilot_constant_lr/) held n = 4 to 1e5 and n = 64 to 2e5 at this lr, both seeds (equal to "
        "this folder's at every step both evaluate). The method reads each seed's n = 8 run to 5 % of C only, but "
        "its mechanism (a decay for the walk beyond the sqrt rule) and its prior width (DECAY_SD 1.0) were chosen "
        "after the cheap part of every n (to 5e4) and that pilot had been seen; it picks 64 in 9 of its 12 "
        "per-seed picks, 8 in the other 3"),
    ("organism_f8/prediction.json", "hard-128"): (
        "not blind: the pilot (LOG table in 94768c1, records in 6bb1e87, studies/results/organism/pilot_f8/) "
        "ran seed 0 of n = 2, 8, 32, 128 on this setting to 1e5 rollouts and chose the setting; its values "
        "equal the sweep's at every matched point, so part of the sweep's seed-0 curves was seen before "
        "any hard-128 prediction"),
    ("organism_f8/prediction_calibrated.json", "hard-128"): "not blind: the pilot chose the setting (see the profile-only entry)",
    ("organism_f8/prediction_dynamics.json", "hard-128"): "not blind: the pilot chose the setting (see the profile-only entry)",
    ("organism_f8/prediction_dynamics.json", "hard-1238-t06"): (
        "committed at 05:34:36 UTC while the rest of the sweep was already running from its cheap part "
        "(05:30-06:15 UTC, studies/LOG.md), before any record past 1e4 was committed; the fit read the "
        "committed copy of the cheap part (runs_cut_at_limit 2, the cheap part's own)"),
    ("organism_f8/prediction_dynamics.json", "hard-256"): (
        "committed at 11:42:17 UTC while the rest of the sweep was already running from its cheap part "
        "(11:31-11:57 UTC, studies/LOG.md), before any record past 1e4 was committed; the fit read the "
        "committed copy of the cheap part (runs_cut_at_limit 2, the cheap part's own)"),
    ("organism_long/prediction.json", "hard-128-long"): (
        "the long runs repeat the F8 sweep's training for their first 2e5 rollouts (same weights, seeds and "
        "settings; studies/LOG.md), so each n's curve to 2e5 was known before this prediction; only 2e5-2e6 was unseen"),
    ("organism_long/prediction_calibrated.json", "hard-128-long"): (
        "the long runs repeat the F8 sweep's training for their first 2e5 rollouts (same weights, seeds and "
        "settings; studies/LOG.md), so each n's curve to 2e5 was known before this prediction; only 2e5-2e6 was unseen"),
}
"""(file under studies/results, key) -> what the commit order alone does not show (from studies/LOG.md)"""

CORE = ("budgets", "n_star", "n_tol", "n_sat", "n_sat_ci", "picks")
"""the fields that make a prediction: its first commit is the first holding these numbers (``picks``:
the cheap readers' entries, :mod:`llm_runs.organism.cheap_picks`)"""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_sha256(entry: Any) -> str:
    """sha256 of an entry's canonical JSON (sorted keys, no spaces)."""
    return sha256_bytes(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode())


def cheap_lines(text: str, budget: float) -> list[str]:
    """The lines of a records.jsonl a reader limited to ``budget`` rollouts uses: every non-blank
    line up to the first one past the budget (``read_cheap_runs``'s rule)."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if float(json.loads(line)["rollouts"]) > budget * (1 + 1e-12):
            break
        out.append(line)
    return out


def cheap_records_sha256(folder: Path, budget: float, n_values: list[int] | None) -> dict[str, str]:
    """run id -> sha256 of its cheap lines (each with its newline), for the runs of ``n_values``
    (all when None); empty for a budget of 0 (nothing read)."""
    if budget <= 0:
        return {}
    out = {}
    for rec in sorted(folder.glob("*/records.jsonl")):
        cfg = json.loads((rec.parent / "config.json").read_text())
        if n_values and cfg.get("n") not in n_values:
            continue
        out[rec.parent.name] = sha256_bytes("".join(ln + "\n" for ln in cheap_lines(rec.read_text(), budget)).encode())
    return out


def reads(entry: dict, root: Path = ROOT) -> dict[str, Any]:
    """What a prediction entry read of its sweep: kind, cheap budget, n values, the fit's file."""
    if str(entry.get("method", "")).startswith("extrapolate"):
        cheap = entry["cheap"]
        return {"reads": "isosim predict", "cheap_budget": float(cheap["max_rollouts"]), "n_values": None,
                "recompute": {"method": entry["method"].split(":", 1)[1], "max_rollouts": float(cheap["max_rollouts"]),
                              "budget": float(entry["max_rollouts"]), "n_boot": 200}}
    if entry.get("method") == "cheap readers":  # llm_runs.organism.cheap_picks: each C read from its share of it
        return {"reads": "cheap readers", "cheap_budget": float(max(entry["cheap_budgets"])), "n_values": None,
                "recompute": None}
    if str(entry.get("method", "")).startswith("lr-read"):  # studies/scoring/const8_predict.py: every n's cheap part
        return {"reads": "lr-read", "cheap_budget": float(max(entry["cheap_budgets"])), "n_values": None,
                "recompute": None}
    if str(entry.get("method", "")).startswith("simfit"):  # studies/scoring/simfit_organism_hard.py: its cheap runs' n
        return {"reads": "simfit", "cheap_budget": float(max(entry["cheap_budgets"])),
                "n_values": sorted(int(n) for n in entry["cheap_runs"]), "recompute": None}
    if entry.get("dynamics_profile"):
        fit_path = entry["dynamics_profile"]
        fit = json.loads((root / fit_path).read_text())["fit"]
        n_values = sorted(int(n) for n in fit["n_values"])
        return {"reads": "dynamics fit", "cheap_budget": float(fit["max_rollouts"]), "fit": fit_path,
                "fit_sha256": sha256_bytes((root / fit_path).read_bytes()),
                "n_values": None if n_values == sorted(entry["n_values"]) else n_values, "recompute": None}
    return {"reads": "profile only", "cheap_budget": 0.0, "n_values": None, "recompute": None}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def commit_info(commit: str) -> dict[str, str]:
    sha, date = git("show", "-s", "--format=%H %cI", commit).split()
    return {"commit": sha, "date": date}


def first_commit_with(file: str, entry: dict) -> str:
    """The first commit in which ``file`` holds an entry (under any key) with ``entry``'s numbers."""
    core = {k: entry.get(k) for k in CORE}
    for commit in git("log", "--reverse", "--format=%H", "--", file).split():
        try:
            doc = json.loads(git("show", f"{commit}:{file}"))
        except (subprocess.CalledProcessError, ValueError):
            continue
        if any(isinstance(v, dict) and {k: v.get(k) for k in CORE} == core for v in doc.values()):
            return commit
    raise SystemExit(f"{file}: no commit holds the current entry's numbers")


def first_commit_of_unit(file: str, units: Any, label: str, core: Any) -> str:
    """The first commit in which ``file`` holds the unit ``label`` with the numbers ``core``."""
    for commit in git("log", "--reverse", "--format=%H", "--", file).split():
        try:
            doc = json.loads(git("show", f"{commit}:{file}"))
            found = {lab: c for _, lab, c in units(doc)}
        except (subprocess.CalledProcessError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if found.get(label) == core:
            return commit
    raise SystemExit(f"{file}: no commit holds the current numbers of {label}")


def other_predictions(path: str) -> list[dict[str, Any]]:
    """The manifest's records of :data:`OTHER`'s files: per unit, its numbers' sha256, the first
    commit holding them, its records' commit and whether it came first (prospective)."""
    out = []
    for f, units in OTHER.get(path, {}).items():
        for runs, label, core in units(json.loads((ROOT / f).read_text())):
            records = commit_info(git("log", "-1", "--format=%H", "--", runs))
            made = commit_info(first_commit_of_unit(f, units, label, core))
            prospective = made["commit"] != records["commit"] and is_ancestor(made["commit"], records["commit"])
            out.append({"file": f, "label": label, "runs": runs, "entry_sha256": entry_sha256(core),
                        "records_commit": records, "prediction_commit": made, "prospective": prospective})
    return out


def is_ancestor(a: str, b: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=ROOT).returncode == 0


def build(family: dict, path: str = "") -> dict[str, Any]:
    """A family's manifest. A prediction file not written yet is left out; a sweep with no committed
    record yet has ``records_commit`` None and its predictions ``prospective`` None (nothing to be
    before yet: the test checks that no record of it is committed)."""
    present = [f for f in family["files"] if (ROOT / f).is_file()]
    files = {f: sha256_bytes((ROOT / f).read_bytes()) for f in [*present, *OTHER.get(path, {})]}
    sweeps = {}
    for name, folder in family["sweeps"].items():
        last = git("log", "-1", "--format=%H", "--", folder)
        records = commit_info(last) if last else None
        preds = []
        for f in present:
            doc = json.loads((ROOT / f).read_text())
            key = next((k for k in family["keys"].get(name, (name,)) if k in doc), None)
            if key is None:
                continue
            entry = doc[key]
            r = reads(entry)
            made = commit_info(first_commit_with(f, entry))
            prospective = None if records is None else (
                made["commit"] != records["commit"] and is_ancestor(made["commit"], records["commit"]))
            preds.append({"file": f, "key": key, "entry_sha256": entry_sha256(entry), **r,
                          "cheap_records_sha256": cheap_records_sha256(ROOT / folder, r["cheap_budget"], r["n_values"]),
                          "prediction_commit": made, "prospective": prospective,
                          **({"note": NOTES[(f[len(RESULTS) + 1:], key)]} if (f[len(RESULTS) + 1:], key) in NOTES else {})})
        sweeps[name] = {"runs": folder, "records_commit": records, "predictions": preds,
                        **({"status": family["status"][name]} if name in family.get("status", {}) else {})}
    return {"about": __doc__.split("\n\n")[0], "files": files, "sweeps": sweeps,
            "other_predictions": other_predictions(path)}


def main() -> None:
    from isosim.files import write_json

    for path, family in FAMILIES.items():
        doc = build(family, path)
        write_json(ROOT / path, doc, indent=1)
        n = sum(len(s["predictions"]) for s in doc["sweeps"].values())
        print(f"wrote {path}: {len(doc['sweeps'])} sweeps, {n} predictions")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
