"""The shipped model organism: its weights are the committed build's, and they reproduce a
committed run's records exactly (step-0 evaluation and the first update steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from llm_helpers import read_jsonl  # noqa: E402

from llm_runs.organism import build as organism  # noqa: E402
from llm_runs.sampling import models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "llm_runs" / "organism" / "shipped"
COMMITTED_RUN = ROOT / "studies" / "results" / "organism_f8" / "hard-128" / "n32_bp16_s0"


def test_the_alias_resolves_to_the_shipped_folder():
    assert Path(models.resolve_model("organism")) == SHIPPED / "model"
    assert (SHIPPED / "model" / "config.json").is_file()


def test_shipped_digest_matches_organism_json_and_the_committed_build():
    meta = json.loads((SHIPPED / "organism.json").read_text())
    digest = organism.weights_digest(SHIPPED / "model")
    assert digest == meta["weights_sha256"]
    # the build every committed organism sweep used
    committed = json.loads((ROOT / "studies" / "results" / "organism" / "organism.json").read_text())
    assert digest == committed["weights_sha256"]
    assert meta["settings"] == committed["settings"]


def test_shipped_pool_is_the_builds_pool():
    meta = json.loads((SHIPPED / "organism.json").read_text())
    rows = read_jsonl(SHIPPED / "pool.jsonl")
    assert rows == organism.make_pool(organism.OrganismSettings(**meta["settings"]))


def test_shipped_weights_reproduce_a_committed_run_exactly(tmp_path):
    """hard-128 (T 0.6, lean path), n 32, seed 0: the step-0 evaluation and steps 1-3, every
    recorded number but wall times, from the shipped weights, in a process of one thread as the
    sweeps ran (float sums depend on the thread count)."""
    import os
    import subprocess
    import sys

    committed_cfg = json.loads((COMMITTED_RUN / "config.json").read_text())
    cfg = {**committed_cfg, "model": "organism", "out": str(tmp_path / "run"), "pause_at_rollouts": 3 * 512,
           "data": str(ROOT / "studies" / "results" / "organism" / "splits" / "hard.jsonl")}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    res = subprocess.run([sys.executable, "-m", "llm_runs.training.train", "--config", str(tmp_path / "config.json")],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    got = read_jsonl(tmp_path / "run" / "records.jsonl")
    want = read_jsonl(COMMITTED_RUN / "records.jsonl")
    assert [r["step"] for r in got] == [0, 1, 2, 3]
    skip = {"model", "data"}
    for g, w in zip(got, want[:4]):
        assert {k: v for k, v in g.items() if k not in skip and not k.endswith("_s")} == \
            {k: v for k, v in w.items() if k not in skip and not k.endswith("_s")}
