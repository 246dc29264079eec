#!/usr/bin/env bash
# An organism sweep on one GPU, every run at once (< 10 min): builds the organism (~4 min of CPU
# SFT; or pass --model DIR of a built one), runs n = 4..128 x 2 seeds (B_p 16, easy recipe,
# docs/organism.md step 4's settings, sampler lean + train_forward lean) as 12 processes sharing
# the GPU, stops what still runs 30 s before --time-limit (540 s for the whole script, build
# included; the stopped runs checkpoint, and rerunning the command resumes them), and
# writes records under $OUT/runs/ and rollouts/s in $OUT/summary.json.
# Needs torch with CUDA, transformers and accelerate; no vLLM, no network, no install.
#   OUT=/some/dir bash scripts/gpu_organism.sh [--model DIR] [--budget 200000] [--time-limit 540]
#   bash scripts/gpu_organism.sh --dry-run     # quick organism, two tiny runs on the CPU (the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
PY=${PYTHON:-python3}
exec "$PY" scripts/gpu_organism.py --out "${OUT:-runs/gpu_organism}" "$@"
