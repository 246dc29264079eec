# %% [markdown]
# # The plane: every way of choosing n, its regret against the compute it spends
#
# Every committed organism sweep is replayed seed by seed at every budget of its frontier grid
# from 2e4 rollouts up (84 replays over the six sweeps; the long-budget sweeps, held out, above
# 2e5 only, summarised apart in ``held_out``); each method's pick is scored in both
# readings (``best`` = best validated value up to C, the headline; ``final`` = value at C) by mean
# regret, replays within 2 seed se and mean overhead (rollouts beyond the chosen run, in full runs).
# Fixed n (2, 4, 8, 16 and the paper's n) sit at overhead 0, the best fixed n in hindsight beside
# each block as a reference. The replays live in ``isosim.validation.plane``, the methods that read
# only a sweep's allowed data (and how to register one) in ``isosim.validation.plane_methods``,
# the document with its leave-one-sweep-out audit in ``isosim.validation.plane_report``; the
# frozen isosim method is named in ``results/plane_method.json``.
#
# Run: ``python studies/scoring/plane.py`` (one to two minutes on one core) ->
# ``studies/results/plane.json`` and ``studies/figures/plane.png``.

# %%
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT))

from isosim.files import write_json  # noqa: E402
from isosim.validation import plane as pl  # noqa: E402

from isosim.validation import plane_report as rep  # noqa: E402

