"""Seeded small-arithmetic problem sets in the JSON Lines format of ``shared/data``.

``python -m llm_runs.problems.make_arith --out arith.jsonl --count 400 --seed 0`` writes problems such as
``{"id": "arith-0-00017", "problem": "What is 23 + 48?", "answer": "71"}``. SmolLM2-135M-Instruct
solves roughly a third of two-term sums below 50 with a ``\\boxed{}`` prompt, so GRPO groups have
real reward variance on a CPU-sized model. The file is a pure function of the arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def make_problems(count: int, seed: int = 0, ops: str = "+", max_operand: int = 50, terms: int = 2) -> list[dict]:
    """``count`` distinct problems ``a op b [op c]`` with operands in [0, max_operand]."""
    if count < 1 or terms < 2 or max_operand < 1 or not ops or any(o not in OPS for o in ops):
        raise ValueError("need count >= 1, terms >= 2, max_operand >= 1 and ops from '+-*'")
    rng = np.random.default_rng([seed, 0xA817])
    seen: set[str] = set()
    out: list[dict] = []
    for _ in range(50 * count):
        if len(out) == count:
            break
        nums = rng.integers(0, max_operand + 1, size=terms).tolist()
        chosen = [ops[int(i)] for i in rng.integers(0, len(ops), size=terms - 1)]
        expr = str(nums[0])
        value = nums[0]
        for op, x in zip(chosen, nums[1:]):
            expr += f" {op} {x}"
            value = OPS[op](value, x)  # left to right; only meaningful without mixing * with +/-
        if "*" in chosen and len(set(chosen)) > 1:
            value = eval_left_free(expr)
        if expr in seen:
            continue
        seen.add(expr)
        out.append({"id": f"arith-{seed}-{len(out):05d}", "problem": f"What is {expr}?", "answer": str(value)})
    if len(out) < count:
        raise ValueError(f"only {len(out)} distinct problems exist with these settings")
    return out


def eval_left_free(expr: str) -> int:
    """Value of ``a op b op c`` with * before + and - (no eval)."""
    tokens = expr.split()
    vals, ops = [int(tokens[0])], []
    for op, x in zip(tokens[1::2], tokens[2::2]):
        if op == "*":
            vals[-1] *= int(x)
        else:
            ops.append(op)
            vals.append(int(x))
    total = vals[0]
    for op, v in zip(ops, vals[1:]):
        total = total + v if op == "+" else total - v
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m llm_runs.problems.make_arith", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSON Lines file to write")
    p.add_argument("--count", type=int, default=400, help="number of problems")
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument("--ops", default="+", help="operators to draw from, e.g. '+-'")
    p.add_argument("--max-operand", type=int, default=50, help="largest operand")
    p.add_argument("--terms", type=int, default=2, help="operands per problem")
    args = p.parse_args(argv)
    try:
        problems = make_problems(args.count, args.seed, args.ops, args.max_operand, args.terms)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in problems), encoding="utf-8")
    print(f"wrote {len(problems)} problems to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
