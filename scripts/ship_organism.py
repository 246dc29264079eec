"""Ship a built organism under a name: its weights, tokenizer, pool and card, beside the first.

    python scripts/ship_organism.py --build /work/runs/organism_hard/organism --name organism-hard \\
        --command "python -m llm_runs.organism --out DIR --max-terms 6 --max-digits 3 --sft-steps 6000 --sft-stop-loss 0.153"

Copies ``BUILD/model/`` and ``BUILD/pool.jsonl`` into the name's folder of
``llm_runs.cards.SHIPPED`` (the one registry of shipped models) and writes its card,
``organism.json``: the build's own (settings, SFT curve, parameters, weights digest, prompt
template, instruction, answer fallback) with paths relative to the folder, the build command and
the run settings its sweeps share (``run_defaults``). The digest is checked against the copied
weights.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RUN_DEFAULTS = {  # what every organism run shares (llm_runs/organism/f8.py BASE), the lean path
    "base_lr": 0.0003, "eval_k": 4, "eval_n": 8, "lr_ref_batch": 1024, "lr_rule": "sqrt", "max_new_tokens": 24,
    "micro_batch_size": 4096, "precision": "fp32", "sampler": "lean", "sampler_batch_size": 4096,
    "temperature": 1.0, "train_forward": "lean", "warmup_steps": 10,
}


def main() -> None:
    from isosim.files import write_json
    from llm_runs.organism.build import weights_digest
    from llm_runs.cards import SHIPPED as ORGANISMS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, required=True, help="a folder python -m llm_runs.organism built")
    ap.add_argument("--name", required=True, choices=sorted(ORGANISMS))
    ap.add_argument("--command", required=True, help="the build command (written into the card)")
    a = ap.parse_args()
    meta = json.loads((a.build / "organism.json").read_text())
    if weights_digest(a.build / "model") != meta["weights_sha256"]:
        raise SystemExit(f"{a.build}: the weights are not the ones its organism.json names")
    dest = ORGANISMS[a.name]
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(a.build / "model", dest / "model")
    shutil.copy2(a.build / "pool.jsonl", dest / "pool.jsonl")
    card = {**meta, "name": a.name, "model": "model", "pool": "pool.jsonl", "build_command": a.command,
            "run_defaults": RUN_DEFAULTS}
    assert weights_digest(dest / "model") == card["weights_sha256"]
    write_json(dest / "organism.json", dict(sorted(card.items())), indent=1)
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"shipped {a.name} in {dest.relative_to(ROOT)} ({size / 1e6:.2f} MB, weights {card['weights_sha256'][:12]})")


if __name__ == "__main__":
    main()
