# %% [markdown]
# # The simulator bank of the one-lr-for-n = 8 sweep's setting
#
# The sweep `organism-hard-256-const8` trains the first organism on 256 problems of its hard split
# (a subset drawn with `train_subset_seed` 20261207), at temperature 0.6, B_p 16, every n at one
# lr. Its bank is built exactly as the nine organism sweeps' banks (`studies/scoring/simfit.py`,
# variant `clusters64`: the frozen method's recipe, profile and bank seeds), for every n of the
# sweep's grid to its budget. A bank is a simulation of the setting (every step size of the grid),
# no record: it is rule-free and may be built before or after the runs.
#
# Run: `python studies/scoring/const8_bank.py` -> `organism_const8/simfit_bank_clusters64.json`

# %%
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "studies" / "scoring"))

import simfit as study  # noqa: E402

from isosim.files import write_json  # noqa: E402
from isosim.predict import simfit as sf  # noqa: E402
from isosim.sim.presets import get_preset  # noqa: E402

OUT = ROOT / "studies" / "results" / "organism_const8" / "simfit_bank_clusters64.json"
SETTING = {"split": "hard", "temperature": 0.6, "n_train": 256, "n_val": 300, "b_p": 16, "warmup": 10}
N_VALUES = (2, 4, 8, 16, 32, 64, 128, 256)
BUDGET = 1e6
KEY = study.group_of(SETTING)


def build() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        settings = {**get_preset(study.RECIPE), **study.VARIANTS["clusters64"],
                    "profile": study.profile_file(SETTING, Path(tmp)), "n_train": SETTING["n_train"],
                    "n_val": SETTING["n_val"], "b_p": SETTING["b_p"], "warmup": SETTING["warmup"]}
        t0 = time.perf_counter()
        bank = sf.build_bank(settings, N_VALUES, BUDGET, study.SEEDS)
    bank["setting"] = dict(SETTING)
    bank["seconds"] = time.perf_counter() - t0
    return {"recipe": study.RECIPE, "banks": {KEY: bank}}


if __name__ == "__main__":
    doc = build()
    write_json(OUT, doc, indent=None)
    print(f"{OUT}: {KEY}, {doc['banks'][KEY]['seconds']:.0f} s")
