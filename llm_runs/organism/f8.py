"""The organism across problem-set sizes (the paper's F8 on a real learner): settings, runs, reads.

A *setting* names everything a sweep's runs share but ``n`` and the seed: the split the training
problems come from, how many of them are kept (a seeded subset of the split's training part, so
every size is validated on the same 300 held-out problems), the sampling temperature and the
model. ``run`` launches (or resumes) the runs of one setting, ``jobs`` processes of one thread
each at a time; a killed call rerun with the same arguments continues where the runs stopped.
With ``--lean --many K``, runs of equal n share a process, K at a time (``llm_runs.training.many``:
one stacked sampling loop and update for the K runs; the same run folders and records).

    python -m llm_runs.organism.f8 run --setting easy-128-t06 --n 2,8,32,128 --seeds 1 \\
        --budget 100000 --out runs/f8/pilot                 # --model organism: the shipped weights
    python -m llm_runs.organism.f8 table runs/f8/pilot      # final val avg@4 per setting and n

Run folders are ``OUT/SETTING/nN_bp16_sS/`` (config.json, records.jsonl, checkpoint/), the layout
of the committed organism sweeps, so ``isosim analyze`` and the organism comparison read them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from isosim.errors import IsosimError

ROOT = Path(__file__).resolve().parents[2]
SPLITS = ROOT / "studies" / "results" / "organism" / "splits"

# What every organism run shares (docs/organism.md, step 4), and the recipe per split.
BASE = {
    "val_size": 300, "b_p": 16, "prompt_template": "plain", "instruction": "",
    "answer_fallback": "last-number", "max_new_tokens": 24, "sampler_batch_size": 4096,
    "micro_batch_size": 4096, "precision": "fp32", "eval_n": 8, "eval_k": 4, "save_every": 100,
    "base_lr": 3e-4, "eval_points": 12, "lr_rule": "sqrt", "warmup_steps": 10,
}


def parse_setting(name: str, splits: Path = SPLITS) -> dict:
    """``SPLIT-SIZE[-tTT]``: e.g. ``easy-128-t06`` (easy split, 128 training problems,
    temperature 0.6), ``hard-3200`` (temperature 1.0). SIZE ``all`` keeps the whole split. The
    split is ``splits/SPLIT.jsonl`` (default: the shipped organism's splits)."""
    parts = name.split("-")
    if len(parts) < 2 or parts[0] not in ("easy", "hard"):
        raise IsosimError(f"setting {name!r} is not SPLIT-SIZE[-tTT] with SPLIT easy or hard")
    split, size = parts[0], parts[1]
    if size != "all" and not (size.isdigit() and int(size) > 0):
        raise IsosimError(f"setting {name!r}: SIZE must be a positive number of problems or 'all'")
    out = {"split": split, "recipe": split, "data": str(Path(splits) / f"{split}.jsonl"),
           "max_train_problems": None if size == "all" else int(size), "temperature": 1.0}
    for p in parts[2:]:
        if p.startswith("t") and p[1:].isdigit():
            out["temperature"] = int(p[1:]) / 10 ** (len(p) - 2)
        else:
            raise IsosimError(f"unknown part {p!r} of setting {name!r} (tTT: temperature 0.TT)")
    return out


def run_config(setting: str, n: int, seed: int, budget: int, model: str, out: Path, extra: dict,
               splits: Path = SPLITS) -> dict:
    s = parse_setting(setting, splits)
    cfg = {**BASE, "model": model, "data": s["data"], "recipe": s["recipe"], "n": n, "seed": seed,
           "budget": budget, "temperature": s["temperature"], "eval_temperature": s["temperature"],
           "max_train_problems": s["max_train_problems"], "out": str(out), "run_id": out.name, **extra}
    return cfg


def launch(cfgs: list[dict], log: Path) -> int:
    """One process: a run (``llm_runs.training.train``), or several together (``llm_runs.training.many``)."""
    paths = []
    for cfg in cfgs:
        out = Path(cfg["out"])
        out.mkdir(parents=True, exist_ok=True)
        path = out / "launch_config.json"
        path.write_text(json.dumps(cfg, indent=1, sort_keys=True))
        paths.append(path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    module = "llm_runs.training.train" if len(cfgs) == 1 else "llm_runs.training.many"
    with open(log, "a") as fh:
        fh.write(f"== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(str(c['out']) for c in cfgs)}\n")
        fh.flush()
        return subprocess.call([sys.executable, "-m", module, *[a for p in paths for a in ("--config", str(p))]],
                               stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def group_jobs(jobs: list[dict], k: int) -> list[list[dict]]:
    """Runs of equal n (in order) in groups of at most ``k``, one process each (k = 1: one run a process)."""
    by_n: dict[int, list[dict]] = {}
    for c in jobs:
        by_n.setdefault(c["n"], []).append(c)
    return [runs[i:i + k] for runs in by_n.values() for i in range(0, len(runs), k)]


def cmd_run(a: argparse.Namespace) -> None:
    extra = json.loads(a.extra) if a.extra else {}
    if a.lean:  # the lean sampling loop and update forward (same draws; see docs/organism.md, Speed)
        extra = {"sampler": "lean", "train_forward": "lean", **extra}
    # a cheap part: the full-budget run, checkpointed at the first step past PAUSE rollouts (its
    # evaluation points are the full run's); rerun without --pause-at to continue it exactly
    extra["pause_at_rollouts"] = int(float(a.pause_at)) if a.pause_at else None
    jobs = []
    for setting in a.setting:
        for n in [int(x) for x in a.n.split(",")]:
            for seed in range(a.seed0, a.seed0 + a.seeds):
                out = Path(a.out) / setting / f"n{n}_bp16_s{seed}"
                jobs.append(run_config(setting, n, seed, int(float(a.budget)), a.model, out, extra,
                                       _splits(a.splits)))
    # the longest runs (small n: most steps) first, so the pool drains evenly
    jobs.sort(key=lambda c: c["n"])
    if a.many < 1:
        raise IsosimError("--many must be at least 1 (runs per process)")
    if a.many > 1 and not a.lean:
        raise IsosimError("--many needs --lean (runs share a process through the lean path)")
    groups = group_jobs(jobs, a.many)
    log = Path(a.out) / "launch.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(a.jobs) as pool:
        codes = list(pool.map(lambda g: launch(g, log), groups))
    bad = [c["out"] for g, rc in zip(groups, codes) if rc for c in g]
    print(f"{len(jobs) - len(bad)} of {len(jobs)} runs finished" + (f"; failed: {bad}" if bad else ""))
    sys.exit(1 if bad else 0)


def read_records(run: Path) -> list[dict]:
    rows = []
    p = run / "records.jsonl"
    if p.is_file():
        for line in p.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


def _splits(folder: str) -> Path:
    path = Path(folder).resolve()
    if not path.is_dir():
        raise IsosimError(f"--splits {folder}: no such folder (it holds SPLIT.jsonl files)")
    return path


def _rel(path: str | Path) -> str:
    """A path under the repository as a relative one (as committed files name it), else as given."""
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return str(path)


def cmd_table(a: argparse.Namespace) -> None:
    for sdir in sorted(Path(a.folder).iterdir()):
        if not sdir.is_dir():
            continue
        print(f"## {sdir.name}")
        for run in sorted(sdir.iterdir(), key=lambda p: (int(p.name.split("_")[0][1:]), p.name)):
            rows = read_records(run)
            if not rows:
                continue
            curve = " ".join(f"{r['rollouts']:.0f}:{r['val_avg']:.3f}" for r in rows)
            best = max(rows, key=lambda r: r["val_avg"])
            print(f"{run.name:>14} final {rows[-1]['val_avg']:.3f} at {rows[-1]['rollouts']:.0f}  "
                  f"peak {best['val_avg']:.3f} at {best['rollouts']:.0f}  | {curve}")


def _merge_write(path: Path, entries: dict) -> None:
    """Add or replace entries (keyed by sweep) in a results file, keeping the others."""
    from isosim.files import write_json

    doc = json.loads(path.read_text()) if path.is_file() else {}
    doc.update(entries)
    write_json(path, dict(sorted(doc.items())), indent=1)


def cmd_predict(a: argparse.Namespace) -> None:
    """The simulator's prediction of each sweep (profile-only, or with ``--dynamics`` fitted from
    the sweep's cheap part), in the schema of the organism's prediction files, keyed by sweep."""
    from llm_runs.organism.predict import predict

    dyn = dict(item.split("=", 1) for item in a.dynamics)
    splits = _splits(a.splits)
    at = _budgets(a.readings) if a.readings else None
    out = {}
    for sweep_name, setting in (item.split("=", 1) for item in a.sweep):
        s = parse_setting(setting, splits)
        rule = {"lr_rule": a.lr_rule} if a.lr_rule else {}  # else the recipe's (the preset's) rule
        work = Path(a.work) / (setting + ("-dyn" if sweep_name in dyn else "") + (f"-lr-{a.lr_rule}" if a.lr_rule else ""))
        work.mkdir(parents=True, exist_ok=True)
        p = predict(s["split"], Path(a.calibration), splits, work, a.n_boot,
                    n_values=[int(x) for x in a.n.split(",")], seeds=list(range(a.seeds)),
                    max_rollouts=float(a.budget), train_problems=s["max_train_problems"],
                    dynamics=Path(dyn[sweep_name]) if sweep_name in dyn else None, readings=at, **rule)
        s["data"] = _rel(s["data"])
        setting_doc = {"name": setting, **s, "calibration": a.calibration, **({"model": a.model} if a.model else {}),
                       **rule}
        out[sweep_name] = {"setting": setting_doc, **p}
        if a.fixed_n:  # a baseline committed beside the prediction: always this n, in every reading
            out[sweep_name]["fixed_n"] = {"n": a.fixed_n, "budgets": at or p["budgets"],
                                          "why": a.fixed_n_why or f"a fixed n = {a.fixed_n}"}
        print(f"{sweep_name}: n* {p['n_star']} n_sat {p['n_sat']} {p['n_sat_ci']}")
        for reading, rows in p.get("readings", {}).items():
            print(f"  {reading}: " + ", ".join(f"{r['budget']:.0e} {r['n_star']} {r['tie_band']}" for r in rows))
    _merge_write(Path(a.out), out)


def _budgets(text: str) -> list[float]:
    try:
        at = [float(x) for x in text.split(",")]
    except ValueError:
        raise IsosimError(f"--readings takes budgets separated by commas, e.g. 2e5,5e5,1e6,2e6; got {text!r}") from None
    if not at or any(not b > 0 for b in at) or at != sorted(at):
        raise IsosimError(f"--readings budgets must be positive and increasing, got {text!r}")
    return at


def cmd_measure(a: argparse.Namespace) -> None:
    """The measured frontier of each sweep's real runs, on its prediction's budget grid."""
    from isosim.integrations import load_runs
    from llm_runs.organism.compare import measure

    at = _budgets(a.readings) if a.readings else None
    pred = json.loads(Path(a.prediction).read_text())
    out = {}
    for sweep_name, folder in (item.split("=", 1) for item in a.runs):
        df, _ = load_runs(folder)
        m = measure(df, budgets=pred[sweep_name]["budgets"] if sweep_name in pred else None)
        out[sweep_name] = {"setting": pred.get(sweep_name, {}).get("setting"), "runs_folder": folder, **m}
        print(f"{sweep_name}: n* {m['n_star']} n_sat {m['n_sat']} {m['n_sat_ci']}")
        if at:
            from isosim.validation import crossing
            from isosim.validation import readings as rd
            from isosim.validation.adaptive import load_sweep

            sweep = load_sweep(folder)
            runs = sweep["runs"]
            short = sorted(f"n{n}_s{s}" for n, seeds in runs.items() for s, c in seeds.items()
                           if math.isnan(rd.final_at(c, at[-1])))
            if short:
                raise IsosimError(f"{sweep_name}: {len(short)} run(s) end short of {at[-1]:.3g} rollouts "
                                  f"({', '.join(short)}): --readings needs every run to reach its last budget")
            out[sweep_name]["readings"] = crossing.measure_both(runs, at, a.share)
            pl = out[sweep_name]["plateaus"] = crossing.plateaus(runs, sweep["b_p"])
            print("  peaks (best reading): " + ", ".join(f"n {n} {v['peak']:.3f}" for n, v in pl["per_n"].items())
                  + f" (se {pl['peak_seed_se']:.4f}; within 2 se of the highest: {pl['peaks_within_2se']})")
            for reading, r in out[sweep_name]["readings"].items():
                lead = r["cheap_leader"]
                cross = "none" if r["crossing"] is None else f"{r['crossing']:.3g}"
                table = ", ".join(f"{t['budget']:.0e} {t['n_star']} {t['tie_band']}" for t in r["n_star"])
                print(f"  {reading}: n* {table}; crossing {cross}; cheap leader @{a.share:g} "
                      f"regret {lead['mean_regret']:.4f} ({lead['mean_regret_in_se']:.1f} se)")
    _merge_write(Path(a.out), out)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--setting", action="append", required=True)
    r.add_argument("--n", default="2,4,8,16,32,64,128")
    r.add_argument("--seeds", type=int, default=2)
    r.add_argument("--seed0", type=int, default=0)
    r.add_argument("--budget", default="2e5")
    r.add_argument("--model", default="organism", help="the shipped organism (default), or a model folder")
    r.add_argument("--out", required=True)
    r.add_argument("--splits", default=str(SPLITS), help="folder of the SPLIT.jsonl files (default: the shipped organism's)")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--extra", default="", help="JSON object of further RunConfig settings")
    r.add_argument("--lean", action="store_true", help="sampler and train_forward 'lean'")
    r.add_argument("--pause-at", default="", help="stop each run at this many rollouts (resumable)")
    r.add_argument("--many", type=int, default=1, metavar="K",
                   help="runs of equal n per process, K at a time (llm_runs.training.many; needs --lean)")
    t = sub.add_parser("table")
    t.add_argument("folder")
    q = sub.add_parser("predict")
    q.add_argument("--sweep", action="append", required=True, metavar="NAME=SETTING")
    q.add_argument("--calibration", required=True, help="pass rates of the splits at the setting's temperature")
    q.add_argument("--dynamics", action="append", default=[], metavar="NAME=FILE")
    q.add_argument("--n", default="2,4,8,16,32,64,128")
    q.add_argument("--seeds", type=int, default=2)
    q.add_argument("--budget", default="2e5")
    q.add_argument("--n-boot", type=int, default=200)
    q.add_argument("--work", default="runs/f8/predict")
    q.add_argument("--splits", default=str(SPLITS), help="folder of the SPLIT.jsonl files (default: the shipped organism's)")
    q.add_argument("--readings", default="", metavar="C1,C2,...",
                   help="also the simulated sweep's n* with its tie band at these budgets, in both readings")
    q.add_argument("--model", default="", help="the model the sweep will run (recorded in the setting; e.g. organism-hard)")
    q.add_argument("--lr-rule", default="", choices=["", "sqrt", "linear", "constant"],
                   help="the runs' lr rule, simulated too (default the recipe's: sqrt; pass the one the sweep's "
                        "--extra sets, e.g. constant: every n at base_lr)")
    q.add_argument("--fixed-n", type=int, default=0, help="also commit this fixed n as a baseline prediction")
    q.add_argument("--fixed-n-why", default="", help="why that n (kept with it)")
    q.add_argument("--out", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--runs", action="append", required=True, metavar="NAME=FOLDER")
    m.add_argument("--prediction", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--readings", default="", metavar="C1,C2,...",
                   help="also n* with tie bands at these budgets in both readings, the crossing budget and the "
                        "cheap leader's regret at the last one (isosim.validation.crossing)")
    m.add_argument("--share", type=float, default=0.05, help="with --readings: the cheap runs' share of the top budget")
    a = p.parse_args(argv)
    try:
        {"run": cmd_run, "table": cmd_table, "predict": cmd_predict, "measure": cmd_measure}[a.cmd](a)
    except IsosimError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
