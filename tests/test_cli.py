"""The isosim command, run as a user runs it: outputs, schema, and one-line errors with exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def isosim(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", "import cli; cli.main()", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd or ROOT, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})


def check_frontier(path: Path):
    data = json.loads(path.read_text())
    for key in ("budgets", "n_star", "reward", "metric", "fit"):
        assert key in data, key
    assert len(data["n_star"]) == len(data["budgets"]) > 0
    assert all(isinstance(n, int) for n in data["n_star"])
    for key in ("n_sat", "log_c_mid", "slope", "n_sat_ci", "log_c_mid_ci", "slope_ci"):
        assert key in data["fit"], key
    return data


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    out = tmp_path_factory.mktemp("explore") / "run"
    res = isosim("explore", "--preset", "easy", "--quick", "--n-boot", "20", "--out", out)
    assert res.returncode == 0, res.stderr
    return out, res


def test_explore_quick_writes_store_frontier_and_figures(explored):
    out, res = explored
    data = check_frontier(out / "frontier.json")
    assert data["metric"] == "val_avg"
    assert (out / "plan.json").exists() and (out / "manifest.json").exists()
    for fig in ("frontier.png", "frontier.svg", "n_star.png"):
        assert (out / fig).stat().st_size > 1000, fig
    assert "n_sat" in res.stdout and "frontier.json" in res.stdout


def test_explore_rerun_resumes_without_rerunning(explored):
    out, _ = explored
    before = json.loads((out / "manifest.json").read_text())
    res = isosim("explore", "--preset", "easy", "--quick", "--n-boot", "20", "--out", out)
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "manifest.json").read_text())["chunks"] == before["chunks"]


def test_analyze_store_and_csv(explored, tmp_path):
    out, _ = explored
    res = isosim("analyze", out, "--metric", "worst", "--n-boot", "0", "--out", tmp_path / "a")
    assert res.returncode == 0, res.stderr
    assert check_frontier(tmp_path / "a" / "frontier.json")["metric"] == "val_worst"
    # a user's own table: only the documented columns
    df = pd.read_parquet(next((out / "records").glob("*.parquet")))
    csv = tmp_path / "mine.csv"
    df[["n", "b_p", "seed", "rollouts", "val_avg", "val_best", "val_worst"]].to_csv(csv, index=False)
    res = isosim("analyze", csv, "--n-boot", "10", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (folder,) = (tmp_path / "runs").glob("analyze-*")  # a folder of its own, not beside the table
    check_frontier(folder / "frontier.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "mine.csv", "runs"]  # no mine_analysis beside it


def _bad(res, *words):
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_bad_input_one_line_exit_2(explored, tmp_path):
    out, _ = explored
    _bad(isosim("explore", "--preset", "nightmare", "--quick", "--out", tmp_path / "x"), "nightmare")
    _bad(isosim("explore", "--quick", "--budget-max", "-5", "--out", tmp_path / "x"), "budget")
    _bad(isosim("explore", "--quick", "--question", "q9", "--out", tmp_path / "x"), "q9")
    _bad(isosim("explore", "--seeds", "0", "--out", tmp_path / "x"), "--seeds")
    _bad(isosim("explore", "--bogus", "1"), "--bogus")
    _bad(isosim("nope"), "nope")
    _bad(isosim("recommend", "--budget", "-3"), "budget")
    _bad(isosim("explore", "--preset", "hard", "--quick", "--out", out), "another plan")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _bad(isosim("analyze", empty), "empty.csv")
    nocols = tmp_path / "nocols.csv"
    pd.DataFrame({"a": [1, 2]}).to_csv(nocols, index=False)
    _bad(isosim("analyze", nocols), "missing column")
    _bad(isosim("analyze", out, "--metric", "val_magic", "--out", tmp_path / "m"), "val_magic")
    _bad(isosim("analyze", tmp_path / "does-not-exist.csv"), "no such")
    prof = tmp_path / "prof.json"
    prof.write_text('{"rates": [0.5, 2.0]}')
    _bad(isosim("explore", "--quick", "--profile", prof, "--out", tmp_path / "p"), "[0, 1]")


def test_help_is_fast_and_light():
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cli"], capture_output=True,
                         text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "torch" not in res.stderr and "transformers" not in res.stderr
    res = isosim("--help")
    assert res.returncode == 0 and "explore" in res.stdout


def test_explore_never_imports_llm_stacks(tmp_path):
    code = ("import sys, cli\nsys.argv=['isosim','explore','--quick','--n-boot','0','--out',sys.argv[1]]\n"
            "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
            "bad=[m for m in ('transformers','vllm','accelerate') if m in sys.modules]\n"
            "assert not bad, bad\nprint('clean')")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "e")], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})
    assert "clean" in res.stdout, res.stderr
    assert np.isfinite(json.loads((tmp_path / "e" / "frontier.json").read_text())["reward"]).all()


def test_recommend_json_reports_the_simulated_recipe(tmp_path):
    """The hard preset is simulated with the paper's hard recipe, and --json says so."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "ISOSIM_CACHE": str(tmp_path)}
    out = {}
    for preset in ("hard", "easy"):
        res = subprocess.run([sys.executable, "-c", "import cli; cli.main()", "recommend", "--budget", "2e4",
                              "--preset", preset, "--quick", "--json"], capture_output=True, text=True, cwd=ROOT,
                             timeout=600, env=env)
        assert res.returncode == 0, res.stderr
        out[preset] = json.loads(res.stdout)
    hard, easy = out["hard"], out["easy"]
    assert (hard["recipe"], hard["kl"], hard["entropy"], hard["recipe_mismatch"]) == ("hard", False, False, False)
    assert hard["simulated_config"]["kl"] == 0 == hard["simulated_config"]["entropy"]
    assert hard["simulated_config"]["optimizer"] == "adamw" and hard["simulated_config"]["wd"] > 0
    assert (easy["recipe"], easy["kl"], easy["entropy"]) == ("easy", True, True)
    assert easy["simulated_config"]["kl"] > 0 and easy["simulated_config"]["entropy"] > 0
    # the simulator's coefficients are not a trainer's: said where they are on, not where the recipe has none
    assert "not a trainer's settings" in easy["reasons"]["kl"] and "entropy_coef" in easy["reasons"]["kl"]
    assert "not a trainer's settings" not in hard["reasons"]["kl"]


