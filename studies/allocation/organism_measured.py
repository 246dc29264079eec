# %% [markdown]
# # Per-problem allocation on the organism: what the real runs measured
# The simulator's prediction (`results/organism_allocation/prediction.json`, committed before any
# of these runs) named its best rule per setting. This script reads the real runs of that rule
# (`results/organism_allocation/<setting>/<rule>_nN_bp16_sS/`, `llm_runs` with `--allocation`, the
# lean path) and the committed uniform runs of the same settings (same model digest, data, seeds,
# budget and evaluation points; only the allocation differs), and writes
# `results/organism_allocation/measured.json`:
#
# * `gain`: the rule's validation avg@4 at the budget minus uniform's, paired by seed, with its
#   standard error over the seeds (`se`), as the prediction reads it;
# * `ratio`: the compute uniform needs to reach the rule's reward at the budget, over the budget,
#   read off uniform's seed-mean curve (`isosim.predict.allocation.crossing`). The uniform runs end
#   at the budget, so a rule that beats uniform's whole curve reads `None` (> 1);
# * `rule_compute_to_uniform_top`: the compute the rule needs to reach uniform's reward at the
#   budget, over the budget (the goal: at most 0.5 on one setting), beside
#   `uniform_compute_to_own_top`, uniform's own (below 1 where its curve peaks before the budget,
#   which makes the goal easy to meet without any gain) and both curves' peaks (rollouts, reward);
# * whether the prediction had the gain's sign, and its size within 2 measured se.

# %%
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import ROOT, write_json  # noqa: E402

from isosim.predict.allocation import crossing  # noqa: E402

started = time.time()
RES = ROOT / "results"
OUT = RES / "organism_allocation"
SEEDS = (0, 1)
SETTINGS = {  # prediction key -> (uniform runs' folder, n, f8 setting of the rule's runs)
    "easy-n4": (RES / "organism" / "real" / "easy", 4, "easy-all"),
    "hard-128-t06-n32": (RES / "organism_f8" / "hard-128", 32, "hard-128-t06"),
}
METRIC = "val_avg"


def records(folder: Path) -> list[dict]:
    path = folder / "records.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path}: missing (run the organism allocation runs first)")
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def curve(runs: list[list[dict]]) -> tuple[np.ndarray, np.ndarray]:
    """Seed-mean metric against rollouts (the runs share their evaluation points)."""
    points = [tuple(r["rollouts"] for r in rows) for rows in runs]
    if len(set(points)) != 1:
        raise SystemExit("the runs do not share their evaluation points")
    c = np.array(points[0], dtype=float)
    return c, np.mean([[r[METRIC] for r in rows] for rows in runs], axis=0)


def _rel(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT.parent))


# %%
prediction = json.loads((OUT / "prediction.json").read_text())["settings"]
measured = {}
for name, (uniform_dir, n, setting) in SETTINGS.items():
    pred = prediction[name]["predicted"]
    rule = pred["rule"]
    uni_dirs = [uniform_dir / f"n{n}_bp16_s{s}" for s in SEEDS]
    rule_dirs = [OUT / setting / f"{rule}_n{n}_bp16_s{s}" for s in SEEDS]
    uni, got = [records(d) for d in uni_dirs], [records(d) for d in rule_dirs]
    for rows in got:
        if rows[-1]["allocation"] != rule:
            raise SystemExit(f"{rule_dirs[0].parent}: records of allocation {rows[-1]['allocation']!r}, not {rule!r}")
    budget = float(uni[0][-1]["rollouts"])
    top_u = np.array([rows[-1][METRIC] for rows in uni])
    top_r = np.array([rows[-1][METRIC] for rows in got])
    if not all(rows[-1]["rollouts"] == budget for rows in (*uni, *got)):
        raise SystemExit(f"{name}: the runs end at different rollouts")
    d = top_r - top_u
    gain, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
    cu, ru = curve(uni)
    cr, rr = curve(got)
    hit = crossing(cu, ru, float(top_r.mean()))
    reach = crossing(cr, rr, float(top_u.mean()))
    entry = {
        "rule": rule, "n": n, "b_p": 16, "budget": budget, "seeds": list(SEEDS), "metric": METRIC,
        "uniform_runs": [_rel(p) for p in uni_dirs], "rule_runs": [_rel(p) for p in rule_dirs],
        "uniform_reward": float(top_u.mean()), "rule_reward": float(top_r.mean()),
        "per_seed": {str(s): {"uniform": float(a), "rule": float(b), "gain": float(b - a)}
                     for s, a, b in zip(SEEDS, top_u, top_r)},
        "gain": gain, "se": se,
        "ratio": None if hit is None else hit / budget,
        "ratio_note": "None: uniform's curve (which ends at the budget) never reaches the rule's reward",
        "rule_compute_to_uniform_top": None if reach is None else reach / budget,
        "half_compute_goal_met": bool(reach is not None and reach <= 0.5 * budget),
        # uniform reaches its own reward at the budget this early where its curve peaks before it
        "uniform_compute_to_own_top": crossing(cu, ru, float(top_u.mean())) / budget,
        "peaks": {"uniform": [float(cu[np.argmax(ru)]), float(ru.max())],
                  "rule": [float(cr[np.argmax(rr)]), float(rr.max())]},
        "per_problem_n": {"min": min(r.get("alloc_n_min") or n for rows in got for r in rows),
                          "max": max(r.get("alloc_n_max") or n for rows in got for r in rows)},
        "predicted": {k: pred[k] for k in ("rule", "gain", "se", "ratio", "significant")},
        "sign_agrees": bool(np.sign(gain) == np.sign(pred["gain"])),
        "size_within_2se": bool(abs(gain - pred["gain"]) <= 2 * se),
    }
    measured[name] = entry
    ratio = "> 1 (uniform never reaches it by the budget)" if hit is None else f"{hit / budget:.3g}"
    print(f"{name}: {rule} {entry['rule_reward']:.4f} vs uniform {entry['uniform_reward']:.4f}: gain {gain:+.4f} "
          f"(se {se:.4f}; predicted {pred['gain']:+.4f}, se {pred['se']:.4f}); ratio {ratio} (predicted "
          f"{pred['ratio']}); the rule reaches uniform's top reward at "
          f"{'never' if reach is None else f'{reach / budget:.3g}'} x the budget")

write_json(OUT / "measured.json", {"settings": measured, "note": (
    "real organism runs (llm_runs, lean path, B_p 16, 2e5 rollouts, 300 validation problems, avg@4 from 8 "
    "samples): the rule the prediction named against the committed uniform runs, paired by seed; se over "
    "2 seeds (one degree of freedom: a rough scale, not a test)")}, started)
