"""Comparing a committed JSON document with one rebuilt from its inputs."""

from __future__ import annotations

import pytest


def assert_same_json(want, got, path: str = "", **tolerance) -> None:
    """Every key, list length and value of ``got`` equal to ``want``'s; where ``want`` holds a
    float, ``got`` within ``pytest.approx(want, **tolerance)`` (anything else exactly equal);
    ``path`` names the first difference."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (path, sorted(set(got) ^ set(want))[:8])
        for k in want:
            assert_same_json(want[k], got[k], f"{path}/{k}", **tolerance)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (w, g) in enumerate(zip(want, got)):
            assert_same_json(w, g, f"{path}[{i}]", **tolerance)
    elif isinstance(want, float):
        assert got == pytest.approx(want, **tolerance), path
    else:
        assert got == want, path
