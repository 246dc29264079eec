"""One atomic write and one JSON writer (isosim.files): no NaN literals, no half-written files."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from isosim import files


def test_json_writer_never_writes_nan(tmp_path):
    obj = {"a": float("nan"), "b": np.float32(np.inf), "c": [np.int64(3), np.bool_(True), (1.5, -math.inf)],
           4: np.arange(2)}
    path = files.write_json(tmp_path / "sub" / "x.json", obj)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"a": None, "b": None, "c": [3, True, [1.5, None]], "4": [0, 1]}
    assert "NaN" in json.dumps({"a": float("nan")})  # planted: what the plain writer would have written


def test_atomic_write_leaves_the_old_file_on_error(tmp_path):
    path = files.atomic_write_text(tmp_path / "f.txt", "old")

    def boom(fh):
        fh.write(b"half")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        files.atomic_write(path, boom)
    assert path.read_text() == "old"
    assert not [p for p in tmp_path.iterdir() if files.is_tmp_name(p)]


def test_isosim_writes_json_through_one_writer():
    """No other module of isosim writes files with json.dumps + write_text / os.replace of its own."""
    import pathlib

    import isosim

    root = pathlib.Path(isosim.__file__).parent
    for p in root.glob("*.py"):
        if p.name == "files.py":
            continue
        src = p.read_text()
        assert "os.replace(" not in src and "os.fsync(" not in src, p.name
        assert "allow_nan" not in src, p.name
