"""The model organism's builder: seeded and reproducible, cached, refuses a folder of other settings."""

import json

import pytest

pytest.importorskip("transformers")

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.organism import build as organism  # noqa: E402


def test_pool_is_seeded_distinct_and_answers_are_sums():
    s = organism.OrganismSettings.for_scale("quick")
    a, b = organism.make_pool(s), organism.make_pool(s)
    assert a == b
    assert len({r["problem"] for r in a}) == len(a) == s.pool_size
    for r in a:
        terms = [int(t) for t in r["problem"].split("+")]
        assert s.min_terms <= len(terms) <= s.max_terms
        assert int(r["answer"]) == sum(terms)
        assert organism.worked_answer(terms).split(",")[-1].strip() == r["answer"]
    other = organism.make_pool(organism.OrganismSettings.for_scale("quick", seed=1))
    assert [r["problem"] for r in other] != [r["problem"] for r in a]


def test_build_reproducible_cached_and_guarded(tmp_path):
    s = organism.OrganismSettings.for_scale("quick", sft_steps=12)
    logs: list[str] = []
    m1 = organism.build(tmp_path / "a", s, log=logs.append)
    m2 = organism.build(tmp_path / "b", s, log=logs.append)
    assert m1["weights_sha256"] == m2["weights_sha256"]  # same seed, same weights
    assert m1["sft_curve"][-1][1] < m1["sft_curve"][0][1]  # supervised training lowered the loss
    assert (tmp_path / "a" / "pool.jsonl").read_text() == (tmp_path / "b" / "pool.jsonl").read_text()
    again = organism.build(tmp_path / "a", s, log=logs.append)  # the cache: nothing rebuilt
    assert again == json.loads((tmp_path / "a" / "organism.json").read_text())
    assert any("cached" in line for line in logs)
    m3 = organism.build(tmp_path / "c", organism.OrganismSettings.for_scale("quick", sft_steps=12, seed=1),
                        log=logs.append)
    assert m3["weights_sha256"] != m1["weights_sha256"]
    with pytest.raises(IsosimError, match="other settings"):
        organism.build(tmp_path / "a", organism.OrganismSettings.for_scale("quick", sft_steps=13), log=logs.append)


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert organism.main(["--out", str(tmp_path / "x"), "--scale", "huge"]) == 2
    assert "unknown scale" in capsys.readouterr().err


def test_a_build_gives_the_callers_thread_count_back(tmp_path):
    # the build trains on its own thread count; a process that builds and then trains (a test
    # session, a notebook) must keep its own, or its later runs change
    import torch

    from llm_runs.organism import build as organism

    before = torch.get_num_threads()
    threads = 1 if before != 1 else 2
    organism.build(tmp_path / "o", organism.OrganismSettings.for_scale("quick", sft_steps=2, threads=threads),
                   log=lambda m: None)
    assert torch.get_num_threads() == before
