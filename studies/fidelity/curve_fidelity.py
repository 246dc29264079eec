# %% [markdown]
# # Curve fidelity: the simulator's curves against the organism's, per n, in seed se
#
# Every organism sweep with records (six 2e5 sweeps, three long ones) read per n at matched update
# steps and at matched rollouts (``isosim.predict.curve_fidelity``), against three simulators:
#
# - ``profile-only``: the simulated sweep behind the committed profile-only prediction (its
#   ``simulated_config`` from the prediction files, the split's measured rates), 2 seeds;
# - ``flat, prior``: the flat-regime simulator (``hard-flat``, the bank of ``studies/scoring/simfit.py``,
#   the model without the gap term) with the numbers of the leave-one-setting-out prior (the mean of
#   the other settings' full fits: nothing of this sweep's records);
# - ``flat, fitted``: the same simulator with its three numbers fitted to all of this sweep's runs
#   (in-sample: what the mechanism can do at best);
# - ``flat 64, prior`` and ``flat 64, fitted``: the same two with the bank of the frozen calibration's
#   variant (``clusters64``: 64 skill directions, ``simfit_bank_clusters64.json`` and the full fits of
#   ``simfit_clusters64.json``).
#
# The simulated values are cached in the JSON with their settings; ``tests/test_curve_fidelity.py``
# recomputes the measured side and the error arithmetic from the committed records.
#
# Run (after ``studies/scoring/simfit.py``): ``python studies/fidelity/curve_fidelity.py`` (about 2
# min on one core) -> ``studies/results/curve_fidelity.json``.

# %%
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT / "scoring"))

import simfit as study  # noqa: E402

from isosim.files import write_json  # noqa: E402
from isosim.predict import curve_fidelity as cf  # noqa: E402
from isosim.predict import simfit as sf  # noqa: E402

RESULTS = ROOT / "results"
SIMULATORS = ("profile-only", "flat, prior", "flat, fitted", "flat 64, prior", "flat 64, fitted")
VARIANT = "clusters64"


def prediction_config(name: str) -> dict:
    split = Path(name).name
    path = {"organism": RESULTS / "organism_prediction.json", "organism_f8": RESULTS / "organism_f8" / "prediction.json",
            "organism_long": RESULTS / "organism_long" / "prediction.json"}[name.split("/")[0]]
    return dict(json.loads(path.read_text())[split]["simulated_config"])


def profile_only(name: str, v: dict, tmp: Path) -> tuple[dict, dict]:
    from isosim.sim.config import SimConfig
    from isosim.sim.engine import simulate

    cfg = prediction_config(name)
    cfg.pop("extra", None)
    cfg["profile"] = study.profile_file(v["setting"], tmp)
    sw = v["sweep"]
    cfgs = [SimConfig(**{**cfg, "n": int(n), "budget": float(sw["max_budget"]), "steps": None, "seed": s,
                         "eval_points": sf.EVAL_POINTS, "name": "p"}) for n in sorted(sw["runs"]) for s in study.SEEDS]
    df = simulate(cfgs)
    curves = {int(n): list(g.groupby("rollouts")["val_avg"].mean().items()) for n, g in df.groupby("n")}
    settings = {k: val for k, val in cfg.items() if k != "profile"}
    return curves, {**settings, "profile": f"{v['setting']['split']} split rates, temperature {v['setting']['temperature']:g}",
                    "seeds": list(study.SEEDS)}


def flat(bank: dict, theta: dict, v0: float, n_values) -> dict:
    out = {}
    for n in n_values:
        r, _ = sf.gain_curve(bank, n, 1.0)
        out[int(n)] = list(zip(r.tolist(), sf.predict_at(bank, theta, n, r, v0).tolist()))
    return out


