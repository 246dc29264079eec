"""Every number docs/organism.md and studies/FINDINGS.md quote from the second organism's read-outs
(``organism_hard/measured.json``, the sqrt rule; ``organism_hard_const/measured.json``, one lr for
every n) is read back here at its printed precision, so a changed number fails. A gap between two n
is quoted in se of the difference of two seed means (``tests/measured_helpers.py``;
:func:`isosim.validation.readings.difference_se` computes it from the records). Also read back: what
was on record when the lr-aware method was frozen, and how its picks hinge on ``DECAY_SD``."""

from __future__ import annotations

import json
import math
import re
import subprocess

import numpy as np
import pytest

import measured_helpers as mh
from git_helpers import history_missing
from isosim.errors import IsosimError
from isosim.validation import plane_methods as pm
from isosim.validation import readings as rd

ROOT = mh.ROOT
ORGANISM = (ROOT / "docs" / "organism.md").read_text()
FINDINGS = (ROOT / "studies" / "FINDINGS.md").read_text()
CONST = mh.load("organism_hard_const/measured.json")
SQRT = mh.load("organism_hard/measured.json")
LR_AWARE = "simfit lr-aware (frozen simfit, no gap, n=8 @5% wide, stay; read under the runs' lr rule)"


def between(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i: text.index(end, i + len(start))]


def flat(text: str) -> str:
    return " ".join(text.split())


def v3(x: float) -> str:
    return f"{x:.3f}".replace("0.", ".", 1)


def v4(x: float) -> str:
    return f"{x:.4f}".replace("0.", ".", 1)


def in_se(x: float) -> str:
    return "0" if abs(x) < 1e-12 else f"{x:.1f}"


