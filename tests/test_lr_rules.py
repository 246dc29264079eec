"""Issue 48 item 5: the learning rate that goes with each n, written by ``plan``, read back and stated
by ``recommend``: one rule formula (:func:`isosim.sim.config.scaled_lr`), each run's lr read from what
its trainer wrote, the runs' rule inferred, and the pick's lr by that rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cli_helpers import run  # tests/cli_helpers.py
from isosim.integrations import lr as LR

ROOT = Path(__file__).resolve().parents[1]
CONST_RUNS = ROOT / "studies" / "results" / "organism_hard_const" / "hard-128"
SQRT_RUNS = ROOT / "studies" / "results" / "organism_hard" / "hard-128"


def sqrt_lr(base: float, b_p: int, n: int) -> float:
    return base * math.sqrt(b_p * n / 1024)


# ----------------------------------------------------------------------------------------------
# The rule's arithmetic, one formula
# ----------------------------------------------------------------------------------------------
def test_one_formula_for_the_simulator_the_runner_and_the_plan():
    from isosim.sim.config import SimConfig
    from llm_runs.config import scaled_lr as runner_lr

    assert LR.lr_for(8, 32, 1e-6, "sqrt") == pytest.approx(1e-6 * math.sqrt(256 / 1024)) == runner_lr(1e-6, 256, 1024, "sqrt")
    assert LR.lr_for(8, 32, 3e-4, "constant") == 3e-4
    cfg = SimConfig(n=8, b_p=32, lr=2.0, lr_rule="sqrt", budget=1e4)
    assert cfg.step_lr == pytest.approx(LR.lr_for(8, 32, 2.0, "sqrt"))
    assert LR.base_of(LR.lr_for(64, 16, 3e-4, "sqrt"), 64 * 16, "sqrt") == pytest.approx(3e-4)


@pytest.mark.parametrize("rule", ["constant", "sqrt", "linear"])
def test_the_runs_rule_is_inferred_from_their_lrs(rule):
    pts = [(16 * n, LR.scaled_lr(3e-4, 16 * n, 1024, rule)) for n in (2, 8, 32)]
    assert LR.infer_rule(pts) == rule


def test_lrs_that_follow_no_rule_are_mixed_and_one_batch_is_unknown():
    assert LR.infer_rule([(32, 1e-6), (64, 3e-6), (128, 2e-6)]) == "mixed"
    assert LR.infer_rule([(32, 1e-6), (32, 1e-6)]) == "unknown"


# ----------------------------------------------------------------------------------------------
# plan --lr --lr-rule writes each run's lr
# ----------------------------------------------------------------------------------------------
def test_plan_for_trl_writes_learning_rate_in_every_run_by_the_sqrt_rule(tmp_path, monkeypatch, capsys):
    """A TRL user's --lr alone is their lr at TRL's default num_generations (n = 8 keeps it exactly; the
    sqrt rule scales the other n from B_p x 8), said in the README as an assumption."""
    out = tmp_path / "p"
    code, text, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--lr", "1e-6", "--out", out)
    assert code == 0, err
    plan = json.loads((out / "isosim_plan.json").read_text())
    assert len(plan["runs"]) == 8
    for r in plan["runs"]:
        cfg = yaml.safe_load((out / "runs" / r["name"] / "config.yaml").read_text())
        assert cfg["learning_rate"] == pytest.approx(1e-6 * math.sqrt(r["n"] / 8), rel=1e-12), r["name"]
        assert cfg["learning_rate"] == 1e-6 or r["n"] != 8
    readme = (out / "README.md").read_text()
    assert "by the **sqrt** rule" in readme and "B_p x n = 256" in readme and "n = 2 collapsed" in readme
    assert "taken as tuned at TRL's default num_generations, n = 8 (--lr-tuned-at N" in readme
    table = pd.read_csv(out / "isosim_runs.csv")
    assert table["lr"].tolist() == pytest.approx([1e-6 * math.sqrt(n / 8) for n in table["n"]])


def test_plan_constant_rule_gives_every_n_the_base(tmp_path, monkeypatch, capsys):
    out = tmp_path / "p"
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--lr", "3e-4",
                       "--lr-rule", "constant", "--out", out)
    assert code == 0, err
    lrs = {p.parent.name: yaml.safe_load(p.read_text())["learning_rate"] for p in (out / "runs").glob("*/config.yaml")}
    assert len(lrs) == 8 and set(lrs.values()) == {3e-4}
    assert "by the **constant** rule" in (out / "README.md").read_text()


def test_plan_without_lr_gives_n_8_trls_default_exactly(tmp_path, monkeypatch, capsys):
    """Without --lr a TRL plan is --lr 1e-6 --lr-tuned-at 8: TRL's default learning_rate at its default
    num_generations, so n = 8's runs are the run a TRL user makes without isosim; the rule scales the others."""
    out = tmp_path / "p"
    code, text, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--n", "2,8,32", "--out", out)
    assert code == 0, err
    lr = {n: yaml.safe_load((out / "runs" / f"n{n}-s0" / "config.yaml").read_text())["learning_rate"] for n in (2, 8, 32)}
    assert lr[8] == 1e-6 and lr[32] == pytest.approx(2e-6, rel=1e-12) and lr[2] == pytest.approx(5e-7, rel=1e-12)
    readme = (out / "README.md").read_text()
    assert "--lr not given: TRL's default learning_rate, 1e-06, at TRL's default num_generations, n = 8" in readme
    assert "TRL's default num_generations" in text
    request = json.loads((out / "isosim_plan.json").read_text())["request"]
    assert (request["lr"], request["lr_tuned_at"], request["lr_defaulted"]) == (1e-6, 8, True)
    # given the same explicitly, the runs are the same; verl keeps its base at 1,024 rollouts a step
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", "--n", "2,8,32", "--lr", "1e-6",
                       "--lr-tuned-at", "8", "--out", tmp_path / "q")
    assert code == 0, err
    assert all(yaml.safe_load((tmp_path / "q" / "runs" / f"n{n}-s0" / "config.yaml").read_text())["learning_rate"]
               == lr[n] for n in (2, 8, 32))


