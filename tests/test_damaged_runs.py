"""Every reader of a user's runs (analyze, recommend --runs, predict, calibrate --dynamics) says the
same things about the same damaged runs: each damage is named in what it prints, or the reader
refuses in one line; none answers in silence (isosim.records.inspect_runs is the one inspection)."""

import contextlib
import io
import json
import math
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NS = (2, 4, 8, 16)
SEEDS = (0, 1)
B_P = 8
STEPS = (0, 2, 4, 8, 16, 32, 64)
DAMAGES = ("cut", "nan_tail", "duplicate", "missing", "deleted", "no_column", "huge", "mixed_lr", "cut_line")
REFUSED = {"huge": "not a share", "mixed_lr": "learning rates", "cut_line": "cut off"}
"""damage every reader refuses, and the words of its one line"""


def name(n: int, seed: int) -> str:
    return f"n{n}-s{seed}"


def write_runs(root: Path) -> dict[str, list[dict]]:
    """A folder of clean runs (every n, two seeds, 64 steps at B_p 8, 16 prompts x 4 samples per
    evaluation) with the plan's run table beside them, as isosim plan writes it."""
    runs = {}
    for n in NS:
        for s in SEEDS:
            rows = []
            for step in STEPS:
                v = 0.3 + 0.05 * math.log1p(step) * (1 + 0.1 * math.log2(n)) + 0.004 * s
                rows.append({"run_id": name(n, s), "n": n, "b_p": B_P, "seed": s, "step": step,
                             "rollouts": float(step * B_P * n), "val_avg": round(v, 4), "lr": 1e-6,
                             "val_size": 16, "eval_n": 4, "train_size": 256, "budget": float(64 * B_P * n)})
            runs[name(n, s)] = rows
    (root / "isosim_runs.csv").write_text("run,n,b_p,seed,lr\n" + "".join(
        f"{name(n, s)},{n},{B_P},{s},1e-06\n" for n in NS for s in SEEDS))
    (root / "isosim_plan.json").write_text(json.dumps({"request": {}, "runs": []}))
    return runs


def damage(root: Path, runs: dict[str, list[dict]], kinds: list[str], target: int) -> dict[str, str]:
    """Apply ``kinds`` to the runs (each to its own run, from ``target`` on); the run each names."""
    names = sorted(runs)
    hit = {}
    for i, kind in enumerate(kinds):
        run = names[(target + 3 * i) % len(names)]
        rows = runs[run]
        hit[kind] = run
        if kind == "cut":
            runs[run] = rows[:4]
        elif kind == "nan_tail":
            rows[-1]["val_avg"] = None
        elif kind == "duplicate":
            rows.insert(4, {**rows[3], "val_avg": rows[3]["val_avg"] + 0.2})
        elif kind == "missing":
            runs[run] = []  # the folder holds its config only: never started, or crashed at once
        elif kind == "deleted":
            runs[run] = None  # no folder at all, though the plan lists it
        elif kind == "no_column":
            for r in rows:
                r.pop("val_avg", None)
        elif kind == "huge":
            rows[3]["val_avg"] = 1e30
        elif kind == "mixed_lr":
            for r in rows:
                r["lr"] = 3e-6
    for run, rows in runs.items():
        if rows is None:
            continue
        folder = root / run
        folder.mkdir()
        n = int(run[1:].split("-")[0])
        (folder / "config.json").write_text(json.dumps({"run_id": run, "n": n, "b_p": B_P}))
        if rows:
            text = "".join(json.dumps(r) + "\n" for r in rows)
            if "cut_line" in kinds and run == hit["cut_line"]:
                text = text[:-25]  # killed while writing its last line
            (folder / "records.jsonl").write_text(text)
    return hit


