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


def test_stop_loss_ends_sft_early_and_is_part_of_the_cache_key(tmp_path):
    # a loss any model reaches at once: the build stops after the 20-step window, not at sft_steps
    s = organism.OrganismSettings.for_scale("quick", sft_steps=60, sft_stop_loss=100.0)
    logs: list[str] = []
    meta = organism.build(tmp_path / "a", s, log=logs.append)
    assert meta["sft_steps_done"] == 20 and meta["sft_curve"][-1][0] == 19
    assert meta["settings"]["sft_stop_loss"] == 100.0
    assert any("stopped after 20 steps" in line for line in logs)
    # a target never reached: every step is trained
    never = organism.build(tmp_path / "b", organism.OrganismSettings.for_scale(
        "quick", sft_steps=25, sft_stop_loss=1e-9), log=logs.append)
    assert never["sft_steps_done"] == 25 and never["sft_curve"][-1][0] == 24
    # unset, the key is left out, so builds made before the option keep their cache key
    assert "sft_stop_loss" not in organism.settings_dict(organism.OrganismSettings.for_scale("quick"))
    with pytest.raises(IsosimError, match="other settings"):
        organism.build(tmp_path / "a", organism.OrganismSettings.for_scale("quick", sft_steps=60), log=logs.append)


def test_a_larger_organism_is_built_from_the_cli(tmp_path):
    out = tmp_path / "wide"
    assert organism.main(["--out", str(out), "--scale", "quick", "--sft-steps", "3", "--hidden-size", "48",
                          "--num-layers", "3", "--num-heads", "4", "--max-terms", "3"]) == 0
    meta = json.loads((out / "organism.json").read_text())
    cfg = json.loads((out / "model" / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (48, 3, 4)
    assert meta["settings"]["max_terms"] == 3
    assert max(len(json.loads(line)["problem"].split("+")) for line in (out / "pool.jsonl").open()) <= 3


@pytest.mark.parametrize("args,message", [
    (["--hidden-size", "64", "--num-heads", "3"], "multiple of num_heads"),
    (["--num-layers", "0"], "must be positive"),
    (["--sft-stop-loss", "-1"], "sft_stop_loss must be positive"),
    (["--max-terms", "1"], "min_terms <= max_terms"),
])
def test_cli_bad_model_settings_exit_2(tmp_path, capsys, args, message):
    assert organism.main(["--out", str(tmp_path / "x"), "--scale", "quick", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x").exists()
