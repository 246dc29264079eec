"""The simulator engine: exactness, reproducibility, batching, and the single-problem theory."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import torch

from isosim.errors import IsosimError
from isosim.sim import engine
from isosim.sim.config import SimConfig
from isosim.sim.engine import (
    ADV_EPS,
    LinearFeatures,
    advantages,
    evaluate,
    evaluate_closed,
    logit_gradient,
    regulariser_gradient,
    simulate,
    unbiased_best_worst,
)
from isosim.sim.problems import build
from isosim.sim.profiles import get_profile

SMALL = dict(n_train=32, n_val=32, b_p=8, eval_points=5)


@pytest.mark.parametrize("profile", ["easy", "hard", "extreme", "very-easy", "hard:0.5,easy:0.5", "beta:0.5,2"])
def test_step0_pass_rate_matches_profile_draw(profile):
    cfg = SimConfig(profile=profile, n_train=64, n_val=64, seed=3)
    pop = build(cfg)
    p = (torch.softmax(pop.z0, -1) * pop.correct).sum(-1)
    assert torch.allclose(p, pop.p0, atol=1e-6, rtol=0)
    # and the draw is the profile's: same generator, same numbers
    rng = np.random.default_rng(np.random.SeedSequence([3, 0x150_5EED]))
    expected = get_profile(profile).sample(128, rng)
    np.testing.assert_allclose(pop.p0.numpy(), expected, atol=1e-12)


def test_step0_record_equals_base_policy():
    cfg = SimConfig(steps=3, **SMALL)
    df = simulate([cfg])
    pop = build(cfg)
    row = df[df.step == 0].iloc[0]
    assert row.train_reward == pytest.approx(pop.p0[:32].mean().item(), abs=1e-9)
    assert row.val_avg == pytest.approx(pop.p0[32:].mean().item(), abs=1e-9)
    assert row.kl == pytest.approx(0.0, abs=1e-12)


def _per_sample_grad(z, actions, rewards, n, mode, baseline_rewards=None):
    """Textbook GRPO: per-sample advantages, autograd through log pi(a_i), mean over samples."""
    z = z.clone().requires_grad_(True)
    logpi = torch.log_softmax(z, -1)  # [B, K]
    B = z.shape[0]
    r = rewards.view(B, n)
    base = r if baseline_rewards is None else baseline_rewards
    adv = r - base.mean(1, keepdim=True)
    if mode == "grpo":
        adv = adv / (base.std(1, keepdim=True) + ADV_EPS)
    chosen = logpi.repeat_interleave(n, 0).gather(1, actions[:, None]).view(B, n)
    loss = (adv * chosen).sum() / (B * n)
    (g,) = torch.autograd.grad(loss, z)
    return g


@pytest.mark.parametrize("mode", ["grpo", "drgrpo"])
@pytest.mark.parametrize("decoupled", [False, True])
def test_count_gradient_equals_mean_of_per_sample_gradients(mode, decoupled):
    gen = torch.Generator().manual_seed(0)
    B, K, n, n_est = 6, 5, 7, 19
    z = torch.randn(B, K, generator=gen, dtype=torch.float64)
    correct = (torch.rand(B, K, generator=gen) < 0.4).double()
    correct[:, 0] = 1.0
    pi = torch.softmax(z, -1)
    actions = torch.multinomial(pi.repeat_interleave(n, 0), 1, generator=gen).squeeze(-1)
    rewards = correct.repeat_interleave(n, 0).gather(1, actions[:, None]).squeeze(-1)
    counts = torch.zeros(B, K, dtype=torch.float64).index_put_(
        (torch.arange(B).repeat_interleave(n), actions), torch.ones(B * n, dtype=torch.float64), accumulate=True)
    m = (counts * correct).sum(-1)
    if decoupled:  # baseline from these n draws plus n_est - n more
        extra = torch.bernoulli(torch.full((B, n_est - n), 0.5, dtype=torch.float64), generator=gen)
        base = torch.cat([rewards.view(B, n), extra], 1)
        mu, n_base = base.mean(1), torch.full((B,), float(n_est), dtype=torch.float64)
        ref = _per_sample_grad(z, actions, rewards, n, mode, baseline_rewards=base)
    else:
        mu, n_base = m / n, torch.full((B,), float(n), dtype=torch.float64)
        ref = _per_sample_grad(z, actions, rewards, n, mode)
    std_norm = torch.tensor([[mode == "grpo"]])
    A = advantages(correct[None], mu[None], n_base[None], std_norm)
    g = logit_gradient(counts[None], A, pi[None], torch.tensor(float(decoupled)).view(1, 1, 1))[0] / (B * n)
    torch.testing.assert_close(g, ref, atol=1e-12, rtol=1e-10)


def test_regulariser_gradient_matches_autograd():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    z0 = torch.randn(4, 6, generator=gen, dtype=torch.float64)
    logpi, logpi0 = torch.log_softmax(z, -1), torch.log_softmax(z0, -1)
    pi = logpi.exp()
    loss = 0.7 * (pi * (logpi - logpi0)).sum() - 0.3 * (-(pi * logpi).sum())
    (ref,) = torch.autograd.grad(loss, z)
    got = regulariser_gradient(pi.detach(), logpi.detach(), logpi0, 0.7, 0.3)
    torch.testing.assert_close(got, ref, atol=1e-12, rtol=1e-10)


def test_exact_best_worst_agree_with_monte_carlo():
    cfg = SimConfig(steps=20, eval_samples=4000, k=4, **SMALL)
    row = simulate([cfg]).iloc[-1]
    assert row.val_best_sampled == pytest.approx(row.val_best, abs=0.01)
    assert row.val_worst_sampled == pytest.approx(row.val_worst, abs=0.01)
    assert row.val_avg_sampled == pytest.approx(row.val_avg, abs=0.01)


def test_unbiased_estimators_on_hand_made_cases():
    best, worst = unbiased_best_worst(np.array([0, 1, 4, 8]), 8, 4)
    np.testing.assert_allclose(best, [0.0, 0.5, 1 - 1 / 70, 1.0])
    np.testing.assert_allclose(worst, [0.0, 0.0, 1 / 70, 1.0])


def test_the_engine_estimator_is_the_estimator_module_one_to_rounding():
    """The sampled evaluation's exact-binomial best@k / worst@k (isosim.sim.estimators) agree with the
    product form every other caller uses, to rounding, and with the enumeration on a small case."""
    from isosim.sim import estimators

    rng = np.random.default_rng(0)
    for N, k in ((4, 4), (32, 4), (100, 8), (512, 16)):
        c = rng.integers(0, N + 1, 500)
        best, worst = (np.asarray(x, dtype=float) for x in unbiased_best_worst(c, N, k))
        np.testing.assert_allclose(best, estimators.best_at_k(c, N, k), rtol=0, atol=1e-14)
        np.testing.assert_allclose(worst, estimators.worst_at_k(c, N, k), rtol=0, atol=1e-14)
    assert unbiased_best_worst is estimators.exact_best_worst  # one module holds the estimators


def test_seeded_runs_are_bit_for_bit_reproducible():
    cfgs = [SimConfig(n=n, budget=4000, seed=s, kl=0.5, entropy=0.01, **SMALL) for n in (4, 80) for s in (0, 1)]
    a, b = simulate(cfgs), simulate(cfgs)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    c = simulate([cfgs[0].replace(seed=7)])
    assert not np.allclose(a[a.run_id == cfgs[0].run_id].val_avg.values[1:], c.val_avg.values[1:])


@pytest.mark.parametrize("policy", ["linear", "tabular", "mlp"])
def test_batched_runs_equal_runs_one_by_one(policy):
    base = SimConfig(policy=policy, budget=6000, kl=0.3, memorize=0.5, typicality=0.2, **SMALL)
    cfgs = [base.replace(n=4, seed=0), base.replace(n=16, b_p=4, seed=1), base.replace(n=100, seed=2),
            base.replace(n=8, seed=3, data_seed=0, optimizer="adam", lr=0.05, n_est=16),
            base.replace(n=8, seed=4, adv="drgrpo", zero_var_filter=True, wd=0.01, clip_grad=1.0)]
    together = simulate(cfgs)
    alone = pd.concat([simulate([c]) for c in cfgs], ignore_index=True)
    metrics = ["step", "rollouts", "train_reward", "val_avg", "val_best", "val_worst", "entropy", "kl"]
    pd.testing.assert_frame_equal(together[["run_id"] + metrics], alone[["run_id"] + metrics],
                                  check_exact=False, rtol=1e-9, atol=1e-12)


def test_correct_only_runs_draw_the_same_whatever_their_batch():
    """Runs that need only their correct draws (skill-only linear policy, no length model) draw
    them from their pass rate on either path; beside runs that force the general path
    (typicality, memorisation, a tabular part) or per-response counts (a length model, at small
    and large n), each run still gives what it gives alone."""
    base = SimConfig(budget=8000, kl=0.3, **SMALL)
    cfgs = [base.replace(n=8, seed=0), base.replace(n=100, seed=1), base.replace(n=16, b_p=4, seed=2, n_est=64),
            base.replace(n=8, seed=3, typicality=0.3), base.replace(n=100, seed=4, memorize=0.5),
            base.replace(n=8, seed=5, tabular=0.5), base.replace(n=16, seed=6, mean_len=50.0),
            base.replace(n=200, seed=7, mean_len=50.0), base.replace(n=4, seed=8, zero_var_filter=True)]
    metrics = ["step", "rollouts", "tokens", "train_reward", "val_avg", "val_best", "val_worst", "entropy", "kl"]
    alone = pd.concat([simulate([c]) for c in cfgs], ignore_index=True)
    for batch in (cfgs, cfgs[:3] + cfgs[6:8], cfgs[:3] + cfgs[3:4]):
        ids = {c.run_id for c in batch}
        together = simulate(batch)
        pd.testing.assert_frame_equal(together[["run_id"] + metrics],
                                      alone[alone.run_id.isin(ids)].reset_index(drop=True)[["run_id"] + metrics],
                                      check_exact=False, rtol=1e-9, atol=1e-12)


def test_many_populations_and_the_adam_fast_path_match_runs_one_by_one():
    # 6 populations (evaluation gathers rather than loops), runs leaving at different steps, and
    # all-Adam batches (scalar fast path) against the same runs beside an SGD run (general path)
    base = SimConfig(optimizer="adam", lr=0.05, kl=1.0, entropy=0.01, **SMALL)
    cfgs = [base.replace(n=4 * (1 + s % 3), seed=s, budget=600.0 * (1 + s)) for s in range(6)]
    metrics = ["step", "rollouts", "train_reward", "val_avg", "val_best", "val_worst", "entropy", "kl"]
    alone = pd.concat([simulate([c]) for c in cfgs], ignore_index=True)
    for batch in (cfgs, cfgs + [base.replace(n=4, seed=9, optimizer="sgd", lr=2.0, budget=2000.0)]):
        together = simulate(batch)
        together = together[together.run_id.isin({c.run_id for c in cfgs})].reset_index(drop=True)
        pd.testing.assert_frame_equal(together[["run_id"] + metrics], alone[["run_id"] + metrics],
                                      check_exact=False, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dense_part", [False, True])
@pytest.mark.parametrize("one_hot", [True, False])
def test_linear_features_equal_the_dense_product(dense_part, one_hot):
    gen = torch.Generator().manual_seed(2)
    S, P, K, C = 2, 10, 5, 3
    U = torch.zeros(S, P, K, C + (2 if dense_part else 0), dtype=torch.float64)
    cluster = torch.randint(0, C, (S, P), generator=gen)
    w = torch.rand(S, P, K, generator=gen, dtype=torch.float64) * (torch.rand(S, P, K, generator=gen) < 0.5)
    U[..., :C].scatter_(-1, cluster[..., None, None].expand(S, P, K, 1), w[..., None])
    if not one_hot:
        U[0, 3, :, (cluster[0, 3] + 1) % C] = 0.7  # a problem loading on two clusters
    if dense_part:
        U[..., C:] = torch.randn(S, P, K, 2, generator=gen, dtype=torch.float64)
    lf = LinearFeatures(U, C)
    assert (lf.n_skill == C) == one_hot
    R, B = 4, 6
    flat = torch.randint(0, S * P, (R, B), generator=gen)
    here = {name: t.index_select(0, flat.view(-1)).view(R, B, -1) for name, t in lf.tables.items()}
    h = torch.randn(R, U.shape[-1], generator=gen, dtype=torch.float64)
    Ug = U.reshape(S * P, K, -1)[flat]  # [R, B, K, D]
    torch.testing.assert_close(lf.forward(h, here, flat), torch.einsum("rbkd,rd->rbk", Ug, h))
    g = torch.randn(R, B, K, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(lf.backward(g, here), torch.einsum("rbk,rbkd->rd", g, Ug))


def _closed_features(cfg: SimConfig):
    pop = build(cfg, memorize=False)
    logpi0 = torch.log_softmax(pop.z0, -1)[None]
    U = pop.U[None, ..., : cfg.clusters]  # the skill block only
    return pop, LinearFeatures(U, cfg.clusters, pop.correct[None], logpi0), logpi0


def test_closed_form_applies_only_where_the_features_allow_it():
    cfg = SimConfig(**SMALL)
    pop, lf, logpi0 = _closed_features(cfg)
    assert lf.closed
    assert not LinearFeatures(pop.U[None, ..., : cfg.clusters], cfg.clusters).closed  # no correct/logpi0 given
    assert not LinearFeatures(pop.U[None], cfg.clusters, pop.correct[None], logpi0).closed  # typicality column
    U = pop.U[None, ..., : cfg.clusters].clone()
    prob = int(((U[0] != 0).sum((-1, -2)) >= 2).nonzero()[0])  # a transferring problem, 2+ correct responses
    resp, col = (U[0, prob] != 0).nonzero()[0].tolist()
    U[0, prob, resp, col] += 0.1  # now it loads more than the problem's other correct responses
    assert not LinearFeatures(U, cfg.clusters, pop.correct[None], logpi0).closed


def test_closed_form_evaluation_equals_the_softmax_over_responses():
    cfg = SimConfig(n_train=48, n_val=16, profile="hard:0.3,easy:0.7", seed=5)
    pop, lf, logpi0 = _closed_features(cfg)
    pop = dataclasses.replace(pop, z0=pop.z0[None], correct=pop.correct[None], U=pop.U[None, ..., : cfg.clusters])
    h = torch.randn(6, cfg.clusters, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    pop_idx = torch.zeros(6, dtype=torch.long)
    z = logpi0[0] + torch.einsum("pkd,rd->rpk", pop.U[0], h)
    want, p_want = evaluate(z, pop, pop_idx, logpi0, k=4)
    got, p_got = evaluate_closed(h, lf, pop, pop_idx, k=4)
    torch.testing.assert_close(p_got, p_want, rtol=1e-12, atol=1e-13)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)


def test_closed_form_step_equals_the_general_step(monkeypatch):
    """Every update option through the closed-form step and through the general one (softmax
    over every response): the same records, to rounding."""
    base = SimConfig(steps=40, eval_points=6, n_train=48, n_val=32)
    cfgs = [base.replace(n=n, b_p=bp, seed=s) for n, bp, s in ((1, 8, 0), (8, 16, 1), (100, 8, 2))]
    cfgs += [base.replace(n=8, seed=3, optimizer="sgd", lr=2.0, n_est=32, zero_var_filter=True),
             base.replace(n=16, seed=4, adv="drgrpo", wd=0.1, optimizer="adamw", clip_grad=0.5,
                          trust_region=0.3, warmup=10, mean_len=100.0),
             base.replace(n=80, seed=5, kl=0.0, entropy=0.0, profile="hard", mean_len=50.0),
             base.replace(n=4, seed=6, kl=0.3, entropy=0.1, data_seed=7, profile="hard:0.5,easy:0.5",
                          hard_clusters=2)]
    monkeypatch.setattr(engine.streams, "CORRECT_ONLY", False)  # the same draws on both paths
    closed = simulate(cfgs)
    used = []
    original = LinearFeatures._closed_form
    monkeypatch.setattr(LinearFeatures, "_closed_form", lambda self, *a: used.append(1))
    general = simulate(cfgs)
    assert len(used) == len({c.batch_key for c in cfgs})  # every batch would have taken the closed form
    monkeypatch.setattr(LinearFeatures, "_closed_form", original)
    metrics = [c for c in closed.columns if closed[c].dtype.kind == "f"]
    pd.testing.assert_frame_equal(closed[["run_id", "step"] + metrics], general[["run_id", "step"] + metrics],
                                  check_exact=False, rtol=1e-10, atol=1e-12)
    assert closed.val_avg.std() > 0.01  # the runs learn


@pytest.mark.parametrize("n", [8, 100])
def test_correct_only_draws_have_the_law_of_the_multinomial(monkeypatch, n):
    """Closed form, no length model: each group draws only its number of correct draws,
    Binomial(n, p) (uniforms below p; above DIRECT_MAX one binomial). Over many seeds the
    learning curves (train reward and validation avg@k at each evaluation) match those from
    per-response multinomial counts, within 4 standard errors; and the correct draws the update
    receives have the binomial's mean and variance given the pass rate it sees."""
    base = SimConfig(n=n, b_p=8, steps=40, eval_points=4, n_train=16, n_val=16, profile="hard:0.5,easy:0.5",
                     data_seed=0, lr=10.0)
    cfgs = [base.replace(seed=s) for s in range(300)]
    seen = []  # (correct draws, pass rate) of every group, as the update receives them
    original = engine.grpo._baseline_correct

    def spy(b, m, p):
        seen.append((m.cpu().numpy().ravel(), p.cpu().numpy().ravel()))
        return original(b, m, p)

    monkeypatch.setattr(engine.grpo, "_baseline_correct", spy)
    binomial = simulate(cfgs)
    m, p = (np.concatenate(x) for x in zip(*seen))
    # the draws themselves: E m = n p and Var m = n p (1 - p), summed over ~1e5 groups
    z_mean = (m - n * p).sum() / np.sqrt((n * p * (1 - p)).sum())
    var_ratio = ((m - n * p) ** 2).sum() / (n * p * (1 - p)).sum()
    assert abs(z_mean) < 4 and abs(var_ratio - 1) < 0.03, (z_mean, var_ratio)
    monkeypatch.setattr(engine.streams, "CORRECT_ONLY", False)
    multinomial = simulate(cfgs)
    assert not np.allclose(binomial.train_reward, multinomial.train_reward)  # other draws, same law
    for col in ("train_reward", "val_avg"):
        a, b = (df.groupby("step")[col].agg(["mean", "var"]) for df in (binomial, multinomial))
        se = np.sqrt((a["var"] + b["var"]) / len(cfgs))
        assert (a["var"].iloc[1:] > 0).all()  # the draws matter
        assert (np.abs(a["mean"] - b["mean"]) <= 4 * se + 1e-12).all(), (col, (a["mean"] - b["mean"]) / se)
    assert binomial.groupby("step").train_reward.mean().iloc[-1] > binomial.train_reward.iloc[0] + 0.02  # learns


