# %% [markdown]
# # The plane: every way of choosing n, its regret against the compute it spends
#
# Every committed organism sweep is replayed seed by seed at every budget of its frontier grid
# from 2e4 rollouts up (84 replays over the six sweeps; the long-budget sweeps, held out, above
# 2e5 only, summarised apart in ``held_out``); each method's pick is scored in both
# readings (``best`` = best validated value up to C, the headline; ``final`` = value at C) by mean
# regret, replays within 2 seed se and mean overhead (rollouts beyond the chosen run, in full runs).
# The methods and the scoring live in ``isosim.validation.plane``; the frozen isosim method is
# named in ``results/plane_method.json``.
#
# Run: ``python studies/scoring/plane.py`` (about a minute on one core) ->
# ``studies/results/plane.json`` and ``studies/figures/plane.png``.

# %%
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from isosim.files import write_json  # noqa: E402
from isosim.validation import plane as pl  # noqa: E402

RESULTS = ROOT / "results"
FIGURES = ROOT / "figures"
READERS = ("lc-sigmoid", "steps", "steps-near", "steps-offset", "steps-sigmoid", "sbi", "sbi-band", "sbi-band1")
COMPARE = ("cheap leader @0.05", "successive halving (C/16)", "successive halving (C/32)")


def frozen() -> dict:
    path = RESULTS / "plane_method.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def verdicts(doc: dict, method: str) -> dict:
    """Does ``method`` dominate each of ``COMPARE`` (and the cheap leader at its own share) in each reading?"""
    o = doc["overall"]
    if method not in o:
        return {}
    share = method.split("@")[-1] if "@" in method else None
    others = list(COMPARE) + ([f"cheap leader @{share}"] if share and f"cheap leader @{share}" not in COMPARE else [])
    return {f"{method} vs {b}": {r: pl.dominates(o[method], o[b], r) for r in ("best", "final")} for b in others if b in o}


def prospective(results: Path, scored: dict) -> dict:
    """The picks committed before the long sweeps passed their cheap part
    (``results/plane_predictions_long.json``: the frozen method and the cheap leader, each from both
    seeds' cheap parts), scored at their budget in both readings on every long sweep that is done."""
    from isosim.validation import readings as rd
    from isosim.validation.adaptive import load_sweep

    path = results / "plane_predictions_long.json"
    if not path.is_file():
        return {}
    out = {}
    for key, preds in json.loads(path.read_text())["sweeps"].items():
        name = f"{pl.LONG}/{pl.LONG_SWEEPS[key]}" if key in pl.LONG_SWEEPS else None
        if name not in scored:
            continue
        runs = load_sweep(results / name)["runs"]
        entry = {}
        for label, p in preds.items():
            truths = {r: rd.truth_at(runs, p["budget"], r) for r in rd.READINGS}
            entry[label] = {"pick": p["pick"], "budget": p["budget"],
                            **{r: {**rd.regret(t, p["pick"]), "best_n": t["best"], "tie_band": t["tie_band"]}
                               for r, t in truths.items()}}
        out[name] = entry
    return out


