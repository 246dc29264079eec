"""Checks of plane.json's derived blocks against the blocks they are read from (imported by name:
pytest puts tests/ on sys.path)."""

from __future__ import annotations

import pytest


def assert_simfit_bar_follows(plane: dict) -> None:
    """plane.json's ``simfit`` bar says what its summaries say: for each block, calibration and
    reading, the overhead and mean regret are the summary's, the margins over the bar's methods
    (a fixed n = 8, the cheap leader at 5 %) are the differences of the summaries' mean regrets, and
    ``meets_bar`` is overhead <= ``max_overhead`` with no margin above 0."""
    from isosim.predict import lr_read as lrr
    from isosim.validation import plane_methods as pm

    bar = plane["simfit"]
    apart = ("second_learner", "constant_lr", "constant_lr_at_8")
    assert (bar["frozen"], bar["max_overhead"]) == (lrr.FROZEN, 0.05)
    assert set(bar["blocks"]) == {"overall", "held_out", "all_sweeps", *apart}
    for block, entries in bar["blocks"].items():
        summary = plane[block] if block not in apart else (plane[block] or {}).get("summary", {})
        labels = [*pm.CALIBRATIONS, pm.SIMFIT_LR]
        assert set(entries) == ({label for label in labels if label in summary} if summary else set()), block
        for label, e in entries.items():
            s = summary[label]
            assert e["overhead"] == s["mean_overhead"], (block, label)
            for reading in ("best", "final"):
                reg = s[reading]["mean_regret"]
                minus = {b: reg - summary[b][reading]["mean_regret"] for b in bar["compared_with"]}
                assert e[reading]["mean_regret"] == reg, (block, label, reading)
                assert e[reading]["minus"] == pytest.approx(minus, rel=1e-12, abs=1e-15), (block, label, reading)
                meets = s["mean_overhead"] <= bar["max_overhead"] + 1e-12 and all(x <= 1e-12 for x in minus.values())
                assert e[reading]["meets_bar"] is meets, (block, label, reading)