RESULTS = ROOT / "results"
FIGURES = ROOT / "figures"


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
            if fam.startswith("fixed n = ") or fam == "paper's n":
                ax.scatter(0, v[reading]["mean_regret"], color="tab:red", marker="D", s=40, zorder=3)
                ax.annotate(f"{m} ({v['replays']})", (0, v[reading]["mean_regret"]), fontsize=6, xytext=(5, -2),
                            textcoords="offset points", color="tab:red")
                continue
            if m.startswith("simfit"):  # the simulator fitted to cheap runs: grey, the frozen one labelled
                frozen = m == (doc.get("simfit") or {}).get("frozen")
                ax.scatter(v["mean_overhead"], v[reading]["mean_regret"], color="dimgray", s=40 if frozen else 14,
                           marker="P" if frozen else "o", zorder=3 if frozen else 2)
                if frozen:
                    ax.annotate("simfit, frozen", (v["mean_overhead"], v[reading]["mean_regret"]), fontsize=6,
                                xytext=(3, -8), textcoords="offset points", color="dimgray")
                continue
            color = {"cheap leader": "tab:blue", "steps": "tab:red", "steps-near": "tab:pink", "steps-offset": "tab:orange",
                     "steps-sigmoid": "tab:brown", "lc-sigmoid": "tab:purple", "sbi": "tab:green", "sbi-band": "tab:olive",
                     "sbi-band1": "tab:cyan"}.get(fam, "black")
            ax.scatter(v["mean_overhead"], v[reading]["mean_regret"], color=color, s=60 if m == highlight else 18,
                       marker="*" if m == highlight else "o")
            if ("@" not in m or m == highlight or m == "cheap leader @0.05") and v[reading]["mean_regret"] < 0.02:
                ax.annotate(m, (v["mean_overhead"], v[reading]["mean_regret"]), fontsize=6, xytext=(3, 2),
                            textcoords="offset points")
        hind = doc["hindsight"]["overall"][reading]
        if hind:
            ax.axhline(hind["mean_regret"], color="tab:red", ls=":", lw=0.8)
            ax.text(0.3, hind["mean_regret"], f"best fixed n in hindsight (n = {hind['n']}; a reference, not a method)",
                    transform=ax.get_yaxis_transform(), fontsize=6, va="top", color="tab:red")
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlabel("mean overhead (full runs beyond the chosen one)")
        ax.set_ylabel(f"mean regret, {reading} reading (val avg@4)")
        held = doc.get("held_out") or {}
        for m, v in held.items():
            if m.startswith("fixed n = "):
                ax.scatter(0, v[reading]["mean_regret"], facecolors="none", edgecolors="tab:red", marker="D", s=40)
        for m in ("cheap leader @0.05", "successive halving (C/16)", "successive halving (C/32)", highlight):
            if m in held:
                ax.scatter(held[m]["mean_overhead"], held[m][reading]["mean_regret"], s=60 if m == highlight else 30,
                           facecolors="none", edgecolors="tab:olive" if m == highlight else "tab:blue" if "cheap" in m
                           else "black", marker="*" if m == highlight else "s")
        six = sum(not v.get("held_out") and not pl.apart(k) for k, v in doc["sweeps"].items())
        ax.set_title(f"{reading} reading, {next(iter(o.values()))['replays']} replays on {six} sweeps"
                     + (f"; hollow: held-out long sweeps ({next(iter(held.values()))['replays']} replays)" if held else ""),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_ylim(top=0.025)
    fig.text(0.5, 0.005, "colour: cheap leader (blue), steps (red), steps-near (pink), steps-sigmoid (brown), lc-sigmoid "
             "(purple), sbi (green), sbi-band (olive; star: the frozen method), sbi-band1 (cyan);\ngrey: the simulator fitted "
             "to cheap runs (simfit calibrations; plus: the frozen one); black: searches and predictions; red diamonds at overhead 0: fixed n (replays scored in brackets; an n not in a sweep's grid "
             "is not scored there);\neach reader at shares 2.5 / 5 / 10 / 20 %; points above the axes are not shown",
             ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)


def main(results: Path = RESULTS, out: Path | None = None, fig: Path | None = None) -> dict:
    doc = rep.document(results)
    write_json(out or results / "plane.json", doc)
    if fig is not False:
        plot(doc, fig or FIGURES / "plane.png", doc["isosim_method"])
    return doc


if __name__ == "__main__":
    from common import setup

    # quick and full are the same computation; --quick (or ISOSIM_STUDY_OUT) writes elsewhere
    quick, _, fig_dir, out = setup("plane", "every way of choosing n: its regret against the compute it spends")
    doc = main(out=out, fig=fig_dir / "plane.png")
    # each block scored apart (plane_report.APART), its title and its short name in the lines below
    apart_words = {"second_learner": ("the second learner", "second learner"),
                   "constant_lr": ("the second learner at one lr for every n", "constant lr"),
                   "constant_lr_at_8": ("the first learner at one lr set for n = 8", "one lr set for n = 8")}
    apart = [(*apart_words[b], doc[b]) for b in rep.APART if doc.get(b)]
    held = [("held-out long sweeps", {"summary": doc["held_out"]})] if doc["held_out"] else []
    held += [(title, block) for title, _, block in apart]
    for name, block in list(doc["sweeps"].items()) + [("all sweeps", {"summary": doc["overall"]})] + held:
        print(name)
        for m, v in sorted(block["summary"].items(), key=lambda kv: kv[1]["best"]["mean_regret"]):
            print(f"  {m:42s} overhead {v['mean_overhead']:.3f}  best: regret {v['best']['mean_regret']:.4f} "
                  f"within 2se {v['best']['within_2se']}/{v['replays']}  final: regret {v['final']['mean_regret']:.4f} "
                  f"within 2se {v['final']['within_2se']}/{v['replays']}")
    for block, h in [*doc["hindsight"].items(), *[(short, b["hindsight"]) for _, short, b in apart]]:
        for reading, v in h.items():
            if v:
                print(f"  {block}, {reading}: best fixed n in hindsight {v['n']} ({v['mean_regret']:.4f} over {v['replays']})")
    for name, c in doc["loso"]["reader_choice"].items():
        print(f"  without {name}: the freeze rule picks {c['reader']}")
    print("isosim method:", doc["isosim_method"])
    for k, v in doc["dominance"].items():
        print(f"  {k}: dominates on best {v['best']}, on final {v['final']}")
    for k, v in doc.get("held_out_dominance", {}).items():
        print(f"  held out: {k}: dominates on best {v['best']}, on final {v['final']}")
    for _, short, block in apart:
        for k, v in block.get("dominance", {}).items():
            print(f"  {short}: {k}: dominates on best {v['best']}, on final {v['final']}")
    for block, entries in doc["simfit"]["blocks"].items():
        for label, e in entries.items():
            if label in (doc["simfit"]["frozen"], "simfit lr-aware (frozen, read under the runs' lr rule)"):
                print(f"  simfit bar, {block}: {label}: " + "; ".join(
                    f"{r} {e[r]['mean_regret']:.4f} (minus n = 8 {e[r]['minus']['fixed n = 8']:+.4f}, minus the cheap "
                    f"leader {e[r]['minus']['cheap leader @0.05']:+.4f}, meets {e[r]['meets_bar']})" for r in ("best", "final")))
    for name, why in doc["not_scored_yet"].items():
        print(f"  not scored yet: {name} ({why})")
    for sweep, preds in doc.get("prospective", {}).items():
        for label, p in preds.items():
            print(f"  committed before {sweep}: {label} picked {p['pick']}: " + "; ".join(
                f"{r} regret {p[r]['regret']:.4f} (2 se {2 * p[r]['seed_se']:.4f}, best {p[r]['best_n']})"
                for r in ("best", "final")))
    for reading, c in doc.get("held_out_covers", {}).items():
        print(f"  held out, {reading}: some method within 2 se on {c['some_method_within_2se']} of {c['replays']} "
              f"replays; the isosim method not on {len(c['missed'])}")
