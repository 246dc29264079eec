"""The second shipped organism (``--model organism-hard``, the harder task family): its weights are
its card's, its pool is its build's, and it reproduces its committed reference on any x86-64 CPU.

The reference (``tests/fixtures/organism_hard_reference.json``, written by
``scripts/organism_reference.py``) holds, on the first 32 pool problems, the greedy continuation
with its smallest logit margin, the summed log-probability of that continuation and the
next-token logits after four prompts. Token ids are compared exactly where the margin is at least
:data:`MARGIN` (a flip needs a float error that large); log-probabilities and logits within
:data:`TOL`. Measured spread of those floats between ATen's CPU kernels (``ATEN_CPU_CAPABILITY``
default, avx2 and avx512, on an Intel AVX-512 Xeon, 2026-12-06): :data:`SPREAD`, 5 to 20 times
below :data:`TOL`; every greedy path is the same under the three, and its smallest margin is .059.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from llm_helpers import read_jsonl  # noqa: E402

from llm_runs.organism import build as organism  # noqa: E402
from llm_runs.sampling import models  # noqa: E402
from llm_runs import cards  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "llm_runs" / "organism" / "shipped_hard"
REFERENCE = ROOT / "tests" / "fixtures" / "organism_hard_reference.json"
RESULTS = ROOT / "studies" / "results" / "organism_hard"
SPREAD = {"logprob": 5.8e-6, "min_margin": 1.8e-5, "first_logits": 5.5e-6}
"""largest difference from the avx512 reference (``scripts/organism_reference.py --compare``):
default 4.4e-6 / 1.2e-5 / 5.5e-6, avx2 5.8e-6 / 1.8e-5 / 4.5e-6"""
MARGIN = 1e-3
TOL = 1e-4

spec = importlib.util.spec_from_file_location("organism_reference", ROOT / "scripts" / "organism_reference.py")
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


def test_both_organisms_resolve_through_the_one_registry():
    assert set(cards.SHIPPED) == {"organism", "organism-hard"}
    assert Path(models.resolve_model("organism-hard")) == SHIPPED / "model"
    assert Path(models.resolve_model("ORGANISM-HARD")) == SHIPPED / "model"
    assert Path(models.resolve_model("organism")) == models.ORGANISM_DIR


def test_card_digest_settings_and_size():
    card = json.loads((SHIPPED / "organism.json").read_text())
    assert organism.weights_digest(SHIPPED / "model") == card["weights_sha256"]
    s = organism.OrganismSettings(**card["settings"])
    assert (s.min_terms, s.max_terms, s.max_digits, s.sft_stop_loss, s.seed) == (2, 6, 3, 0.153, 0)
    assert (card["prompt_template"], card["instruction"], card["answer_fallback"]) == ("plain", "", "last-number")
    assert card["model"] == "model" and card["pool"] == "pool.jsonl" and card["name"] == "organism-hard"
    assert card["sft_steps_done"] < s.sft_steps  # stopped at the loss, not at the cap
    from safetensors.torch import load_file

    tensors = load_file(str(SHIPPED / "model" / "model.safetensors"))
    assert sum(t.numel() for t in tensors.values()) == card["parameters"]  # tied embeddings stored once
    size = sum(f.stat().st_size for f in SHIPPED.rglob("*") if f.is_file())
    assert size < 2.5e6, f"the shipped organism takes {size / 1e6:.1f} MB"


def test_pool_is_the_builds_pool_and_the_splits_come_from_it():
    card = json.loads((SHIPPED / "organism.json").read_text())
    rows = read_jsonl(SHIPPED / "pool.jsonl")
    assert rows == organism.make_pool(organism.OrganismSettings(**card["settings"]))
    profile = json.loads((RESULTS / "profile.json").read_text())
    rate = dict(zip(profile["ids"], profile["rates"]))
    pool = {r["id"]: r for r in rows}
    hard = read_jsonl(RESULTS / "splits" / "hard.jsonl")
    easy = read_jsonl(RESULTS / "splits" / "easy.jsonl")
    assert hard and easy
    assert all(pool[r["id"]]["problem"] == r["problem"] and rate[r["id"]] <= 1 / 16 for r in hard)
    assert all(0.3 <= rate[r["id"]] <= 0.6 for r in easy)
    assert sum(v <= 1 / 16 for v in rate.values()) == len(hard)


@pytest.mark.cpu_sensitive
def test_shipped_weights_reproduce_the_reference():
    want = json.loads(REFERENCE.read_text())
    card = json.loads((SHIPPED / "organism.json").read_text())
    assert want["weights_sha256"] == card["weights_sha256"]
    got = ref.compute("organism-hard", want["prompts"], want["max_new_tokens"], len(want["first_logits"]))
    sure = [i for i, r in enumerate(want["greedy"]) if r["min_margin"] >= MARGIN]
    assert len(sure) >= 24, "too few prompts with a clear greedy path to test"
    for i in sure:
        g, w = got["greedy"][i], want["greedy"][i]
        assert (g["id"], g["tokens"], g["text"], g["correct"]) == (w["id"], w["tokens"], w["text"], w["correct"])
        assert g["logprob"] == pytest.approx(w["logprob"], abs=TOL)
        assert g["min_margin"] == pytest.approx(w["min_margin"], abs=TOL)
    assert sum(got["greedy"][i]["correct"] for i in sure) == sum(want["greedy"][i]["correct"] for i in sure)
    for g, w in zip(got["first_logits"], want["first_logits"]):
        assert g == pytest.approx(w, abs=TOL)
