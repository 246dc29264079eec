"""The studies are runnable percent-format notebooks with a --quick mode.

Every study compiles and is in jupytext percent format; the cheapest ones run end to end at
--quick scale (the rest are run by hand: ``python studies/<part>/<study>.py --quick``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

STUDIES = Path(__file__).resolve().parents[1] / "studies"
# each study sits in the folder of its part (studies/README.md); common.py is their shared plumbing
BUILDERS = ("scoring/sbi_bank.py", "allocation/organism_measured.py", "scoring/simfit_organism_hard.py",
            "scoring/simfit.py", "fidelity/curve_fidelity.py", "fidelity/flat_regime.py",
            "organism/organism_hard_measure.py", "organism/pilot_criterion.py", "scoring/simfit_lr_const.py",
            "organism/const_vs_sqrt.py", "scoring/lr_grid.py", "scoring/const8_bank.py", "scoring/const8_predict.py")
"""scripts that write one results file from runs, or read one (the plane's simulated bank, the
organism allocation check's measured.json, the frozen simfit method's organism-hard prediction, the
simfit calibrations scored on the nine sweeps, the curve-fidelity table, the flat-regime ablation,
the second organism's measured.json, the learner search's pilot criterion, the lr-aware method's
constant-lr picks, the two lr rules' cheap parts compared, the lr grid's calibration, the one-lr-for-n = 8
sweep's bank and predictions), with no --quick scale"""
ALL = sorted(str(p.relative_to(STUDIES)) for p in STUDIES.glob("*/*.py") if str(p.relative_to(STUDIES)) not in BUILDERS)
RUN = ("paper/baseline.py",)


@pytest.mark.parametrize("name", ALL)
def test_study_is_a_percent_notebook_with_quick(name):
    text = (STUDIES / name).read_text()
    compile(text, name, "exec")
    assert text.startswith("# %%") and "setup(" in text, name


@pytest.mark.parametrize("name", RUN)
def test_study_runs_quick(name, tmp_path):
    # (output not into the repository; isosim from this tree, not from wherever it is installed)
    root = str(STUDIES.parent)
    env = {**os.environ, "ISOSIM_STUDY_OUT": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    res = subprocess.run([sys.executable, str(STUDIES / name), "--quick"], cwd=STUDIES,
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    out = tmp_path / "results" / "quick" / Path(name).name.replace(".py", ".json")
    assert "wall_seconds" in json.loads(out.read_text())


def test_studies_sit_in_the_folder_of_their_part():
    # studies/README.md names the parts; only the shared plumbing stays at the top
    assert sorted(p.name for p in STUDIES.glob("*.py")) == ["common.py"]
    parts = {p.parent.name for p in STUDIES.glob("*/*.py")}
    assert parts <= {"paper", "fidelity", "organism", "scoring", "allocation"}, parts
    readme = (STUDIES / "README.md").read_text()
    assert all(f"{part}/" in readme for part in parts)
