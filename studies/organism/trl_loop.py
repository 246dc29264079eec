# %% [markdown]
# # From a budget to TRL configs and back, with the real TRL on this CPU
#
# The loop `isosim plan --for trl` -> TRL's `GRPOTrainer` (the written `launch.sh`, i.e.
# `accelerate launch train_grpo.py --config RUN/config.yaml`) -> `isosim recommend --runs ... --for trl`
# -> the pick's full-budget `GRPOConfig`, run end to end on the model organism (a 0.15 M Llama
# that adds small numbers, `llm_runs/organism/shipped/model`) and its problem pool. Nothing here
# calls isosim's own trainer: the runs are TRL's, read back from the records isosim's
# `RecordsCallback` wrote and from nothing else.
#
# `python studies/organism/trl_loop.py [--quick]` (full: n = 2, 4, 8 at B_p = 4, 5 % of
# C = 6,400 rollouts each, minutes on a CPU; quick: n = 2, 4, a few steps).

# %%
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import figure, setup, write_json  # noqa: E402

STARTED = time.time()
quick, _, FIG_DIR, OUT_JSON = setup("trl_loop", "the TRL loop on the organism")
ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "llm_runs" / "organism" / "shipped" / "model"
WORK = Path(os.environ.get("ISOSIM_STUDY_OUT") or ROOT) / "runs" / ("trl_loop_quick" if quick else "trl_loop")
NS, B_P, BUDGET = ("2,4", 2, 480) if quick else ("2,4,8", 4, 6400)
TRL_ARGS = ["--learning_rate", "3e-4", "--max_completion_length", "12" if quick else "24", "--use_cpu", "true",
            "--disable_tqdm", "true", "--eval_size", "8" if quick else "48", "--eval_samples", "2" if quick else "8"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
       "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def isosim(*args: str) -> str:
    res = subprocess.run([sys.executable, "-c", "import cli; cli.main()", *args], cwd=ROOT, env=ENV,
                         capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(res.stderr)
    print(res.stdout)
    return res.stdout


# %% [markdown]
# ## The data and the reward: the organism's problems, scored on the last number (as its own runs)

# %%
if WORK.exists():
    shutil.rmtree(WORK)
WORK.mkdir(parents=True)
pool = [json.loads(line) for line in (ROOT / "llm_runs" / "organism" / "shipped" / "pool.jsonl").read_text().splitlines()]


def row(p):
    return {"prompt": f"Question: {p['problem']}\nAnswer:", "answer": p["answer"]}


(WORK / "train.jsonl").write_text("".join(json.dumps(row(p)) + "\n" for p in pool[:-300]))
(WORK / "held_out.jsonl").write_text("".join(json.dumps(row(p)) + "\n" for p in pool[-300:]))
(WORK / "organism_rewards.py").write_text('''import re


def accuracy(completions, answer, **kwargs):
    """1 when the completion's last number is the answer (the organism's last-number scoring)."""
    out = []
    for c, a in zip(completions, answer):
        nums = re.findall(r"-?\\d+", c)
        out.append(1.0 if nums and nums[-1] == a else 0.0)
    return out
''')

# %% [markdown]
# ## 1. Plan: the cheap sweep as TRL configs

# %%
plan_out = isosim("plan", "--for", "trl", "--budget", str(BUDGET), "--n", NS, "--b-p", str(B_P),
                  "--min-steps", "3" if quick else "10", "--out", str(WORK / "sweep"))

# %% [markdown]
# ## 2. Run: TRL's GRPOTrainer through the written launch.sh

# %%
t0 = time.time()
res = subprocess.run(["bash", str(WORK / "sweep" / "launch.sh"), "--model_name_or_path", str(MODEL),
                      "--dataset_name", str(WORK / "train.jsonl"), "--eval_dataset", str(WORK / "held_out.jsonl"),
                      "--reward_funcs", "organism_rewards.accuracy", *TRL_ARGS],
                     cwd=WORK, env=ENV, capture_output=True, text=True)
(WORK / "launch.log").write_text(res.stdout + res.stderr)
if res.returncode:
    raise SystemExit(res.stderr[-3000:])
train_seconds = time.time() - t0
print(f"the sweep trained in {train_seconds:.0f} s")

# %% [markdown]
# ## 3. Recommend: read the runs back, write the pick's full-budget run

# %%
rec_out = isosim("recommend", "--runs", str(WORK / "sweep" / "runs"), "--budget", str(BUDGET), "--for", "trl")
rec = json.loads(isosim("recommend", "--runs", str(WORK / "sweep" / "runs"), "--budget", str(BUDGET), "--json"))
full_cfg = WORK / "sweep" / "full" / f"full-n{rec['pick']}" / "config.yaml"

# %% [markdown]
# ## 4. The full-budget config loads into TRL's GRPOConfig

# %%
check = subprocess.run([sys.executable, "-c", (
    "import json, sys, yaml; from trl import GRPOConfig; "
    "c = GRPOConfig(**yaml.safe_load(open(sys.argv[1])), use_cpu=True); "
    "print(json.dumps({k: getattr(c, k) for k in ('num_generations', 'per_device_train_batch_size', "
    "'gradient_accumulation_steps', 'steps_per_generation', 'generation_batch_size', 'max_steps')}))"),
    str(full_cfg)], env=ENV, capture_output=True, text=True)
if check.returncode:
    raise SystemExit(check.stderr[-3000:])
loaded = json.loads(check.stdout.strip().splitlines()[-1])
print("GRPOConfig:", loaded)
assert loaded["generation_batch_size"] == rec["b_p"] * rec["pick"]

# %% [markdown]
# ## The figure: each n's held-out avg@k against rollouts, the pick marked

# %%
records = pd.concat([pd.read_json(p, lines=True) for p in sorted((WORK / "sweep" / "runs").glob("*/records.jsonl"))])
fig, (ax,) = figure()
for n, g in records.groupby("n"):
    g = g.sort_values("rollouts")
    ax.plot(g["rollouts"], g["val_avg"], marker="o", ms=3,
            label=f"n = {n}" + (" (pick)" if n == rec["pick"] else ""), lw=2.2 if n == rec["pick"] else 1.2)
ax.set_xlabel("rollouts (TRL completions)")
ax.set_ylabel("held-out avg@k")
ax.set_title(f"TRL GRPOTrainer on the organism: cheap runs at B_p = {B_P}\n(5 % of C = {BUDGET:,}; pick n = {rec['pick']})",
             fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(FIG_DIR / "trl_loop.png", dpi=120)
if not quick and not os.environ.get("ISOSIM_STUDY_OUT"):
    fig.savefig(ROOT / "docs" / "figures" / "trl_loop.png", dpi=120)

curves = {str(n): [[float(r), float(v)] for r, v in zip(g.sort_values("rollouts")["rollouts"], g.sort_values("rollouts")["val_avg"])]
          for n, g in records.groupby("n")}
write_json(OUT_JSON, {
    "budget": BUDGET, "b_p": B_P, "ns": [int(x) for x in NS.split(",")], "trl_args": TRL_ARGS,
    "train_seconds": round(train_seconds, 1), "pick": rec["pick"], "tie_band": rec["tie_band"],
    "expected_regret": {n: v["expected_regret"] for n, v in rec["n"].items()},
    "full_run": {"config": str(full_cfg.relative_to(WORK)), "grpo_config": loaded}, "curves": curves,
    # (the printed lines with the work folder's path shortened to WORK)
    "plan_output": plan_out.replace(str(WORK), "WORK").splitlines(),
    "recommend_output": rec_out.replace(str(WORK), "WORK").splitlines(),
}, STARTED)