def table(text: str, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header line starts with ``header``."""
    lines = text[text.index(header):].splitlines()
    rows = []
    for ln in lines:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return [r for r in rows[2:]]


def band(text: str, grid: list[int]) -> list[int]:
    """A tie band as printed: ``4-32`` (every n of the grid from 4 to 32) or ``2, 8, 32`` / ``2,8,32``."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = map(int, part.split("-"))
            out += [n for n in grid if lo <= n <= hi]
        else:
            out.append(int(part))
    return out


# ------------------------------------------------------------------------------------------------
# the unit: se of the difference of two seed means

def test_difference_se_from_the_records_is_the_read_outs_gap_over_root_two_seed_se():
    from isosim.validation.adaptive import load_sweep

    for measured, folder in ((CONST, "organism_hard_const/hard-128"), (SQRT, "organism_hard/hard-128")):
        runs = load_sweep(mh.RESULTS / folder)["runs"]
        gaps = mh.rule_gaps(CONST)
        for reading in rd.READINGS:
            seeds = mh.seeds_per_n(measured, reading)
            assert set(seeds.values()) == {2}
            for row in measured["readings"][reading]["n_star"]:
                got = rd.difference_se(runs, row["budget"], {row["n_star"]: 1, 8: -1}, reading)
                assert got["seed_se"] == pytest.approx(row["seed_se"], rel=1e-9)
                assert got["se"] == pytest.approx(math.sqrt(2) * row["seed_se"], rel=1e-9)
                want = mh.gap_in_se(row, row["n_star"], 8, seeds)
                assert got["value"] == pytest.approx(want["gap"], abs=1e-12)
                assert got["in_se"] == pytest.approx(want["difference"], rel=1e-9)
                assert got["in_se"] == pytest.approx(want["one"] / math.sqrt(2), rel=1e-9)
        if measured is CONST:  # the rule table's sqrt rows are the sqrt-rule sweep's
            for (reading, rule, budget), g in gaps.items():
                if rule == "sqrt":
                    row = mh.row_at(SQRT, reading, budget)
                    assert g == pytest.approx(mh.gap_in_se(row, row["n_star"], 8, mh.seeds_per_n(SQRT, reading)))


def test_difference_se_weights_each_n_by_its_own_number_of_seeds():
    # n = 2: three seeds at .1, .2, .3 (mean .2, squared deviations .02); n = 4: two at .5, .7 (mean .6, .02):
    # pooled sd sqrt(.04 / 3); se of the gap sqrt(sd^2 / 3 + sd^2 / 2)
    runs = {2: {s: [(0.0, 0.0), (1e3, v)] for s, v in enumerate((0.1, 0.2, 0.3))},
            4: {s: [(0.0, 0.0), (1e3, v)] for s, v in enumerate((0.5, 0.7))}}
    got = rd.difference_se(runs, 1e3, {4: 1, 2: -1}, "final")
    sd = math.sqrt(0.04 / 3)
    assert got["value"] == pytest.approx(0.4)
    assert got["se"] == pytest.approx(sd * math.sqrt(1 / 3 + 1 / 2))
    assert got["in_se"] == pytest.approx(0.4 / (sd * math.sqrt(1 / 3 + 1 / 2)))
    # the mean of two picks minus a third n: weights 1/2, 1/2, -1
    half = rd.difference_se(runs, 1e3, {4: 0.5, 2: -0.5}, "final")
    assert half["value"] == pytest.approx(0.2) and half["in_se"] == pytest.approx(got["in_se"])
    with pytest.raises(IsosimError, match="n = \\[8\\]"):
        rd.difference_se(runs, 1e3, {8: 1, 2: -1}, "final")


# ------------------------------------------------------------------------------------------------
# the constant-lr sweep (docs/organism.md, FINDINGS.md, against organism_hard_const/measured.json)

CONST_DOC = between(ORGANISM, "**Measured to 1e6** (`studies/results/organism_hard_const/measured.json`",
                    "On the plane (`plane.json`'s `constant_lr` block")


@pytest.mark.parametrize("reading, title", [("best", "Best reading (best validated value up to C):"),
                                            ("final", "Final reading (value at C):")])
def test_the_two_rule_tables_are_the_read_outs(reading, title):
    rows = table(CONST_DOC[CONST_DOC.index(title):], "| n |")
    rules = {(r["rule"], r["budget"]): r for r in CONST["rules"][reading]}
    cols = [(rule, b) for b in mh.BAR_BUDGETS for rule in ("sqrt", "constant")]
    ns = [int(n) for n in CONST["n_values"]]
    assert [r[0] for r in rows] == [str(n) for n in ns] + ["n = 8's regret (se)"]
    for row in rows[:-1]:
        for cell, col in zip(row[1:], cols, strict=True):
            r = rules[col]
            want = v3(r["mean"][row[0]])
            assert cell == (f"**{want}**" if int(row[0]) == r["best"] else want), (reading, row[0], col)
    gaps = mh.rule_gaps(CONST)
    for cell, (rule, b) in zip(rows[-1][1:], cols, strict=True):
        g = gaps[(reading, rule, b)]
        assert g["gap"] == pytest.approx(rules[(rule, b)]["fixed_regret"], abs=1e-12)
        assert cell == f"{v3(g['gap'])} ({g['difference']:.1f})", (reading, rule, b)


def test_the_constant_lr_prose_is_the_read_outs():
    gaps = mh.rule_gaps(CONST)

    def span(reading: str, rule: str, budgets=mh.BAR_BUDGETS) -> str:
        got = [gaps[(reading, rule, b)]["difference"] for b in budgets]
        return f"{min(got):.1f}-{max(got):.1f}"

    doc = flat(CONST_DOC)
    assert (f"n = 8 is {span('best', 'constant')} se (of the difference) behind the best n in the best reading and "
            f"{span('final', 'constant')} se in the final reading") in doc
    sqrt_late = max(gaps[("best", "sqrt", b)]["difference"] for b in (3e5, 1e6))
    assert (f"under the sqrt rule it is within {sqrt_late:.1f} se at 3e5 and 1e6 (best reading) and "
            f"{span('final', 'sqrt')} se behind in the final") in doc
    stars = {(reading, rule): " / ".join(str(r["best"]) for r in CONST["rules"][reading] if r["rule"] == rule)
             for reading in rd.READINGS for rule in ("sqrt", "constant")}
    assert (f"n*(C) at a constant lr: best reading {stars[('best', 'constant')]} at 1e5 / 3e5 / 1e6, final reading "
            f"{stars[('final', 'constant')]};") in doc
    assert stars[("best", "sqrt")] == stars[("final", "sqrt")] == "32 / 32 / 32"
    # FINDINGS: each n at 1e6 under both rules in both readings, n = 8's regret in the same unit
    find = flat(between(FINDINGS, "**Measured to 1e6, n matters at a constant lr**", "## Reading n*"))
    at = {(reading, r["rule"]): r for reading in rd.READINGS for r in CONST["rules"][reading] if r["budget"] == 1e6}
    best = ", ".join(f"{n} {v3(at[('best', 'sqrt')]['mean'][n])} / {v3(at[('best', 'constant')]['mean'][n])}"
                     for n in map(str, CONST["n_values"]))
    assert f"sqrt / constant rule at 1e6: n = {best}" in find
    final = ", ".join(f"{v3(at[('final', 'sqrt')]['mean'][n])} / {v3(at[('final', 'constant')]['mean'][n])}"
                      for n in map(str, CONST["n_values"]))
    assert f"final reading (value at C) {final}." in find

    def each(reading: str, rule: str) -> str:
        return " / ".join(f"{gaps[(reading, rule, b)]['difference']:.1f}" for b in mh.BAR_BUDGETS)

    assert (f"under the sqrt rule {each('best', 'sqrt')} at 1e5 / 3e5 / 1e6 (best reading), at a constant lr "
            f"{each('best', 'constant')}; final reading {each('final', 'sqrt')} against {each('final', 'constant')}.") in find


def test_the_predictions_scored_are_the_read_outs():
    s = {label: {r: mh.summary_in_se(CONST, label, r) for r in rd.READINGS} for label in CONST["predictions"]["summary"]}
    # the se of a difference is sqrt(2) that of one seed mean: the committed means, over sqrt(2)
    for label, got in s.items():
        for r in rd.READINGS:
            assert got[r] == pytest.approx(CONST["predictions"]["summary"][label][r]["mean_regret_in_se"] / math.sqrt(2))

    def pair(label: str) -> str:
        return f"{s[label]['best']:.1f} / {s[label]['final']:.1f}"

    seed = [f"{LR_AWARE} (seed {i})" for i in (0, 1)]
    lr_aware = (f"{s[seed[0]]['best']:.1f} and {s[seed[1]]['best']:.1f} / "
                f"{s[seed[0]]['final']:.1f} and {s[seed[1]]['final']:.1f}")
    doc = flat(CONST_DOC)
    assert (f"the profile-only prediction (4 / 4 / 8) {pair('profile-only (simulated sweep' + chr(39) + 's n*)')}; a "
            f"fixed n = 8 {pair('fixed n = 8')}; the frozen `sbi-band` reader at 5 % (8 / 16 / 64) "
            f"{pair('frozen (sbi-band) @0.05')}; the cheap leader at 5 % (16 / 16 / 32) "
            f"{pair('cheap leader (level) @0.05')}; the lr-aware method frozen before the runs, per seed (best 8 / 64 / "
            f"64 and 8 / 8 / 64; final 64 at every budget) {lr_aware}; its pick from both seeds' runs in one fit (what "
            f"`recommend --runs` gives: best 8 / 8 / 64, final 64 / 8 / 64) {pair(f'{LR_AWARE} (both seeds pooled)')}.") in doc
    find = flat(FINDINGS)
    assert (f"profile-only {pair('profile-only (simulated sweep' + chr(39) + 's n*)')}, n = 8 {pair('fixed n = 8')}, "
            f"`sbi-band` @5 % {pair('frozen (sbi-band) @0.05')}, cheap leader @5 % {pair('cheap leader (level) @0.05')}, "
            f"the lr-aware method frozen before the runs {lr_aware.replace(' / ', ' (seeds 0, 1) / ', 1)}.") in find
    # the picks named are the scored ones
    picks = {(x["label"], x["reading"]): [] for x in CONST["predictions"]["scored"]}
    for x in CONST["predictions"]["scored"]:
        picks[(x["label"], x["reading"])].append(x["pick"])
    assert picks[(f"{LR_AWARE} (both seeds pooled)", "best")] == [8, 8, 64]
    assert picks[(f"{LR_AWARE} (both seeds pooled)", "final")] == [64, 8, 64]
    assert picks[("frozen (sbi-band) @0.05", "best")] == [8, 16, 64]
    assert picks[("cheap leader (level) @0.05", "best")] == [16, 16, 32]


def test_the_bar_table_is_the_read_outs():
    rows = table(CONST_DOC, "| reading, C | lr-aware picks |")
    gains = mh.bar_gains(CONST)
    bar = CONST["bar"]["rows"]
    assert len(rows) == len(bar) == 6
    for cells, r in zip(rows, bar, strict=True):
        cl = r["cheap leader (level) @0.05"]
        g = gains[(r["reading"], r["budget"])]
        want = [f"{r['reading']}, {r['budget']:.0e}".replace("e+0", "e"), ", ".join(map(str, r["method"]["picks"])),
                v4(r["method"]["regret"]), v4(r["fixed n = 8"]["regret"]), f"{cl['pick']}: {v4(cl['regret'])}",
                v4(r["seed_se"]), "yes" if r["meets"] else "no", "0 (ties n = 8)" if g == 0 else f"{g:.1f}"]
        assert cells == want
        assert (g >= 2) == r["goal"]  # the goal (2 se of one seed mean) holds where the gain is 2 se of a difference
    doc = flat(CONST_DOC)
    pos = [g for g in gains.values() if g > 0]
    assert f"beat a fixed n = 8 in five of six cells by {min(pos):.1f}-{max(pos):.1f} se of the difference" in doc
    assert f"beat n = 8 by {min(pos):.1f}-{max(pos):.1f} such se in five of the six (budget, reading) cells" in flat(FINDINGS)
    assert sum(r["meets"] for r in bar) == 3 and "in three of six: **the acceptance bar was not met**" in doc


# ------------------------------------------------------------------------------------------------
# what was on record when the lr-aware method was frozen (07a27e7)

def _evals(folder: str) -> dict[int, float]:
    return {int(r["step"]): r["val_avg"] for r in map(json.loads, (mh.RESULTS / folder / "records.jsonl").read_text().splitlines())
            if "val_avg" in r}


def test_n64s_whole_trajectory_at_the_constant_lr_was_on_record_through_the_sqrt_rule_sweep_and_the_pilot():
    for s in (0, 1):
        const, sqrt = (f"{f}/hard-128/n64_bp16_s{s}" for f in ("organism_hard_const", "organism_hard"))
        cfg = {f: json.loads((mh.RESULTS / f / "config.json").read_text()) for f in (const, sqrt)}
        assert cfg[const]["lr"] == cfg[sqrt]["lr"] == 3e-4 and cfg[const]["seed"] == cfg[sqrt]["seed"] == s
        assert (cfg[const]["lr_rule"], cfg[sqrt]["lr_rule"]) == ("constant", "sqrt")
        assert _evals(const) == _evals(sqrt) and max(_evals(const)) == 976  # to 1e6 rollouts, every evaluation equal
        for n, budget in ((4, 1e5), (64, 2e5)):
            pilot = f"organism_hard/pilot_constant_lr/n{n}_bp16_s{s}"
            c = json.loads((mh.RESULTS / pilot / "config.json").read_text())
            assert (c["lr"], c["lr_rule"], c["budget"], c["seed"]) == (3e-4, "constant", budget, s)
            mine, sweep = _evals(pilot), _evals(f"organism_hard_const/hard-128/n{n}_bp16_s{s}")
            common = set(mine) & set(sweep)
            assert len(common) >= 7 and all(mine[t] == sweep[t] for t in common)
    committed = json.loads((mh.RESULTS / "organism_hard_const/prediction_simfit_lr.json").read_text())
    picks = [p for r in committed["organism-hard-128-const"]["picks"].values() for seed in r.values() for p in seed]
    assert (len(picks), picks.count(64), picks.count(8)) == (12, 9, 3)
    note = next(p["note"] for p in mh.load("organism_hard_const/manifest.json")["sweeps"]["organism-hard-128-const"]
                ["predictions"] if p["file"].endswith("prediction_simfit_lr.json"))
    for text in (note, flat(ORGANISM), flat(FINDINGS)):
        assert "c9d3d38" in text
    assert "748744e" in note and "748744e" in ORGANISM
    assert "it picks 64 in 9 of its 12 per-seed picks, 8 in the other 3" in note
    assert "The method picks 64 in 9 of its 12 per-seed picks (8 in the other 3)" in flat(ORGANISM)
    assert "it picks 64 in 9 of its 12 picks" in flat(FINDINGS)


@pytest.mark.skipif(history_missing() is not None, reason=str(history_missing()))
def test_the_records_named_were_committed_before_the_method():
    for before in ("c9d3d38", "748744e"):
        res = subprocess.run(["git", "merge-base", "--is-ancestor", before, "07a27e7"], cwd=ROOT, capture_output=True)
        assert res.returncode == 0, before


# ------------------------------------------------------------------------------------------------
# how the picks hinge on DECAY_SD: the committed picks' computation with the constant patched in memory

@pytest.mark.cpu_sensitive
def test_the_decay_sd_table_is_the_replay_with_the_constant_patched():
    from test_frozen_replay import _study

    from isosim.predict import lr_read as lrr
    from isosim.validation import plane_methods as pm

    study = _study()
    bank = pm.bank_of(study.BANK_SWEEP)
    rule = study.rule_of(study.SWEEP)
    rows = {r[0]: r for r in table(ORGANISM, "| `DECAY_SD` |")}
    committed = json.loads(study.OUT.read_text())[study.KEY]
    assert committed["decay_prior_sd"] == lrr.CALIBRATION_07A27E7.decay_sd == 1.0
    said, decay_span = {}, {}
    for sd, label in ((0.5, "0.5"), (1.0, "1.0 (frozen)"), (2.0, "2.0")):
        picks, detail, _ = study.replay(study.SWEEP, bank, rule, lrr.LrCalibration(decay_sd=sd))
        decays = [d["theta"]["decay"] for d in detail]
        assert len(decays) == 6
        decay_span[sd] = f"{min(decays):.2f}-{max(decays):.2f}"
        if sd == 1.0:
            assert picks == committed["picks"]
        scored = mh.picks_scored(CONST, picks)
        cells = mh.bar_cells(CONST, picks)
        n64 = sum(p.count(64) for r in picks.values() for p in r.values())
        mean = {r: sum(c["regret"] for (rr, _), c in scored["cells"].items() if rr == r) / 3 for r in rd.READINGS}
        want = [label, *(" and ".join(" / ".join(map(str, picks[r][f"seed {s}"])) for s in (0, 1)) for r in rd.READINGS),
                f"{n64} of 12", f"{v4(mean['best'])} / {v4(mean['final'])}",
                f"{scored['mean_in_se']['best']:.1f} / {scored['mean_in_se']['final']:.1f}",
                f"{sum(c['gain_in_se'] >= 2 for c in scored['cells'].values())} of 6", f"{sum(cells.values())} of 6"]
        assert rows[label] == want, (sd, rows[label], want)
        said[sd] = (n64, mean)
    assert (f"the fitted decay smaller ({decay_span[0.5]} over the six fits at 0.5, {decay_span[1.0]} as frozen, "
            f"{decay_span[2.0]} at 2.0)") in flat(ORGANISM)
    # the frozen width's regrets are the committed bar's; no width meets the bar in every cell
    assert said[1.0][1]["best"] == pytest.approx(np.mean([r["method"]["regret"] for r in CONST["bar"]["rows"][:3]]))
    find = flat(FINDINGS)
    assert (f"0.5 picks 64 in {said[0.5][0]} of 12 (mean regret {v4(said[0.5][1]['best'])} / {v4(said[0.5][1]['final'])}, "
            f"best / final), 2.0 in {said[2.0][0]} of 12 ({v4(said[2.0][1]['best'])} / {v4(said[2.0][1]['final'])}), the "
            f"frozen 1.0 {v4(said[1.0][1]['best'])} / {v4(said[1.0][1]['final'])}") in find


# ------------------------------------------------------------------------------------------------
# the sqrt-rule sweep of the same learner (docs/organism.md, FINDINGS.md, against organism_hard/measured.json)

SQRT_DOC = between(ORGANISM, "**Measured** (`measured.json`): seed means of val avg@4", "On the plane (`plane.json`, `second_learner`")


def test_the_sqrt_rule_sweeps_values_and_n_star_are_the_read_outs():
    rows = table(SQRT_DOC, "| C | best reading | final reading |")
    budgets = SQRT["budgets"]
    assert [r[0] for r in rows] == [f"{b:.0e}".replace("e+0", "e") for b in budgets]
    for cells, b in zip(rows, budgets, strict=True):
        for cell, reading in zip(cells[1:], rd.READINGS, strict=True):
            row = mh.row_at(SQRT, reading, b)
            want = " ".join(f"**{v3(row['mean'][str(n)])}**" if n == row["n_star"] else v3(row["mean"][str(n)])
                            for n in SQRT["n_values"])
            assert cell == want, (b, reading)
    grid = [int(n) for n in SQRT["n_values"]]

    def check(cells: list[str], reading: str) -> None:
        r = SQRT["readings"][reading]
        for cell, row in zip(cells[:5], r["n_star"], strict=True):
            star, rest = cell.split(" ", 1)
            assert int(star) == row["n_star"] and band(rest.strip("[]"), grid) == row["tie_band"], (reading, cell)
        point, interval = cells[5].split(" ", 1)
        lo, hi = (float(x) for x in interval.strip("[]").split(","))
        want = r["slope"]
        assert float(point) == round(want["point"], 2) and (lo, hi) == (round(want["interval"][0], 2),
                                                                         round(want["interval"][1], 2))

    doc_rows = {r[0]: r for r in table(SQRT_DOC, "| | 1e4 | 3e4 |")}
    find_rows = {r[0]: r for r in table(FINDINGS, "| reading | 1e4 | 3e4 | 1e5 | 3e5 | 1e6 | slope")}
    for reading in rd.READINGS:
        check(doc_rows[f"n* [tie band], {reading}"][1:], reading)
        check(find_rows[reading][1:], reading)
    # "n* is 32 from 2.0e4 rollouts to 1e6 in the best reading", the final reading's path between; n = 32's peak
    # and its value at 1e6
    path = {r: SQRT["readings"][r]["n_star_path"] for r in rd.READINGS}
    assert path["best"][-1]["n_star"] == 32 and all(p["n_star"] == 32 for p in path["final"][2::2])

    def e(x: float) -> str:
        return f"{x:.1e}".replace("e+0", "e")

    final = ", ".join(f"{p['n_star']} from {e(p['from_budget'])}" for p in path["final"][3:])
    assert (f"n* is 32 from {e(path['best'][-1]['from_budget'])} rollouts to 1e6 in the best reading" in flat(SQRT_DOC))
    assert final.replace(f"32 from {e(path['final'][-1]['from_budget'])}",
                         f"32 again from {e(path['final'][-1]['from_budget'])}") in flat(SQRT_DOC), final
    assert all(row["n_star"] == 32 for r in rd.READINGS for row in SQRT["readings"][r]["n_star"])
    top = {r: mh.row_at(SQRT, r, 1e6)["mean"]["32"] for r in rd.READINGS}
    assert f"(n = 32 {v3(top['best'])} at its peak, {v3(top['final'])} at 1e6)" in flat(SQRT_DOC)
    assert f"(n = 32: {v3(top['best'])} at its peak, {v3(top['final'])} at 1e6)" in flat(FINDINGS)


SQRT_LABELS = {"profile-only, simulated sweep": "profile-only (simulated sweep's n*)",
               "profile-only, frontier n*": "profile-only (frontier n*)", "fixed n = 8": "fixed n = 8",
               "frozen `sbi-band` @5 %": "frozen (sbi-band) @0.05", "cheap leader @5 %": "cheap leader (level) @0.05"}


def test_the_sqrt_rule_sweeps_predictions_are_scored_in_se_of_the_difference():
    rows = table(SQRT_DOC, "| prediction (committed) | picks |")
    seen = set()
    for cells in rows:
        name = next((k for k in SQRT_LABELS if cells[0].startswith(k)), None)
        if name is None:
            assert cells[0].startswith("frozen simfit") and cells[2:] == ["as n = 8", "as n = 8"]
            continue
        seen.add(name)
        label = SQRT_LABELS[name]
        picks = [x["pick"] for x in SQRT["predictions"]["scored"] if x["label"] == label and x["reading"] == "best"]
        assert cells[1] == (" / ".join(map(str, picks)) if len(set(picks)) > 1 else str(picks[0]))
        for cell, reading in zip(cells[2:], rd.READINGS, strict=True):
            assert cell == " / ".join(in_se(x) for x in mh.scored_in_se(SQRT, label, reading)), (name, reading)
    assert seen == set(SQRT_LABELS)
    # FINDINGS: the same, best reading, and n = 8 at 1e6 in the final reading
    find = flat(FINDINGS)
    for name, short in (("profile-only, simulated sweep", "profile-only (simulated) 2 / 4 / 8: "),
                        ("profile-only, frontier n*", "its frontier n* 4 / 4 / 2: "),
                        ("fixed n = 8", "fixed n = 8 (and the frozen simfit method, which stays on 8): "),
                        ("frozen `sbi-band` @5 %", "frozen `sbi-band` 2 / 8 / 32: "),
                        ("cheap leader @5 %", "cheap leader 16 / 16 / 32: ")):
        got = ", ".join(in_se(x) for x in mh.scored_in_se(SQRT, SQRT_LABELS[name], "best"))
        assert short + got in find, (short, got)
    n8 = mh.scored_in_se(SQRT, "fixed n = 8", "final")[-1]
    assert f"Final reading at 1e6: n = 8 {n8:.1f} se, the cheap readers 0." in find
    assert all(x == 0 for label in ("frozen (sbi-band) @0.05", "cheap leader (level) @0.05")
               for x in mh.scored_in_se(SQRT, label, "final")[-1:])


# ------------------------------------------------------------------------------------------------
# the first organism's long sweeps (FINDINGS.md, docs/organism.md, against organism_long/measured.json)

LONG = mh.load("organism_long/measured.json")
LONG_FIND = between(FINDINGS, "## Long budgets: ten times the rollouts", "The learner search beyond")
LONG_DOC = between(ORGANISM, "**hard-128 (measured).**", "**The search for a setting where the choice of n matters.**")


def e(x: float) -> str:
    """1.8e4, 2e6 (as the tables print a budget)."""
    m, p = f"{x:.1e}".split("e")
    return f"{m.removesuffix('.0')}e{int(p)}"


def long_row(sweep: str, reading: str, budget: float = 2e6) -> dict:
    return next(r for r in LONG[sweep]["readings"][reading]["n_star"] if r["budget"] == budget)


def long_gap(sweep: str, reading: str, n: int) -> dict:
    row = long_row(sweep, reading)
    return mh.gap_in_se(row, row["n_star"], n, {int(k): len(LONG[sweep]["seeds"]) for k in row["mean"]})


def numbers(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])\.?\d+(?:\.\d+)?(?:e\d+)?", text)


