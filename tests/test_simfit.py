"""The flat regime by named settings (and the rising one by default), and the three-number fit of
the simulator to cheap real points (isosim.predict.simfit)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from isosim.errors import IsosimError
from isosim.predict import simfit as sf
from isosim.sim.config import SimConfig
from isosim.sim.engine import simulate
from isosim.sim.presets import PRESETS, get_preset


def _at_steps(preset: str, ns=(2, 8, 32, 128), steps=(50, 800)) -> dict[int, list[float]]:
    s = {**get_preset(preset), "n_train": 128, "n_val": 256, "b_p": 16}
    df = simulate([SimConfig(**{**s, "n": n, "steps": max(steps), "budget": None, "seed": sd, "eval_points": 12})
                   for n in ns for sd in (0, 1)])
    out = {}
    for n in ns:
        g = df[df["n"] == n].groupby("step")["val_avg"].mean()
        st = g.index.to_numpy(float)
        out[n] = [float(np.interp(math.log(x), np.log(st[st > 0]), g.to_numpy()[st > 0])) for x in steps]
    return out


def test_flat_preset_saturates_in_n_and_reaches_one_ceiling():
    flat = _at_steps("hard-flat")
    # by 800 steps every n sits at one ceiling (within .02), far above the base (.014)
    ceil = [flat[n][1] for n in flat]
    assert max(ceil) - min(ceil) < 0.02 and min(ceil) > 0.3
    # the gain per step saturates: n = 128 over n = 32 at 50 steps gains far less than n = 32 over n = 2
    assert flat[128][0] - flat[32][0] < 0.5 * (flat[32][0] - flat[2][0])


def test_default_hard_preset_keeps_the_rising_regime():
    rising = _at_steps("hard")
    # per-step gain keeps growing with n and the value at 800 steps still depends on n
    assert rising[128][0] > rising[32][0] > rising[8][0]
    assert rising[128][1] - rising[2][1] > 0.2
    assert PRESETS["hard"]["optimizer"] == "adamw" and PRESETS["hard"]["lr_rule"] == "sqrt"
    assert PRESETS["hard-flat"]["lr_rule"] == "constant" and PRESETS["hard-flat"]["wd"] == 0.0


@pytest.fixture(scope="module")
def bank():
    settings = {**get_preset("hard-flat"), "n_train": 64, "n_val": 64, "b_p": 8}
    return sf.build_bank(settings, (2, 8, 32), 4e4, seeds=(0,), lr_grid=sf.LR_GRID[2:9])


def test_fit_recovers_the_numbers_it_was_made_with(bank):
    truth = {"log_lr": math.log(0.8), "power": 0.0, "log_h": math.log(1.3)}
    pts = [(8, 0.0, 0.05)]
    for n in (8,):
        r, _ = sf.gain_curve(bank, n, 1.0)
        vals = sf.predict_at(bank, truth, n, r, 0.05)
        pts += [(n, float(x), float(v)) for x, v in zip(r, vals) if x > 0]
    prior = {"log_lr": (0.0, 2.0), "power": (0.0, 0.1), "log_h": (0.0, 1.0)}
    res = sf.fit(bank, pts, prior, ("log_lr", "log_h"), noise=0.002)
    assert res["theta"]["log_lr"] == pytest.approx(truth["log_lr"], abs=0.15)
    assert res["theta"]["log_h"] == pytest.approx(truth["log_h"], abs=0.1)
    assert res["rms"] < 0.002
    # the same points read as noisy (sd .03 each) barely move the numbers off the prior
    loose = sf.fit(bank, pts, prior, ("log_lr", "log_h"))
    assert abs(loose["theta"]["log_lr"] - truth["log_lr"]) > abs(res["theta"]["log_lr"] - truth["log_lr"])
    # with no points after step 0 the prior comes back unchanged
    assert sf.fit(bank, pts[:1], prior)["theta"] == {p: prior[p][0] for p in prior}


def test_pick_reads_the_bank_in_both_readings(bank):
    theta = {"log_lr": math.log(0.5), "power": 0.0, "log_h": 0.0}
    best = sf.pick(bank, theta, (2, 8, 32), 4e4, "best")
    assert best in (2, 8, 32)
    assert sf.value(bank, theta, best, 4e4, "best") >= sf.value(bank, theta, best, 4e4, "final") - 1e-12
    with pytest.raises(IsosimError):
        sf.gain_curve(bank, 4, 1.0)


@pytest.fixture(scope="module")
def cheap_runs(tmp_path_factory):
    """Two seeds of n = 8, simulated with the flat preset, written as a folder of real runs."""
    import json

    from isosim.sim.profiles import write_profile

    root = tmp_path_factory.mktemp("simfit")
    rates = np.random.default_rng(1).uniform(0.0, 0.2, 300)
    profile = write_profile(root / "profile.json", rates, k=16)
    base = {**get_preset("hard-flat"), "profile": str(profile), "n_train": 128, "n_val": 64, "eval_points": 8}
    cfgs = [SimConfig(**{**base, "n": 8, "b_p": 16, "budget": 8000, "seed": s}) for s in (0, 1)]
    df = simulate(cfgs)
    runs = root / "runs"
    for cfg in cfgs:
        d = runs / f"n{cfg.n}_s{cfg.seed}"
        d.mkdir(parents=True)
        rows = df[df["run_id"] == cfg.run_id][["run_id", "n", "b_p", "seed", "step", "rollouts", "val_avg", "n_train", "n_val"]]
        d.joinpath("records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.to_dict("records")))
        d.joinpath("config.json").write_text(json.dumps({"recipe": "hard", "n": cfg.n, "seed": cfg.seed}))
    return {"runs": runs, "profile": profile}


def _cli(monkeypatch, capsys, *args):
    import sys

    import cli

    monkeypatch.setattr(sys, "argv", ["isosim", *map(str, args)])
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


def test_calibrate_dynamics_from_one_cheap_run_simulates_every_n(cheap_runs, tmp_path, monkeypatch, capsys):
    import json

    out = tmp_path / "dyn.json"
    code, stdout, err = _cli(monkeypatch, capsys, "calibrate", "--dynamics", cheap_runs["runs"], "--profile",
                             cheap_runs["profile"], "--preset", "hard-flat", "--n", "8", "--max-rollouts", "2000",
                             "--budget", "8192", "--grid", "2,8,32", "--max-evals", "3", "--out", out)
    assert code == 0, err
    every = json.loads(out.read_text())["every_n"]
    assert every["n"]["8"]["measured_to"] is not None and every["n"]["8"]["measured_to"] <= 2000
    assert every["n"]["2"]["measured_to"] is None and every["n"]["32"]["measured_to"] is None
    assert every["pick_best"] in (2, 8, 32) and every["pick_best"] in every["tie_band_best"]
    assert "measured n: 8; simulated only: 2, 32" in stdout


@pytest.mark.parametrize("args, message", [
    (["--grid", "2,8"], "--grid needs --budget"),
    (["--budget", "-5"], "--budget must be a positive"),
    (["--budget", "100", "--grid", "2,8"], "below one step"),
])
def test_calibrate_budget_bad_input_is_one_line_exit_2(cheap_runs, tmp_path, monkeypatch, capsys, args, message):
    code, _, err = _cli(monkeypatch, capsys, "calibrate", "--dynamics", cheap_runs["runs"], "--profile",
                        cheap_runs["profile"], "--preset", "hard-flat", "--n", "8", "--max-rollouts", "2000",
                        "--max-evals", "2", *args, "--out", tmp_path / "o.json")
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o.json").exists()


def test_budget_without_dynamics_is_refused(tmp_path, monkeypatch, capsys):
    code, _, err = _cli(monkeypatch, capsys, "calibrate", "--model", "m", "--data", "d", "--budget", "1e5")
    assert code == 2 and "--budget and --grid go with --dynamics" in err and len(err.splitlines()) == 1, err


def test_gap_term_costs_a_small_n_more_at_equal_rollouts(bank):
    theta = {"log_lr": 0.0, "power": 0.0, "log_h": 0.0}
    gap = {**theta, "log_gap": math.log(0.05), "log_d0": math.log(1.0)}
    loss = {n: float(sf.predict_at(bank, theta, n, np.array([4e4]))[0] - sf.predict_at(bank, gap, n, np.array([4e4]))[0])
            for n in (2, 32)}
    assert loss[2] > loss[32] > 0


@pytest.mark.parametrize("variant", ["", "clusters64"])
def test_simfit_scores_recomputed_from_the_records(variant):
    """studies/results/simfit[_VARIANT].json: the summaries from its rows, and one sweep's rows
    re-scored from the committed records and banks (the leave-one-setting-out priors refitted)."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "studies" / "scoring"))
    import simfit as study

    suffix = f"_{variant}" if variant else ""
    doc = json.loads((root / "studies" / "results" / f"simfit{suffix}.json").read_text())
    assert study.summarise(doc["rows"]) == doc["overall"]
    assert study.verdict(doc["overall"], doc["rows"]) == doc["verdict"]
    assert doc["variant"]["changes"] == study.VARIANTS[variant]
    sws, banks = study.load(build=False, bank_path=root / "studies" / "results" / f"simfit_bank{suffix}.json")
    fits = {model: study.full_fits(sws, banks, params) for model, params in study.MODELS.items()}
    for model, key in (("simfit", "full_fits"), ("simfit (no gap)", "full_fits_no_gap")):
        for name, f in fits[model].items():
            assert f["theta"] == pytest.approx(doc[key][name]["theta"], abs=1e-6)
    name = "organism/real/hard"
    rows = study.score(sws, banks, fits, only=(name,))
    want = [r for r in doc["rows"] if r["sweep"] == name]
    assert len(rows) == len(want) > 0
    for got, exp in zip(rows, want):
        assert (got["method"], got["budget"], got["seed"]) == (exp["method"], exp["budget"], exp["seed"])
        for reading in ("best", "final"):
            assert got[reading]["chosen"] == exp[reading]["chosen"]
            assert got[reading]["regret"] == pytest.approx(exp[reading]["regret"], abs=1e-12)
        assert got["overhead"] == pytest.approx(exp["overhead"], abs=1e-12)
