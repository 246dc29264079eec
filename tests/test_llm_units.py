"""llm_runs pieces on hand-made cases: rewards, advantages, estimators, loss terms, config, data."""

from __future__ import annotations

import json
import math
from math import comb

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("math_verify")
torch = pytest.importorskip("torch")

from isosim.errors import IsosimError  # noqa: E402
from llm_runs.training import grpo, metrics  # noqa: E402
from llm_runs.config import RunConfig, parse_args, scaled_lr  # noqa: E402
from llm_runs.problems.data import (EpochSampler, filter_by_pass_rate, load_jsonl, read_calibration,  # noqa: E402
                           split_train_val, write_calibration)
from llm_runs.problems.make_arith import eval_left_free, make_problems  # noqa: E402
from llm_runs.problems.rewards import extract_boxed, score, score_one  # noqa: E402
from llm_runs.training.train import derive_seed, eval_steps  # noqa: E402

pytestmark = pytest.mark.llm


# --- rewards ------------------------------------------------------------------------------------


def test_extract_boxed_takes_the_last_balanced_box():
    assert extract_boxed(r"so \boxed{1} then \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"
    assert extract_boxed(r"\fbox{7}") == "7"
    assert extract_boxed("no box") is None
    assert extract_boxed(r"\boxed{1} and \boxed{2") is None  # the last box is unclosed


def test_extract_boxed_is_bounded_on_adversarial_input():
    assert extract_boxed(r"\boxed{" + "{" * 5000 + "}" * 5000 + "}") is None  # too deep
    assert extract_boxed(r"\boxed{" + "1" * 10_000 + "}") is None  # too long
    huge = "x" * 5_000_000 + r"\boxed{42}"
    assert extract_boxed(huge) == "42"  # the tail is kept


def test_rewards_are_exact_on_hand_made_cases():
    completions = [r"The answer is \boxed{72}.", r"\boxed{72.0}", r"\boxed{71}", "72", r"\boxed{}",
                   r"\boxed{(3, \pi/2)}", r"\boxed{\dfrac{\pi}{2}}", r"\boxed{1,000}"]
    golds = ["72", "72", "72", "72", "72", r"\left( 3, \frac{\pi}{2} \right)", r"\frac{\pi}{2}", "1000"]
    assert score(completions, golds) == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]


def test_last_number_fallback_only_when_there_is_no_box():
    assert score(["8 + 2 = 10", r"\boxed{11} not 10", "no number"], ["10", "10", "10"], fallback="last-number") == [
        1.0, 0.0, 0.0]
    assert score(["8 + 2 = 10"], ["10"]) == [0.0]


def test_reward_refuses_math_verify_outside_the_main_thread():
    import threading

    out = {}
    t = threading.Thread(target=lambda: out.update(a=score_one(r"\boxed{\frac{144}{2}}", "72"),
                                                   b=score_one(r"\boxed{72}", "72"),
                                                   c=score_one(r"\boxed{72.0}", "72")))
    t.start()
    t.join()
    assert out == {"a": 0.0, "b": 1.0, "c": 1.0}  # plain numbers need no math-verify


PLAIN_PAIRS = [("216", "216"), ("216.0", "216"), ("0216", "216"), ("215", "216"), ("-3", "3"), ("-3", "-3"),
               ("2.50", "2.5"), ("2.05", "2.5"), ("1000", "100"), ("0", "-0"), ("12", "1.2")]


def test_plain_numbers_are_compared_without_math_verify_and_agree_with_it(monkeypatch):
    from math_verify import parse, verify

    expected = [float(verify(parse(f"\\boxed{{{g}}}"), parse(f"\\boxed{{{a}}}"))) for a, g in PLAIN_PAIRS]
    assert 0.0 in expected and 1.0 in expected

    def refuse(*args, **kwargs):
        raise AssertionError("math-verify was called for plain numbers")

    import math_verify
    monkeypatch.setattr(math_verify, "parse", refuse)
    got = [score_one(f"\\boxed{{{a}}}", g) for a, g in PLAIN_PAIRS]
    assert got == expected
    assert score_one(" 112,208,216", "216", fallback="last-number") == 1.0
    assert score_one(" 112,208,215", "216", fallback="last-number") == 0.0


# --- advantages -----------------------------------------------------------------------------------


