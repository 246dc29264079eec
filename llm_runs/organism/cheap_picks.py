"""The cheap-part readers' picks for a sweep's top budgets, each read from its own share of them.

    python -m llm_runs.organism.cheap_picks --runs CHEAP_RUNS --budgets 1e5,3e5,1e6 --share 0.05 \\
        --key SWEEP --out prediction_cheap.json

For each budget C the cheap part is cut to what a sweep run to ``share`` C has written (each
``records.jsonl`` up to its first record past ``share`` C, the rule of
``scripts/prediction_manifest.py``'s ``cheap_lines``) and read by ``isosim recommend --runs`` in
both readings with two methods: the frozen plane method (``sbi-band``, studies/results/plane_method.json)
and ``recommend``'s default, the cheap runs' leader (``level``). The entry, under ``--key``
(other keys of the file kept), holds each method's pick and tie band per reading and budget
(``picks``, ``tie_bands``) and every ``recommend`` answer in full (``detail``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError

METHODS = {"frozen (sbi-band)": "sbi-band", "cheap leader (level)": "level"}
"""label -> ``isosim recommend --method`` (the labels of ``plane_predictions_long.json``)"""
READINGS = ("best", "final")


def cut_lines(text: str, limit: float) -> list[str]:
    """A records.jsonl's non-blank lines up to the first one past ``limit`` rollouts."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if float(json.loads(line)["rollouts"]) > limit * (1 + 1e-12):
            break
        out.append(line)
    return out


def cut_copy(folder: Path, dest: Path, limit: float) -> int:
    """Copy every run of ``folder`` (``*/records.jsonl``, ``config.json``) cut at ``limit`` rollouts
    into ``dest``; returns how many runs."""
    runs = sorted(Path(folder).glob("*/records.jsonl"))
    if not runs:
        raise IsosimError(f"{folder}: no run folders with records.jsonl")
    for rec in runs:
        out = dest / rec.parent.name
        out.mkdir(parents=True)
        out.joinpath("records.jsonl").write_text("".join(ln + "\n" for ln in cut_lines(rec.read_text(), limit)))
        if (rec.parent / "config.json").is_file():
            out.joinpath("config.json").write_bytes((rec.parent / "config.json").read_bytes())
    return len(runs)


def picks(folder: Path, budgets: list[float], share: float) -> dict[str, Any]:
    """Every method's pick per reading at each budget, each from the cheap part cut at ``share`` C."""
    from isosim.predict.from_runs import recommend_from_runs

    detail: dict[str, dict[str, list]] = {label: {r: [] for r in READINGS} for label in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        for budget in budgets:
            cut = Path(tmp) / f"{budget:.0f}"
            cut_copy(folder, cut, share * budget)
            for label, method in METHODS.items():
                for reading in READINGS:
                    res = recommend_from_runs(cut, budget, method=method, reading=reading)
                    res["runs"] = f"{folder} cut at {share * budget:.6g} rollouts"
                    detail[label][reading].append(res)
    return {
        "method": "cheap readers", "share": share, "budgets": [float(b) for b in budgets],
        "cheap_budgets": [float(share * b) for b in budgets],
        "picks": {lb: {r: [d["pick"] for d in v] for r, v in by.items()} for lb, by in detail.items()},
        "tie_bands": {lb: {r: [d["tie_band"] for d in v] for r, v in by.items()} for lb, by in detail.items()},
        "commands": {lb: "isosim recommend --runs CHEAP_RUNS_CUT_AT_SHARE_C --budget C --reading R --json"
                         + (f" --method {m}" if m != "level" else "") for lb, m in METHODS.items()},
        "detail": detail,
    }


def main(argv: list[str] | None = None) -> None:
    from isosim.files import write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, required=True, help="the sweep's cheap part (nN_bpB_sS/records.jsonl)")
    ap.add_argument("--budgets", required=True, help="top budgets C, comma-separated (e.g. 1e5,3e5,1e6)")
    ap.add_argument("--share", type=float, default=0.05, help="the cheap part read for C: share x C rollouts")
    ap.add_argument("--key", required=True, help="the sweep's key in --out")
    ap.add_argument("--setting", default="", help="a line saying what the sweep is (kept in the entry)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        try:
            budgets = [float(x) for x in a.budgets.split(",") if x.strip()]
        except ValueError:
            raise IsosimError(f"--budgets takes numbers separated by commas, got {a.budgets!r}") from None
        if not budgets or any(not b > 0 for b in budgets) or not 0 < a.share < 1:
            raise IsosimError("--budgets must be positive and --share in (0, 1)")
        entry = {**({"setting": a.setting} if a.setting else {}), **picks(a.runs, budgets, a.share)}
    except IsosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    doc = json.loads(a.out.read_text()) if a.out.is_file() else {}
    doc[a.key] = entry
    write_json(a.out, dict(sorted(doc.items())), indent=1)
    for label, by in entry["picks"].items():
        print(f"{label}: " + "; ".join(f"{r} " + ", ".join(f"{b:.0e} {p}" for b, p in zip(budgets, v)) for r, v in by.items()))


if __name__ == "__main__":
    main()
