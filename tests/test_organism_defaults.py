"""``--model organism`` runs with the organism's own settings (its card's) in calibrate, validate
and train, flags still override them and the plan says where each came from; a profile nobody
solves is flagged; validate checks its inputs before any expensive work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_runs import cards
from llm_runs.config import RunConfig, parse_args

ROOT = Path(__file__).resolve().parents[1]
EASY = ROOT / "studies" / "results" / "organism" / "splits" / "easy.jsonl"


from cli_helpers import one_line_error, run  # noqa: E402  (tests/cli_helpers.py)


# --------------------------------------------------------------------------------------------
# the card
# --------------------------------------------------------------------------------------------
def test_the_shipped_card_holds_the_settings_the_committed_sweeps_used():
    committed = json.loads((ROOT / "studies" / "results" / "organism" / "real" / "easy" / "n4_bp16_s0" /
                            "config.json").read_text())
    d = cards.run_defaults("organism")
    for key in ("prompt_template", "instruction", "answer_fallback", "temperature", "max_new_tokens", "base_lr",
                "lr_rule", "lr_ref_batch", "warmup_steps", "precision", "eval_n", "eval_k"):
        assert d[key] == committed[key], key
    assert cards.run_defaults("smollm2-135m") == {} and cards.run_defaults("/some/folder") == {}
    assert cards.run_threads("organism") == 1 and cards.run_threads("Qwen/Qwen2.5-7B") is None


def test_run_config_takes_the_card_under_what_is_given():
    base = {"data": "x.jsonl", "n": 4, "b_p": 16, "budget": 640}
    org = RunConfig.from_dict({**base, "model": "organism"})
    assert (org.prompt_template, org.instruction, org.answer_fallback) == ("plain", "", "last-number")
    assert (org.base_lr, org.max_new_tokens, org.temperature, org.sampler) == (3e-4, 24, 1.0, "lean")
    assert org.lr == pytest.approx(3e-4 * (64 / 1024) ** 0.5)
    mine = RunConfig.from_dict({**base, "model": "Organism", "base_lr": 1e-3, "prompt_template": "chat"})
    assert (mine.base_lr, mine.prompt_template, mine.instruction) == (1e-3, "chat", "")
    other = RunConfig.from_dict({**base, "model": "smollm2-135m"})
    assert (other.prompt_template, other.base_lr, other.max_new_tokens) == ("chat", 1e-6, 8192)


def test_train_flags_say_what_the_card_gave():
    said = []
    cfg = parse_args(["--model", "organism", "--data", "x.jsonl", "--budget", "640", "--n", "4", "--b-p", "16",
                      "--temperature", "0.6"], log=said.append)
    assert cfg.temperature == 0.6 and cfg.prompt_template == "plain"
    assert len(said) == 1 and "organism card" in said[0] and "temperature" not in said[0]
    assert "prompt_template='plain'" in said[0] and "base_lr=0.0003" in said[0]


def test_a_second_shipped_model_is_one_entry(tmp_path, monkeypatch):
    """The lookup is by name: another shipped folder with a card and weights serves the same way."""
    from llm_runs.sampling import models

    folder = tmp_path / "hard"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "model.safetensors").write_bytes(b"")
    (folder / "organism.json").write_text(json.dumps({"prompt_template": "plain", "instruction": "",
                                                       "answer_fallback": "last-number",
                                                       "run_defaults": {"max_new_tokens": 40, "base_lr": 1e-4}}))
    monkeypatch.setitem(cards.SHIPPED, "organism-hard", folder)
    cfg = RunConfig.from_dict({"model": "organism-hard", "data": "x.jsonl", "n": 4, "b_p": 16, "budget": 640})
    assert (cfg.max_new_tokens, cfg.base_lr, cfg.prompt_template) == (40, 1e-4, "plain")
    assert models.resolve_model("organism-hard") == str(folder / "model")
    assert "organism-hard card" in cards.defaults_source("organism-hard")


# --------------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------------
def test_calibrate_settings_come_from_the_card_then_the_flags():
    from llm_runs.launch.calibrate import calibrate_settings

    s, note = calibrate_settings("organism", "x.jsonl", {}, k=4)
    assert (s.prompt_template, s.instruction, s.answer_fallback, s.max_new_tokens, s.temperature) == \
        ("plain", "", "last-number", 24, 1.0)
    assert "from the organism card" in note
    s, note = calibrate_settings("organism", "x.jsonl", {"temperature": 0.6}, k=4)
    assert s.temperature == 0.6 and "from the flags: temperature=0.6" in note
    s, note = calibrate_settings("smollm2-135m", "x.jsonl", {}, k=4)
    assert (s.prompt_template, s.answer_fallback, s.max_new_tokens) == ("chat", "none", 1024)
    assert "card" not in note and "defaults:" in note


def test_a_profile_never_solved_is_flagged(tmp_path):
    from llm_runs.launch.calibrate import CalibrateSettings, finish
    from llm_runs.problems.data import Problem

    s = CalibrateSettings(model="organism", data="x.jsonl", k=4)
    problems = [Problem(id=str(i), problem=f"{i}+1", answer=str(i + 1)) for i in range(10)]
    said = []
    finish(s, problems, {p.id: {"rate": 0.0, "mean_len": 5.0} for p in problems}, tmp_path / "p.json", None,
           log=said.append)
    warning = [line for line in said if line.startswith("warning:")]
    assert len(warning) == 1 and "100% of the problems were never solved" in warning[0]
    assert "prompt_template" in warning[0] and "answer_fallback" in warning[0]
    said.clear()
    finish(s, problems, {p.id: {"rate": 0.5 * (i % 2), "mean_len": 5.0} for i, p in enumerate(problems)},
           tmp_path / "q.json", None, log=said.append)
    assert not [line for line in said if line.startswith("warning:")]


# --------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------
def test_validate_plans_the_organisms_settings_and_says_where_each_came_from(tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path / "cache"))
    code, out, err = run(monkeypatch, capsys, "validate", "--model", "organism", "--data", EASY, "--budget", 4096,
                         "--n", "4,16", "--b-p", 16, "--quick", "--dry-run", "--train-size", 3200,
                         "--set", "eval_points=3", "--out", tmp_path / "v")
    assert code == 0, err
    cfg = json.loads((tmp_path / "v" / "runs" / "n4_bp16_s0" / "config.json").read_text())
    assert (cfg["prompt_template"], cfg["instruction"], cfg["answer_fallback"]) == ("plain", "", "last-number")
    assert (cfg["max_new_tokens"], cfg["base_lr"], cfg["temperature"], cfg["eval_points"]) == (24, 3e-4, 1.0, 3)
    note = [line for line in out.splitlines() if "note: settings" in line]
    assert len(note) == 1 and "from the organism card" in note[0] and "from --set: eval_points='3'" in note[0]
    assert "lr=7.5e-05" in out  # 3e-4 * sqrt(64 / 1024)
    assert "fewer than --min-steps 20" in out and "kept as asked" in out  # n = 16 gets 16 steps


def test_validate_refuses_a_bad_n_before_predicting(tmp_path, monkeypatch, capsys):
    from llm_runs.launch import validate as val

    def predicted(*a, **kw):
        raise AssertionError("validate predicted before checking --n")

    monkeypatch.setattr(val, "predict", predicted)
    code, _, err = run(monkeypatch, capsys, "validate", "--model", "organism", "--data", EASY, "--budget", 4096,
                       "--n", "0,4", "--train-size", 100, "--dry-run", "--out", tmp_path / "v")
    one_line_error(code, err, "--n 0", "n >= 2")
    code, _, err = run(monkeypatch, capsys, "validate", "--model", "organism", "--data", EASY, "--budget", 4096,
                       "--n", "4,512", "--b-p", 16, "--train-size", 100, "--dry-run", "--out", tmp_path / "v")
    one_line_error(code, err, "--n 512", "below one step")
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("model", ["/nonexistent", "./no/such/model.gguf", "no/such/deep/folder"])
def test_validate_refuses_a_model_that_is_not_there(model, tmp_path, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "validate", "--model", model, "--data", EASY, "--budget", 4096,
                       "--train-size", 100, "--quick", "--dry-run", "--out", tmp_path / "v")
    one_line_error(code, err, model)
    assert not (tmp_path / "v").exists()


def test_validate_says_what_it_does_before_the_prediction(tmp_path, monkeypatch, capsys):
    """Piped, a dry run used to print nothing until the prediction was done (30-40 s)."""
    from llm_runs.launch import validate as val

    seen = []

    def predicted(*a, **kw):
        seen.append(capsys.readouterr().out)
        raise val.IsosimError("stop here")

    monkeypatch.setattr(val, "predict", predicted)
    code, _, err = run(monkeypatch, capsys, "validate", "--model", "organism", "--data", EASY, "--budget", 4096,
                       "--train-size", 100, "--quick", "--dry-run", "--out", tmp_path / "v")
    assert code == 2 and "stop here" in err
    assert len(seen) == 1 and seen[0].startswith("validate: predicting n*(C = 4096) from the easy preset")
