"""What a shipped organism computes on fixed prompts, for a reproduction test that holds on any CPU.

    python scripts/organism_reference.py --model organism-hard --out tests/fixtures/organism_hard_reference.json

On the first ``--prompts`` problems of the organism's shipped pool (its prompt template and
instruction from its card): the greedy continuation (token ids, up to ``--max-new-tokens``, a full
forward per token) with its smallest logit margin (top-1 minus top-2 over the continuation),
whether its last number is the answer, the summed log-probability of the continuation and the
next-token logits after the first ``--logit-prompts`` prompts. Token ids where the margin is
large do not depend on float summation order; log-probabilities and logits do, within a tolerance
measured across CPU kernels (``ATEN_CPU_CAPABILITY=default``, ``avx2``, ``avx512``).
``--compare FILE`` prints the largest float differences against an earlier output and the
prompts whose tokens differ.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def compute(model: str, prompts: int = 32, max_new_tokens: int = 24, logit_prompts: int = 4) -> dict[str, Any]:
    import torch

    from llm_runs.problems.data import build_prompt
    from llm_runs.sampling import models

    path = Path(models.resolve_model(model))
    card = json.loads((path.parent / "organism.json").read_text())
    pool = [json.loads(x) for x in (path.parent / "pool.jsonl").read_text().splitlines()[:prompts]]
    tok = models.load_tokenizer(str(path))
    net = models.load_model(str(path)).eval()
    eos = set(models.eos_ids(tok, net))
    rows, logits_out = [], []
    with torch.no_grad():
        for i, row in enumerate(pool):
            ids = build_prompt(tok, row["problem"], card["prompt_template"], card["instruction"])
            out, margins, logprob = [], [], 0.0
            for _ in range(max_new_tokens):
                logits = net(input_ids=torch.tensor([ids + out])).logits[0, -1].double()
                if i < logit_prompts and not out:
                    logits_out.append([float(x) for x in logits])
                top = torch.topk(logits, 2)
                margins.append(float(top.values[0] - top.values[1]))
                nxt = int(top.indices[0])
                logprob += float(torch.log_softmax(logits, -1)[nxt])
                out.append(nxt)
                if nxt in eos:
                    break
            text = tok.decode(out, skip_special_tokens=True)
            nums = re.findall(r"-?\d+", text)
            rows.append({"id": row["id"], "problem": row["problem"], "tokens": out, "text": text,
                         "correct": bool(nums) and nums[-1] == row["answer"], "min_margin": min(margins),
                         "logprob": logprob})
    return {"model": model, "weights_sha256": card["weights_sha256"], "prompts": prompts,
            "max_new_tokens": max_new_tokens, "torch": torch.__version__, "greedy": rows,
            "first_logits": logits_out}


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The largest float differences between two outputs, and the prompts whose tokens differ."""
    import numpy as np

    differ = [x["id"] for x, y in zip(a["greedy"], b["greedy"]) if x["tokens"] != y["tokens"]]
    same = [(x, y) for x, y in zip(a["greedy"], b["greedy"]) if x["tokens"] == y["tokens"]]
    return {"tokens_differ": differ,
            "logprob": max(abs(x["logprob"] - y["logprob"]) for x, y in same),
            "min_margin": max(abs(x["min_margin"] - y["min_margin"]) for x, y in same),
            "first_logits": float(np.max(np.abs(np.array(a["first_logits"]) - np.array(b["first_logits"]))))}


def main() -> None:
    from isosim.files import write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="organism-hard")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=24)
    ap.add_argument("--logit-prompts", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--compare", type=Path, default=None, help="an earlier output: print the differences")
    a = ap.parse_args()
    doc = compute(a.model, a.prompts, a.max_new_tokens, a.logit_prompts)
    if a.out:
        write_json(a.out, doc, indent=1)
    if a.compare:
        print(json.dumps(compare(json.loads(a.compare.read_text()), doc)))
    margins = sorted(r["min_margin"] for r in doc["greedy"])
    print(f"{sum(r['correct'] for r in doc['greedy'])} of {len(margins)} greedy answers right; "
          f"smallest margins {[round(m, 4) for m in margins[:5]]}")


if __name__ == "__main__":
    main()
