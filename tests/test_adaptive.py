"""The adaptive choice of n (isosim.validation.adaptive): synthetic curves with known answers, the replay,
successive halving, scoring, and rebuilding the state from the decision log."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from isosim.validation import adaptive as ad
from isosim.errors import IsosimError

GRID = (4, 8, 16, 32, 64, 128)
C = 2e5
B_P = 16


def eval_rollouts(n: int, budget: float = C, points: int = 12) -> list[float]:
    """Where the trainer evaluates a run of n at B_p 16 over the budget (llm_runs.train.eval_steps)."""
    m = int(budget // (B_P * n))
    steps = sorted({0, m, *(int(round(s)) for s in np.geomspace(1, m, points))})
    return [float(s * B_P * n) for s in steps]


def logistic_curve(amp: float, mid: float, width: float = 1.2, base: float = 0.4):
    return lambda r: base + amp / (1 + math.exp(-(math.log(max(r, 1.0)) - math.log(mid)) / width))


def sweep(fns, sigma=0.0, seed=0, budget=C):
    rng = np.random.default_rng(seed)
    return {n: [(r, fns[n](r) + (sigma * rng.standard_normal() if r > 0 else 0.0)) for r in eval_rollouts(n, budget)]
            for n in fns}


def late_overtaker(scale=1500):
    # larger n: higher ceiling, later take-off; n=32 best at C, a smaller n best early
    amp = {4: .20, 8: .24, 16: .28, 32: .33, 64: .34, 128: .345}
    mid = {n: scale * n ** 0.9 for n in GRID}
    return {n: logistic_curve(amp[n], mid[n]) for n in GRID}


def best_at(fns, budget=C):
    return max(fns, key=lambda n: fns[n](budget))


FIRST_ROUND = {"first_rung": 1 / 16, "window_octaves": 2.0}
"""the first round's rungs and window, where the late-overtaker cases below hold"""
C32 = pytest.param({}, marks=pytest.mark.xfail(strict=True, reason=(
    "known weakness of the default C/32 first rung: it decides before the larger n takes off "
    "(module docstring)")))


@pytest.mark.parametrize("kw", [FIRST_ROUND, C32])
def test_late_overtaker_rising_faster_is_not_stopped_while_it_trails(kw):
    # 32 trails n=4 at the first rung but already rises faster there; it wins at C. (With a later
    # take-off, scale 1500, 32 is still convex at C/16 with the leader's slope, and the policy
    # stops it: the limitation the docs state. At the default C/32 first rung, even scale 800.)
    fns = late_overtaker(scale=800)
    assert fns[4](C / 16) > fns[32](C / 16) and best_at(fns) == 32
    res = ad.replay(sweep(fns, sigma=0.005), ad.Settings(budget=C, grid=GRID, start=(4, 32), eval_samples=2400,
                                                         **kw))
    assert res["chosen"] == 32
    assert not any(d["event"] == "stop" and d["n"] == 32 for d in res["decisions"])


@pytest.mark.parametrize("kw", [FIRST_ROUND, C32])
def test_a_start_below_the_answer_spawns_upwards_and_ends_within_the_margin(kw):
    fns = late_overtaker()
    s = ad.Settings(budget=C, grid=GRID, start=(4, 8), eval_samples=2400, **kw)
    res = ad.replay(sweep(fns, sigma=0.005), s)
    spawned = [d["n"] for d in res["decisions"] if d["event"] == "spawn"]
    assert spawned and min(spawned) > 8
    # within the stop margin z * sqrt(2) * sigma (sigma: sampling error of 2400 samples, ~.01)
    margin = max(d["margin"] for d in res["decisions"] if d["event"] == "rung")
    assert fns[32](C) - fns[res["chosen"]](C) <= margin, res["chosen"]


