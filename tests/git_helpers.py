"""Reading the repository's git history from a test (imported by name: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def history_missing() -> str | None:
    """Why the git history cannot be read here, or None."""
    try:
        res = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return "git is not installed"
    if res.returncode:
        return "no git repository (a source copy without .git)"
    if res.stdout.strip() == "true":
        return "a shallow clone: the commits of the predictions are not in it"
    return None
