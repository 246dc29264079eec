"""Copy the mini-validation's small outputs from the work folder into studies/mini_validation/.

``python studies/mini_validation/collect.py runs/mini_validation``: the profile and its
histogram, the recommendation, the plan, each run's records and metrics, the generated
``validation.md`` / ``validation.json`` and every figure (PNG). Checkpoints stay behind.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(work: str) -> None:
    w = Path(work)
    (HERE / "figures").mkdir(exist_ok=True)
    (HERE / "results").mkdir(exist_ok=True)
    for src in (w / "profile.json", w / "recommend.json", w / "validate" / "plan.json",
                w / "validate" / "validation.json"):
        if src.is_file():
            shutil.copy2(src, HERE / "results" / src.name)
    for run in sorted((w / "validate" / "runs").glob("*")):
        for name in ("records.jsonl", "metrics.jsonl"):
            if (run / name).is_file():
                shutil.copy2(run / name, HERE / "results" / f"{run.name}.{name}")
    for png in [w / "profile_hist.png", *(w / "validate" / "figures").glob("*.png"),
                *(w / "validate" / "analysis").glob("*.png")]:
        if png.is_file():
            shutil.copy2(png, HERE / "figures" / png.name)
    md = w / "validate" / "validation.md"
    if md.is_file():
        text = md.read_text()
        for prefix in ("figures/", "analysis/"):  # figures now sit in ./figures
            text = text.replace(f"]({prefix}", "](figures/")
        (HERE / "validation.md").write_text(text)
    print(f"collected into {HERE}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/mini_validation")