def test_plan_for_verl_and_isosim_write_the_lr_their_way(tmp_path, monkeypatch, capsys):
    from llm_runs.config import RunConfig

    keys = {line for line in (ROOT / "tests" / "fixtures" / "verl_0.9.1_ppo_trainer_keys.txt").read_text().splitlines()}
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "verl", "--budget", "2e6", "--n", "4,16", "--lr", "2e-6",
                       "--out", tmp_path / "v")
    assert code == 0, err
    text = (tmp_path / "v" / "runs" / "n16-s0" / "overrides.txt").read_text()
    assert f"actor_rollout_ref.actor.optim.lr={sqrt_lr(2e-6, 32, 16)!r}" in text.splitlines()
    assert "actor_rollout_ref.actor.optim.lr" in keys
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "isosim", "--budget", "2e6", "--n", "4,16", "--lr", "2e-6",
                       "--lr-rule", "constant", "--out", tmp_path / "i")
    assert code == 0, err
    cfg = json.loads((tmp_path / "i" / "runs" / "n16-s0" / "config.json").read_text())
    assert (cfg["lr"], cfg["base_lr"], cfg["lr_rule"], cfg["lr_ref_batch"]) == (2e-6, 2e-6, "constant", 1024)
    rc = RunConfig(**{k: v for k, v in cfg.items() if k != "out"}, model="m", data="d")
    assert rc.lr == 2e-6


@pytest.mark.parametrize("args, words", [(["--lr-rule", "linear"], "--lr-rule must be sqrt or constant"),
                                         (["--lr", "0"], "--lr must be a positive finite"),
                                         (["--lr", "inf"], "--lr must be a positive finite")])
def test_plan_refuses_a_bad_lr_before_making_a_folder(args, words, tmp_path, monkeypatch, capsys):
    from cli_helpers import one_line_error

    code, _, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "2e6", *args, "--out", tmp_path / "p")
    one_line_error(code, err, words)
    assert not (tmp_path / "p").exists()


def test_plan_help_names_the_rule_and_why(monkeypatch, capsys):
    code, out, _ = run(monkeypatch, capsys, "plan", "--help")
    text = " ".join(out.split())
    assert "--lr-rule" in text and "n = 2 collapse" in text and "sqrt(B_p x n / 1024)" in text
    # n = 8's gap to the best n at 1e6 at one lr, both readings, in se of the difference of two seed means: the
    # committed read-out's (tests/measured_helpers.py)
    from measured_helpers import load, rule_gaps

    gaps = rule_gaps(load("organism_hard_const/measured.json"))
    lo, hi = sorted(gaps[(reading, "constant", 1e6)]["difference"] for reading in ("best", "final"))
    assert f"left n = 8 {lo:.1f}-{hi:.1f} se (of the difference of two seed means;" in text


