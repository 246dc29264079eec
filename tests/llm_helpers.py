"""Helpers shared by the GRPO runner's tests (imported by name: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import json
import subprocess
import time
import zlib
from pathlib import Path

VOLATILE = frozenset({"wall_s", "eval_s", "run_id"})
"""record columns that differ between an uninterrupted and a resumed run (wall clock, run name)"""


def crc_reward(texts, golds):
    """A deterministic 0/1 reward with variance inside groups (random models never box an answer)."""
    return [float(zlib.crc32(t.encode()) % 2) for t in texts]


def problem_reward(texts, golds):
    """A deterministic 0/1 reward whose rate depends on the problem: each gold answer hashes to a
    pass rate in {0, 1/4, 1/2, 3/4, 1}, and a completion passes by a hash of itself and the gold
    (so estimated pass rates differ between problems, which allocation rules act on)."""
    return [float(zlib.crc32((t + g).encode()) % 1000 < (zlib.crc32(g.encode()) % 5) * 250)
            for t, g in zip(texts, golds)]


def cli_args(defaults: dict, **over) -> list[str]:
    """``--key value`` flags of ``llm_runs.training.train`` from ``defaults`` updated by ``over`` (``b_p`` ->
    ``--b-p``); booleans become ``--key`` / ``--no-key``."""
    args = {**defaults, **{k.replace("_", "-"): v for k, v in over.items()}}
    out: list[str] = []
    for k, v in args.items():
        out += ([f"--{k}"] if v else [f"--no-{k}"]) if isinstance(v, bool) else [f"--{k}", str(v)]
    return out


def read_jsonl(path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def strip_volatile(rows, volatile=VOLATILE) -> list[dict]:
    """Rows without the volatile columns and the per-step timings (``time/...``)."""
    return [{k: v for k, v in r.items() if k not in volatile and not k.startswith("time/")} for r in rows]


def interrupt_after(cmd, metrics, steps: int, sig, *, cwd, env, timeout: float):
    """Start ``cmd``, send it ``sig`` once its ``metrics`` file holds ``steps`` step lines (or it
    has ended, or ``timeout`` seconds have passed), wait for it and return the process (its stderr
    is a pipe, for the failure message)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count("\n") >= steps:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.wait(timeout=timeout)
    return proc