def test_the_long_sweeps_table_is_the_read_outs():
    rows = table(LONG_FIND, "| sweep | reading | n* at 2e5 |")
    assert len(rows) == 6
    for cells in rows:
        sweep = f"{cells[0]}-long"
        r = LONG[sweep]["readings"][cells[1]]
        grid = [int(n) for n in LONG[sweep]["n_values"]]
        for cell, row in zip(cells[2:6], r["n_star"], strict=True):
            star, rest = cell.split(" ", 1)
            assert int(star) == row["n_star"] and band(rest.strip("[]"), grid) == row["tie_band"], (sweep, cell)
        assert cells[6] == e(r["in_tie_band_from"]) and cells[7] == e(r["crossing"]), (sweep, cells[1])
        cl = r["cheap_leader"]
        picks = " / ".join(str(p["pick"]) for p in cl["per_seed"])
        assert cells[8].startswith(f"{picks}, regret "), cells[8]
        # every number in the cell is the read-out's: a regret, that regret or the mean in se of the difference,
        # the se of one seed mean, and (hard-1238) each n's peak
        said = {v4(p["regret"]) for p in cl["per_seed"]} | {"0"} | {v4(long_row(sweep, cells[1])["seed_se"])}
        said |= {f"{p['regret_in_se'] / math.sqrt(2):.1f}" for p in cl["per_seed"]}
        said |= {f"{cl['mean_regret_in_se'] / math.sqrt(2):.1f}"}
        said |= {v3(v["peak"]) for v in LONG[sweep]["plateaus"]["per_n"].values()} | set(map(str, grid))
        rest = cells[8][len(picks):]
        assert set(numbers(rest)) <= said, (sweep, cells[1], set(numbers(rest)) - said)
    hard1238 = LONG["hard-1238-long"]["plateaus"]["per_n"]
    assert "peaks " + "/".join(v3(hard1238[str(n)]["peak"]) for n in (2, 8, 32, 128)) + " (n 2/8/32/128)" in LONG_FIND