def test_single_problem_tabular_learns_and_sequential_beats_parallel():
    base = SimConfig(policy="tabular", n_train=1, n_val=1, b_p=1, profile="uniform:0.3,0.3",
                     lr=1.0, eval_points=4, data_seed=0)
    long = simulate([base.replace(n=8, budget=8 * 400, seed=s) for s in range(4)])
    assert long[long.step == 400].train_reward.min() > 0.95  # pass@1 -> 1
    # equal rollouts (512): small n takes many more steps and gets further
    budget = 512
    small = simulate([base.replace(n=4, budget=budget, seed=s) for s in range(8)])
    large = simulate([base.replace(n=128, budget=budget, seed=s) for s in range(8)])
    end = lambda df: df.groupby("run_id").train_reward.last().mean()  # noqa: E731
    assert end(small) > end(large) + 0.1


def test_kl_and_entropy_terms_move_kl_and_entropy():
    base = SimConfig(n=16, budget=16 * 8 * 150, lr=4.0, **SMALL)
    plain, with_kl, with_ent = simulate([base, base.replace(kl=2.0), base.replace(entropy=0.5)]).groupby("run_id").last().loc[
        [base.run_id, base.replace(kl=2.0).run_id, base.replace(entropy=0.5).run_id]].itertuples()
    assert with_kl.kl < 0.5 * plain.kl
    assert with_ent.entropy > plain.entropy + 0.05


