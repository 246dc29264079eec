"""Running ``isosim`` in the test's own process, and the one-line error every bad input gets."""

from __future__ import annotations

import sys


def run(monkeypatch, capsys, *args):
    """``isosim ARGS`` in this process: (exit code, stdout, stderr)."""
    import cli

    monkeypatch.setattr(sys, "argv", ["isosim", *map(str, args)])
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(code, err, *words):
    """Exit code 2 and one line ``isosim: error: ...`` holding each of ``words``."""
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("isosim: error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])