def test_grpo_advantages_are_std_normalised_per_group():
    r = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
    adv = grpo.group_advantages(r, n=4, n_est=4, kind="grpo")
    # group 1: mean 1/4, unbiased std 1/2 -> (0.75, -0.25) / 0.5
    assert torch.allclose(adv[0], torch.tensor([1.5, -0.5, -0.5, -0.5]), atol=1e-5)
    # group 2: mean 1/2, unbiased std sqrt(1/3)
    s = math.sqrt(1 / 3)
    assert torch.allclose(adv[1], torch.tensor([0.5, 0.5, -0.5, -0.5]) / s, atol=1e-5)


def test_drgrpo_advantages_are_mean_only():
    adv = grpo.group_advantages(torch.tensor([1.0, 0, 0, 0]), n=4, n_est=4, kind="drgrpo")
    assert torch.allclose(adv, torch.tensor([[0.75, -0.25, -0.25, -0.25]]))


def test_zero_variance_group_gets_zero_advantage():
    adv = grpo.group_advantages(torch.tensor([1.0, 1, 1, 1, 0, 0, 0, 0]), n=4, n_est=4, kind="grpo")
    assert torch.all(adv == 0)
    zv = grpo.zero_variance_groups(torch.tensor([1.0, 1, 1, 1, 0, 1, 0, 0]), 4)
    assert zv.tolist() == [True, False]


def test_decoupled_baseline_uses_all_n_est_and_updates_on_n():
    # one problem, n_est = 8 rollouts (3 correct), update on the first n = 2 of them
    r = torch.tensor([1.0, 0, 1, 1, 0, 0, 0, 0])
    adv = grpo.group_advantages(r, n=2, n_est=8, kind="drgrpo")
    assert adv.shape == (1, 2)
    assert torch.allclose(adv, torch.tensor([[1 - 3 / 8, -3 / 8]]))
    std = r.std().item()
    adv = grpo.group_advantages(r, n=2, n_est=8, kind="grpo")
    assert torch.allclose(adv, torch.tensor([[(1 - 3 / 8) / std, (-3 / 8) / std]]), atol=1e-5)
    with pytest.raises(ValueError):
        grpo.group_advantages(r[:7], n=2, n_est=4)


# --- unbiased estimators ----------------------------------------------------------------------------


@pytest.mark.parametrize("N,k", [(4, 1), (4, 4), (16, 4), (10, 3)])
def test_estimators_match_the_binomial_formulas(N, k):
    c = np.arange(N + 1)
    best = metrics.best_at_k(c, N, k)
    worst = metrics.worst_at_k(c, N, k)
    for ci in c:
        assert best[ci] == pytest.approx(1 - comb(N - ci, k) / comb(N, k), abs=1e-12)
        assert worst[ci] == pytest.approx(comb(ci, k) / comb(N, k), abs=1e-12)
    if k == 1:
        assert np.allclose(best, c / N) and np.allclose(worst, c / N)


def test_estimators_hand_made():
    # N = 4 samples, 2 correct, k = 2: best = 1 - C(2,2)/C(4,2) = 5/6; worst = C(2,2)/C(4,2) = 1/6
    assert metrics.best_at_k(np.array([2]), 4, 2)[0] == pytest.approx(5 / 6)
    assert metrics.worst_at_k(np.array([2]), 4, 2)[0] == pytest.approx(1 / 6)
    s = metrics.summarize_eval(np.array([0, 2, 4]), 4, 2)
    assert s == pytest.approx({"val_avg": 0.5, "val_best": (0 + 5 / 6 + 1) / 3, "val_worst": (0 + 1 / 6 + 1) / 3})
    with pytest.raises(ValueError):
        metrics.best_at_k(np.array([1]), 3, 4)


def test_histogram_columns():
    h = metrics.histogram_columns(np.array([0.0, 0.0, 0.55, 1.0]))
    assert h["train_hist_0"] == 0.5 and h["train_hist_5"] == 0.25 and h["train_hist_9"] == 0.25
    assert h["train_frac_zero"] == 0.5 and h["train_frac_solved"] == 0.25


# --- loss terms ---------------------------------------------------------------------------------------


