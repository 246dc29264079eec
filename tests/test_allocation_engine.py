"""Per-problem allocation in the simulator engine (isosim.sim.engine.allocated)."""

import numpy as np
import pandas as pd
import pytest
import torch

from isosim.errors import IsosimError
from isosim.sim import allocation as alloc_mod
from isosim.sim import engine
from isosim.sim.config import SimConfig
from isosim.sim.engine import ADV_EPS, LinearFeatures, advantages, logit_gradient, simulate

SMALL = dict(n_train=48, n_val=32, b_p=8, eval_points=5)
METRICS = ["step", "rollouts", "tokens", "train_reward", "val_avg", "val_best", "val_worst", "entropy", "kl"]


@pytest.mark.parametrize("mode", ["grpo", "drgrpo"])
def test_count_gradient_with_unequal_groups_equals_per_sample_gradient(mode):
    """Groups of sizes n_i in one batch: each group's mean and std from its own draws, the loss
    a mean over all the batch's rollouts, against autograd through every sampled rollout."""
    gen = torch.Generator().manual_seed(0)
    sizes = torch.tensor([1, 2, 3, 7, 12, 5])
    B, K = len(sizes), 5
    z = torch.randn(B, K, generator=gen, dtype=torch.float64, requires_grad=True)
    correct = (torch.rand(B, K, generator=gen) < 0.4).double()
    correct[:, 0] = 1.0
    pi = torch.softmax(z, -1).detach()
    total = int(sizes.sum())
    loss = 0.0
    counts = torch.zeros(B, K, dtype=torch.float64)
    logpi = torch.log_softmax(z, -1)
    for i, n in enumerate(sizes.tolist()):
        a = torch.multinomial(pi[i], n, replacement=True, generator=gen)
        r = correct[i, a]
        adv = r - r.mean()
        if mode == "grpo":
            sd = r.std() if n > 1 else torch.zeros((), dtype=torch.float64)
            adv = adv / (sd + ADV_EPS)
        loss = loss + (adv * logpi[i, a]).sum() / total
        counts[i].index_put_((a,), torch.ones(n, dtype=torch.float64), accumulate=True)
    (ref,) = torch.autograd.grad(loss, z)
    m = (counts * correct).sum(-1)
    n_b = sizes.double()[None]
    A = advantages(correct[None], (m / sizes)[None], n_b, torch.tensor([[mode == "grpo"]]))
    g = logit_gradient(counts[None], A, pi[None])[0] / total
    torch.testing.assert_close(g, ref, atol=1e-12, rtol=1e-10)


def _cfgs(**kw):
    base = SimConfig(steps=40, **SMALL, **kw)
    return [base.replace(allocation=rule, n=n, seed=s, b_p=bp)
            for s, (rule, n, bp) in enumerate([("filter", 4, 8), ("variance", 8, 8), ("knapsack", 6, 4),
                                               ("band", 80, 8), ("knapsack", 100, 8)])]


def test_every_rule_spends_uniform_compute_and_runs_reproducibly():
    cfgs = _cfgs(profile="hard:0.5,easy:0.5")
    a = simulate(cfgs)
    pd.testing.assert_frame_equal(a, simulate(cfgs), check_exact=True)
    uni = simulate([c.replace(allocation="uniform") for c in cfgs])
    np.testing.assert_array_equal(a.rollouts.to_numpy(), uni.rollouts.to_numpy())
    assert set(a.allocation) == {"filter", "variance", "knapsack", "band"} and "allocation" not in uni
    assert not np.allclose(a.train_reward, uni.train_reward)


def test_allocated_runs_equal_runs_one_by_one():
    cfgs = _cfgs(kl=0.2, memorize=0.3) + _cfgs(mean_len=50.0)
    together = simulate(cfgs)
    alone = pd.concat([simulate([c]) for c in cfgs], ignore_index=True)
    pd.testing.assert_frame_equal(together[["run_id"] + METRICS], alone[["run_id"] + METRICS],
                                  check_exact=False, rtol=1e-9, atol=1e-12)


def test_closed_form_and_general_step_agree_with_unequal_groups(monkeypatch):
    cfgs = _cfgs(kl=0.3, entropy=0.05, profile="hard:0.5,easy:0.5")
    monkeypatch.setattr(engine.streams, "CORRECT_ONLY", False)
    closed = simulate(cfgs)
    monkeypatch.setattr(LinearFeatures, "_closed_form", lambda self, *a: None)
    general = simulate(cfgs)
    pd.testing.assert_frame_equal(closed[["run_id"] + METRICS], general[["run_id"] + METRICS],
                                  check_exact=False, rtol=1e-10, atol=1e-12)


def test_the_estimator_sees_only_sampled_outcomes(monkeypatch):
    """Every update is whole correct counts within each group's own rollouts, the groups'
    sizes sum to the uniform step's compute, and knapsack gives unequal sizes."""
    seen = []
    original = alloc_mod.PassRateEstimator.update

    def spy(self, ids, successes, trials):
        seen.append((np.asarray(successes), np.asarray(trials)))
        return original(self, ids, successes, trials)

    monkeypatch.setattr(alloc_mod.PassRateEstimator, "update", spy)
    cfg = SimConfig(steps=30, allocation="knapsack", n=8, profile="hard:0.5,easy:0.5", **SMALL)
    simulate([cfg])
    assert len(seen) == 30
    for s, t in seen:
        assert t.sum() == cfg.b_p * cfg.n and np.all(s == np.rint(s)) and np.all((0 <= s) & (s <= t))
    assert any(len(set(t.tolist())) > 1 for _, t in seen)