def test_flat_tie_costs_at_most_one_run_and_any_choice_is_right():
    f = logistic_curve(.3, 2e4)
    fns = {n: f for n in GRID}
    spawned = 0
    chosen = []
    for seed in range(5):
        data = sweep(fns, sigma=0.01, seed=seed)
        s = ad.Settings(budget=C, grid=GRID, start=(8, 32, 128), eval_samples=2400)
        res = ad.replay(data, s)
        # a tie is broken by the noise alone: the run still active at the last rung whose fitted level
        # (its local line through what it had written by then) is highest
        last = [d for d in res["decisions"] if d["event"] == "rung"][-1]
        assert last["rung"] == s.rungs()[-1]
        levels = {}
        for n in last["active"]:
            seen = ad.reveal(data[n], last["rung"])
            levels[n] = ad.local_fit(seen, seen[-1][0], s.window_octaves)[0]
        assert res["chosen"] == max(levels, key=levels.get), (seed, levels, res["chosen"])
        chosen.append(res["chosen"])
        assert res["overhead"] <= 1.0 + 1e-9
        spawned += any(d["event"] == "spawn" for d in res["decisions"])
    # a new n starts only after a run is dominated beyond noise (tie stops do not count): in a flat
    # tie that is a false positive of the z = 2 test, rare
    assert spawned <= 1
    assert len(set(chosen)) > 1  # the noise, not a preference for some n, decides


@pytest.mark.parametrize("kw", [FIRST_ROUND, pytest.param({}, marks=pytest.mark.xfail(strict=True, reason=(
    "the default one-octave window reads a level from two evaluations: 8 of 10 seeds, not 9")))])
def test_noisy_leader_is_not_stopped_on_one_bad_evaluation(kw):
    # n=8 is best by .05 at C but evaluates with sigma .02; the others are smooth and worse
    fns = {n: logistic_curve(.25 if n != 8 else .30, 3e3 * n ** 0.5) for n in GRID}
    assert best_at(fns) == 8
    wins = 0
    for seed in range(10):
        data = sweep(fns, sigma=0.0, seed=seed)
        rng = np.random.default_rng(100 + seed)
        data[8] = [(r, v + (0.02 * rng.standard_normal() if r > 0 else 0)) for r, v in data[8]]
        res = ad.replay(data, ad.Settings(budget=C, grid=GRID, start=(4, 8, 32), eval_samples=2400, **kw))
        wins += res["chosen"] == 8
    assert wins >= 9, wins


def test_clear_loser_stops_early_and_overhead_is_counted():
    fns = {n: logistic_curve(.3 / (1 + math.log2(n / 4)), 1e3) for n in GRID}  # smaller is better, fast
    res = ad.replay(sweep(fns), ad.Settings(budget=C, grid=GRID, start=(4, 16, 64)))
    assert res["chosen"] == 4
    stops = {d["n"]: d["spent"] for d in res["decisions"] if d["event"] == "stop"}
    assert {16, 64} <= set(stops) and all(stops[n] <= C / 4 for n in (16, 64))
    assert set(stops) - {16, 64} <= {8}  # 8 (the gap between 4 and 16) may be tried and stopped
    assert res["overhead"] == pytest.approx(sum(stops.values()) / C)
    assert res["spent"][4] == pytest.approx(max(r for r, _ in sweep(fns)[4]))


def peak_curve(amp, mid, fall=0.0, peak=1e12, width=0.8, base=0.3):
    """A take-off at ``mid`` rollouts, then (``fall`` > 0) a fall of ``fall`` around ``peak``:
    the curve of a run that overfits its training problems."""
    def f(r):
        x = math.log(max(r, 1.0))
        return (base + amp / (1 + math.exp(-(x - math.log(mid)) / width))
                - fall / (1 + math.exp(-(x - math.log(peak)) / width)))
    return f


def peak_and_late_riser():
    # n=4 takes off early, peaks around 1.5e4 rollouts and falls by .06; n=8 rises slowly and is
    # better at C by .035 (n=4 leads until about C/4)
    return {4: peak_curve(0.27, 800, fall=0.06, peak=3e4, width=0.5), 8: peak_curve(0.27, 1.2e4, width=1.2)}


