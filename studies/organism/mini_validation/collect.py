"""Copy the mini-validation's small outputs from the work folder into studies/organism/mini_validation/.

``python studies/organism/mini_validation/collect.py runs/mini_validation``: the profile and its
histogram, the recommendation, the plan, each run's records and metrics, the generated
``validation.md`` / ``validation.json`` and every figure (PNG), and ``results/progress.json``
(steps done per run, last validation point), which also covers a study that did not finish.
Checkpoints stay behind.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def main(work: str) -> None:
    w = Path(work)
    (HERE / "figures").mkdir(exist_ok=True)
    (HERE / "results").mkdir(exist_ok=True)
    for src in (w / "profile.json", w / "recommend.json", w / "validate" / "plan.json",
                w / "validate" / "validation.json"):
        if src.is_file():
            shutil.copy2(src, HERE / "results" / src.name)
    progress = {}
    plan = w / "validate" / "plan.json"
    for run in (json.loads(plan.read_text())["runs"] if plan.is_file() else []):
        d = Path(run["dir"])
        for name in ("records.jsonl", "metrics.jsonl", "train.log"):
            if (d / name).is_file():
                shutil.copy2(d / name, HERE / "results" / f"{d.name}.{name}")
        rows, recs = _jsonl(d / "metrics.jsonl"), _jsonl(d / "records.jsonl")
        progress[run["name"]] = {
            "n": run["n"], "b_p": run["b_p"], "steps_planned": run["steps"], "steps_done": len(rows),
            "rollouts": rows[-1]["rollouts"] if rows else 0, "wall_s": rows[-1]["wall_s"] if rows else 0.0,
            "train_reward_per_step": [r["reward/mean"] for r in rows],
            "evals": [{k: r[k] for k in ("step", "rollouts", "val_avg", "val_best", "val_worst")} for r in recs],
        }
    (HERE / "results" / "progress.json").write_text(json.dumps(progress, indent=1))
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
