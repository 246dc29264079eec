"""Every output whole, every bad output folder one line (issue 50): figures go through the atomic
writer, and each command checks its ``--out`` before any work."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import one_line_error, run  # tests/cli_helpers.py

ROOT = Path(__file__).resolve().parents[1]

SLOW_FIGURE = r"""
import io, sys, time
from pathlib import Path
from matplotlib.figure import Figure
from isosim.frontier import plots

real = Figure.savefig

def half_then_hang(self, target, **kw):
    # draw for real, write the first half of the bytes where savefig was told to, then hang (killed here)
    fmt = kw.pop("format", None) or Path(str(target)).suffix[1:]
    buf = io.BytesIO()
    real(self, buf, format=fmt, **kw)
    data = buf.getvalue()
    fh = open(target, "wb") if isinstance(target, (str, Path)) else target
    fh.write(data[: len(data) // 2])
    fh.flush()
    print("mid", flush=True)
    time.sleep(120)

Figure.savefig = half_then_hang
fig, (ax,) = plots.figure()
ax.plot([1, 2, 3], [3, 1, 2])
plots.save(fig, sys.argv[1])
"""


def _kill_mid_figure(stem: Path) -> None:
    """Start a writer of ``stem``.png/.svg and kill -9 it halfway through its first file."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_FIGURE, str(stem)], stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "mid"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_writer_killed_mid_figure_leaves_the_old_figure_whole(tmp_path):
    from isosim.frontier import plots

    fig, (ax,) = plots.figure()
    ax.plot([1, 2], [1, 2])
    old = {p.suffix: p.read_bytes() for p in plots.save(fig, tmp_path / "frontier")}
    assert old[".png"].startswith(b"\x89PNG") and old[".svg"].rstrip().endswith(b"</svg>")
    _kill_mid_figure(tmp_path / "frontier")
    for suffix, data in old.items():
        assert (tmp_path / f"frontier{suffix}").read_bytes() == data, suffix  # the old one, whole


def test_a_writer_killed_mid_figure_in_a_fresh_folder_leaves_no_partial_figure(tmp_path):
    _kill_mid_figure(tmp_path / "frontier")
    assert not (tmp_path / "frontier.png").exists() and not (tmp_path / "frontier.svg").exists()


def test_isosim_writes_no_file_but_through_the_atomic_writer():
    """No module of isosim writes a whole file with write_text / write_bytes, or a figure to a path."""
    import isosim

    root = Path(isosim.__file__).parent
    for p in root.rglob("*.py"):
        if p.name == "files.py":
            continue
        src = p.read_text()
        assert ".write_text(" not in src and ".write_bytes(" not in src, p
        for call in re.findall(r"savefig\(([^,)]*)", src):
            assert call == "fh", (p, call)


# ----------------------------------------------------------------------------------------------
# --out checked before any work
# ----------------------------------------------------------------------------------------------
@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "taken.txt"
    path.write_text("not a folder\n")
    return path


@pytest.fixture
def runs_dir(tmp_path):
    """Two tiny isosim runs (records.jsonl), enough for analyze to read."""
    import json

    root = tmp_path / "runs"
    for n in (2, 8):
        d = root / f"n{n}"
        d.mkdir(parents=True)
        rows = [{"run_id": f"n{n}", "n": n, "b_p": 4, "seed": 0, "step": s, "rollouts": float(s * 4 * n),
                 "val_avg": 0.3 + 0.01 * s} for s in range(0, 9, 2)]
        (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _commands(out: Path, runs: Path) -> dict[str, list[str]]:
    data = ROOT / "studies" / "results" / "organism" / "splits" / "easy.jsonl"
    return {
        "explore": ["explore", "--preset", "easy", "--quick", "--out", out],
        "analyze": ["analyze", runs, "--out", out, "--n-boot", "0"],
        "validate": ["validate", "--model", "organism", "--data", data, "--budget", "4096", "--n", "4,16",
                     "--b-p", "16", "--quick", "--dry-run", "--out", out],
        "plan": ["plan", "--for", "trl", "--budget", "2e5", "--out", out],
    }


COMMANDS = ("explore", "analyze", "validate", "plan")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_that_is_a_file_is_one_line(command, a_file, runs_dir, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, *_commands(a_file, runs_dir)[command])
    one_line_error(code, err, str(a_file), "is a file, not a folder")
    assert a_file.read_text() == "not a folder\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_under_a_file_is_one_line(command, a_file, runs_dir, monkeypatch, capsys):
    code, _, err = run(monkeypatch, capsys, *_commands(a_file / "sub", runs_dir)[command])
    one_line_error(code, err, str(a_file / "sub"), f"under {a_file}, which is a file")


@pytest.mark.parametrize("args, words", [
    (["predict", "--runs", "RUNS", "--max-rollouts", "64", "--budget", "256", "--out", "FOLDER"], "is a folder, not a file"),
    (["predict", "--runs", "RUNS", "--max-rollouts", "64", "--budget", "256", "--out", "FILE/p.json"], "which is a file"),
    (["calibrate", "--dynamics", "RUNS", "--profile", "FILE", "--out", "FOLDER"], "is a folder, not a file"),
])
def test_a_file_out_that_cannot_be_written_is_one_line(args, words, a_file, runs_dir, monkeypatch, capsys):
    names = {"RUNS": str(runs_dir), "FOLDER": str(runs_dir), "FILE": str(a_file)}
    args = [names.get(a, a.replace("FILE", str(a_file))) for a in args]
    code, _, err = run(monkeypatch, capsys, *args)
    one_line_error(code, err, args[args.index("--out") + 1], words)


def _without_override() -> list[str] | None:
    """A command prefix that runs a child without root's override of file permissions (the prefix is
    empty when this is not root), or None where none works here."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    prefix = [setpriv, "--bounding-set=-dac_override", "--inh-caps=-dac_override"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("inside", [False, True])
def test_an_unwritable_out_is_one_line(command, inside, tmp_path, runs_dir):
    prefix = _without_override()
    if prefix is None:
        pytest.skip("no way here to drop root's override of file permissions (setpriv --bounding-set)")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    out = locked / "sub" if inside else locked
    args = [str(a) for a in _commands(out, runs_dir)[command]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ISOSIM_CACHE": str(tmp_path / "cache")}
    try:
        proc = subprocess.run([*prefix, sys.executable, "-c", "import cli; cli.main()", *args], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=300)
    finally:
        locked.chmod(0o755)
    one_line_error(proc.returncode, proc.stderr, str(locked), "not writable (permission denied)")
    assert "Traceback" not in proc.stderr and not list(locked.iterdir())