def test_a_peaked_leader_loses_to_the_late_riser():
    fns = peak_and_late_riser()
    assert best_at(fns) == 8 and fns[8](C) - fns[4](C) > 0.03 and fns[4](C / 8) > fns[8](C / 8) + 0.05

    def wins(**kw):
        return sum(ad.replay(sweep(fns, sigma=0.005, seed=seed), ad.Settings(
            budget=C, grid=(4, 8), start=(4, 8), eval_samples=2400, **kw))["chosen"] == 8 for seed in range(10))

    assert wins() >= 9
    # without the peak rule (the first round's reading, at the same rungs) the early leader is
    # kept in about half the seeds: the rule is what finds the late riser here
    assert wins(trend="optimistic", peak_stop=False) <= 6


def test_a_peaked_run_stops_and_a_larger_n_starts():
    fns = peak_and_late_riser()
    fns[16] = peak_curve(0.27, 3e4, width=1.2)
    res = ad.replay(sweep(fns, sigma=0.005, seed=0), ad.Settings(budget=C, grid=(4, 8, 16), start=(4, 8),
                                                                 eval_samples=2400))
    ev = [(d["event"], d.get("n"), d.get("kind")) for d in res["decisions"] if d["event"] in ("stop", "spawn")]
    assert ("stop", 4, "peaked") in ev
    assert any(e == "spawn" and n == 16 for e, n, _ in ev)
    assert any(4 in d["peaked"] for d in res["decisions"] if d["event"] == "rung")


def test_at_most_one_new_n_per_rung():
    fns = late_overtaker(scale=800)
    free_doubles = 0
    for seed in range(3):
        data = sweep(fns, sigma=0.005, seed=seed)
        res = ad.replay(data, ad.Settings(budget=C, grid=GRID, start=(4, 16), eval_samples=2400))
        rungs = [d["rung"] for d in res["decisions"] if d["event"] == "spawn"]
        assert rungs and len(rungs) == len(set(rungs))
        free = ad.replay(data, ad.Settings(budget=C, grid=GRID, start=(4, 16), eval_samples=2400, spawns_per_rung=0))
        free_rungs = [d["rung"] for d in free["decisions"] if d["event"] == "spawn"]
        free_doubles += len(free_rungs) > len(set(free_rungs))
    assert free_doubles >= 1  # without the cap this case starts two n at one rung


def test_successive_halving_keeps_the_better_half_on_each_rung():
    fns = {n: logistic_curve(.3 / (1 + math.log2(n / 4)), 1e3) for n in GRID}
    res = ad.successive_halving(sweep(fns), ad.Settings(budget=C, grid=GRID, start=(4,), first_rung=ad.SH_FIRST_RUNG))
    assert res["chosen"] == 4
    assert set(res["spent"]) == set(GRID)
    # six runs to C/16 (three stop), three to C/8 (one stops), two to C/4 (one stops)
    spent_c = sorted(v / C for n, v in res["spent"].items() if n != 4)
    assert [v <= 1 / 16 for v in spent_c] == [True] * 3 + [False] * 2
    assert res["overhead"] == pytest.approx(sum(spent_c))


def test_the_decision_log_rebuilds_the_state_and_continues_identically():
    fns = late_overtaker()
    data = sweep(fns, sigma=0.005)
    s = ad.Settings(budget=C, grid=GRID, start=(4, 8), eval_samples=2400)
    full = ad.replay(data, s)
    # stop after every prefix of the decision log (a cut inside an update is trimmed back to the
    # last complete one), rebuild from JSON, and continue
    for cut in range(1, len(full["decisions"])):
        log = json.loads(json.dumps(full["decisions"][:cut]))
        pol = ad.Adaptive(s, decisions=log)
        seen = {n: ad.reveal(data[n], sp) for n, sp in pol.stopped.items()}  # what the stopped runs wrote
        while pol.requests():
            for n, t in pol.requests().items():
                seen[n] = ad.reveal(data[n], t)
            pol.update(seen)
        assert pol.chosen == full["chosen"] and pol.decisions == json.loads(json.dumps(full["decisions"]))


