"""Rerun the first steps of a committed organism run and compare its records with what holds on
every x86-64 CPU kind (imported by name: pytest puts tests/ on sys.path).

A seeded run of a shipped organism repeats its sampled tokens, and so every count, reward, pass
rate and length, on any CPU; the float averages over tokens do not: kernels of another vector
width (AVX-512, AVX2, SSE4: torch's, MKL's) add in another order. Measured on hard-128 n32 s0's
step-0 evaluation and steps 1-3 under ATEN_CPU_CAPABILITY=default, avx2 and avx512 with the
libraries capped alike (``scripts/cpu_kinds.py``), one and two threads, against the committed
records (studies/LOG.md, 2026-12-06):

- every field but the ones below equal, bit for bit, under every kind and thread count;
- ``entropy`` (a float32 mean over the tokens) within 2.5e-6 relative (1 and 2 threads differ
  too): compared within 2e-5;
- ``sampler_logprob_gap_max`` / ``_mean``, the sampler's and the trainer's log-probabilities of
  the same tokens apart, are float32 round-off themselves (1.5e-5 to 1.1e-4 / 6e-7 to 9e-7, up to
  a factor of 7 between kinds): each must stay below 1e-3 / 1e-5, the size a real disagreement of
  sampler and trainer (another model, another temperature) exceeds by orders of magnitude.

The sampled tokens are not equal by construction: a token is ``argmax(probs / Exp(1) noise)``, and a
float difference larger than the two best candidates' gap would flip it (and the run would go on as
another draw). Measured on this run (issue #49's audit): of its 129,354 token draws the closest call
has the two best within 1.27e-4 of each other (none within 1e-4), while the sampler's log-probability
of a drawn token moves between CPU kinds (default, avx512, the zen4 stand-in) by 4e-7 to 6e-7 on
average and 2.4e-4 at most. From the density of close calls that implies, about one run in 200 to
300 per CPU kind would flip a token: seen on none of the kinds here, nor on a real AMD EPYC.

``kl`` is a float32 mean over tokens like ``entropy`` and gets its tolerance (no committed
organism run has a KL term yet, so it is not measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

IGNORED = frozenset({"model", "data"})
"""fields that name where the run read its model and data (besides the ``*_s`` wall times)"""
RELATIVE = {"entropy": 2e-5, "kl": 2e-5}
"""float32 means over tokens: relative tolerance (measured spread 2.5e-6)"""
ROUNDOFF = {"sampler_logprob_gap_max": 1e-3, "sampler_logprob_gap_mean": 1e-5}
"""round-off measures: both sides below the bound (measured at most 1.1e-4 / 9e-7)"""


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def rerun_first_steps(committed_run: Path, data: Path, out: Path, steps: int, model: str = "organism",
                      threads: int = 1, env: dict | None = None) -> list[dict]:
    """The records of ``committed_run``'s config run again with ``model`` on ``data`` up to its
    ``steps``-th update, in a fresh process of ``threads`` threads (float sums depend on the thread
    count; the committed sweeps ran on one). ``env`` replaces this process's environment (e.g. one
    of ``scripts/cpu_kinds.py``'s)."""
    cfg = json.loads((Path(committed_run) / "config.json").read_text())
    cfg.update(model=model, out=str(Path(out) / "run"), data=str(data),
               pause_at_rollouts=steps * cfg["n"] * cfg["b_p"])
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "config.json").write_text(json.dumps(cfg))
    base = os.environ if env is None else env
    run_env = {**base, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
               "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [base.get("PYTHONPATH")])])}
    res = subprocess.run([sys.executable, "-m", "llm_runs.training.train", "--config", str(Path(out) / "config.json")],
                         cwd=ROOT, env=run_env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return read_records(Path(out) / "run" / "records.jsonl")


def field_difference(key: str, got, want) -> str | None:
    """Why ``got`` is not ``want`` for the record field ``key``, or None when it holds."""
    if key in RELATIVE and isinstance(got, float) and isinstance(want, float):
        rel = abs(got - want) / max(abs(want), 1e-30)
        return None if rel <= RELATIVE[key] else f"{got!r} vs {want!r} ({rel:.1e} relative > {RELATIVE[key]:g})"
    if key in ROUNDOFF and isinstance(got, float) and isinstance(want, float):
        bound = ROUNDOFF[key]
        return None if 0 <= got < bound and 0 <= want < bound else f"{got!r} vs {want!r} (not both in [0, {bound:g}))"
    if got == want and type(got) is type(want):
        return None
    return f"{got!r} vs {want!r}"


def record_differences(got: list[dict], want: list[dict]) -> list[str]:
    """Every way the fresh records ``got`` differ from the committed ``want`` (its first
    ``len(got)``), field by field, as readable lines; empty when they agree."""
    out = []
    if len(got) > len(want):
        out.append(f"{len(got)} records, the committed run has {len(want)}")
    for g, w in zip(got, want):
        keys = [k for k in {**w, **g} if k not in IGNORED and not k.endswith("_s")]
        for k in keys:
            if k not in g or k not in w:
                out.append(f"step {g.get('step')}: {k} only in the {'fresh' if k in g else 'committed'} record")
                continue
            why = field_difference(k, g[k], w[k])
            if why:
                out.append(f"step {g.get('step')}: {k}: {why}")
    return out