def test_the_long_sweeps_prose_is_the_read_outs():
    find, doc = flat(LONG_FIND), flat(LONG_DOC)
    for sweep in ("hard-128-long", "hard-512-long"):
        per_n = LONG[sweep]["plateaus"]["per_n"]
        peaks = " / ".join(v3(per_n[str(n)]["peak"]) for n in (2, 8, 32, 128))
        finals = " / ".join(v3(long_row(sweep, "final")["mean"][str(n)]) for n in (2, 8, 32, 128))
        assert peaks in find and peaks in doc and finals in find and finals in doc, sweep
        for steps in (50, 800):
            at = next(m for m in LONG[sweep]["plateaus"]["matched_steps"] if m["steps"] == steps)
            assert " / ".join(v3(at["mean"][str(n)]) for n in (2, 8, 32, 128)) in find, (sweep, steps)
    # the plateaus table of docs/organism.md
    rows = table(ORGANISM, "| update steps | hard-128: n = 2 / 8 / 32 / 128 |")
    for cells in rows:
        for cell, sweep in zip(cells[1:], ("hard-128-long", "hard-512-long"), strict=True):
            at = next(m for m in LONG[sweep]["plateaus"]["matched_steps"] if m["steps"] == int(cells[0]))
            assert cell == " / ".join(v3(at["mean"][str(n)]) for n in (2, 8, 32, 128)), (sweep, cells[0])
    # the predictions' regrets at 2e6, in se of the difference of two seed means
    n8, n2 = long_gap("hard-128-long", "best", 8), long_gap("hard-128-long", "best", 2)
    n8f, n2f = long_gap("hard-128-long", "final", 8), long_gap("hard-128-long", "final", 2)
    assert (f"n* 8 (best +{v3(n8['gap'])}, {n8['difference']:.1f} se; final +{v3(n8f['gap'])}), `isosim predict`'s scored "
            f"n_tol 2 (best +{v3(n2['gap'])}, final +{v3(n2f['gap'])}, {n2f['difference']:.1f} se)") in find
    assert (f"said n* 8 (best reading +{v3(n8['gap'])}, {n8['difference']:.1f} se; `isosim predict` scored by its n_tol, "
            f"2, as the plane does: +{v3(n2['gap'])})") in doc
    two, big = long_gap("hard-512-long", "best", 2), long_gap("hard-512-long", "best", 128)
    fin = [v4(long_gap("hard-512-long", "final", n)["gap"]) for n in (2, 128, 8)]
    assert (f"profile-only 2 (+{v4(two['gap'])}, {two['difference']:.1f} se), `isosim predict` 128 (+{v4(big['gap'])}, "
            f"{big['difference']:.1f} se; its n_tol 2 +{v4(two['gap'])})") in find
    assert f"final reading +{fin[0]}, +{fin[1]}, +{fin[2]}." in find
    assert f"`isosim predict` n* 128 (+{v4(big['gap'])}, {big['difference']:.1f} se;" in doc
    cl = LONG["hard-512-long"]["readings"]["best"]["cheap_leader"]
    seed0 = cl["per_seed"][0]
    assert seed0["pick"] == 2 and cl["per_seed"][1]["regret"] == 0
    d0, dm = seed0["regret_in_se"] / math.sqrt(2), cl["mean_regret_in_se"] / math.sqrt(2)
    assert (f"loses {v4(seed0['regret'])} ({d0:.1f} se of the difference) in the best reading, seed 1's picks 8 (0); "
            f"the mean, {dm:.1f} such se ({cl['mean_regret_in_se']:.1f} se of one seed mean)") in find
    assert f"(regret {v4(seed0['regret'])}, {d0:.1f} se, best reading) and 8 on seed 1 (0): mean {dm:.1f} se" in doc
    assert f"| mean {dm:.1f} se ({d0:.1f} se on seed 0, 0 on seed 1) |" in ORGANISM
    # the second organism's cheap leader in the search table
    cl2 = SQRT["readings"]["best"]["cheap_leader"]
    s1 = cl2["per_seed"][1]
    assert (f"seed 0's cheap part {cl2['per_seed'][0]['pick']} (0), seed 1's {s1['pick']} ({v4(s1['regret'])}, "
            f"{s1['regret_in_se'] / math.sqrt(2):.1f} se): mean {cl2['mean_regret_in_se'] / math.sqrt(2):.1f} se") in ORGANISM