def test_cost_of_a_step_does_not_depend_on_n():
    """Same steps, any n: the count-based engine does not loop over rollouts (rollouts spent scale)."""
    df = simulate([SimConfig(n=n, steps=10, **SMALL) for n in (2, 2048)])
    last = df.groupby("n").rollouts.last()
    assert last[2048] == 1024 * last[2]


def test_tokens_follow_the_length_model():
    """With a policy that does not move (lr 1e-12) and every training problem in every batch, each
    rollout of problem p is response k with probability softmax(z0_p)_k, of length L[p, k]: the
    token count's mean and sd follow from the population exactly; it must lie within 4 sd (~2.5%)."""
    from isosim.sim.problems import build

    cfgs = [SimConfig(n=8, steps=20, mean_len=100.0, seed=seed, n_train=32, n_val=32, b_p=32, eval_points=5,
                      lr=1e-12) for seed in range(3)]
    df = simulate(cfgs)
    for cfg in cfgs:
        last = df[df.run_id == cfg.run_id].iloc[-1]
        assert last.rollouts == cfg.steps * cfg.b_p * cfg.n
        pop = build(cfg)
        z0, length = pop.z0.numpy()[:cfg.n_train], pop.length.numpy()[:cfg.n_train]
        pi = np.exp(z0 - z0.max(1, keepdims=True))
        pi /= pi.sum(1, keepdims=True)
        per_rollout = (pi * length).sum(1)
        var = (pi * length ** 2).sum(1) - per_rollout ** 2
        mean, sd = cfg.steps * cfg.n * per_rollout.sum(), np.sqrt(cfg.steps * cfg.n * var.sum())
        assert abs(length.mean() / cfg.mean_len - 1) < 0.1  # lognormal lengths of mean mean_len
        assert float(last.tokens).is_integer()  # a sum of whole response lengths
        assert abs(last.tokens - mean) < 4 * sd, (cfg.seed, last.tokens, mean, sd)
        assert 4 * sd < 0.03 * mean  # the band is tight: a wrong length model or count falls outside


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n=0), "n must be"),
        (dict(b_p=64, n_train=32), "cannot exceed the training set"),
        (dict(responses=1), "responses"),
        (dict(profile="nope"), "unknown profile"),
        (dict(profile="uniform:0.2,1.5"), "0 <= a <= b <= 1"),
        (dict(budget=-5), "budget must be positive"),
        (dict(budget=10, n=8, b_p=8), "below one step"),
        (dict(n_est=2, n=4), "n_est"),
        (dict(policy="transformer"), "unknown policy"),
    ],
)
def test_bad_input_raises_one_clear_error(kwargs, match):
    with pytest.raises(IsosimError, match=match):
        SimConfig(**kwargs)