def test_uniform_ids_and_columns_are_unchanged():
    cfg = SimConfig(**SMALL)
    assert cfg.replace(allocation="uniform").run_id == cfg.run_id
    assert cfg.replace(allocation="knapsack").run_id != cfg.run_id
    assert "allocation" not in cfg.settings()


@pytest.mark.parametrize("kwargs, match", [
    (dict(allocation="greedy"), "unknown allocation rule 'greedy'"),
    (dict(allocation="filter", n_est=16), "decoupled baseline"),
    (dict(allocation="band", zero_var_filter=True), "zero_var_filter"),
])
def test_bad_allocation_settings_raise_one_clear_error(kwargs, match):
    with pytest.raises(IsosimError, match=match):
        SimConfig(**kwargs)


# ----------------------------------------------------------------------------------------
# isosim.predict.allocation: the comparison against uniform and the advice
# ----------------------------------------------------------------------------------------
from isosim.predict import allocation as A  # noqa: E402


def test_crossing_reads_uniform_curve_in_log_compute():
    c = np.array([0.0, 10.0, 100.0, 1000.0])
    r = np.array([0.1, 0.2, 0.4, 0.5])
    assert A.crossing(c, r, 0.3) == pytest.approx(10 ** 1.5)
    assert A.crossing(c, r, 0.2) == 10.0
    assert A.crossing(c, r, 0.6) is None


def test_comparison_is_paired_and_reads_ratios_off_uniform():
    base = dict(SMALL, profile="hard:0.5,easy:0.5", optimizer="adam", lr=0.05)
    summary = A.compare(base, [4, 8], 4000, seeds=(0, 1, 2), rules=("knapsack",), extend=3.0)
    r, u = summary["rules"]["knapsack"], summary["rules"]["uniform"]
    assert summary["n_values"] == [4, 8] and summary["seeds"] == 3
    assert u["gain"] == 0.0 and u["se"] == 0.0
    for n in ("4", "8"):
        p = r["per_n"][n]
        assert p["gain"] == pytest.approx(p["reward"] - p["uniform"])
        assert p["ratio"] is None or 0 < p["ratio"] <= 3.0
    assert r["n_star"] in (4, 8)
    line = A.verdict(summary)
    assert "knapsack" in line and "C = 4e+03" in line


def test_ratio_text_and_verdict_rules():
    assert A.ratio_text(None, 4.0) == "> 4x" and A.ratio_text(2.5, 4.0) == "2.50x"
    assert A.ratio_text(0.2, 4.0, significant=False) == "~1x (n.s.)"
    mk = lambda g, se: {"budget": 1e5, "extend": 4.0, "metric": "val_avg",  # noqa: E731
                        "rules": {"uniform": {"gain": 0.0}, "band": {"gain": g, "se": se, "ratio": 2.0, "n_star": 8,
                                                                      "significant": abs(g) > 2 * se}}}
    assert "is predicted to pay" in A.verdict(mk(0.03, 0.005))
    assert "not predicted to pay" in A.verdict(mk(0.03, 0.02))  # within noise
    assert "not predicted to pay" in A.verdict(mk(0.002, 0.0001))  # significant but below half a point


def test_advice_reads_the_committed_study_for_presets_and_prints_the_organism_record(tmp_path):
    summary = {"budget": 2e5, "extend": 4.0, "metric": "val_avg",
               "rules": {"uniform": {"gain": 0.0, "se": 0.0, "ratio": 1.0, "n_star": 8},
                         "knapsack": {"gain": 0.05, "se": 0.01, "ratio": None, "n_star": 16, "significant": True}}}
    study = tmp_path / "allocation.json"
    study.write_text(__import__("json").dumps({"settings": {"easy/128": summary}}))
    a = A.advice({}, 8, 1e6, preset="easy", train_size=128, study=study,
                 simulate=lambda cfgs: pytest.fail("a committed setting is not simulated"))
    assert "committed study" in a["source"] and "knapsack" in a["verdict"]
    org = tmp_path / "org"
    org.mkdir()
    (org / "prediction.json").write_text(__import__("json").dumps(
        {"settings": {"easy-n4": {"predicted": {"rule": "band", "gain": 0.004, "se": 0.001, "ratio": 2.0}}}}))
    lines = A.advice_lines(a, A.organism_record(org))
    assert any("> 4x" in x for x in lines) and any("easy-n4" in x and "not measured yet" in x for x in lines)
    (org / "measured.json").write_text(__import__("json").dumps(
        {"settings": {"easy-n4": {"measured": {"rule": "band", "gain": 0.01, "se": 0.004, "ratio": 1.5}}}}))
    lines = A.advice_lines(a, A.organism_record(org))
    assert any("measured +0.0100 (se 0.0040), ratio 1.50x" in x for x in lines)
    assert "none yet" in A.advice_lines(a, {})[-1]


def test_explore_allocation_option(tmp_path):
    from typer.testing import CliRunner

    import cli

    # (cli.main turns an IsosimError into one line and exit 2)
    bad = CliRunner().invoke(cli.app, ["explore", "--allocation", "greedy", "--quick", "--out", str(tmp_path / "a")])
    assert isinstance(bad.exception, IsosimError) and "unknown allocation rule 'greedy'" in str(bad.exception)
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    both = CliRunner().invoke(cli.app, ["explore", "--plan", str(plan), "--allocation", "band", "--out", str(tmp_path / "b")])
    assert isinstance(both.exception, IsosimError) and "--allocation with --plan: the plan fixes" in str(both.exception)
