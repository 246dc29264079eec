"""The shipped model organism: its weights are the committed build's, and they reproduce a
committed run's records (step-0 evaluation and the first update steps): every sampled outcome
exactly, the float means over tokens to the spread measured across CPU kinds."""

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


@pytest.mark.cpu_sensitive
def test_shipped_weights_reproduce_a_committed_run(tmp_path):
    """hard-128 (T 0.6, lean path), n 32, seed 0: the step-0 evaluation and steps 1-3 from the shipped
    weights, in a process of one thread as the sweeps ran: every sampled outcome (counts, rewards,
    pass rates, lengths) exactly, the float32 means over tokens to the spread measured across CPU
    kinds (tests/organism_reproduction.py says which and how far)."""
    from organism_reproduction import read_records, record_differences, rerun_first_steps

    got = rerun_first_steps(COMMITTED_RUN, ROOT / "studies" / "results" / "organism" / "splits" / "hard.jsonl",
                            tmp_path, steps=3)
    assert [r["step"] for r in got] == [0, 1, 2, 3]
    bad = record_differences(got, read_records(COMMITTED_RUN / "records.jsonl"))
    assert not bad, "\n".join(bad)


def test_the_record_comparison_sees_what_can_move_only_by_a_real_change():
    from organism_reproduction import read_records, record_differences

    want = read_records(COMMITTED_RUN / "records.jsonl")[:4]
    assert record_differences(want, want) == []
    w = want[1]
    assert w["entropy"] and w["sampler_logprob_gap_max"] is not None
    # within the measured CPU-kind spread: entropy 2.5e-6 relative, the gaps round-off of any size
    same = {**w, "entropy": w["entropy"] * (1 + 5e-6), "sampler_logprob_gap_max": 2.6 * w["sampler_logprob_gap_max"],
            "sampler_logprob_gap_mean": 0.5 * w["sampler_logprob_gap_mean"], "wall_s": 99.0, "model": "elsewhere"}
    assert record_differences([want[0], same], want[:2]) == []
    for change in ({"val_avg": w["val_avg"] + 1 / 2400}, {"train_reward": w["train_reward"] + 1 / 512},
                   {"tokens": w["tokens"] + 1}, {"entropy": w["entropy"] * (1 + 1e-4)},
                   {"sampler_logprob_gap_max": 2e-3}, {"train_hist_2": None}, {"lr": w["lr"] * (1 + 1e-12)}):
        bad = record_differences([want[0], {**w, **change}], want[:2])
        assert len(bad) == 1 and bad[0].startswith(f"step 1: {next(iter(change))}:"), (change, bad)
    assert record_differences(want + [want[-1]], want[:4])  # a record more than the committed run has