def test_val_profile_changes_validation_only():
    base = dict(profile="hard", n_train=64, n_val=64, seed=5)
    on_easy, on_hard = build(SimConfig(**base, val_profile="easy")), build(SimConfig(**base, val_profile="hard"))
    assert torch.equal(on_easy.z0[:64], on_hard.z0[:64]) and torch.equal(on_easy.U[:64], on_hard.U[:64])
    assert float(on_easy.p0[64:].min()) >= 0.3 and float(on_hard.p0[64:].max()) <= 0.0625
    runs = simulate([SimConfig(**base, val_profile=v, n=4, b_p=8, steps=30, eval_points=3) for v in ("easy", "hard")])
    by = {v: g.reset_index(drop=True) for v, g in runs.groupby("val_profile")}
    assert np.array_equal(by["easy"]["train_reward"], by["hard"]["train_reward"])  # same training
    assert by["easy"]["val_avg"].iloc[0] > 0.3 > 0.0625 > by["hard"]["val_avg"].iloc[0]
    assert SimConfig(**base).run_id != SimConfig(**base, val_profile="hard").run_id
    with pytest.raises(IsosimError, match="unknown"):
        SimConfig(val_profile="medium")


def test_bad_profile_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(IsosimError, match="not valid JSON"):
        SimConfig(profile=str(bad))
    out = tmp_path / "rates.json"
    out.write_text('{"rates": [0.1, 1.5], "k": 16}')
    with pytest.raises(IsosimError, match=r"\[0, 1\]"):
        SimConfig(profile=str(out))
    out.write_text('{"rates": [0.0, 0.5, 0.25], "k": 16}')
    pop = build(SimConfig(profile=str(out), n_train=50, n_val=50))
    zeros = pop.p0[pop.p0 < 0.2]
    assert len(zeros) > 0 and float(zeros.max()) <= 1 / 32  # measured zeros spread over [0, 1/(2k)]