def test_truth_scoring_on_a_fabricated_sweep():
    runs = {4: {0: [(0, .4), (1e3, .5), (1e4, .6)], 1: [(0, .4), (1e3, .52), (1e4, .62)]},
            8: {0: [(0, .4), (2e3, .45), (1e4, .58)], 1: [(0, .4), (2e3, .47), (1e4, .60)]}}
    t = ad.truth_at(runs, 1e4)
    assert t["best"] == 4 and t["mean"]["8"] == pytest.approx(.59)
    assert t["seed_sd"] == pytest.approx(math.sqrt((2 * .01 ** 2 + 2 * .01 ** 2) / 2))
    assert t["tie_band"] == [4, 8]  # .59 is within 2 se (.02) of .61
    assert ad.value_at(runs[4][0], math.sqrt(1e3 * 1e4)) == pytest.approx(.55)
    assert math.isnan(ad.value_at(runs[4][0], 2e4))


@pytest.mark.parametrize("kw,needle", [
    ({"budget": 0}, "budget must be a positive"),
    ({"budget": -5}, "budget must be a positive"),
    ({"start": (3,)}, "not in the grid"),
    ({"start": ()}, "no n to start"),
    ({"trend": "upward"}, "trend must be"),
    ({"policy": "widest"}, "policy must be"),
    ({"policy": "lines"}, "starts every grid n"),
    ({"policy": "sbi"}, "starts every grid n"),
    ({"policy": "sbi", "start": GRID}, "needs the runs' B_p"),
])
def test_bad_settings_are_one_line_errors(kw, needle):
    args = {"budget": C, "grid": GRID, "start": (4,), **kw}
    with pytest.raises(IsosimError, match=needle):
        ad.Settings(**args)


def test_replay_without_records_of_a_started_n_is_an_error():
    with pytest.raises(IsosimError, match="no records for n=8"):
        ad.replay({4: [(0, .4), (C, .5)]}, ad.Settings(budget=C, grid=(4, 8), start=(4, 8)))


def test_spread_start():
    assert ad.spread_start(GRID, 32) == [8, 32, 128]
    assert ad.spread_start(GRID, 4) == [4, 16]
    assert ad.spread_start(GRID, 1000) == [32, 128]
    assert ad.spread_start(GRID) == [4, 32, 128]