def test_kl_k3_and_tis_and_clip():
    logp = torch.tensor([[-1.0, -2.0]])
    assert torch.allclose(grpo.kl_k3(logp, logp), torch.zeros(1, 2))
    d = torch.tensor(0.5)
    assert grpo.kl_k3(torch.tensor(-1.0), torch.tensor(-0.5)).item() == pytest.approx((d.exp() - d - 1).item())
    w = grpo.tis_weights(torch.tensor([0.0, 0.0]), torch.tensor([-2.0, 0.5]), cap=2.0)
    assert torch.allclose(w, torch.tensor([2.0, math.exp(-0.5)]))
    loss, clipped = grpo.clipped_pg_loss(torch.tensor([[math.log(1.5)]]), torch.tensor([[0.0]]),
                                         torch.tensor([[1.0]]), 0.2, 0.2)
    assert loss.item() == pytest.approx(-1.2) and clipped.item() == 1.0
    loss, clipped = grpo.clipped_pg_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([[-2.0]]), 0.2, 0.2)
    assert loss.item() == pytest.approx(2.0) and clipped.item() == 0.0


def test_token_weights_sum_to_one_over_the_batch():
    mask = torch.tensor([[1.0, 1, 1, 0], [1, 0, 0, 0]])
    for kind in ("token-mean", "seq-mean-token-mean"):
        w = grpo.token_weights(mask, kind, num_tokens=4, num_seqs=2, max_len=4)
        assert w.sum().item() == pytest.approx(1.0)
    w = grpo.token_weights(mask, "seq-mean-token-sum-norm", 4, 2, max_len=8)
    assert w.sum().item() == pytest.approx(4 / 16)
    w = grpo.token_weights(mask, "seq-mean-token-mean", 4, 2, 4)
    assert w[0, 0].item() == pytest.approx(1 / 6) and w[1, 0].item() == pytest.approx(1 / 2)


def test_pack_layout():
    t = grpo.pack([[5, 6, 7], [8]], [[1, 2], [3, 4, 9]], pad_id=0)
    assert t["input_ids"].tolist() == [[5, 6, 7, 1, 2, 0], [0, 0, 8, 3, 4, 9]]
    assert t["position_ids"].tolist()[1][2:] == [0, 1, 2, 3]
    assert t["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]


# --- config ------------------------------------------------------------------------------------------


def test_config_derives_lr_and_recipe():
    cfg = RunConfig(data="x.jsonl", n=16, b_p=64, budget=1024 * 10)
    assert cfg.lr == pytest.approx(1e-6)  # B = 1024 = B_ref
    assert RunConfig(data="x", n=8, b_p=32, budget=256).lr == pytest.approx(1e-6 * math.sqrt(256 / 1024))
    assert scaled_lr(1e-6, 4096, 1024, "linear") == pytest.approx(4e-6)
    assert scaled_lr(1e-6, 4096, 1024, "constant") == pytest.approx(1e-6)
    easy, hard = RunConfig(data="x", budget=256), RunConfig(data="x", budget=256, recipe="hard")
    assert easy.kl_coef > 0 and easy.entropy_coef > 0 and hard.kl_coef == 0 and hard.entropy_coef == 0
    assert RunConfig(data="x", budget=256, recipe="hard", kl_coef=0.1).kl_coef == 0.1
    d = RunConfig(data="x", n=2, n_est=8, b_p=4, budget=100)
    assert d.rollouts_per_step == 32 and d.total_steps == 3


@pytest.mark.parametrize("kwargs,needle", [
    ({"n": 0}, "n must be >= 1"),
    ({"budget": 10}, "smaller than one step"),
    ({"n": 4, "n_est": 2}, "n_est (2) must be >= n (4)"),
    ({"n": 1}, "zero advantage"),
    ({"eval_n": 2, "eval_k": 4}, "draw k of N"),
    ({"sampler": "tgi"}, "sampler must be one of"),
    ({"data": ""}, "data is required"),
])
def test_config_errors_state_the_invariant(kwargs, needle):
    base = {"data": "x.jsonl", "n": 4, "b_p": 4, "budget": 64}
    with pytest.raises(IsosimError, match=None) as exc:
        RunConfig(**{**base, **kwargs})
    assert needle in str(exc.value)


def test_flags_override_the_config_file(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"data": "a.jsonl", "n": 4, "b_p": 8, "budget": 1000, "tis": False}))
    cfg = parse_args(["--config", str(f), "--n", "8", "--no-tis", "--lr", "1e-3", "--val-data", "none"])
    assert (cfg.n, cfg.b_p, cfg.tis, cfg.lr, cfg.val_data) == (8, 8, False, 1e-3, None)
    f.write_text(json.dumps({"data": "a.jsonl", "budget": 1000, "bogus": 1}))
    with pytest.raises(IsosimError, match="unknown setting"):
        parse_args(["--config", str(f)])
    with pytest.raises(IsosimError, match="must be an integer"):
        parse_args(["--data", "a", "--budget", "64", "--n", "four"])