# ----------------------------------------------------------------------------------------------
# recommend --runs reads each run's lr, the runs' rule, and states the pick's lr
# ----------------------------------------------------------------------------------------------
def test_recommend_runs_reports_each_runs_lr_and_the_constant_rules_record(monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", CONST_RUNS, "--budget", "2e6", "--json")
    assert code == 0, err
    r = json.loads(out)
    lrs = {run_id: v["lr"] for run_id, v in r["lr"]["each"].items()}
    assert len(lrs) == 16 and all(v == pytest.approx(3e-4) for v in lrs.values())
    assert r["lr"]["rule"] == "constant" and r["lr"]["pick_lr"] == pytest.approx(3e-4)
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", CONST_RUNS, "--budget", "2e6")
    assert "lr of each run: n2_bp16_s0 0.0003, n2_bp16_s1 0.0003, n4_bp16_s0 0.0003" in out
    assert "the runs' lr rule: constant (one lr, 0.0003, for every n)" in out
    text = " ".join(out.split())
    assert "made n = 2 collapse (to .001)" in text and "n = 8 ended at .099 against n = 256's .195" in text
    # the numbers are the committed read-out's (value at 1e6 rollouts, seed means; n = 8's regret in se of the
    # difference of two seed means)
    from measured_helpers import load, rule_gaps

    measured = load("organism_hard_const/measured.json")
    m = measured["rules"]
    at = {(r["rule"], reading): r for reading in ("best", "final") for r in m[reading] if r["budget"] == 1e6}
    fin = at[("constant", "final")]
    assert (round(fin["mean"]["2"], 3), round(fin["mean"]["8"], 3), round(fin["mean"]["256"], 3), fin["best"]) == \
        (0.001, 0.099, 0.195, 256)
    gaps = rule_gaps(measured)
    said = (f"({gaps[('final', 'constant', 1e6)]['difference']:.1f} se behind, in se of the difference of two seed "
            f"means; {gaps[('best', 'constant', 1e6)]['difference']:.1f} by its best value), while the sqrt rule gave a "
            f"flat top (n = 8 within {gaps[('best', 'sqrt', 1e6)]['difference']:.1f} such se of the best by its best value)")
    assert said in text, said
    # and the sweep at one lr set where the sqrt rule puts n = 8 (its read-out's values and n = 8's regret at 1e6)
    c8 = load("organism_const8/measured.json")
    at8 = {r["reading"]: r for r in c8["lr_read_bar"]["rows"] if r["form"] == "lr-read one n"
           and r["version"] == "pooled" and r["budget"] == 1e6}
    val = {reading: next(c for c in c8["readings"][reading]["n_star"] if c["budget"] == 1e6)["mean"]
           for reading in ("best", "final")}
    assert (at8["final"]["best_n"], at8["best"]["best_n"]) == (256, 128)
    said = (f"n = 8 ended at {val['final']['8']:.3f} against n = 256's {val['final']['256']:.3f} "
            f"({at8['final']['n = 8 regret_in_difference_se']:.1f} se behind; "
            f"{at8['best']['n = 8 regret_in_difference_se']:.1f} by its best value, against n = 128's "
            f"{val['best']['128']:.3f})").replace("0.", ".")
    assert said in text, said
    assert f"organism-hard-256-const8 at 1.06e-4: n = 8 ended at {val['final']['8']:.3f}".replace("0.", ".") in \
        " ".join(LR.MEASURED.split())


def test_recommend_runs_infers_the_sqrt_rule_and_gives_the_pick_its_lr(monkeypatch, capsys):
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", SQRT_RUNS, "--budget", "2e7", "--json")
    assert code == 0, err
    r = json.loads(out)
    lr = r["lr"]
    for run_id, v in lr["each"].items():
        assert v["lr"] == pytest.approx(sqrt_lr(3e-4, v["b_p"], v["n"])), run_id
    assert lr["rule"] == "sqrt" and lr["base"] == pytest.approx(3e-4)
    assert lr["pick_lr"] == pytest.approx(sqrt_lr(3e-4, r["b_p"], r["pick"]))
    assert not any("warning" in line for line in lr["lines"])


def test_recommend_runs_reads_wandb_learning_rates_and_says_when_they_follow_no_rule(tmp_path, monkeypatch, capsys):
    from test_first_hour import write_export

    csv = write_export(tmp_path / "run.csv", lr={2: 1e-6, 4: 5e-6, 8: 2e-6, 16: 1e-6})
    code, out, err = run(monkeypatch, capsys, "recommend", "--runs", csv, "--budget", "1e5",
                         "--map", "val_avg=eval/accuracy")
    assert code == 0, err
    assert "lr of each run: run-n2-s0 1e-06, run-n2-s1 1e-06, run-n4-s0 5e-06" in out
    assert "the runs' lr rule: mixed" in out and "comparing their n also compares their lrs" in out
    assert "lr for the pick (n = 16, B_p = 16): 1e-06, by the lr of its own cheap run" in out


def test_a_trl_plan_read_back_gives_the_full_run_the_picks_lr(tmp_path, monkeypatch, capsys):
    """plan --for trl at the sqrt rule, fake records in each run's folder (no lr column: the lr is
    read from the run's config.yaml), recommend --runs --for trl: the full run's learning_rate is
    the sqrt rule's for the pick."""
    out = tmp_path / "p"
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "trl", "--budget", "4e5", "--n", "2,8,32", "--lr", "1e-6",
                       "--seeds", "2", "--out", out)
    assert code == 0, err
    for d in (out / "runs").iterdir():
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        n, seed = cfg["num_generations"], cfg["seed"]
        rows = [{"run_id": d.name, "n": n, "b_p": 32, "seed": seed, "step": s, "rollouts": s * 32 * n,
                 "val_avg": 0.2 + 0.3 * (1 - math.exp(-s * 32 * n / 4000)) + 0.05 * (n == 8) + 0.001 * seed}
                for s in range(0, cfg["max_steps"] + 1, max(cfg["max_steps"] // 10, 1))]
        (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, text, err = run(monkeypatch, capsys, "recommend", "--runs", out / "runs", "--budget", "4e5", "--for", "trl")
    assert code == 0, err
    # the plan's 1e-6 at n = 8 (B_p 32: 256 rollouts a step) is the sqrt rule's 2e-6 at 1,024
    assert "the runs' lr rule: sqrt (lr = 2e-06 x sqrt(B_p n / 1024))" in text
    pick = int(text.split("pick n = ")[1].split(";")[0])
    full = yaml.safe_load((out / "full" / f"full-n{pick}" / "config.yaml").read_text())
    assert full["learning_rate"] == pytest.approx(sqrt_lr(2e-6, 32, pick))
    assert f"lr for the pick (n = {pick}, B_p = 32): {sqrt_lr(2e-6, 32, pick):.3g}" in text


def test_run_lrs_reads_verl_overrides_by_run_folder(tmp_path, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, "plan", "--for", "verl", "--budget", "2e6", "--n", "4,16", "--lr", "1e-6",
                       "--out", tmp_path / "v")
    assert code == 0, err
    df = pd.DataFrame([{"run_id": name, "n": n, "b_p": 32} for name, n in (("n4-s0", 4), ("n16-s0", 16))])
    got = LR.run_lrs(tmp_path / "v" / "runs", df)
    assert got["n4-s0"]["lr"] == pytest.approx(sqrt_lr(1e-6, 32, 4)) and got["n4-s0"]["from"] == "overrides.txt"
    assert LR.runs_rule(got)["rule"] == "sqrt"


def test_recommend_budget_states_the_picks_lr_by_the_sqrt_rule(tmp_path, monkeypatch):
    from isosim.predict import recommend as rec

    monkeypatch.setenv("ISOSIM_CACHE", str(tmp_path))
    r = rec.recommend(2e4, preset="easy", quick=True, seeds=1, allocation=False)
    assert r.lr == pytest.approx(sqrt_lr(1e-6, r.b_p, r.n))
    assert r.reasons["lr"].startswith(f"the sqrt rule: 1e-06 x sqrt({r.b_p * r.n} / 1024)")
    assert "the simulation assumed the sqrt rule" in r.reasons["lr"]