def main(out: Path = RESULTS / "curve_fidelity.json") -> dict:
    t0 = time.perf_counter()
    sws = study.sweeps()
    banks = json.loads(study.BANK.read_text())["banks"]
    fits = json.loads((RESULTS / "simfit.json").read_text())["full_fits_no_gap"]
    banks64 = json.loads((RESULTS / f"simfit_bank_{VARIANT}.json").read_text())["banks"]
    fits64 = json.loads((RESULTS / f"simfit_{VARIANT}.json").read_text())["full_fits_no_gap"]
    doc = {"steps": list(cf.STEPS), "rollouts": list(cf.ROLLOUTS), "simulators": list(SIMULATORS),
           "unit": "(simulated - measured seed mean) / seed se of that n", "sweeps": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, v in sws.items():
            sw = v["sweep"]
            meas = cf.measured(sw["runs"], sw["b_p"])
            bank = banks[v["group"]]
            prior = study.loso_prior(name, sws, fits)
            curves = {}
            curves["profile-only"], po_settings = profile_only(name, v, Path(tmp))
            curves["flat, prior"] = flat(bank, {p: prior[p][0] for p in prior}, bank["step0"], sorted(sw["runs"]))
            curves["flat, fitted"] = flat(bank, fits[name]["theta"], fits[name]["v0"], sorted(sw["runs"]))
            bank64, prior64 = dict(banks64[v["group"]]), study.loso_prior(name, sws, fits64)
            bank64.setdefault("n_train", bank64["setting"]["n_train"])
            curves["flat 64, prior"] = flat(bank64, {p: prior64[p][0] for p in prior64}, bank64["step0"], sorted(sw["runs"]))
            curves["flat 64, fitted"] = flat(bank64, fits64[name]["theta"], fits64[name]["v0"], sorted(sw["runs"]))
            entry = {"b_p": sw["b_p"], "settings": {"profile-only": po_settings,
                                                    "flat, prior": {"recipe": study.RECIPE, "theta": {p: prior[p][0] for p in prior},
                                                                    "v0": bank["step0"], "bank": v["group"]},
                                                    "flat, fitted": {"recipe": study.RECIPE, **fits[name], "bank": v["group"]},
                                                    "flat 64, prior": {"recipe": study.RECIPE, "variant": VARIANT,
                                                                       "theta": {p: prior64[p][0] for p in prior64},
                                                                       "v0": bank64["step0"], "bank": v["group"]},
                                                    "flat 64, fitted": {"recipe": study.RECIPE, "variant": VARIANT, **fits64[name],
                                                                        "bank": v["group"]}},
                     "simulated": {}, "errors": {}}
            for s in SIMULATORS:
                entry["simulated"][s] = cf.simulated_points(curves[s], sw["b_p"], meas)
                entry["errors"][s] = cf.errors(meas, entry["simulated"][s])
            doc["sweeps"][name] = entry
            print(name, "  ".join(f"{s}: steps {entry['errors'][s]['steps']['mean_abs_se']:.1f} "
                                  f"({entry['errors'][s]['steps']['mean_se']:+.1f}) rollouts "
                                  f"{entry['errors'][s]['rollouts']['mean_abs_se']:.1f}" for s in SIMULATORS), flush=True)
    doc["seconds"] = time.perf_counter() - t0
    write_json(out, doc)
    return doc


def table(doc: dict) -> str:
    """The docs table: per sweep and simulator, mean |error| (mean signed error) in seed se."""
    head = "| sweep | " + " | ".join(f"{s}: steps | {s}: rollouts" for s in doc["simulators"]) + " |"
    lines = [head, "|---" * (1 + 2 * len(doc["simulators"])) + "|"]
    for name, e in doc["sweeps"].items():
        cells = []
        for s in doc["simulators"]:
            for kind in ("steps", "rollouts"):
                x = e["errors"][s][kind]
                cells.append(f"{x['mean_abs_se']:.1f} ({x['mean_se']:+.1f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    d = main()
    print(table(d))
    print(f"{d['seconds']:.0f} s")