# --- data ----------------------------------------------------------------------------------------------


def test_load_jsonl_and_errors(tmp_path):
    good = tmp_path / "g.jsonl"
    good.write_text('{"id": "a", "problem": "1+1?", "answer": 2}\n\n{"id": "b", "problem": "2+2?", "answer": "4"}\n')
    probs = load_jsonl(good)
    assert [(p.id, p.answer) for p in probs] == [("a", "2"), ("b", "4")]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"id": "a", "problem": "1+1?", "answer": "2"}\n{"id": "b", "problem": "no answer"}\n')
    with pytest.raises(IsosimError, match=r"b.jsonl:2: record has no 'answer'"):
        load_jsonl(bad)
    bad.write_text('{"id": "a", "problem": "1+1?", "answer": "2"}\n{not json\n')
    with pytest.raises(IsosimError, match=r"b.jsonl:2: not valid JSON"):
        load_jsonl(bad)
    bad.write_text('{"id": "a", "problem": "x", "answer": "2"}\n{"id": "a", "problem": "y", "answer": "3"}\n')
    with pytest.raises(IsosimError, match="duplicate id"):
        load_jsonl(bad)
    with pytest.raises(IsosimError, match="no such data file"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_real_data_files_load():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "math500.jsonl"
    if not path.exists():
        pytest.skip("shared/data is not beside the repository")
    probs = load_jsonl(path)
    assert len(probs) == 500 and all(p.answer for p in probs)


def test_split_and_calibration_filter(tmp_path):
    probs = [type("P", (), {"id": str(i)})() for i in range(20)]
    train, val = split_train_val(probs, 5, seed=0)
    assert len(train) == 15 and len(val) == 5 and not {p.id for p in train} & {p.id for p in val}
    assert [p.id for p in split_train_val(probs, 5, seed=0)[1]] == [p.id for p in val]
    with pytest.raises(IsosimError, match="val_size"):
        split_train_val(probs, 20, seed=0)
    path = write_calibration(tmp_path / "cal.json", [str(i) for i in range(20)], [i / 19 for i in range(20)], k=16,
                             meta={"model": "m"})
    cal = read_calibration(path)
    assert cal["k"] == 16 and cal["meta"] == {"model": "m"} and len(cal["rates"]) == 20
    kept = filter_by_pass_rate(probs, cal["rates"], 0.3, 0.6)
    assert [p.id for p in kept] == [str(i) for i in range(20) if 0.3 <= i / 19 <= 0.6]
    with pytest.raises(IsosimError, match="no problem has a pass rate"):
        filter_by_pass_rate(probs, cal["rates"], 0.99, 0.995)
    (tmp_path / "bad.json").write_text('{"ids": [1, 2], "rates": [0.5]}')
    with pytest.raises(IsosimError, match="2 ids but 1 rates"):
        read_calibration(tmp_path / "bad.json")


def test_epoch_sampler_covers_each_epoch_and_resumes_exactly():
    s = EpochSampler(10, seed=3)
    first = s.next(4) + s.next(4)
    tail = s.next(4)  # runs into epoch 1
    assert sorted(first + tail[:2]) == list(range(10)) and s.epoch == 1
    state = s.state_dict()
    expect = [s.next(3) for _ in range(5)]
    t = EpochSampler(10, seed=3)
    t.load_state_dict(state)
    assert [t.next(3) for _ in range(5)] == expect


def test_eval_steps_and_seeds():
    assert eval_steps(100, 5) == [0, 1, 3, 10, 32, 100]
    assert eval_steps(1, 8) == [0, 1]
    assert derive_seed(0, 1, 0, 0) == derive_seed(0, 1, 0, 0) != derive_seed(0, 2, 0, 0)


def test_make_arith_is_seeded_and_correct():
    a, b = make_problems(50, seed=1), make_problems(50, seed=1)
    assert a == b and len({p["problem"] for p in a}) == 50
    for p in make_problems(30, seed=2, ops="+-", terms=3):
        expr = p["problem"][len("What is "):-1].split()
        val = int(expr[0])
        for op, x in zip(expr[1::2], expr[2::2]):
            val = val + int(x) if op == "+" else val - int(x)
        assert str(val) == p["answer"]
    assert eval_left_free("2 + 3 * 4 - 1") == 13