# ------------------------------------------------------------------------------------------------
# the first organism's set-size (F8) sweeps (FINDINGS.md, docs/organism.md, against organism_f8/measured.json)

F8 = mh.load("organism_f8/measured.json")
F8_SIZES = {"128": "hard-128", "256": "hard-256", "512": "hard-512", "1,238": "hard-1238-t06"}


def n_sat(x: float) -> str:
    """8.1, 32, and an interval's bound without a trailing .0 (2, 128)."""
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def bound(x: float) -> str:
    return n_sat(x).removesuffix(".0")


def test_the_f8_tables_are_the_read_outs():
    def first_learning(s: dict) -> tuple[int, float]:
        i = s["learning"].index(True)
        return s["n_star"][i], s["budgets"][i]

    find = {r[0]: r for r in table(FINDINGS, "| training problems | measured n* at 2e5 (tie band) |")}
    doc = {r[0]: r for r in table(ORGANISM, "| sweep | n* at first learning budget | measured n* at 2e5 (tie band) |")}
    assert set(find) == set(F8_SIZES) and set(doc) == set(F8_SIZES.values())
    for size, key in F8_SIZES.items():
        s = F8[key]
        star, tol, hi = s["n_star"][-1], s["n_tol"][-1], s["n_tie_hi"][-1]
        sat = f"{n_sat(s['n_sat'])} ({bound(s['n_sat_ci'][0])}-{bound(s['n_sat_ci'][1])}"
        first, at = first_learning(s)
        assert find[size][1] == f"{star} ({tol}-{hi}); first learning budget {first}"
        assert find[size][2] == sat + ")"
        cells = doc[key]
        assert cells[1] == f"{first} ({at:.0f} rollouts)"
        assert cells[2].replace("**", "") == f"{star} ({tol}-{hi})"
        assert cells[3].replace("**", "").startswith(sat), (key, cells[3])
        vals = " ".join(v3(s["final_val_avg"][str(n)]) for n in s["n_values"])
        assert cells[-1].startswith(vals + " (noise "), (key, cells[-1])
    doc_text = flat(ORGANISM)
    for key in ("hard-1238-t06", "hard-256"):
        s = F8[key]
        assert f"n_sat {n_sat(s['n_sat'])} ({bound(s['n_sat_ci'][0])}-{bound(s['n_sat_ci'][1])})" in doc_text, key
    assert f"(n_sat 128 against {n_sat(F8['hard-128']['n_sat'])})" in doc_text


