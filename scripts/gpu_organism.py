"""An organism sweep with many runs on one GPU at once (``scripts/gpu_organism.sh``).

Builds the organism (``python -m llm_runs.organism``; or takes a built one with ``--model``), then
starts every run of the sweep (n x seeds, B_p 16, the easy recipe, docs/organism.md step 4's
settings, ``sampler lean`` and ``train_forward lean``) as its own process, all at once, on the one
GPU; writes each run's records under OUT/runs/, and OUT/summary.json with the rollouts/s of each
run and of the whole sweep. Runs still going when ``--time-limit`` (540 s for the whole script,
the build included) is near get SIGTERM: they save a
checkpoint and stop (rerunning the same command resumes them), and the summary counts what they
did. ``--dry-run``: the quick organism, two tiny runs, on the CPU (what the tests run).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
STEP4 = ["--b-p", "16", "--prompt-template", "plain", "--instruction", "", "--answer-fallback", "last-number",
         "--temperature", "1.0", "--max-new-tokens", "24", "--sampler-batch-size", "4096",
         "--micro-batch-size", "4096", "--precision", "fp32", "--eval-n", "8", "--eval-k", "4",
         "--base-lr", "3e-4", "--recipe", "easy", "--eval-points", "12", "--val-size", "300", "--save-every", "100"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "runs/gpu_organism")
    ap.add_argument("--model", default=None, help="a built organism's model folder (default: build one in OUT)")
    ap.add_argument("--data", default=None, help="problems (default: the committed easy split)")
    ap.add_argument("--n", default="4,8,16,32,64,128")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=200_000)
    ap.add_argument("--time-limit", type=float, default=540.0,
                    help="seconds for the whole script (build included): runs still going then are stopped "
                         "(they checkpoint; rerun to resume)")
    ap.add_argument("--dry-run", action="store_true", help="quick organism, two tiny runs, CPU")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1"}
    settings = list(STEP4)
    if args.dry_run:
        env["CUDA_VISIBLE_DEVICES"] = ""
        ns, seeds = [2, 4], 1
        settings += ["--b-p", "8", "--val-size", "20", "--eval-n", "2", "--eval-k", "2", "--eval-points", "2",
                     "--max-new-tokens", "12"]
    else:
        ns, seeds = [int(x) for x in args.n.split(",")], args.seeds
    t0 = time.perf_counter()
    model = args.model
    if model is None and args.dry_run:  # a few seconds of SFT on one thread
        from llm_runs.organism.build import OrganismSettings, build

        build(out / "organism", OrganismSettings.for_scale("quick", sft_steps=20, threads=1), log=lambda m: None)
        model = str(out / "organism" / "model")
    elif model is None:  # the study's organism, as docs/organism.md step 1 builds it
        subprocess.run([py, "-m", "llm_runs.organism", "--out", str(out / "organism")], cwd=ROOT, env=env, check=True)
        model = str(out / "organism" / "model")
    data = args.data or (str(out / "organism" / "pool.jsonl") if args.dry_run
                         else str(ROOT / "studies/results/organism/splits/easy.jsonl"))
    build_s = time.perf_counter() - t0
    sweep_limit = max(args.time_limit - build_s - 30.0, 30.0)  # 30 s to stop the runs and summarise
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
    procs: dict[str, subprocess.Popen] = {}
    t1 = time.perf_counter()
    for n in ns:
        for seed in range(seeds):
            run_id = f"n{n}_bp16_s{seed}"
            budget = 8 * n * 3 if args.dry_run else args.budget
            cmd = [py, "-m", "llm_runs.training.train", "--model", model, "--data", data,
                   "--out", str(out / "runs" / run_id),
                   "--n", str(n), "--seed", str(seed), "--budget", str(budget), *settings,
                   "--sampler", "lean", "--train-forward", "lean"]
            (out / "runs").mkdir(exist_ok=True)
            log = (out / "runs" / f"{run_id}.log").open("w")
            procs[run_id] = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    stopped = []
    while any(p.poll() is None for p in procs.values()):
        if time.perf_counter() - t1 > sweep_limit:
            for run_id, p in procs.items():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)  # the trainer checkpoints and stops
                    stopped.append(run_id)
            for p in procs.values():
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
            break
        time.sleep(1)
    sweep_s = time.perf_counter() - t1
    per_run, failed = [], []
    for run_id, p in procs.items():
        metrics = out / "runs" / run_id / "metrics.jsonl"
        rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()] if metrics.is_file() else []
        if p.returncode not in (0, 128 + 15, -signal.SIGTERM) or not rows:  # 143: stopped, checkpoint saved
            failed.append({"run_id": run_id, "exit": p.returncode})
            continue
        last = rows[-1]
        per_run.append({"run_id": run_id, "rollouts": last["rollouts"], "steps": last["step"],
                        "train_wall_s": last["wall_s"], "rollouts_per_s": last["rollouts"] / max(last["wall_s"], 1e-9),
                        "finished": run_id not in stopped})
    total = sum(r["rollouts"] for r in per_run)
    summary = {"device": device, "device_name": name, "torch": torch.__version__, "runs": len(per_run),
               "failed": failed, "stopped_at_time_limit": stopped, "build_s": build_s, "sweep_wall_s": sweep_s,
               "rollouts": total, "rollouts_per_s": total / max(sweep_s, 1e-9), "per_run": per_run,
               "note": "rollouts_per_s: all runs' training rollouts over the sweep's wall time (evaluations, "
                       "start-up and checkpoints included); per run: rollouts over its trainer wall time"}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"{device} ({name}): {len(per_run)} runs at once, {total:,} rollouts in {sweep_s:.0f}s = "
          f"{summary['rollouts_per_s']:.0f} rollouts/s (build {build_s:.0f}s); stopped {len(stopped)}, failed "
          f"{len(failed)}; {out / 'summary.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