def test_lr_rule():
    c = SimConfig(n=64, b_p=64, lr=1.0)
    assert c.step_lr == pytest.approx(2.0)
    assert c.replace(lr_rule="linear").step_lr == pytest.approx(4.0)
    assert c.replace(lr_rule="constant").step_lr == pytest.approx(1.0)
    assert math.isclose(c.total_steps, 1e6 // 4096)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_matches_cpu():
    """Same per-run random streams on both devices: results agree up to float rounding."""
    cfgs = [SimConfig(n=n, budget=4000, seed=s, kl=0.5, **SMALL) for n in (4, 100) for s in (0, 1)]
    cpu, gpu = simulate(cfgs), simulate(cfgs, device="cuda")
    np.testing.assert_allclose(cpu.val_avg, gpu.val_avg, atol=1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_request_without_gpu_is_a_clear_error():
    with pytest.raises(IsosimError, match="CUDA is not available"):
        simulate([SimConfig(steps=2, **SMALL)], device="cuda")


def test_hard_clusters_separate_hard_problems_and_change_nothing_else():
    base = dict(profile="hard:0.5,easy:0.5", n_train=64, n_val=64, seed=3)
    shared, split = build(SimConfig(**base)), build(SimConfig(**base, hard_clusters=3))
    assert torch.equal(shared.z0, split.z0) and torch.equal(shared.correct, split.correct)
    C = 8
    cluster_of = lambda pop: pop.U[:, :, :C].abs().sum(1).argmax(-1)  # noqa: E731
    loads = split.U[:, :, :C].abs().sum((1, 2)) > 0  # problems that transfer
    hard = split.p0 < 1.0 / 16
    assert bool(hard.any()) and bool((~hard).any())
    c = cluster_of(split)
    assert bool((c[hard & loads] >= C - 3).all()) and bool((c[~hard & loads] < C - 3).all())
    assert torch.equal(shared.U[:, :, :C].abs().sum(-1), split.U[:, :, :C].abs().sum(-1))  # same loadings
    assert SimConfig(**base).run_id == SimConfig(**base, hard_clusters=0).run_id  # ids of old runs kept
    assert SimConfig(**base).run_id != SimConfig(**base, hard_clusters=3).run_id
    with pytest.raises(IsosimError, match="hard_clusters"):
        SimConfig(hard_clusters=8)


@pytest.mark.parametrize("extra", [{}, {"typicality": 0.5}, {"adv": "drgrpo"}])
def test_the_advantage_is_defined_once_and_every_path_uses_it(monkeypatch, extra):
    """isosim.sim.advantage holds GRPO's advantage for every caller: perturbing its divisor (GRPO)
    or its centring (Dr.GRPO) changes the default simulator path (closed form), the general path
    (typicality features), the per-rollout reference and llm_runs' advantages; undoing the
    perturbation gives the same records bit for bit."""
    from isosim.sim import advantage
    from isosim.sim.reference import train_per_rollout
    from llm_runs.training.grpo import group_advantages

    cfg = SimConfig(steps=20, eval_points=4, n_train=32, n_val=32, b_p=8, seed=1, **extra)
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    kind = cfg.adv

    def outputs():
        return (simulate(cfg), train_per_rollout(cfg.replace(steps=5)), group_advantages(rewards, 4, 4, kind))

    before = outputs()
    if kind == "grpo":
        monkeypatch.setattr(advantage, "divisor", lambda sd, eps: sd + 0.5)
    else:
        monkeypatch.setattr(advantage, "centre", lambda r, b: r - 0.9 * b)
    perturbed = outputs()
    monkeypatch.undo()
    after = outputs()
    metric = ["train_reward", "val_avg"]
    # (runs are deterministic, as the last lines check: any difference is the perturbation's)
    assert not np.array_equal(before[0][metric].to_numpy(), perturbed[0][metric].to_numpy())
    assert not np.array_equal(before[1].train_reward.to_numpy(), perturbed[1].train_reward.to_numpy())
    assert not torch.equal(before[2], perturbed[2])
    pd.testing.assert_frame_equal(before[0], after[0], check_exact=True)
    pd.testing.assert_frame_equal(before[1], after[1], check_exact=True)
    assert torch.equal(before[2], after[2])


@pytest.mark.parametrize("allocation", ["uniform", "variance"])
@pytest.mark.parametrize("n", [8, 100])
def test_a_run_outliving_the_widest_run_of_its_batch_is_unchanged(allocation, n):
    """When the widest runs leave, the batch narrows to the widest ``b_p`` still going (a rule's batch
    keeps its width): the padding slots of the runs still going (here b_p 4 in a batch 8 wide, once
    the 16 has left) must stay out of their updates (the KL / entropy pull of a padded problem is not
    zero), as they do alone."""
    base = SimConfig(n=n, kl=1.0, entropy=0.05, allocation=allocation, **SMALL)
    cfgs = [base.replace(b_p=4, steps=30, seed=0), base.replace(b_p=16, steps=6, seed=1),
            base.replace(b_p=8, steps=15, seed=2)]
    metrics = ["step", "rollouts", "train_reward", "val_avg", "val_best", "val_worst", "entropy", "kl"]
    together = simulate(cfgs)
    alone = pd.concat([simulate([c]) for c in cfgs], ignore_index=True)
    pd.testing.assert_frame_equal(together[["run_id"] + metrics], alone[["run_id"] + metrics],
                                  check_exact=False, rtol=1e-9, atol=1e-12)