def plot(doc: dict, path: Path, highlight: str | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    o = doc["overall"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 6), sharey=False)
    for ax, reading in zip(axes, ("best", "final")):
        for m, v in o.items():
            if "(final reader)" in m:
                continue
            fam = m.split(" @")[0]
            color = {"cheap leader": "tab:blue", "steps": "tab:red", "steps-near": "tab:pink", "steps-offset": "tab:orange",
                     "steps-sigmoid": "tab:brown", "lc-sigmoid": "tab:purple", "sbi": "tab:green", "sbi-band": "tab:olive",
                     "sbi-band1": "tab:cyan"}.get(fam, "black")
            ax.scatter(v["mean_overhead"], v[reading]["mean_regret"], color=color, s=60 if m == highlight else 18,
                       marker="*" if m == highlight else "o")
            if ("@" not in m or m == highlight or m == "cheap leader @0.05") and v[reading]["mean_regret"] < 0.02:
                ax.annotate(m, (v["mean_overhead"], v[reading]["mean_regret"]), fontsize=6, xytext=(3, 2),
                            textcoords="offset points")
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlabel("mean overhead (full runs beyond the chosen one)")
        ax.set_ylabel(f"mean regret, {reading} reading (val avg@4)")
        held = doc.get("held_out") or {}
        for m in ("cheap leader @0.05", "successive halving (C/16)", "successive halving (C/32)", highlight):
            if m in held:
                ax.scatter(held[m]["mean_overhead"], held[m][reading]["mean_regret"], s=60 if m == highlight else 30,
                           facecolors="none", edgecolors="tab:olive" if m == highlight else "tab:blue" if "cheap" in m
                           else "black", marker="*" if m == highlight else "s")
        six = sum(not v.get("held_out") for v in doc["sweeps"].values())
        ax.set_title(f"{reading} reading, {next(iter(o.values()))['replays']} replays on {six} sweeps"
                     + (f"; hollow: held-out long sweeps ({next(iter(held.values()))['replays']} replays)" if held else ""),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_ylim(top=0.025)
    fig.text(0.5, 0.005, "colour: cheap leader (blue), steps (red), steps-near (pink), steps-sigmoid (brown), lc-sigmoid "
             "(purple), sbi (green), sbi-band (olive; star: the frozen method), sbi-band1 (cyan);\nblack: searches and "
             "predictions; each reader at shares 2.5 / 5 / 10 / 20 %; points above the axes are not shown",
             ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)


def main(results: Path = RESULTS, out: Path | None = None, fig: Path | None = None) -> dict:
    doc = pl.build(results, readers=READERS)
    rows = doc.pop("rows")
    chosen = frozen().get("method_label")
    doc["isosim_method"] = chosen
    doc["dominance"] = verdicts(doc, chosen) if chosen else {}
    if chosen and doc["held_out"]:
        held = [r for r in rows if doc["sweeps"][r["sweep"]]["held_out"]]
        doc["held_out_dominance"] = verdicts({"overall": doc["held_out"]}, chosen)
        doc["held_out_covers"] = {reading: pl.covers(held, chosen, reading) for reading in ("best", "final")}
    doc["prospective"] = prospective(results, {k for k, v in doc["sweeps"].items() if v["held_out"]})
    write_json(out or results / "plane.json", doc)
    if fig is not False:
        plot(doc, fig or FIGURES / "plane.png", chosen)
    return doc


if __name__ == "__main__":
    from common import setup

    # quick and full are the same computation; --quick (or ISOSIM_STUDY_OUT) writes elsewhere
    quick, _, fig_dir, out = setup("plane", "every way of choosing n: its regret against the compute it spends")
    rep = main(out=out, fig=fig_dir / "plane.png")
    held = [("held-out long sweeps", {"summary": rep["held_out"]})] if rep["held_out"] else []
    for name, block in list(rep["sweeps"].items()) + [("all sweeps", {"summary": rep["overall"]})] + held:
        print(name)
        for m, v in sorted(block["summary"].items(), key=lambda kv: kv[1]["best"]["mean_regret"]):
            print(f"  {m:42s} overhead {v['mean_overhead']:.3f}  best: regret {v['best']['mean_regret']:.4f} "
                  f"within 2se {v['best']['within_2se']}/{v['replays']}  final: regret {v['final']['mean_regret']:.4f} "
                  f"within 2se {v['final']['within_2se']}/{v['replays']}")
    print("isosim method:", rep["isosim_method"])
    for k, v in rep["dominance"].items():
        print(f"  {k}: dominates on best {v['best']}, on final {v['final']}")
    for k, v in rep.get("held_out_dominance", {}).items():
        print(f"  held out: {k}: dominates on best {v['best']}, on final {v['final']}")
    for sweep, preds in rep.get("prospective", {}).items():
        for label, p in preds.items():
            print(f"  committed before {sweep}: {label} picked {p['pick']}: " + "; ".join(
                f"{r} regret {p[r]['regret']:.4f} (2 se {2 * p[r]['seed_se']:.4f}, best {p[r]['best_n']})"
                for r in ("best", "final")))
    for reading, c in rep.get("held_out_covers", {}).items():
        print(f"  held out, {reading}: some method within 2 se on {c['some_method_within_2se']} of {c['replays']} "
              f"replays; the isosim method not on {len(c['missed'])}")
