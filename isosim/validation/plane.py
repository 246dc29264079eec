"""The plane: every way of choosing n scored by its regret against the compute it spends.

Each committed sweep (``nN_bpB_sS/records.jsonl`` runs) is replayed seed by seed at every budget C
of its frontier grid from ``MIN_BUDGET`` up (the replays of :mod:`isosim.validation.adaptive`: a
method sees one seed's runs, revealed up to what it asked to spend). A method's pick is scored in
both readings (:mod:`isosim.validation.readings`: ``best`` = best validated value up to C, the
headline; ``final`` = value at C) by its regret (seed-mean value of the sweep's best n at C minus
the pick's, in that reading), whether that is within 2 seed standard errors, and its overhead
(rollouts on runs other than the chosen one, in full runs of C; the chosen run's cheap part
continues to C). The second organism's sweeps (:data:`SECOND`, ``--model organism-hard``) are
replayed the same way once every run reaches its budget (until then they are listed under
``not_scored_yet``) and summarised apart (``plane_report``'s ``second_learner``): a held-out case of
another learner; nothing of them reaches the first learner's sweeps' fits. The same learner swept at
one lr for every n (:data:`CONST`, the runs' ``lr_rule`` ``constant``: TRL's and verl's practice) is
a block of its own (``plane_report``'s ``constant_lr``), held out the same way, and so is the first
learner swept at one lr set where the sqrt rule puts n = 8 (:data:`CONST8`, ``constant_lr_at_8``). Methods
(``method_names``):

- ``cheap leader @s``: every grid n run to s C, the best last value (s = 2.5, 5, 10, 20 %).
- ``lc-sigmoid @s``: every grid n run to s C, each curve fitted alone with ScaleRL's sigmoid in log
  rollouts and read at C.
- ``steps @s``, ``steps-offset @s``, ``steps-sigmoid @s``: the step readers of
  :mod:`isosim.predict.stepcurve` on the same cheap part.
- ``sbi @s``: the simulation-trained reader of :mod:`isosim.predict.sbi` (its bank:
  ``results/sbi_bank.json``) on the same cheap part.
- ``sbi-band @s``: the same reader choosing only among the n within 2 evaluation sds of the
  cheap leader (``sbi-band1``: 1 sd).
- ``profile-only``: the committed profile-only prediction (no runs before the chosen one).
- ``isosim predict``: the scoreboard's calibrated pick (its cheap part: every n and every seed to
  5 % of the sweep's full budget, every one of those runs but the chosen one counted as overhead).
- ``dynamics fit``: the committed whole-grid dynamics calibration of a 2e5 sweep (the same cheap
  part, the same overhead).
- every method registered in :mod:`isosim.validation.plane_methods` (the fixed n = 2, 4, 8, 16 and
  the paper's n, at overhead 0; any method added there), from what it may read alone.
- ``successive halving (C/16)``, ``successive halving (C/32)``: every grid n, the better half
  continues at each rung.
- ``hyperband``: three successive-halving brackets (every n from C/32; every other n from C/8;
  the grid's ends from C/2), each bracket's winner run to C, the best of them at C kept.
- ``adaptive (sbi)`` (``--search sbi``, :mod:`isosim.validation.adaptive.sbi_search`): every grid n
  starts; at C / 32, C / 16, C / 8 and C / 4 the reader of ``sbi-band`` (trained at share rung / C)
  predicts each surviving n's regret at C and the better half continues; the last one runs to C.
  Scored only where the bank is given.
- ``adaptive (default)`` (started at the profile-only prediction where there is one, else the
  grid spread, as ``validate --adaptive``), ``adaptive (spread)``, ``lines`` (``--search lines``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from isosim.predict import sbi, stepcurve
from isosim.validation import adaptive as ad
from isosim.validation import plane_methods as pm
from isosim.validation import readings as rd

MIN_BUDGET = 2e4
SHARES = (0.025, 0.05, 0.1, 0.2)
CHEAP_READERS = ("lc-sigmoid", "steps", "steps-offset", "steps-sigmoid")
HB_BRACKETS = ((1 / 32, "all"), (1 / 8, "every other"), (1 / 2, "ends"))
LONG = "organism_long"
LONG_SWEEPS = {"hard-128-t06": "hard-128-long", "hard-512-t06": "hard-512-long", "hard-1238-t06": "hard-1238-long"}
"""the long-budget sweeps: organism setting -> folder under :data:`LONG` (the keys of
``plane_predictions_long.json``)"""
LONG_FROM = 2e5
"""the long-budget sweeps are replayed only at budgets above ``LONG_FROM`` (their first 2e5
rollouts are the F8 sweeps' runs, already replayed)"""
SECOND = "organism_hard"
SECOND_SWEEPS = {"hard-128": "organism-hard-128"}
"""the second learner's sweeps (``--model organism-hard``): folder under :data:`SECOND` -> their key
in its ``prediction.json``; scored apart from the first learner's, every budget from ``MIN_BUDGET``"""
CONST = "organism_hard_const"
CONST_SWEEPS = {"hard-128": "organism-hard-128-const"}
"""the second learner at one lr for every n (``lr_rule`` ``constant``): folder under :data:`CONST` ->
its key in that folder's ``prediction.json``; a block of its own, every budget from ``MIN_BUDGET``"""
CONST8 = "organism_const8"
CONST8_SWEEPS = {"hard-256": "organism-hard-256-const8"}
"""the first learner at one lr for every n, set where the sqrt rule puts n = 8 (``lr_rule`` ``constant``,
1.0607e-4): folder under :data:`CONST8` -> its key in that folder's predictions; a block of its own
(``constant_lr_at_8``), every budget from ``MIN_BUDGET``, its profile the first learner's"""


def find_sweeps(results: Path, second_learner: bool = False) -> dict[str, Path]:
    """Folders of ``n*_bp*_s*/records.jsonl`` runs under ``organism/real``, ``organism_f8`` and
    ``organism_long`` (the held-out long-budget sweeps, :data:`LONG`), named by their path under
    ``results``; with ``second_learner``, also the second organism's sweeps (:data:`SECOND_SWEEPS`
    only: its pilots' runs sit beside them and are no sweep) and its constant-lr sweeps
    (:data:`CONST_SWEEPS`), and the first learner's sweep at one lr set for n = 8 (:data:`CONST8_SWEEPS`)."""
    found = {}
    bases = [results / "organism" / "real", results / "organism_f8", results / LONG]
    bases += [results / SECOND / folder for folder in SECOND_SWEEPS] if second_learner else []
    bases += [results / CONST / folder for folder in CONST_SWEEPS] if second_learner else []
    bases += [results / CONST8 / folder for folder in CONST8_SWEEPS] if second_learner else []
    for base in bases:
        if base.is_dir():
            for rec in sorted(base.rglob("n*_bp*_s*/records.jsonl")):
                found[str(rec.parent.parent.relative_to(results))] = rec.parent.parent
    return found


def held_out(name: str) -> bool:
    """A long-budget sweep, scored apart from the six the method was chosen on."""
    return name.startswith(LONG + "/")


def second_learner(name: str) -> bool:
    """A sweep of the second organism at the sqrt rule: held out too, scored apart from the first learner's."""
    return name.startswith(SECOND + "/")


def constant_lr(name: str) -> bool:
    """A sweep of the second organism at one lr for every n: a block of its own."""
    return name.startswith(CONST + "/")


def constant_lr_at_8(name: str) -> bool:
    """The first organism's sweep at one lr for every n, set where the sqrt rule puts n = 8."""
    return name.startswith(CONST8 + "/")


APART_BLOCKS = {SECOND: "second_learner", CONST: "constant_lr", CONST8: "constant_lr_at_8"}
"""the folders of the sweeps scored apart from the first learner's -> their block in ``plane.json``"""
APART_PROFILES = {SECOND: f"{SECOND}/profile_t06.json", CONST: f"{SECOND}/profile_t06.json",
                  CONST8: "organism_f8/profile_t06.json"}
"""the folders of the sweeps scored apart -> their learner's base-model profile at T 0.6 (under ``results``)"""


def apart_block(name: str) -> str | None:
    """The block a sweep scored apart belongs to (:data:`APART_BLOCKS`), or None: a first-learner sweep."""
    return APART_BLOCKS.get(name.split("/", 1)[0])


def apart(name: str) -> bool:
    """Scored apart from the first learner's sweeps (the second learner's, at either lr rule, and the
    first learner's at one lr set for n = 8): none of the first learner's fits or choices reads it."""
    return apart_block(name) is not None


def _nearest(budgets: list[float], picks: list[Any]) -> Callable[[float], int | None]:
    b = np.log(budgets)

    def at(budget: float) -> int | None:
        p = picks[int(np.argmin(np.abs(b - math.log(budget))))]
        return None if p is None else int(p)
    return at


def profile_prediction(name: str, results: Path) -> Callable[[float], int | None] | None:
    """The committed profile-only prediction n*(C) of a sweep, or None."""
    split = Path(name).name
    if second_learner(name):
        path, split = results / SECOND / "prediction.json", SECOND_SWEEPS.get(split, split)
    elif constant_lr(name):
        path, split = results / CONST / "prediction.json", CONST_SWEEPS.get(split, split)
    elif constant_lr_at_8(name):  # no profile-only prediction was committed for it
        return None
    elif held_out(name):
        path = results / LONG / "prediction.json"
    else:
        path = results / ("organism_prediction.json" if name.startswith("organism/real/") else "organism_f8/prediction.json")
    pred = json.loads(path.read_text()).get(split) if path.is_file() else None
    return _nearest(pred["budgets"], pred["n_star"]) if pred else None


def calibrated_prediction(folder: Path, results: Path) -> tuple[Callable[[float], int | None], float] | None:
    """``isosim predict``'s committed pick per budget (the scoreboard's ``isosim_calibrated``: n_tol,
    else n_star) and the rollouts of its cheap part per run; for a long-budget sweep, read from
    ``organism_long/prediction_calibrated.json``; none for the second learner's (its sweeps have no
    ``isosim predict`` prediction)."""
    if folder.parent.name in (SECOND, CONST, CONST8):
        return None
    if folder.parent.name == LONG:
        from isosim.validation.scoreboard import prediction_picks

        path = results / LONG / "prediction_calibrated.json"
        pred = json.loads(path.read_text()).get(folder.name) if path.is_file() else None
        if not pred:
            return None
        return _nearest(pred["budgets"], prediction_picks(pred, pred["budgets"])), float(pred["cheap"]["max_rollouts"])
    path = results / "scoreboard.json"
    if not path.is_file():
        return None
    for sw in json.loads(path.read_text())["sweeps"].values():
        if Path(sw["runs"]).name == folder.name and Path(sw["runs"]).parent.name == folder.parent.name:
            pb = sw["predictors"]["isosim_calibrated"]["per_budget"]["n_pick"]
            return _nearest(sw["budgets"], pb), float(sw["cheap"].get("budget", 0.05 * sw["max_rollouts"]))
    return None


def _clip(n: int, grid: list[int]) -> int:
    return min(grid, key=lambda g: (abs(math.log2(g) - math.log2(n)), g))


def _cheap(full: Mapping[int, Any], budget: float, share: float, chosen: int) -> float:
    seen = {n: ad.reveal(c, share * budget) for n, c in full.items()}
    return float(sum(ad.spent(c) for n, c in seen.items() if n != chosen) / budget)


def hyperband(full: Mapping[int, Any], budget: float, eval_samples: int | None) -> dict[str, Any]:
    """:data:`HB_BRACKETS`: each bracket's successive-halving winner runs to C; the winner with the
    best value at C (this seed) is kept; every other rollout is overhead."""
    grid = sorted(full)
    total, winners = 0.0, []
    for first, which in HB_BRACKETS:
        g = grid if which == "all" else grid[::2] if which == "every other" else sorted({grid[0], grid[-1]})
        res = ad.successive_halving({n: full[n] for n in g}, ad.Settings(
            budget=budget, grid=tuple(g), start=tuple(g), eval_samples=eval_samples, first_rung=first))
        total += sum(res["spent"].values())
        winners.append((ad.value_at(full[res["chosen"]], budget), res["chosen"], res["spent"][res["chosen"]]))
    best = max(winners, key=lambda w: (w[0] if math.isfinite(w[0]) else -math.inf, -w[1]))
    return {"chosen": best[1], "overhead": float((total - best[2]) / budget)}


def replays(sweep: Mapping[str, Any], budgets: list[float], profile: Callable | None, calibrated: tuple | None,
            readers: tuple[str, ...] = CHEAP_READERS, shares: tuple[float, ...] = SHARES,
            pick_rules: tuple[str, ...] = ("max",), bank: Path | None = None, ctx: Mapping[str, Any] | None = None,
            methods: Mapping[str, pm.Method] | None = None, fitted: Mapping[str, Any] | None = None,
            dynamics: Callable | None = None, stored: Mapping[str, Any] | None = None,
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One row per (budget, seed, method): the pick, its overhead and, per reading, its regret; and
    one entry per replay (budget, seed) with the truth in each reading. ``calibrated`` and
    ``dynamics`` read every n and seed of the sweep to their cheap budget: their overhead counts
    every one of those runs but the chosen one's; the registered ``methods`` (constants and any
    :mod:`isosim.validation.plane_methods` method) see only their :class:`~isosim.validation.plane_methods.Allowed`."""
    policy_rows = {(r["budget"], r["seed"], r["policy"]): r for r in ad.score_sweep(sweep, budgets, predicted=profile)}
    full_grid, n_seeds = sorted(sweep["runs"]), len(sweep["seeds"])
    rows, seen = [], []
    at = {(float(b), int(s)): i for i, (b, s) in enumerate((stored or {}).get("replays", []))}
    for budget, grid, _truth, seed, full in ad.seed_replays(sweep, budgets):
        i = at.get((float(budget), int(seed)))
        truths = {reading: rd.truth_at({n: sweep["runs"][n] for n in grid}, budget, reading) for reading in rd.READINGS}
        seen.append({"budget": float(budget), "seed": int(seed), "truth": truths})
        picks: dict[str, tuple[int | dict[str, int], float]] = {}
        for share in shares:
            lead = ad.informed_choice(full, budget, frac=1 / share, reading="level")
            picks[f"cheap leader @{share:g}"] = (lead["chosen"], lead["overhead"])
            cheap = {n: ad.reveal(c, share * budget) for n, c in full.items()}
            for reader in readers:
                for reading in rd.READINGS:
                    name = f"{reader} @{share:g}" + ("" if reading == rd.HEADLINE else f" ({reading} reader)")
                    if reading != rd.HEADLINE and not reader.startswith("steps") or (reader.startswith("sbi") and bank is None):
                        continue  # the other readers do not depend on the reading
                    if i is not None and pick_rules == ("max",) and (stored.get(name) or [None] * (i + 1))[i] is not None:
                        picks[name] = (int(stored[name][i]), _cheap(full, budget, share, int(stored[name][i])))
                        continue
                    if reader.startswith("sbi"):
                        values = sbi.reader(bank, share).read(cheap, sweep["b_p"], budget, sbi.BANDS[reader],
                                                              sweep["eval_samples"])
                    else:
                        values = stepcurve.read_forward(cheap, sweep["b_p"], budget, reader, reading)
                    for rule in pick_rules if reading == rd.HEADLINE else ("max",):
                        label = name if rule == "max" else f"{name} [{rule}]"
                        n = stepcurve.pick(values, rule, eval_samples=sweep["eval_samples"])
                        picks[label] = (n, _cheap(full, budget, share, n))
        if profile is not None and profile(budget):
            picks["profile-only"] = (_clip(profile(budget), grid), 0.0)
        for label, pred in (("isosim predict", calibrated), ("dynamics fit", dynamics)):
            if pred is not None and pred[0](budget):
                n = _clip(pred[0](budget), grid)
                picks[label] = (n, (len(full_grid) * n_seeds - 1) * min(pred[1], budget) / budget)
        for pol, name in (("successive halving", "successive halving (C/16)"), (ad.SH_CHEAP, "successive halving (C/32)"),
                          ("adaptive (spread)", "adaptive (spread)")):
            r = policy_rows[(budget, seed, pol)]
            picks[name] = (r["chosen"], r["overhead"])
        default = policy_rows.get((budget, seed, "adaptive (prediction)")) or policy_rows[(budget, seed, "adaptive (spread)")]
        picks["adaptive (default)"] = (default["chosen"], default["overhead"])
        lines = ad.replay(full, ad.lines_settings(budget, grid, sweep["eval_samples"]))
        picks["lines"] = (lines["chosen"], lines["overhead"])
        if bank is not None:
            res = ad.replay(full, ad.sbi_settings(budget, grid, sweep["b_p"], sweep["eval_samples"], str(bank)))
            picks["adaptive (sbi)"] = (res["chosen"], res["overhead"])
        hb = hyperband(full, budget, sweep["eval_samples"])
        picks["hyperband"] = (hb["chosen"], hb["overhead"])
        if ctx is not None:
            picks.update(pm.picks_at(pm.REGISTRY if methods is None else methods, ctx, budget, grid, seed, fitted or {}))
        for method, (n, over) in picks.items():
            per = n if isinstance(n, Mapping) else {reading: int(n) for reading in rd.READINGS}
            row = {"budget": float(budget), "seed": int(seed), "method": method, "chosen": int(per[rd.HEADLINE]),
                   "overhead": float(over)}
            for reading, truth in truths.items():
                row[reading] = {**rd.regret(truth, per[reading]), "best_n": truth["best"], "chosen": int(per[reading])}
            rows.append(row)
    return rows, seen


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per method and reading: replays, mean overhead, mean regret, replays within 2 se, in the tie band."""
    out: dict[str, Any] = {}
    for method in sorted({r["method"] for r in rows}):
        rs = [r for r in rows if r["method"] == method]
        out[method] = {"replays": len(rs), "mean_overhead": float(np.mean([r["overhead"] for r in rs]))}
        for reading in rd.READINGS:
            out[method][reading] = {"mean_regret": float(np.mean([r[reading]["regret"] for r in rs])),
                                    "within_2se": int(sum(r[reading]["within_2se"] for r in rs)),
                                    "in_tie_band": int(sum(r[reading]["in_tie_band"] for r in rs))}
    return out


def dominates(a: Mapping[str, Any], b: Mapping[str, Any], reading: str = rd.HEADLINE) -> bool:
    """Mean regret no higher at no more overhead, and strictly better on one of the two."""
    ra, rb = a[reading]["mean_regret"], b[reading]["mean_regret"]
    oa, ob = a["mean_overhead"], b["mean_overhead"]
    eps = 1e-12
    return ra <= rb + eps and oa <= ob + eps and (ra < rb - eps or oa < ob - eps)


def sweep_kind(name: str) -> str:
    """The paper's recipe a sweep follows: ``easy`` for the organism's easy split, else ``hard``."""
    return "easy" if Path(name).name.startswith("easy") else "hard"


def profile_path(name: str, results: Path) -> Path:
    """The base model's profile a sweep's cheap-data methods may read (pass rates at its temperature)."""
    folder = name.split("/", 1)[0]
    if folder in APART_PROFILES:
        return results / APART_PROFILES[folder]
    return results / ("organism/profile.json" if name.startswith("organism/real/") else "organism_f8/profile_t06.json")


def dynamics_prediction(name: str, results: Path) -> tuple[Callable[[float], int | None], float] | None:
    """The committed whole-grid dynamics fit of a 2e5 sweep (``isosim calibrate --dynamics`` on every
    n and seed to 5 % of the sweep, then the simulator; n_tol, else n_star) and its cheap rollouts
    per run."""
    from isosim.validation.scoreboard import CHEAP_SHARE, prediction_picks

    if name.startswith("organism/real/"):
        path, key = results / "organism" / "prediction_dynamics_grid.json", Path(name).name
    elif name.startswith("organism_f8/"):
        path, key = results / "organism_f8" / "prediction_dynamics.json", Path(name).name
    else:
        return None
    pred = json.loads(path.read_text()).get(key) if path.is_file() else None
    if not pred:
        return None
    return _nearest(pred["budgets"], prediction_picks(pred, pred["budgets"])), CHEAP_SHARE * float(pred["max_rollouts"])


def _settings(folder: Path) -> dict[str, Any]:
    cfg = next(iter(sorted(folder.glob("n*_bp*_s*/config.json"))), None)
    return {k: v for k, v in json.loads(cfg.read_text()).items() if k not in ("n", "seed", "run_id")} if cfg else {}


def build(results: Path, readers: tuple[str, ...] = CHEAP_READERS, shares: tuple[float, ...] = SHARES,
          pick_rules: tuple[str, ...] = ("max",), bank: Path | None = None, only: tuple[str, ...] | None = None,
          methods: Mapping[str, pm.Method] | None = None, stored: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every method's rows over every finished sweep under ``results`` (``only``: those names), the
    replays' truths and the readers' picks (``picks``; ``stored``: a committed ``picks`` block whose
    reader picks are taken instead of recomputed). :func:`isosim.validation.plane_report.document`
    summarises them."""
    from isosim.validation.scoreboard import unfinished

    doc: dict[str, Any] = {"readings": {"best": "best validated value up to C (analyze's n* reads it); the headline",
                                        "final": "value at C (train to C, keep the last)"},
                           "headline": rd.HEADLINE, "min_budget": MIN_BUDGET, "shares": list(shares),
                           "readers": list(readers), "pick_rules": list(pick_rules),
                           "sweeps": {}, "not_scored_yet": {}, "picks": {}}
    loaded = {}
    for name, folder in find_sweeps(results, second_learner=True).items():
        short = unfinished(folder)
        if short:
            doc["not_scored_yet"][name] = f"{len(short)} run(s) short of their budget"
        else:
            loaded[name] = (folder, ad.load_sweep(folder))
    methods = pm.REGISTRY if methods is None else methods
    rows_all, seen_all = [], []
    for name, (folder, sw) in loaded.items():
        if only and name not in only:
            continue
        budgets = [b for b in ad.default_budgets(sw["max_budget"]) if b >= MIN_BUDGET]
        if held_out(name):
            budgets = [b for b in budgets if b > LONG_FROM]
        pool = {k: v[1] for k, v in loaded.items() if apart(name) or not apart(k)}
        training = pm.loso_training(name, pool)  # the first learner's sweeps never learn from the second's
        fitted = {m.name: m.fit(training) for m in methods.values() if m.fit is not None}
        ctx = {"name": name, "sweep": sw, "kind": sweep_kind(name), "settings": _settings(folder),
               "profile": profile_path(name, results)}
        rows, seen = replays(sw, budgets, profile_prediction(name, results), calibrated_prediction(folder, results),
                             readers, shares, pick_rules, bank or results / "sbi_bank.json", ctx, methods, fitted,
                             dynamics_prediction(name, results), (stored or {}).get(name))
        for r in rows + seen:
            r["sweep"] = name
        grid = sorted(sw["runs"])
        doc["sweeps"][name] = {"budgets": budgets, "held_out": held_out(name), "grid": grid, "kind": sweep_kind(name),
                               "paper_n": {"paper": pm.PAPER_N[sweep_kind(name)], "scored_as": pm.paper_n(sweep_kind(name), grid)}}
        doc["picks"][name] = stored_picks(rows, seen, readers, shares)
        rows_all += rows
        seen_all += seen
    doc["rows"], doc["replays"] = rows_all, seen_all
    return doc


def stored_picks(rows: list[dict[str, Any]], seen: list[dict[str, Any]], readers: tuple[str, ...],
                 shares: tuple[float, ...]) -> dict[str, Any]:
    """The cheap-part readers' picks, replay by replay (the expensive part of the plane), so that
    the summaries can be recomputed from the records without refitting every curve."""
    order = {(s["budget"], s["seed"]): i for i, s in enumerate(seen)}
    labels = sorted({r["method"] for r in rows if r["method"].split(" @")[0] in readers})
    out: dict[str, Any] = {"replays": [[s["budget"], s["seed"]] for s in seen]}
    for label in labels:
        col = [None] * len(seen)
        for r in rows:
            if r["method"] == label:
                col[order[(r["budget"], r["seed"])]] = r["chosen"]
        out[label] = col
    return out


def covers(rows: list[dict[str, Any]], method: str, reading: str = rd.HEADLINE) -> dict[str, Any]:
    """Wherever any method's pick is within 2 se (one budget and seed of a sweep), is ``method``'s?
    The replays where some method is and ``method`` is not."""
    cases: dict[tuple, dict[str, bool]] = {}
    for r in rows:
        cases.setdefault((r["sweep"], r["budget"], r["seed"]), {})[r["method"]] = r[reading]["within_2se"]
    missed = [{"sweep": k[0], "budget": k[1], "seed": k[2],
               "within_2se": sorted(m for m, ok in v.items() if ok)[:6]}
              for k, v in sorted(cases.items()) if method in v and any(v.values()) and not v[method]]
    return {"reading": reading, "replays": sum(method in v for v in cases.values()),
            "some_method_within_2se": sum(method in v and any(v.values()) for v in cases.values()),
            "missed": missed}
