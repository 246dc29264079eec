"""The organism's measured Q1 frontier, and its distance from the committed prediction.

    python -m llm_runs.organism.compare --runs easy=DIR --runs hard=DIR \
        --prediction studies/results/organism_prediction.json \
        --measured studies/results/organism_measured.json \
        --comparison studies/results/organism_comparison.json

Each ``DIR`` is an ``isosim validate`` output folder (or any folder ``isosim analyze`` reads) that
holds the real runs of one split. The runs are read with the frontier analysis the prediction was
read with (``isosim.frontier.analysis.analyze``, the same budget grid, bootstrap and seed), and written in
the prediction's schema. The comparison is per budget of the prediction's grid:
``|log2 n*_predicted - log2 n*_measured|`` in octaves (median and maximum over all budgets, and over
the budgets where both the simulator and the real runs had learned something), the same for
``n_tol`` (the smallest n within the tie tolerance of the frontier), and whether the fitted
``n_sat`` intervals overlap. Budgets of the two files are matched within a relative tolerance of
1e-6. The *scored* budgets (``error_learning_budgets``) are those where both the simulator and
the real runs learned something and ``n`` is free (more than one ``n`` of the grid has taken a
step: at the first budgets only the smallest ``n`` can, so ``n*`` agrees by construction). An
``n_sat`` interval that spans the whole grid says nothing: the overlap is then ``null`` and
``n_sat_ci_informative`` says which side carried no information.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from isosim import records
from isosim.errors import IsosimError
from isosim.files import write_json
from isosim.frontier import analysis
from isosim.integrations import load_runs
from isosim.frontier.analysis import frontier_summary
from llm_runs.organism.predict import final_stats

SPLITS = ("easy", "hard")


def measure(df: Any, *, budgets: list[float] | None = None, n_boot: int = 200, seed: int = 0) -> dict[str, Any]:
    """Measured frontier of one split's runs, in the prediction's schema (plus what the runs were)."""
    df = records.normalize(df)
    if budgets is not None:  # the prediction's grid, clipped to what the runs reached
        xs = df["rollouts"].to_numpy(float)
        lo, hi = float(xs[xs > 0].min()), float(xs.max())
        budgets = [b for b in budgets if lo * (1 - 1e-9) <= b <= hi * (1 + analysis.REACH_RTOL)]
    res = analysis.analyze(df, metric="val_avg", budgets=budgets, n_boot=n_boot, seed=seed)
    out = frontier_summary(res)
    split = analysis.metric_split(df, ("val_best", "val_worst"), budgets=out["budgets"])
    out["n_star_best"] = [int(v) for v in split["val_best"]["n_star"]]
    out["n_star_worst"] = [int(v) for v in split["val_worst"]["n_star"]]
    out["frontier_reward"] = [float(v) for v in res["reward"]]
    first = df.sort_values("step").groupby("run_id").head(1)
    last = df.sort_values("step").groupby("run_id").tail(1)
    out["base_val_avg"] = float(first["val_avg"].mean())
    finals = last.groupby("n")[["val_avg", "val_best", "val_worst"]].mean()
    for col in finals:
        out[f"final_{col}"] = {str(int(n)): float(v) for n, v in finals[col].items()}
    out["seed_sd"] = final_stats(df)["seed_sd"]
    out["n_values"] = sorted(int(n) for n in df["n"].unique())
    out["seeds"] = sorted(int(s) for s in df["seed"].unique())
    out["max_rollouts"] = float(df["budget"].max()) if "budget" in df else float(df["rollouts"].max())
    out["b_p"] = sorted(int(b) for b in df["b_p"].unique())
    for col in ("train_size", "val_size", "recipe", "lr", "kl_coef", "entropy_coef", "eval_n", "temperature"):
        if col in df:
            vals = sorted({v for v in df[col].dropna().tolist()}, key=str)
            out[col] = vals[0] if len(vals) == 1 else vals
    out["runs"] = int(df["run_id"].nunique())
    return out


def octaves(a: list[int | None], b: list[int | None]) -> list[float | None]:
    return [None if x is None or y is None else abs(math.log2(x) - math.log2(y)) for x, y in zip(a, b)]


def _stats(errs: list[float | None]) -> dict[str, Any]:
    v = [e for e in errs if e is not None]
    if not v:
        return {"median": None, "max": None, "budgets": 0}
    return {"median": float(np.median(v)), "max": float(np.max(v)), "budgets": len(v)}


BUDGET_RTOL = 1e-6
"""two budgets are the same when they agree within this relative tolerance"""


def match_budget(budgets: list[float], b: float, rtol: float = BUDGET_RTOL) -> int | None:
    """Index of the budget in ``budgets`` within ``rtol`` (relative) of ``b``, or None."""
    hits = [i for i, x in enumerate(budgets) if abs(float(x) - b) <= rtol * max(abs(float(x)), abs(b))]
    return hits[0] if hits else None


def free_budgets(budgets: list[float], n_values: list[int], b_p: int | list[int]) -> list[bool]:
    """Whether more than one n of the grid has taken a step (B_p * n rollouts) by each budget."""
    bp = min(b_p) if isinstance(b_p, list) else int(b_p)
    steps = sorted(int(n) * bp for n in n_values)
    second = steps[1] if len(steps) > 1 else math.inf
    return [float(b) >= second * (1 - 1e-9) for b in budgets]


def spans_grid(ci: list[float] | None, n_values: list[int]) -> bool:
    """An interval that covers the whole n grid (within 1e-6): no information about n_sat."""
    if not ci or not n_values:
        return False
    return ci[0] <= min(n_values) * (1 + BUDGET_RTOL) and ci[1] >= max(n_values) * (1 - BUDGET_RTOL)


def compare(pred: dict[str, Any], meas: dict[str, Any]) -> dict[str, Any]:
    """Error of the prediction per budget of the measured grid (budgets matched within 1e-6)."""
    idx = [(match_budget(pred["budgets"], float(b)), j) for j, b in enumerate(meas["budgets"])]
    idx = [(i, j) for i, j in idx if i is not None]
    if not idx:
        raise IsosimError("the prediction and the measurement share no budget")
    budgets = [meas["budgets"][j] for _, j in idx]
    n_pred = [pred["n_star"][i] for i, _ in idx]
    n_meas = [meas["n_star"][j] for _, j in idx]
    err = octaves(n_pred, n_meas)
    tol_err = octaves([pred["n_tol"][i] for i, _ in idx], [meas["n_tol"][j] for _, j in idx])
    grid = meas.get("n_values") or pred.get("n_values") or []
    free = free_budgets(budgets, grid, meas.get("b_p") or pred.get("b_p") or 1) if grid else [True] * len(idx)
    both = [bool(pred["learning"][i]) and bool(meas["learning"][j]) for i, j in idx]
    scored = [b and f for b, f in zip(both, free)]
    p_ci, m_ci = pred.get("n_sat_ci"), meas.get("n_sat_ci")
    informative = {"predicted": not spans_grid(p_ci, grid), "measured": not spans_grid(m_ci, grid)}
    overlap = (None if not (p_ci and m_ci) or not all(informative.values())
               else bool(max(p_ci[0], m_ci[0]) <= min(p_ci[1], m_ci[1])))
    return {
        "budgets": budgets, "n_star_predicted": n_pred, "n_star_measured": n_meas,
        "error_octaves": err, "error": _stats(err),
        "error_learning_budgets": _stats([e for e, ok in zip(err, scored) if ok]),
        "learning_both": both, "n_free": free, "scored": scored,
        "n_tol_error_octaves": tol_err, "n_tol_error": _stats(tol_err),
        "n_sat_predicted": pred.get("n_sat"), "n_sat_ci_predicted": p_ci,
        "n_sat_measured": meas.get("n_sat"), "n_sat_ci_measured": m_ci, "n_sat_ci_overlap": overlap,
        "n_sat_ci_informative": informative,
        "saturated_predicted": pred.get("saturated"), "at_floor_predicted": pred.get("at_floor"),
        "saturated_measured": meas.get("saturated"), "at_floor_measured": meas.get("at_floor"),
        "n_tie_hi_predicted": [pred["n_tie_hi"][i] for i, _ in idx] if pred.get("n_tie_hi") else None,
        "n_tie_hi_measured": [meas["n_tie_hi"][j] for _, j in idx] if meas.get("n_tie_hi") else None,
    }


def final_model(run_dir: Path, base_model: str, dest: Path) -> Path:
    """A Hugging Face folder of a run's last checkpoint: the base model's files, its trained weights."""
    import shutil

    ckpt = run_dir / "checkpoint" / "model.safetensors"
    if not ckpt.is_file():
        raise IsosimError(f"{run_dir}: no checkpoint/model.safetensors (run not finished?)")
    dest.mkdir(parents=True, exist_ok=True)
    for f in Path(base_model).iterdir():
        if f.is_file() and f.suffix != ".safetensors":
            shutil.copy2(f, dest / f.name)
    shutil.copy2(ckpt, dest / "model.safetensors")
    return dest


def final_eval(folder: Path, measured: dict[str, Any], work: Path, k: int = 16, seed: int = 0,
               log: Any = print) -> dict[str, Any]:
    """pass@1 (avg@k) of every validation problem for the base model's calibration ids and for the
    final models of the smallest n and of the measured n* at the top budget (seed ``seed``)."""
    from llm_runs.config import parse_args
    from llm_runs.launch.calibrate import CalibrateSettings, calibrate
    from llm_runs.training.train import load_data

    runs = {}
    for cfg_path in sorted(Path(folder).glob("runs/*/config.json")):
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        runs[(int(cfg["n"]), int(cfg["seed"]))] = (cfg_path.parent, cfg)
    if not runs:
        raise IsosimError(f"{folder}: no runs/*/config.json")
    picks = sorted({min(n for n, _ in runs), int(measured["n_star"][-1])})
    run0, _ = runs[(picks[0], seed)]
    _, val = load_data(parse_args(["--config", str(run0 / "config.json")]))
    work.mkdir(parents=True, exist_ok=True)
    val_file = work / "val.jsonl"
    val_file.write_text("".join(json.dumps({"id": p.id, "problem": p.problem, "answer": p.answer}) + "\n"
                                for p in val), encoding="utf-8")
    after = {}
    for n in picks:
        run_dir, cfg = runs[(n, seed)]
        model = final_model(run_dir, cfg["model"], work / f"model_n{n}")
        st = CalibrateSettings(model=str(model), data=str(val_file), k=k, max_new_tokens=cfg["max_new_tokens"],
                               temperature=cfg["temperature"], instruction=cfg["instruction"],
                               prompt_template=cfg["prompt_template"], answer_fallback=cfg["answer_fallback"],
                               batch_size=4096, seed=seed, precision="fp32")
        calibrate(st, out=work / f"profile_n{n}.json", log=log)
        prof = json.loads((work / f"profile_n{n}.json").read_text(encoding="utf-8"))
        rate = dict(zip(prof["ids"], prof["rates"]))
        after[f"n={n}"] = [float(rate[p.id]) for p in val]
    return {"val_ids": [p.id for p in val], "k": k, "seed": seed, "after": after}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", action="append", required=True, metavar="SPLIT=DIR",
                    help="the real runs of a split (repeat per split)")
    ap.add_argument("--prediction", type=Path, default=Path("studies/results/organism_prediction.json"))
    ap.add_argument("--measured", type=Path, default=Path("studies/results/organism_measured.json"))
    ap.add_argument("--comparison", type=Path, default=Path("studies/results/organism_comparison.json"))
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--final-eval", type=Path, default=None,
                    help="also re-evaluate final models at k = 16 and write their pass@1 here")
    ap.add_argument("--work", type=Path, default=Path("runs/organism_compare"))
    args = ap.parse_args(argv)
    try:
        try:
            pred = json.loads(args.prediction.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IsosimError(f"{args.prediction}: cannot read the prediction ({exc})") from None
        measured, comparison, finals = {}, {}, {}
        for item in args.runs:
            split, sep, folder = item.partition("=")
            if not sep or split not in pred:
                raise IsosimError(f"--runs wants SPLIT=DIR with SPLIT one of {sorted(pred)}, got {item!r}")
            df, _ = load_runs(folder)
            measured[split] = measure(df, budgets=pred[split]["budgets"], n_boot=args.n_boot)
            comparison[split] = compare(pred[split], measured[split])
            if args.final_eval is not None:
                finals[split] = final_eval(Path(folder), measured[split], args.work / split)
    except IsosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    write_json(args.measured, measured, indent=1)
    write_json(args.comparison, comparison, indent=1)
    if args.final_eval is not None:
        write_json(args.final_eval, finals)
    for split, c in comparison.items():
        e, m = c["error"], measured[split]
        print(f"{split}: measured n* {m['n_star']}; predicted {c['n_star_predicted']}")
        print(f"  error {e['median']:.2f} octaves median, {e['max']:.2f} max over {e['budgets']} budgets; "
              f"n_sat measured {m['n_sat']} {m['n_sat_ci']} vs predicted {c['n_sat_predicted']} "
              f"{c['n_sat_ci_predicted']}: overlap {c['n_sat_ci_overlap']}")


if __name__ == "__main__":
    main()
