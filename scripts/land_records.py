"""Land a finished sweep's records over its committed cheap part: every check first, then the copy.

A sweep whose cheap part was committed before its predictions (each run's ``records.jsonl`` cut at
the cheap budget, and its ``config.json``) trains on to its budget in a folder of its own. When it
has finished, this copies each run's whole ``records.jsonl`` over the committed one, and only if,
for every committed run:

- its run folder exists under ``--runs`` with a ``config.json`` byte-equal to the committed one;
- the committed ``records.jsonl`` is a byte prefix of the run's (nothing committed was rewritten);
- the run's last line is whole (ends with a newline) and reaches ``--budget`` (within one
  update step, ``b_p x n`` rollouts: runs stop at whole steps);

and no run folder under ``--runs`` is missing from the committed ones. Anything else is one line
each and exit 2, with nothing copied.

    python scripts/land_records.py --runs /work/runs/organism_const8/runs/hard-256-t06 \\
        --into studies/results/organism_const8/hard-256 --budget 1e6 [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


def _last_record(text: bytes) -> dict | None:
    for line in reversed(text.decode("utf-8").splitlines()):
        if line.strip():
            return json.loads(line)
    return None


def problems(runs: Path, into: Path, budget: float) -> tuple[list[str], list[str]]:
    """(what is wrong, one line each; the run names that pass)."""
    bad, ok = [], []
    committed = sorted(p.name for p in into.iterdir() if (p / "records.jsonl").is_file()) if into.is_dir() else []
    if not committed:
        return [f"{into}: no committed run folders (nN_bpB_sS/records.jsonl)"], []
    trained = sorted(p.name for p in runs.iterdir() if (p / "records.jsonl").is_file()) if runs.is_dir() else []
    if not trained:
        return [f"{runs}: no run folders with records"], []
    for extra in sorted(set(trained) - set(committed)):
        bad.append(f"{extra}: trained under {runs} but not among the committed runs")
    for name in committed:
        src, dst = runs / name, into / name
        if not (src / "records.jsonl").is_file():
            bad.append(f"{name}: no records under {runs}")
            continue
        if (dst / "config.json").is_file() and (
                not (src / "config.json").is_file()
                or (src / "config.json").read_bytes() != (dst / "config.json").read_bytes()):
            bad.append(f"{name}: its config.json differs from the committed one")
            continue
        whole, cut = (src / "records.jsonl").read_bytes(), (dst / "records.jsonl").read_bytes()
        if not whole.startswith(cut):
            bad.append(f"{name}: the committed records.jsonl is not a prefix of the run's (a committed line was rewritten)")
            continue
        if not whole.endswith(b"\n"):
            bad.append(f"{name}: its last records line is cut off (still writing, or stopped mid-write)")
            continue
        try:
            last = _last_record(whole)
        except ValueError:
            bad.append(f"{name}: a records line is not JSON")
            continue
        step = float(last.get("n", 1)) * float(last.get("b_p", 1)) if last else 0.0
        reached = float(last.get("rollouts", 0.0)) if last else 0.0
        if reached + step < budget:
            bad.append(f"{name}: at {reached:,.0f} of {budget:,.0f} rollouts (not finished)")
            continue
        ok.append(name)
    return bad, ok


def land(runs: Path, into: Path, names: list[str]) -> None:
    """Each run's whole records.jsonl over the committed one (written beside, then moved in)."""
    for name in names:
        dst = into / name / "records.jsonl"
        fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=".records-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write((runs / name / "records.jsonl").read_bytes())
        os.replace(tmp, dst)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", required=True, help="the folder the sweep trained in (its nN_bpB_sS run folders)")
    ap.add_argument("--into", required=True, help="the committed cheap part (the same run folders)")
    ap.add_argument("--budget", type=float, required=True, help="the rollouts every run must have reached")
    ap.add_argument("--check", action="store_true", help="check only; copy nothing")
    a = ap.parse_args(argv)
    if not a.budget > 0:
        print(f"error: --budget must be positive, got {a.budget}", file=sys.stderr)
        return 2
    bad, ok = problems(Path(a.runs), Path(a.into), a.budget)
    if bad:
        for line in bad:
            print(f"error: {line}", file=sys.stderr)
        print(f"nothing copied: {len(bad)} problem(s), {len(ok)} run(s) ready", file=sys.stderr)
        return 2
    if a.check:
        print(f"{len(ok)} run(s) ready: each committed file a byte prefix of its finished run's, every run at "
              f"{a.budget:g} rollouts")
        return 0
    land(Path(a.runs), Path(a.into), ok)
    print(f"landed {len(ok)} run(s) into {a.into}: each committed file was a byte prefix of its finished run's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