def test_the_allocation_check_is_the_read_outs():
    alloc = mh.load("organism_allocation/measured.json")["settings"]
    easy, hard = alloc["easy-n4"], alloc["hard-128-t06-n32"]
    for s in (easy, hard):  # the se of the mean of the two seeds' paired gains
        gains = [v["gain"] for v in s["per_seed"].values()]
        assert s["se"] == pytest.approx(np.std(gains, ddof=1) / math.sqrt(len(gains)))
    assert round(easy["se"], 3) == round(hard["se"], 3)
    said = (f"predicted to gain +{v4(easy['predicted']['gain'])} (easy, n {easy['n']}) and +{v4(hard['predicted']['gain'])} "
            f"(hard-128 at T 0.6, n {hard['n']}) at 2e5; measured over 2 seeds against the committed uniform runs: "
            f"-{v3(-easy['gain'])} and -{v3(-hard['gain'])} (se of the mean paired gain {v3(easy['se'])} each)")
    assert said in flat(FINDINGS), said


CONST8 = mh.load("organism_const8/measured.json")
CONST8_FORMS = {"lr-read, one n (n = 8)": "lr-read one n", "lr-read, every n": "lr-read every n",
                "07a27e7 (n = 8; reference batch 1,024)": "07a27e7", "cheap leader @5 %": "cheap leader @5%"}