def run_cli(*args) -> tuple[int, str, str]:
    import cli

    out, err = io.StringIO(), io.StringIO()
    argv, sys.argv = sys.argv, ["isosim", *map(str, args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


def readers(root: Path, tmp: Path) -> dict[str, tuple[int, str, str]]:
    """Each reader's (exit code, stdout, stderr) on ``root``."""
    from isosim.errors import IsosimError
    from isosim.predict import extrapolate

    got = {
        "analyze": run_cli("analyze", root, "--n-boot", "0", "--out", tmp / "analysis"),
        "recommend": run_cli("recommend", "--runs", root, "--budget", "5e5"),
        "predict": run_cli("predict", "--runs", root, "--max-rollouts", "1e4", "--budget", "5e5", "--n-boot", "0",
                           "--out", tmp / "p.json"),
    }
    # calibrate --dynamics reads the runs through the same check before it fits anything (the fit
    # itself takes minutes): the note it prints, or its one-line refusal
    try:
        got["calibrate"] = (0, extrapolate.check_cheap_reach(root, None), "")
    except IsosimError as exc:
        got["calibrate"] = (2, "", f"isosim: error: {exc}\n")
    return got


def said(kind: str, run: str, text: str) -> bool:
    words = {"cut": ["stopped short", run], "nan_tail": ["read only to their last number", run],
             "duplicate": ["have several evaluations at one budget", run], "missing": ["without records", run],
             "deleted": ["planned run(s) without records", run, f"seed {run[-1]} is run for"],
             "no_column": ["no val_avg value", run]}[kind]
    return all(w in text for w in words)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(DAMAGES), min_size=1, max_size=3, unique=True),
       target=st.integers(0, len(NS) * len(SEEDS) - 1))
def test_every_reader_names_every_damage_or_refuses_in_one_line(tmp_path_factory, kinds, target):
    tmp = tmp_path_factory.mktemp("damaged")
    root = tmp / "runs"
    root.mkdir()
    runs = write_runs(root)
    hit = damage(root, runs, kinds, target)
    refused = [k for k in kinds if k in REFUSED]
    for reader, (code, out, err) in readers(root, tmp).items():
        assert code in (0, 2), (reader, kinds, err[-2000:])
        if code == 2:  # refused: one line, the tool's own
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("isosim: error:"), (reader, kinds, err[-2000:])
            if refused:  # what must be refused is refused for what it is
                assert any(REFUSED[k] in lines[0] for k in refused), (reader, kinds, lines[0])
            continue
        assert not refused, (reader, kinds, f"answered despite {refused}", out)
        flat = " ".join(out.split())
        for kind in kinds:
            assert said(kind, hit[kind], flat), (reader, kind, hit[kind], flat)


def test_clean_runs_are_read_without_a_damage_note(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    damage(root, write_runs(root), [], 0)
    for reader, (code, out, err) in readers(root, tmp_path).items():
        assert code == 0, (reader, err)
        for words in ("stopped short", "without records", "not a number", "several evaluations", "cannot be fitted", "no val_avg", "seed 1 is"):
            assert words not in out, (reader, words, out)


def test_a_missing_run_that_leaves_a_seed_out_of_every_n_is_a_warning_line(tmp_path):
    """recommend --runs compares the n on the seeds every n has: one deleted run of seed 0 leaves seed
    0's other runs unread. That is its own warning line (how many runs, which seed lacks which n, what
    was read), not only a clause of the header; with every run there, no such line."""
    root = tmp_path / "runs"
    root.mkdir()
    damage(root, write_runs(root), [], 0)
    code, out, err = run_cli("recommend", "--runs", root, "--budget", "5e5")
    assert code == 0, err
    assert "runs are not read" not in out
    shutil.rmtree(root / name(4, 0))
    code, out, err = run_cli("recommend", "--runs", root, "--budget", "5e5")
    assert code == 0, err
    lines = out.splitlines()
    warn = [ln for ln in lines if ln.startswith("warning: ")]
    assert warn == [lines[1]]  # right under the header, before the pick
    assert (f"warning: {len(NS) - 1} of {len(NS) * len(SEEDS) - 1} runs are not read (seed 0 has no run of n = 4): "
            "every n is compared on seed 1 alone") in warn[0]
    code, out, err = run_cli("recommend", "--runs", root, "--budget", "5e5", "--json")
    assert code == 0 and json.loads(out)["seeds"] == [1] and json.loads(out)["seed_warning"] == warn[0]


def test_runs_that_already_reach_the_budget_are_refused_with_where_to_read_them(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    damage(root, write_runs(root), [], 0)
    reach = max(STEPS) * B_P * max(NS)
    code, out, err = run_cli("recommend", "--runs", root, "--budget", reach)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and not out
    assert f"the runs already reach {reach:.3g} rollouts, at or past the budget" in lines[0]
    assert f"isosim analyze {root}" in lines[0] and "larger --budget" in lines[0]
