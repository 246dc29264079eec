"""Dynamics calibration (isosim.predict.dynamics, ``isosim calibrate --dynamics``): recovery of known
settings from simulated "real" runs, its failing controls, the profile's use by explore, bad input."""

import json
import sys

import numpy as np
import pytest

from isosim.predict import dynamics as dyn
from isosim.sim.config import SimConfig
from isosim.sim.engine import simulate
from isosim.sim.presets import get_preset
from isosim.sim.profiles import get_profile, write_profile

TRUE_LR = 0.4  # eight times the easy preset's lr
SIZES = dict(n_train=256, n_val=128)


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    """Simulated runs with a known lr, written as a folder of real runs (records.jsonl + config.json)."""
    root = tmp_path_factory.mktemp("dyn")
    rates = np.random.default_rng(0).uniform(0.3, 0.6, 400)
    profile = write_profile(root / "profile.json", rates, k=16)
    base = {k: v for k, v in get_preset("easy").items() if k not in ("b_p",)}
    base.update(profile=str(profile), lr=TRUE_LR, eval_points=10, **SIZES)
    cfgs = [SimConfig(**base, n=n, b_p=16, budget=16000, seed=s) for n in (4, 16) for s in (0, 1)]
    df = simulate(cfgs)
    runs = root / "runs"
    for cfg in cfgs:
        d = runs / f"n{cfg.n}_s{cfg.seed}"
        d.mkdir(parents=True)
        rows = df[df["run_id"] == cfg.run_id][["run_id", "n", "b_p", "seed", "step", "rollouts", "val_avg",
                                               "n_train", "n_val"]]
        d.joinpath("records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows.to_dict("records")))
        d.joinpath("config.json").write_text(json.dumps({"recipe": "easy", "n": cfg.n, "seed": cfg.seed}))
    return {"root": root, "runs": runs, "profile": profile}


def fit(truth, **kw):
    runs = dyn.read_cheap_runs(truth["runs"], max_rollouts=kw.pop("max_rollouts", 8000))
    return dyn.calibrate_dynamics(runs, truth["profile"], params=["lr"], max_evals=30, **kw)


def test_fit_recovers_the_true_lr_and_a_wrong_lr_fits_much_worse(truth):
    res = fit(truth)
    lr = res["fit"]["parameters"]["lr"]
    assert TRUE_LR / 1.5 <= lr <= TRUE_LR * 1.5, lr
    assert res["fit"]["loss"] < 0.2 * res["fit"]["loss_preset"]  # the preset's lr (0.05) is far off
    # failing control: the same fit with lr held at the preset's value is much worse
    wrong = fit(truth, fixed={"lr": TRUE_LR / 8})
    assert wrong["fit"]["loss"] > 5 * res["fit"]["loss"]
    assert res["dynamics"]["overrides"]["lr"] == lr and res["dynamics"]["preset"] == "easy"


def test_records_past_max_rollouts_are_never_read(truth, tmp_path):
    import shutil

    copy = tmp_path / "runs"
    shutil.copytree(truth["runs"], copy)
    for f in copy.glob("*/records.jsonl"):
        lines = f.read_text().splitlines()
        out = []
        for line in lines:
            row = json.loads(line)
            if row["rollouts"] > 8000:
                row["val_avg"] = 0.0  # nonsense past the limit
            out.append(json.dumps(row))
        f.write_text("\n".join(out) + "\n{ not json at all\n")  # and an unreadable line at the end
    clean = fit(truth)
    dirty = fit({**truth, "runs": copy})
    assert dirty["fit"]["parameters"] == clean["fit"]["parameters"]
    assert dirty["fit"]["loss"] == clean["fit"]["loss"]
    assert dirty["fit"]["runs_cut_at_limit"] == 4
    # control: with every record allowed, the corrupted values are read
    with pytest.raises(Exception, match="not a records line"):
        dyn.read_cheap_runs(copy, max_rollouts=None)


def test_profile_with_dynamics_is_applied_by_plans_and_explore(truth, tmp_path, monkeypatch, capsys):
    from isosim.sweeps import sweep

    runs = dyn.read_cheap_runs(truth["runs"], max_rollouts=8000, n_values=[4])
    res = dyn.calibrate_dynamics(runs, truth["profile"], params=["lr"], max_evals=5)
    out = dyn.write_dynamics_profile(tmp_path / "dyn.json", truth["profile"], res)
    prof = get_profile(str(out))
    assert prof.dynamics["overrides"]["lr"] == res["fit"]["parameters"]["lr"]
    assert np.array_equal(prof.rates, get_profile(str(truth["profile"])).rates)
    plan = sweep.plan_for_preset("easy", "q1", quick=True, seeds=1, profile=str(out))
    assert plan.base["lr"] == res["fit"]["parameters"]["lr"] != get_preset("easy")["lr"]
    assert "fitted dynamics" in plan.label
    # a profile without dynamics: the preset's settings, as before
    plain = sweep.plan_for_preset("easy", "q1", quick=True, seeds=1, profile=str(truth["profile"]))
    assert plain.base["lr"] == get_preset("easy")["lr"]
    # the caller's overrides still win over the profile's dynamics
    assert sweep.plan_for_preset("easy", "q1", quick=True, profile=str(out), lr=0.123).base["lr"] == 0.123
    # through the command
    import cli

    dest = tmp_path / "explore"
    monkeypatch.setattr(sys, "argv", ["isosim", "explore", "--quick", "--seeds", "1", "--n-boot", "0",
                                      "--profile", str(out), "--out", str(dest)])
    cli.main()
    base = json.loads((dest / "plan.json").read_text())["base"]
    assert base["lr"] == res["fit"]["parameters"]["lr"]


def run_cli(monkeypatch, capsys, *args):
    import cli

    monkeypatch.setattr(sys, "argv", ["isosim", *map(str, args)])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    err = capsys.readouterr().err.strip()
    return exc.value.code, err


@pytest.mark.parametrize("case", ["missing", "empty", "unknown_n", "no_rates", "no_profile", "neither", "both"])
def test_bad_input_is_one_line_exit_2(truth, tmp_path, monkeypatch, capsys, case):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_rates = tmp_path / "no_rates.json"
    no_rates.write_text(json.dumps({"k": 16}))
    args = {
        "missing": ["--dynamics", tmp_path / "nope", "--profile", truth["profile"]],
        "empty": ["--dynamics", empty, "--profile", truth["profile"]],
        "unknown_n": ["--dynamics", truth["runs"], "--profile", truth["profile"], "--n", "4,7"],
        "no_rates": ["--dynamics", truth["runs"], "--profile", no_rates],
        "no_profile": ["--dynamics", truth["runs"]],
        "neither": [],
        "both": ["--dynamics", truth["runs"], "--profile", truth["profile"], "--model", "m", "--data", "d"],
    }[case]
    code, err = run_cli(monkeypatch, capsys, "calibrate", *args, "--out", tmp_path / "o.json")
    assert code == 2
    assert err.startswith("isosim: error:") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o.json").exists()


def test_a_run_that_stopped_short_is_refused_in_one_line(truth, tmp_path, monkeypatch, capsys):
    """One run cut to its first half: fitting every record would compare its short curve with the
    others' whole ones; the refusal names it and the budget every run reached, and reading only to
    that budget works."""
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(truth["runs"], runs)
    rec = runs / "n16_s1" / "records.jsonl"
    lines = rec.read_text().splitlines()
    rec.write_text("".join(x + "\n" for x in lines[: len(lines) // 2]))
    stop = json.loads(lines[len(lines) // 2 - 1])["rollouts"]
    code, err = run_cli(monkeypatch, capsys, "calibrate", "--dynamics", runs, "--profile", truth["profile"],
                        "--out", tmp_path / "o.json")
    assert code == 2 and len(err.splitlines()) == 1 and not (tmp_path / "o.json").exists()
    named = err.split("stopped short of their planned budget: ")[1].split(": every record is read")[0]
    assert "n16" in named and "n4" not in named and named.count(" at ") == 1  # the one short run (its run_id)
    assert f"--max-rollouts {stop:.0f}" in err
    code, err = run_cli(monkeypatch, capsys, "calibrate", "--dynamics", runs, "--profile", truth["profile"],
                        "--max-rollouts", "-5", "--out", tmp_path / "o.json")
    assert code == 2 and "--max-rollouts" in err and len(err.splitlines()) == 1


def test_new_fields_leave_old_runs_and_populations_alone(tmp_path):
    """lr_power and loading_dist at their defaults change no run id, plan id or draw; a log-uniform
    loading changes the loadings only, and lr_power replaces the lr rule's exponent."""
    from isosim.sim.problems import build
    from isosim.sweeps import sweep

    cfg = SimConfig(n=4, b_p=8, n_train=64, n_val=32, budget=1e3)
    assert cfg.run_id == "easy-n4-bp8-s0-26c20285"  # its id before the fields existed
    assert cfg.replace(lr_power=0.5).run_id != cfg.run_id
    plan = sweep.plan_for_preset("easy", "q1", quick=True)
    assert "lr_power" not in plan.base and "loading_dist" not in plan.base
    log = cfg.replace(loading_dist="loguniform", loading_lo=0.01)
    a, b = build(cfg.replace(loading_lo=0.01), memorize=False), build(log, memorize=False)
    assert np.array_equal(a.p0, b.p0) and np.array_equal(a.correct, b.correct) and np.array_equal(a.z0, b.z0)
    la, lb = a.U[..., :8].amax((-1, -2)), b.U[..., :8].amax((-1, -2))
    assert np.array_equal(la > 0, lb > 0) and not np.allclose(la, lb)  # same problems transfer, other loadings
    assert float(lb[lb > 0].median()) < 0.25 < float(la[la > 0].median())  # medians ~0.1 vs ~0.5
    assert cfg.replace(lr_power=0.0).step_lr == cfg.lr and cfg.step_lr == cfg.lr * (32 / 1024) ** 0.5


def test_organism_predict_checks_its_dynamics_profiles(truth, tmp_path, capsys):
    """--write-profiles writes the splits' rates; a dynamics profile of other data, or one split
    without dynamics, is refused with one line and exit 2 before anything is simulated."""
    from pathlib import Path

    from llm_runs.organism import predict as op

    root = Path(__file__).resolve().parents[1] / "studies" / "results" / "organism"
    common = ["--calibration", str(root / "profile.json"), "--splits", str(root / "splits"), "--work", str(tmp_path)]
    op.main([*common, "--write-profiles", str(tmp_path / "p")])
    easy = json.loads((tmp_path / "p" / "easy_profile.json").read_text())
    assert len(easy["rates"]) == 3500 and (tmp_path / "p" / "hard_profile.json").is_file()
    other = tmp_path / "other.json"  # calibrated on other data (the test's simulated runs)
    runs = dyn.read_cheap_runs(truth["runs"], max_rollouts=2000, n_values=[4])
    dyn.write_dynamics_profile(other, truth["profile"], dyn.calibrate_dynamics(runs, truth["profile"],
                                                                               params=["lr"], max_evals=2))
    for args, message in (([f"--dynamics=easy={other}", f"--dynamics=hard={other}"], "rates are not the easy"),
                          ([f"--dynamics=easy={other}"], "not for ['hard']"),
                          (["--preset", "easy=no-such-preset"], "unknown profile 'no-such-preset'"),
                          (["--preset", "medium=easy"], "--preset wants SPLIT=NAME")):
        with pytest.raises(SystemExit) as exc:
            op.main([*common, *args, "--out", str(tmp_path / "pred.json")])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "pred.json").exists()