def test_the_one_lr_for_n_8_sweeps_values_table_is_the_read_outs():
    """docs/organism.md's value table of organism-hard-256-const8: every seed mean, the bold n* and the
    tie band at 1e5, 3e5 and 1e6 in both readings."""
    part = between(ORGANISM, "**What the runs did.**", "**The bar**")
    rows = table(part, "| reading, C |")
    assert len(rows) == 6
    for row in rows:
        reading, budget = row[0].split(", ")
        cell = next(c for c in CONST8["readings"][reading]["n_star"] if c["budget"] == float(budget))
        for n, got in zip(CONST8["n_values"], row[1:-1]):
            want = v3(cell["mean"][str(n)])
            assert got == (f"**{want}**" if n == cell["n_star"] else want), (reading, budget, n)
        assert row[-1] == ", ".join(map(str, cell["tie_band"]))


def test_the_one_lr_for_n_8_sweeps_bar_table_and_prose_are_the_read_outs():
    """The bar table (each pick and its regret in se of the difference, the counts, met or missed) is
    ``lr_read_bar``'s pooled rows; the per-seed counts and the plane block's numbers in the prose are
    measured.json's and plane.json's."""
    bar = CONST8["lr_read_bar"]
    part = between(ORGANISM, "**The bar**", "On the plane (")
    rows = {r[0]: r for r in table(part, "| method (both seeds' runs in one fit) |")}
    assert set(rows) == set(CONST8_FORMS) | {"best n in hindsight"}
    for label, form in CONST8_FORMS.items():
        mine = [r for r in bar["rows"] if r["form"] == form and r["version"] == "pooled"]
        for col, reading in ((1, "best"), (2, "final")):
            want = " / ".join(f"{r['picks'][0]} ({r['regret_in_difference_se']:.1f})" for r in mine
                              if r["reading"] == reading)
            assert rows[label][col] == want, (label, reading)
        s = bar["summary"][form]["pooled"]
        assert rows[label][3:] == [f"{s['no_higher_than_fixed']}/6", f"{s['within_1se']}/6",
                                   "met" if s["meets"] else "missed"], label
    one = [r for r in bar["rows"] if r["form"] == "lr-read one n" and r["version"] == "pooled"]
    assert rows["best n in hindsight"][1:3] == [" / ".join(str(r["best_n"]) for r in one if r["reading"] == x)
                                                for x in ("best", "final")]
    seeds = {f: bar["summary"][f]["seeds"] for f in ("lr-read one n", "lr-read every n")}
    assert seeds["lr-read one n"] == bar["summary"]["lr-read one n"]["pooled"]
    e = seeds["lr-read every n"]
    text = flat(part)
    assert f"{e['no_higher_than_fixed']}/6, {e['within_1se']}/6 for the every-n form" in text
    assert not any(bar["summary"][f]["pooled"]["meets"] or bar["summary"][f]["seeds"]["meets"] for f in bar["summary"])
    assert "No method isosim has met this bar" in text
    plane = json.loads((ROOT / "studies" / "results" / "plane.json").read_text())["constant_lr_at_8"]
    summ, hind = plane["summary"], plane["hindsight"]
    prose = flat(between(ORGANISM + "\n\n", "On the plane (`studies/results/plane.json`, block `constant_lr_at_8`", "\n\n"))
    assert f"{len(plane['sweeps'])}" == "1" and f"{summ['fixed n = 8']['replays']} replays" in prose
    for label, name in (("lr-read one n (it is a fixed n = 8 here)", "lr-read n=8 @5%"),
                        ("lr-read every n", "lr-read every n @5%"), ("07a27e7", pm.SIMFIT_LR),
                        ("cheap leader @5 %", "cheap leader @0.05")):
        v = summ[name]
        assert f"{label} {v4(v['best']['mean_regret'])} / {v4(v['final']['mean_regret'])}" in prose, label
    assert summ["lr-read n=8 @5%"]["best"] == summ["fixed n = 8"]["best"]
    assert summ["lr-read n=8 @5%"]["final"] == summ["fixed n = 8"]["final"]
    for reading, word in (("best", "best"), ("final", "final")):
        h = hind[reading]
        assert f"{h['n']} ({v4(h['mean_regret'])})" in prose and word in prose
    worse = all(summ[f][r]["mean_regret"] > summ[pm.SIMFIT_LR][r]["mean_regret"]
                for f in ("lr-read n=8 @5%", "lr-read every n @5%") for r in ("best", "final"))
    assert worse and "is missed by both forms on this block" in prose


