"""The tests that compare with numbers made on another machine pass on every x86-64 CPU kind.

A committed record, a shipped sweep or a published number was computed on one CPU; torch, MKL,
numpy and OpenBLAS pick kernels by the CPU they find, and kernels of another vector width add
floats in another order. The tests marked ``cpu_sensitive`` compare such numbers, exactly where
the numbers are the same on every kind and within the spread measured across kinds elsewhere.
Here they run again in a fresh process under each narrower kind this machine can stand in for
(``scripts/cpu_kinds.py``: default = SSE4, avx2 = an AVX2-only Intel) and under its stand-ins for
an AMD CPU (zen3, zen4: MKL's AVX2 path and OpenBLAS's Zen kernels beside torch's own width), so
that a test which holds only on the CPU kind that made its numbers fails on the machine that runs
the suite, not on the next user's. (The suite itself runs them under the machine's own kind.)
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("cpu_kinds", ROOT / "scripts" / "cpu_kinds.py")
ck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ck)

NARROWER = ck.available_kinds()[:-1]
"""every kind this CPU can run but its own widest (which the suite runs)"""
OTHERS = NARROWER + ck.vendor_kinds()
"""and the other-vendor stand-ins it can run"""

PROBE = ("import torch; from numpy._core import _multiarray_umath as m; "
         "print(torch.backends.cpu.get_cpu_capability(), sorted(k for k, v in m.__cpu_features__.items() if v))")


@pytest.mark.parametrize("kind", OTHERS)
def test_a_kind_caps_torch_and_numpy(kind):
    """The stand-in is real: torch and numpy in a process of that kind use the kernels it names."""
    pytest.importorskip("torch")
    res = subprocess.run([sys.executable, "-c", PROBE], env=ck.kind_env(kind), capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    capability, features = res.stdout.split(" ", 1)
    features = set(ast.literal_eval(features.strip()))
    assert capability == ck.CAPS[kind]["ATEN_CPU_CAPABILITY"].upper()
    assert bool(features & {"AVX512F", "AVX512_SKX"}) == (kind == "zen4"), features  # zen4: numpy's own width
    assert ("AVX2" in features) == (kind != "default"), features


def test_the_cpu_sensitive_tests_are_marked():
    """The tests known to compare with another machine's numbers carry the mark the guard selects."""
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "cpu_sensitive", "-p",
                          "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    files = {line.split("::")[0] for line in res.stdout.splitlines() if "::" in line}
    assert files >= {f"tests/{name}" for name in (
        "test_organism_shipped.py", "test_organism_hard_shipped.py", "test_presimulated.py", "test_published_numbers.py",
        "test_prediction_records.py", "test_recommend_partial.py", "test_plane_second_learner.py")}, files


@pytest.mark.parametrize("kind", OTHERS)
def test_the_cpu_sensitive_tests_pass_under(kind):
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-m", "cpu_sensitive", "-p", "no:cacheprovider"],
                         cwd=ROOT, env=ck.kind_env(kind), capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, f"under the {kind} CPU kind:\n" + res.stdout[-4000:] + res.stderr[-2000:]