# --------------------------------------------------------------------------------------------
# what a new user meets: help text, --version, analyze keeping explore's outputs, the table
# --------------------------------------------------------------------------------------------
def _help(*args, width=80):
    """The help text at a fixed terminal width, as a user's 80-column terminal shows it."""
    from typer.testing import CliRunner

    import cli

    res = CliRunner().invoke(cli.app, [*args, "--help"], terminal_width=width, env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("command", ["explore", "analyze", "recommend", "calibrate", "validate", "plan"])
def test_help_names_every_option_whole_and_no_bool_type(command):
    import cli

    text = _help(command)
    assert "<bool>" not in text and "…" not in text
    click_cmd = next(c for c in cli.typer.main.get_command(cli.app).commands.values() if c.name == command)
    import re

    for param in click_cmd.params:
        longs = [o for o in param.opts if o.startswith("--")]
        if longs:
            assert f"  {longs[0]}" in text, (longs[0], text)  # printed whole, at the start of its entry
        for opt in longs[1:]:  # aliases follow it, whole
            assert re.search(rf", {re.escape(opt)}(?![\w-])", text), (opt, text)


def test_top_level_help_lists_each_command_uncut():
    import cli

    text = " ".join(_help().split())
    for info in cli.app.registered_commands:
        first = " ".join(info.callback.__doc__.strip().split("\n\n")[0].split())
        assert f"{info.callback.__name__} {first}" in text, (first, text)
    assert "--version" in text


def test_validate_help_states_held_out_size_and_no_deepspeed():
    import dataclasses

    import cli
    from llm_runs.config import RunConfig

    default = {f.name: f.default for f in dataclasses.fields(RunConfig)}["val_size"]
    assert cli.VAL_SIZE == default
    text = " ".join(_help("validate", width=200).split())
    assert f"{default} of them are held out for validation" in text
    assert "DeepSpeed is refused" in text and "DDP/FSDP/DeepSpeed" not in text


def test_version():
    res = isosim("--version")
    assert res.returncode == 0 and res.stdout.startswith("isosim ") and res.stdout.split()[1][0].isdigit()


def test_analyze_keeps_explores_frontier_unless_forced(explored, tmp_path):
    out, _ = explored
    before = (out / "frontier.json").read_bytes()
    figure = (out / "n_star.png").stat().st_mtime_ns
    files = sorted(p.name for p in out.iterdir())
    res = isosim("analyze", out, "--metric", "worst", "--n-boot", "0", cwd=tmp_path)
    assert res.returncode == 0, res.stderr  # by default into a fresh folder, never into the input
    assert sorted(p.name for p in out.iterdir()) == files
    (folder,) = (tmp_path / "runs").glob("analyze-*")
    assert check_frontier(folder / "frontier.json")["metric"] == "val_worst"
    res = isosim("analyze", out, "--metric", "worst", "--n-boot", "0", "--out", out)
    _bad(res, "already holds a frontier.json", "--force", "--out")
    assert (out / "frontier.json").read_bytes() == before and (out / "n_star.png").stat().st_mtime_ns == figure
    res = isosim("analyze", out, "--metric", "worst", "--n-boot", "0", "--out", tmp_path / "new")
    assert res.returncode == 0, res.stderr
    assert (out / "frontier.json").read_bytes() == before
    assert check_frontier(tmp_path / "new" / "frontier.json")["metric"] == "val_worst"
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(out, copy)
    res = isosim("analyze", copy, "--metric", "worst", "--n-boot", "0", "--out", copy, "--force")
    assert res.returncode == 0, res.stderr
    assert check_frontier(copy / "frontier.json")["metric"] == "val_worst"


def test_summary_table_says_how_many_budgets_it_shows(explored):
    _, res = explored
    data = json.loads((explored[0] / "frontier.json").read_text())
    shown = len(data["budgets"]) if len(data["budgets"]) <= 12 else 12
    if shown < len(data["budgets"]):
        assert f"{shown} of {len(data['budgets'])} budgets shown" in " ".join(res.stdout.split())


def test_recommend_says_where_its_n_comes_from(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "ISOSIM_CACHE": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", "import cli; cli.main()", "recommend", "--budget", "1e4", "--quick"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "uncalibrated: this is the simulator's preset dynamics" in text, text