def test_the_findings_paragraph_on_the_one_lr_for_n_8_sweep_is_the_read_outs():
    """studies/FINDINGS.md's paragraph on organism-hard-256-const8: the seed means at 1e6, n*, n = 8's
    regret in se of the difference, the bar's counts and the plane's block, read back."""
    text = flat(between(FINDINGS, "**One lr set where the sqrt rule puts n = 8, measured to 1e6**", "\n\n"))
    at = {r: next(c for c in CONST8["readings"][r]["n_star"] if c["budget"] == 1e6)["mean"] for r in ("best", "final")}
    assert (f"best reading: n = 4 {v3(at['best']['4'])}, 8 {v3(at['best']['8'])}, 64 {v3(at['best']['64'])}, "
            f"128 {v3(at['best']['128'])}, 256 {v3(at['best']['256'])}; final reading n = 8 {v3(at['final']['8'])}, "
            f"128 {v3(at['final']['128'])}, 256 {v3(at['final']['256'])}") in text
    star = {r: {c["budget"]: c["n_star"] for c in CONST8["readings"][r]["n_star"]} for r in ("best", "final")}
    assert f"n* {star['best'][3e5]} / {star['best'][1e6]} at 3e5 / 1e6 (best), {star['final'][3e5]} / {star['final'][1e6]}" in text
    bar = CONST8["lr_read_bar"]
    one = [r for r in bar["rows"] if r["form"] == "lr-read one n" and r["version"] == "pooled"]
    for reading in ("best", "final"):
        gaps = " / ".join(f"{r['n = 8 regret_in_difference_se']:.1f}" for r in one if r["reading"] == reading)
        assert gaps in text, reading
    s = bar["summary"]
    assert f"one n picked 8 throughout (within 1 se in {s['lr-read one n']['pooled']['within_1se']} of 6)" in text
    every = [r["picks"][0] for r in bar["rows"] if r["form"] == "lr-read every n" and r["version"] == "pooled"
             and r["reading"] == "best"]
    assert f"every n {' / '.join(map(str, every))} ({s['lr-read every n']['pooled']['within_1se']} of 6)" in text
    assert f"was within 1 se in {s['07a27e7']['pooled']['within_1se']} of 6" in text
    assert not any(v["pooled"]["meets"] for v in s.values()) and "**not met**" in text
    summ = json.loads((ROOT / "studies" / "results" / "plane.json").read_text())["constant_lr_at_8"]["summary"]
    pair = {k: f"{v4(summ[k]['best']['mean_regret'])} / {v4(summ[k]['final']['mean_regret'])}"
            for k in ("lr-read n=8 @5%", "lr-read every n @5%", pm.SIMFIT_LR)}
    assert (f"{pair['lr-read n=8 @5%']} (one n: n = 8 itself) and {pair['lr-read every n @5%']} against 07a27e7's "
            f"{pair[pm.SIMFIT_LR]}") in text
