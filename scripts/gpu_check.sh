#!/usr/bin/env bash
# A prepared GPU check (< 8 min on one GPU): bf16 trainer + hf sampler on CUDA with a tiny model,
# FSDP2 in one process, and the simulator's --device cuda. One line per check: PASS / FAIL / SKIP.
# Needs torch with CUDA, transformers and accelerate; no vLLM, no network, no install.
#   bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
PY=${PYTHON:-python3}
run() {  # run NAME TIMEOUT CMD...: one line whatever happens
  local name=$1 limit=$2; shift 2
  local out rc
  out=$(timeout "$limit" "$@" 2>/tmp/gpu_check_$name.err); rc=$?
  if [ -n "$out" ]; then echo "$out" | grep -E '^(PASS|FAIL|SKIP) ' | head -1
  elif [ $rc -eq 124 ]; then echo "FAIL $name: timed out after ${limit}s"
  else echo "FAIL $name: exit $rc: $(tail -1 /tmp/gpu_check_$name.err | cut -c1-300)"; fi
}
run env 60 "$PY" scripts/gpu_check.py env
run bf16_train 150 "$PY" scripts/gpu_check.py bf16_train
run fsdp2 150 "$PY" -m accelerate.commands.launch --num_processes 1 --num_machines 1 --mixed_precision bf16 \
  --dynamo_backend no --use_fsdp --fsdp_version 2 --fsdp_auto_wrap_policy TRANSFORMER_BASED_WRAP \
  --fsdp_transformer_layer_cls_to_wrap LlamaDecoderLayer scripts/gpu_check.py fsdp2
run sim_cuda 120 "$PY" scripts/gpu_check.py sim_cuda