def write_sweep(folder, fns, seeds=(0, 1), budget=C, b_p=B_P, sigma=0.004):
    for n in fns:
        for s in seeds:
            run = folder / f"n{n}_bp{b_p}_s{s}"
            run.mkdir(parents=True)
            rows = [{"run_id": run.name, "n": n, "b_p": b_p, "seed": s, "step": int(r // (b_p * n)), "rollouts": r,
                     "val_avg": v, "budget": budget, "val_size": 300, "eval_n": 8}
                    for r, v in sweep({n: fns[n]}, sigma=sigma, seed=s * 100 + n)[n]]
            (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_replay_scores_a_fabricated_sweep_folder(tmp_path):
    fns = {n: logistic_curve(.3 / (1 + math.log2(n / 4)), 1e3 * n ** 0.5) for n in (4, 8, 16, 32)}
    write_sweep(tmp_path / "sw", fns)
    sw = ad.load_sweep(tmp_path / "sw")
    assert sorted(sw["runs"]) == [4, 8, 16, 32] and sw["seeds"] == [0, 1] and sw["eval_samples"] == 2400
    budgets = [b for b in ad.default_budgets(sw["max_budget"]) if b >= 2e4]
    rows = ad.score_sweep(sw, budgets, predicted=lambda b: 16)
    pols = {r["policy"] for r in rows}
    assert pols == {"adaptive (prediction)", "adaptive (spread)", "successive halving", "one run at the predicted n",
                    ad.SH_CHEAP}
    assert len(rows) == 5 * 2 * len(budgets)
    for r in rows:
        assert r["best"] == 4 and r["regret"] >= 0 and r["seed_se"] > 0
        if r["policy"] == "successive halving":  # the baseline keeps its first-round rungs (C/16 up)
            full = {n: sw["runs"][n][r["seed"]] for n in sw["runs"]}
            grid = tuple(ad.grid_at(list(sw["runs"]), r["budget"], sw["b_p"]))
            base = ad.successive_halving({n: full[n] for n in grid}, ad.Settings(
                budget=r["budget"], grid=grid, start=grid, first_rung=1 / 16))
            assert r["overhead"] == pytest.approx(base["overhead"]) and r["chosen"] == base["chosen"]
        if r["policy"] == "one run at the predicted n":
            assert r["chosen"] == 16 and r["overhead"] == 0
        else:
            assert r["chosen"] == 4 and 0 < r["overhead"] <= 1.0, r


def test_load_sweep_bad_input(tmp_path):
    with pytest.raises(IsosimError, match="no run folders"):
        ad.load_sweep(tmp_path)
    fns = {4: logistic_curve(.3, 1e3)}
    write_sweep(tmp_path / "a", fns, seeds=(0,))
    write_sweep(tmp_path / "a", fns, seeds=(1,), b_p=8)
    with pytest.raises(IsosimError, match="several B_p"):
        ad.load_sweep(tmp_path / "a")
    (tmp_path / "e" / "n4_bp16_s0").mkdir(parents=True)
    (tmp_path / "e" / "n4_bp16_s0" / "records.jsonl").write_text('{"n": 4}\n')
    with pytest.raises(IsosimError, match="no records with val_avg"):
        ad.load_sweep(tmp_path / "e")


def test_replay_study_leaves_a_sweep_short_of_its_budget_unscored(tmp_path):
    # a sweep whose cheap part is committed before the rest runs is listed, not scored
    import importlib.util

    spec = importlib.util.spec_from_file_location("adaptive_replay", Path(__file__).parents[1] / "studies" / "scoring" / "adaptive_replay.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    fns = {n: logistic_curve(.3 / (1 + math.log2(n / 4)), 1e3 * n ** 0.5) for n in (4, 8)}
    write_sweep(tmp_path / "organism" / "real" / "easy", fns)
    write_sweep(tmp_path / "organism_f8" / "hard-128", fns)
    for rec in (tmp_path / "organism_f8" / "hard-128").glob("*/records.jsonl"):
        rows = rec.read_text().splitlines()
        rec.write_text("\n".join(rows[: len(rows) // 2]) + "\n")  # paused at about half the budget
    rep = study.main(results=tmp_path, out=tmp_path / "out.json")
    assert list(rep["sweeps"]) == ["organism/real/easy"]
    assert rep["not_scored_yet"] == {"organism_f8/hard-128": "4 run(s) short of their budget"}
    assert {r["sweep"] for r in rep["rows"]} == {"organism/real/easy"}


def test_a_search_begun_under_older_rules_resumes_under_them(tmp_path):
    # a decision log written before the second round (no trend, C/16 rungs) continues with its own
    # rules; a log of another search (budget, grid, start) is refused
    from llm_runs.launch.adaptive import load_decisions

    old = ad.Settings(budget=C, grid=GRID, start=(4, 32), first_rung=1 / 16, window_octaves=2.0, trend="optimistic",
                      peak_stop=False, spawns_per_rung=0)
    log = ad.Adaptive(old).decisions
    for key in ("trend", "peak_stop", "spawns_per_rung", "noise_past_takeoff", "matched_steps"):
        del log[0]["settings"][key]
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps(log))
    now = ad.Settings(budget=C, grid=GRID, start=(4, 32))
    decisions, settings = load_decisions(path, now)
    assert settings == old and decisions == log
    assert ad.Adaptive(settings, decisions=decisions).rungs == [C / 16 * 2 ** k for k in range(4)]
    with pytest.raises(IsosimError, match="other settings"):
        load_decisions(path, ad.Settings(budget=C / 2, grid=GRID, start=(4, 32)))


def test_informed_choice_reads_levels_lines_and_the_run_at_c():
    # n=4 leads early and has peaked (falling); n=32 trails at C/2 but rises steeply and is best at C
    def peaked(r):
        return .55 - .04 * max(0.0, math.log(r / 2e4)) if r > 0 else .1
    fns = {4: peaked, 32: logistic_curve(.2, 6e4, width=.4, base=.35)}
    full = sweep(fns)
    assert best_at(fns) == 32
    half = {n: ad.reveal(full[n], C / 2) for n in full}
    assert half[4][-1][1] > half[32][-1][1]  # the level at C/2 favours n=4
    lvl = ad.informed_choice(full, C, 2.0, "level")
    line = ad.informed_choice(full, C, 2.0, "line")
    own = ad.informed_choice(full, C, 1.0)
    assert lvl["chosen"] == 4 and line["chosen"] == 32 and own["chosen"] == 32
    # overhead: the run not chosen, as far as it was revealed, over C
    assert lvl["overhead"] == pytest.approx(ad.spent(half[32]) / C)
    assert own["overhead"] == pytest.approx(ad.spent(full[4]) / C)
    two = ad.informed_choice({**full, 8: sweep({8: lambda r: .3})[8]}, C, 4.0, "line2")
    assert two["chosen"] in (4, 32) and set(two["value"]) == {4, 32}  # the flat n=8 is not among the two best lines
    with pytest.raises(IsosimError, match="frac must be"):
        ad.informed_choice(full, C, 0.5)
    with pytest.raises(IsosimError, match="reading must be"):
        ad.informed_choice(full, C, 2.0, "median")


def test_score_references_on_a_fabricated_sweep(tmp_path):
    fns = {n: logistic_curve(.3 / (1 + math.log2(n / 4)), 1e3 * n ** 0.5) for n in (4, 8, 16, 32)}
    write_sweep(tmp_path / "sw", fns, sigma=0.0)
    sw = ad.load_sweep(tmp_path / "sw")
    budgets = [b for b in ad.default_budgets(sw["max_budget"]) if b >= 2e4]
    rows = ad.score_references(sw, budgets)
    assert {r["policy"] for r in rows} == set(ad.REFERENCES)
    assert len(rows) == len(ad.REFERENCES) * 2 * len(budgets)
    for r in rows:
        assert r["regret"] >= 0
        if r["policy"] == "every n to C, best at C (this seed)":  # noiseless: the seed's best is the best
            assert r["chosen"] == 4 and r["regret"] == 0 and r["overhead"] > 1.5  # three runs, each past C/2


def assert_resumes_identically(settings, data, decisions):
    """A search rebuilt from any prefix of its decision log (through JSON) continues to the same log."""
    for cut in range(1, len(decisions)):
        pol = ad.Adaptive(settings, decisions=json.loads(json.dumps(decisions[:cut])))
        seen = {n: ad.reveal(data[n], sp) for n, sp in pol.stopped.items()}
        while pol.requests():
            for n, t in pol.requests().items():
                seen[n] = ad.reveal(data[n], t)
            pol.update(seen)
        assert pol.decisions == json.loads(json.dumps(decisions))


def test_lines_policy_is_the_two_stage_reference_and_finds_a_late_riser():
    # a peaked early leader and a late riser that is best at C: the two-stage lines policy keeps
    # the riser (its line) and chooses it at C/2; its replay equals the reference reader exactly
    def peaked(r):
        return .55 - .04 * max(0.0, math.log(r / 2e4)) if r > 0 else .1
    fns = {4: peaked, 8: peaked, 16: lambda r: .3 + .1 * min(1.0, r / 1e4),
           32: logistic_curve(.2, 3e4, width=.4, base=.35)}
    grid = tuple(sorted(fns))
    for seed in range(5):
        data = sweep(fns, sigma=0.004, seed=seed)
        res = ad.replay(data, ad.lines_settings(C, grid, 2400))
        ref = ad.informed_choice(data, C, 4.0, "line2")
        assert res["chosen"] == ref["chosen"] == 32
        assert res["overhead"] == pytest.approx(ref["overhead"])
        ev = [d["event"] for d in res["decisions"]]
        assert ev == ["start", "rung", "stop", "stop", "advance", "rung", "choose", "done"]
        # halving, which reads levels, keeps a peaked run
        assert ad.successive_halving(data, ad.Settings(budget=C, grid=grid, start=grid, first_rung=1 / 16))["chosen"] in (4, 8)
    # resumable: rebuilt from any prefix of its log, it continues identically
    assert_resumes_identically(ad.lines_settings(C, grid, 2400), data, res["decisions"])


def _sbi_case(seed):
    # n = 16 clearly best at every budget; the other n learn far less
    amp = {4: .05, 8: .07, 16: .35, 32: .08, 64: .06, 128: .04}
    fns = {n: logistic_curve(amp[n], 2e3 * n ** 0.5) for n in GRID}
    return fns, sweep(fns, sigma=0.003, seed=seed)


def test_sbi_search_halves_at_compute_matched_rungs_by_the_readers_prediction():
    s = ad.sbi_settings(C, GRID, B_P, 2400)
    assert s.rungs() == [C / 32, C / 16, C / 8, C / 4]
    for seed in range(3):
        fns, data = _sbi_case(seed)
        res = ad.replay(data, s)
        assert res["chosen"] == best_at(fns) == 16
        rungs = [d for d in res["decisions"] if d["event"] == "rung"]
        assert [len(d["active"]) for d in rungs] == [6, 3, 2]  # the better half continues; one left at C/8
        for d in rungs:
            # compute-matched: every surviving n has run to its last evaluation at or below the rung
            for n in d["active"]:
                assert d["spent"][str(n)] == ad.spent(ad.reveal(data[n], d["rung"])) <= d["rung"] * (1 + 1e-9)
            # every surviving curve is read to C before anything stops, and the kept half is the
            # best half by that reading (not by the last evaluation)
            assert set(d["predicted"]) == set(d["expected_regret"]) == {str(n) for n in d["active"]}
            pos = res["decisions"].index(d)
            stopped = {e["n"] for e in res["decisions"][pos + 1:] if e["event"] == "stop" and e["rung"] == d["rung"]}
            kept = sorted(d["active"], key=lambda n: (-d["predicted"][str(n)], n))[: len(d["active"]) - len(stopped)]
            assert stopped and set(d["active"]) - stopped == set(kept)
            assert d["in_band"]["16"] and d["expected_regret"]["16"] < min(
                d["expected_regret"][str(n)] for n in d["active"] if n != 16)
        assert res["decisions"][-2]["event"] == "choose" and res["decisions"][-1]["event"] == "done"
        stops = {d["n"]: d["spent"] for d in res["decisions"] if d["event"] == "stop"}
        assert res["overhead"] == pytest.approx(sum(stops.values()) / C)
        assert res["spent"][16] == data[16][-1][0]  # the chosen run continued to the end of its budget
    # resumable: rebuilt from any prefix of its log, it continues identically
    assert_resumes_identically(s, data, res["decisions"])


def test_sbi_search_without_its_bank_is_one_line_error(tmp_path):
    _, data = _sbi_case(0)
    with pytest.raises(IsosimError, match="no bank of simulated sweeps"):
        ad.replay(data, ad.sbi_settings(C, GRID, B_P, 2400, bank=str(tmp_path / "missing.json")))
