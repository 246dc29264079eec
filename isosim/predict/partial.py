"""``isosim recommend --runs DIR --profile FILE``: n for a budget from a *partial* cheap set.

The runs (whatever ``isosim analyze`` reads: isosim records, TRL / verl TensorBoard logs, W&B CSV
exports, through :func:`isosim.integrations.load_runs`) hold one or two n, any number of seeds, each
run to a small share of the budget C. The simfit model (:mod:`isosim.predict.simfit`) reads them
through :mod:`isosim.predict.lr_read`: a bank of the frozen recipe is simulated on the runs' setting
and the base model's profile (:func:`user_bank`), the step size and the ceiling (and with two n or
more the exponent) are fitted to the measured points, each run read at its lr, and every other n of
the grid is simulated to C. Where every run's lr is the calibration's, one measured n is the frozen
method and two the two-run calibration (scored on the nine organism sweeps, not frozen):
:func:`isosim.predict.lr_read.at_calibration_pick`.

The setting the bank is simulated on:

- B_p: the runs' own (one B_p for every run);
- training-set size: the records' ``train_size`` (isosim runs) or ``n_train``, else
  ``--train-size``, else the profile's problem count;
- validation-set size: the records' ``val_size`` or ``n_val``, else ``--val-size``, else
  :data:`DEFAULT_VAL_SIZE` (it sets the simulated evaluation noise, not the mean gain);
- warm-up steps: the run folders' ``config.json`` ``warmup_steps`` (isosim runs), else
  ``--warmup-steps``, else 0 (TRL's and verl's default).

A flag that contradicts what the runs carry is refused, not silently preferred.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from isosim.errors import IsosimError
from isosim.predict import lr_read as lrr
from isosim.predict import simfit as sf

DEFAULT_VAL_SIZE = 512
"""validation problems simulated when neither the runs nor ``--val-size`` say (SimConfig's default)"""
GRID_N = (2, 4, 8, 16, 32, 64, 128, 256)
"""the n compared (the plane's grid), with the measured n added; each kept where C affords 20 updates"""
LR_ONE = "lr-read, one n"
LR_EVERY = "lr-read, every n"
SCORED_SHARE = {lrr.FROZEN: 0.05, lrr.TWO_RUNS: 0.025, LR_ONE: 0.05, LR_EVERY: 0.05}
"""the share of C each measured n was run to where the method was scored"""


def measured_n(df: pd.DataFrame, metric: str) -> list[int]:
    """The distinct n that have at least one value of ``metric``."""
    if "n" not in df.columns or metric not in df.columns:
        return []
    d = df[pd.to_numeric(df[metric], errors="coerce").notna()]
    return sorted({int(n) for n in d["n"].dropna()})


def _one_value(df: pd.DataFrame, cols: tuple[str, ...], what: str) -> tuple[int | None, str | None]:
    for col in cols:
        if col in df.columns:
            vals = {int(v) for v in pd.to_numeric(df[col], errors="coerce").dropna()}
            if len(vals) > 1:
                raise IsosimError(f"the runs' records hold several {what}s ({col} = "
                                  f"{', '.join(map(str, sorted(vals)))}); calibrate on runs of one setting")
            if vals:
                return vals.pop(), f"records ({col})"
    return None, None


def _config_values(path: Path, key: str) -> set:
    """The distinct values of ``key`` in the run folders' ``config.json`` files (isosim runs)."""
    from isosim.frontier.report import record_files

    vals = set()
    if Path(path).is_dir():
        for f in record_files(Path(path)):
            cfg = f.parent / "config.json"
            if cfg.is_file():
                try:
                    got = json.loads(cfg.read_text()).get(key)
                except (OSError, ValueError, AttributeError):
                    got = None
                if got is not None:
                    vals.add(got)
    return vals


def _warmup_of(path: Path, df: pd.DataFrame) -> tuple[int | None, str | None]:
    vals = {int(v) for v in _config_values(path, "warmup_steps")}
    if vals:
        if len(vals) > 1:
            raise IsosimError(f"the runs' config.json files hold several warmup_steps ({', '.join(map(str, sorted(vals)))}); "
                              "calibrate on runs of one setting")
        return vals.pop(), "config.json (warmup_steps)"
    return _one_value(df, ("warmup",), "warm-up")


def lr_rule_of(path: Path, df: pd.DataFrame, b_p: int, given: str | None = None) -> tuple[str, str]:
    """The lr rule the cheap runs were trained with, and where it was read: the run folders'
    ``config.json`` ``lr_rule`` (isosim runs), else ``--lr-rule``, else the rule the runs' own lr
    values follow across n (two n or more), else ``constant`` (TRL's and verl's practice: one lr
    for every n). A flag that contradicts the runs is refused."""
    from isosim.integrations.lr import infer_rule
    from isosim.sim.config import LR_RULES, check_lr_rule

    if given is not None:
        check_lr_rule(given)
    found = {str(v) for v in _config_values(path, "lr_rule")}
    if len(found) > 1:
        raise IsosimError(f"the runs' config.json files hold several lr rules ({', '.join(sorted(found))}); "
                          "calibrate on runs of one rule")
    if found:
        rule = check_lr_rule(found.pop())
        if given is not None and given != rule:
            raise IsosimError(f"--lr-rule {given} contradicts the runs' config.json (lr_rule {rule}): drop --lr-rule")
        return rule, "config.json (lr_rule)"
    if given is not None:
        return given, "--lr-rule"
    if "lr" in df.columns and "n" in df.columns:
        lrs = df.dropna(subset=["lr", "n"]).groupby("n")["lr"].first()
        rule = infer_rule([(b_p * int(n), float(v)) for n, v in lrs.items()])
        if rule in LR_RULES:
            return rule, "the runs' lr across n"
    return "constant", "default (one lr for every n, as TRL and verl train; --lr-rule to change)"


def setting_of(path: Path, df: pd.DataFrame, b_p: int, problems: int, train_size: int | None = None,
               val_size: int | None = None, warmup: int | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The setting of the bank (see the module docstring) and where each number came from."""
    found = {"n_train": _one_value(df, ("train_size", "n_train"), "training-set size"),
             "n_val": _one_value(df, ("val_size", "n_val"), "validation-set size"),
             "warmup": _warmup_of(Path(path), df)}
    flags = {"n_train": ("--train-size", train_size), "n_val": ("--val-size", val_size), "warmup": ("--warmup-steps", warmup)}
    fallback = {"n_train": (problems, "the profile's problem count"), "n_val": (DEFAULT_VAL_SIZE, "default"),
                "warmup": (0, "default (none)")}
    values, sources = {}, {}
    for key, (got, src) in found.items():
        flag, given = flags[key]
        if given is not None and given < (0 if key == "warmup" else 1):
            raise IsosimError(f"{flag} must be {'0 or more' if key == 'warmup' else 'positive'}, got {given}")
        if got is not None and given is not None and got != given:
            raise IsosimError(f"{flag} {given} contradicts the runs' {src}: {got} (drop {flag})")
        if got is not None:
            values[key], sources[key] = got, src
        elif given is not None:
            values[key], sources[key] = int(given), flag
        else:
            values[key], sources[key] = fallback[key]
    if b_p > values["n_train"]:
        raise IsosimError(f"the runs' B_p {b_p} exceeds the training-set size {values['n_train']} "
                          f"({sources['n_train']}): give --train-size")
    sources["b_p"] = "the runs"
    return values, sources


TUNED_AT_DEFAULT = 8
"""the n a user's lr is taken to have been tuned at where nothing says (TRL's default num_generations)"""


def _plan_anchor(path: Path, b_p: int) -> tuple[float, float] | None:
    """(lr, batch) where a plan's request says its lr was set (``isosim plan --lr [--lr-tuned-at N
    [--lr-tuned-b-p B]]``; B defaults to the runs' ``b_p``)."""
    from isosim.integrations import plan_files
    from isosim.integrations.lr import LR_REF_BATCH

    plan = plan_files.find_plan(Path(path)) if Path(path).exists() else None
    if plan is None:
        return None
    try:
        req = json.loads((plan / plan_files.PLAN_FILE).read_text()).get("request", {})
    except (OSError, ValueError):
        return None
    if req.get("lr") is None:
        return None
    tuned, tuned_b_p = req.get("lr_tuned_at"), req.get("lr_tuned_b_p")
    return float(req["lr"]), float(int(tuned_b_p or b_p) * int(tuned) if tuned else LR_REF_BATCH)


def runs_lrs(path: Path, df: pd.DataFrame, ns: Sequence[int], b_p: int, rule: str) -> tuple[dict[int, float] | None, str]:
    """Each n's lr: the measured n's own (one lr per n: runs of one n at several lrs are refused, as
    every reader of runs refuses them), every other n's by the runs' ``rule`` from them; None where
    no run's lr is found."""
    from isosim.integrations import lr as LR
    from isosim.records import check_lrs

    known = {run: r for run, r in LR.run_lrs(path, df).items() if r["lr"] is not None}
    if not known:
        return None, "no run's lr found"
    check_lrs(pd.DataFrame({"run_id": list(known), "n": [r["n"] for r in known.values()],
                             "b_p": [r["b_p"] for r in known.values()], "lr": [r["lr"] for r in known.values()]}))
    lrs = {int(r["n"]): round(float(r["lr"]), 15) for r in known.values()}
    bases = [LR.base_of(v, b_p * n, rule) for n, v in lrs.items()]
    base = float(sum(bases) / len(bases))
    others = lrr.lrs_by_rule(set(ns) - set(lrs), b_p, base, LR.LR_REF_BATCH, rule)
    return dict(sorted({**others, **lrs}.items())), "each run's own lr; every other n's by the runs' rule"


def anchor_of(path: Path, lrs: Mapping[int, float], b_p: int, tuned_at: int | None) -> Any:
    """Where the runs' lr was set (:class:`isosim.predict.lr_read.Anchor`): ``--lr-tuned-at N`` (the lr
    of n = N there); else the run folders' ``config.json`` (``base_lr`` at ``lr_ref_batch``); else
    their plan's request (``--lr`` at ``--lr-tuned-at``'s batch, or at 1024); else n =
    :data:`TUNED_AT_DEFAULT`, said as an assumption."""
    from isosim.predict import lr_read as lrr

    if tuned_at is not None:
        if tuned_at not in lrs:
            raise IsosimError(f"--lr-tuned-at {tuned_at}: no lr for n = {tuned_at} (n = {', '.join(map(str, sorted(lrs)))})")
        return lrr.Anchor(lrs[tuned_at], float(b_p * tuned_at), f"--lr-tuned-at {tuned_at}")
    bases, refs = _config_values(path, "base_lr"), _config_values(path, "lr_ref_batch")
    if len(bases) == 1 and len(refs) == 1:
        return lrr.Anchor(float(bases.pop()), float(refs.pop()), "config.json (base_lr at lr_ref_batch)")
    plan = _plan_anchor(path, b_p)
    if plan is not None:
        return lrr.Anchor(plan[0], plan[1], "the plan's --lr (isosim_plan.json)")
    n = TUNED_AT_DEFAULT if TUNED_AT_DEFAULT in lrs else min(lrs, key=lambda m: (abs(math.log(m / TUNED_AT_DEFAULT)), m))
    return lrr.Anchor(lrs[n], float(b_p * n), f"assumed: the lr was tuned at n = {n} (TRL's default num_generations "
                                              f"is {TUNED_AT_DEFAULT}); --lr-tuned-at N says where")


def user_setting(b_p: int, n_train: int, n_val: int, warmup: int) -> dict[str, Any]:
    """The setting a bank is simulated on for a user's cheap runs (checked here, simulated by
    :func:`user_bank`)."""
    for what, v in (("B_p", b_p), ("training-set size", n_train), ("validation-set size", n_val)):
        if v < 1:
            raise IsosimError(f"the cheap runs' {what} must be positive, got {v}")
    return {"b_p": int(b_p), "n_train": int(n_train), "n_val": int(n_val), "warmup": int(max(warmup, 0))}


def user_bank(profile: str | Path, setting: Mapping[str, Any], n_values: Sequence[int], budget: float,
              seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """A bank of the frozen recipe and variant (:func:`isosim.predict.lr_read.frozen`) on the user's
    setting (every n of ``n_values`` at every step size of the grid, to ``budget``): a few seconds to
    two minutes on one core."""
    from isosim.sim.presets import get_preset

    doc = lrr.frozen()
    settings = {**get_preset(doc["settings"]["recipe"]), **doc["variant"]["changes"], "profile": str(profile),
                "n_train": int(setting["n_train"]), "n_val": int(setting["n_val"]), "b_p": int(setting["b_p"]),
                "warmup": int(setting["warmup"])}
    bank = sf.build_bank(settings, sorted(set(int(n) for n in n_values)), float(budget),
                         tuple(doc["variant"]["bank_seeds"]) if seeds is None else tuple(seeds))
    bank["setting"] = dict(setting)
    return bank


def grid_for(budget: float, b_p: int, n_values: Sequence[int] = GRID_N) -> list[int]:
    """The n a budget affords at least 20 update steps of (the plane's grid rule)."""
    from isosim.predict.sbi import MIN_STEPS

    grid = sorted(int(n) for n in n_values if budget // (b_p * n) >= MIN_STEPS)
    if not grid:
        raise IsosimError(f"--budget {budget:g} affords fewer than {MIN_STEPS} update steps of n = {min(n_values)} at B_p {b_p}")
    return grid


def _nine_scores(label: str) -> dict[str, Any] | None:
    """The calibration's scores on the nine organism sweeps (the simfit study's), for the note."""
    if not lrr.SCORES_FILE.is_file():
        return None
    o = json.loads(lrr.SCORES_FILE.read_text())["overall"]
    if label not in o:
        return None
    return {"replays": o[label]["replays"], "overhead": o[label]["mean_overhead"],
            **{r: o[label][r]["mean_regret"] for r in ("best", "final")},
            "fixed n = 8": {r: o["fixed n = 8"][r]["mean_regret"] for r in ("best", "final")}}


def _profile_key(profile: str | Path) -> str:
    return hashlib.sha256(Path(profile).read_bytes()).hexdigest()


def bank_path(digest: str, setting: Mapping[str, Any], ns: tuple[int, ...], budget: float) -> Path:
    """Where a bank of these inputs is kept between calls: the recommend cache (``ISOSIM_CACHE``),
    named by a hash of the profile's bytes, the setting, the n, the budget and the frozen method."""
    from isosim.files import cache_root

    key = json.dumps({"profile": digest, "setting": dict(sorted(setting.items())), "n": list(ns), "budget": float(budget),
                      "frozen": lrr.frozen()["commit"], "variant": lrr.VARIANT}, sort_keys=True)
    return cache_root() / "recommend" / "simfit_banks" / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


@lru_cache(maxsize=4)
def _bank(profile: str, digest: str, setting: tuple, ns: tuple[int, ...], budget: float) -> dict[str, Any]:
    from isosim.files import write_json

    path = bank_path(digest, dict(setting), ns, budget)
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass  # a damaged cache entry is simulated again and overwritten
    bank = user_bank(profile, dict(setting), ns, budget)
    write_json(path, bank, indent=None)
    return bank


def bank_for(profile: str | Path, setting: Mapping[str, Any], ns: list[int], budget: float) -> dict[str, Any]:
    """:func:`user_bank`, kept between calls (same profile bytes,
    setting, n, budget and frozen method: the same bank, read from the cache; written atomically)."""
    return _bank(str(profile), _profile_key(profile), tuple(sorted(setting.items())), tuple(ns), float(budget))


def check_request(profile: str | Path, budget: float, reading: str) -> int:
    """What :func:`recommend_partial` checks before it reads the runs (the reading, the budget, the
    profile); the profile's problem count."""
    from isosim.sim.profiles import read_profile
    from isosim.validation.readings import check_reading

    check_reading(reading)
    if not (budget and math.isfinite(budget) and budget > 0):
        raise IsosimError(f"--budget must be a positive number of rollouts, got {budget}")
    return int(read_profile(profile).rates.size)


def recommend_partial(path: str | Path, profile: str | Path, budget: float, reading: str = "best",
                      train_size: int | None = None, val_size: int | None = None,
                      warmup: int | None = None, lr_rule: str | None = None, maps: Sequence[str] = (),
                      sets: Sequence[str] = (), lr_tuned_at: int | None = None,
                      raw: tuple[pd.DataFrame, str] | None = None) -> dict[str, Any]:
    """The calibrated simulator's answer for the cheap runs at ``path`` (one n, two, or every n) at
    ``budget``, each run read at the lr it had (:func:`runs_lrs`, from where it was set:
    :func:`anchor_of`; ``maps``, ``sets``: ``--map`` and ``--set`` for TensorBoard and W&B logs;
    ``raw``: what :func:`isosim.integrations.load_runs` already returned for ``path``).
    Where every n's lr is the calibration's (the sqrt rule from where it was set), one or two n are
    the frozen method or the two-run calibration; otherwise :mod:`isosim.predict.lr_read` reads
    them, one n or every n, with one model."""
    from isosim.integrations import default_metric, load_inspected
    from isosim.predict.from_runs import cheap_curves

    problems = check_request(profile, budget, reading)
    path = Path(path)
    # a run that stopped short of its planned budget: every run is read at the budget every run
    # reached, and the line read names it (as the direct reader does)
    df, what, _ = load_inspected(path, maps=maps, sets=sets, raw=raw)
    metric = default_metric(df)
    by_seed, b_p, _ = cheap_curves(df, metric)
    runs: dict[int, dict[int, list]] = {}
    for seed, curves in by_seed.items():
        for n, c in curves.items():
            runs.setdefault(int(n), {})[int(seed)] = c
    if not any(r > 0 for seeds in runs.values() for c in seeds.values() for r, _ in c):
        raise IsosimError(f"{path}: the runs have no evaluation after step 0: nothing to calibrate on")
    cheap = max(r for seeds in runs.values() for c in seeds.values() for r, _ in c)
    if cheap >= budget:
        raise IsosimError(finished_runs(path, cheap, budget))
    setting, sources = setting_of(path, df, b_p, problems, train_size, val_size, warmup)
    rule, sources["lr_rule"] = lr_rule_of(path, df, b_p, lr_rule)
    grid = grid_for(budget, b_p, sorted(set(GRID_N) | set(runs)))
    lrs, sources["lr"] = runs_lrs(path, df, grid, b_p, rule)
    anchor = anchor_of(path, lrs, b_p, lr_tuned_at) if lrs else None
    rho = lrr.rhos(lrs, b_p, anchor) if lrs else None
    calibrated = rho is None or lrr.at_calibration(rho)
    setting = user_setting(b_p, setting["n_train"], setting["n_val"], setting["warmup"])
    t0 = time.perf_counter()
    bank = bank_for(profile, setting, sorted(set(grid) | set(runs)), budget)
    if calibrated and len(runs) <= 2:
        got = lrr.at_calibration_pick(bank, runs, grid, budget)
        got["scores_nine_sweeps"] = _nine_scores(got["method"])
    else:
        if lrs is None:  # no lr found: every n read at the calibration's lr (said in the note)
            from isosim.sim.config import scaled_lr

            got = lr_read_pick(bank, runs, grid, budget,
                               {n: scaled_lr(1.0, b_p * n, 1024, "sqrt") for n in set(grid) | set(runs)},
                               lrr.Anchor(1.0, 1024.0, "none found"))
        else:
            got = lr_read_pick(bank, runs, grid, budget, lrs, anchor)
    got["lr_read"] = {"anchor": None if anchor is None else {"lr": anchor.lr, "batch": anchor.batch, "from": anchor.source},
                      "rho": None if rho is None else {str(n): rho[n] for n in sorted(rho)},
                      "at_calibration": calibrated, "lr": None if lrs is None else {str(n): lrs[n] for n in sorted(lrs)}}
    other = "final" if reading == "best" else "best"
    per_n = {}
    for n in sorted(set(grid) | set(runs)):
        seeds = sorted(runs.get(n, {}))
        per_n[str(n)] = {"status": "measured" if n in runs else "simulated",
                         "measured_to": float(got["measured"][str(n)]) if n in runs else None,
                         "seeds": seeds, "in_grid": n in grid,
                         "predicted_gain": {r: got[r]["predicted_gain"].get(str(n)) for r in ("best", "final")}}
    share = cheap / budget
    scored = SCORED_SHARE[got["method"]]
    out = {"mode": "calibrated simulator (partial cheap set)", "runs": str(path), "read": what, "metric": metric,
           "profile": str(profile), "reading": reading, "budget": float(budget), "b_p": int(b_p),
           "setting": setting, "setting_from": sources, "grid": grid, "bank_seconds": round(time.perf_counter() - t0, 1),
           "pick": got[reading]["pick"], "pick_other_reading": {other: got[other]["pick"]},
           "tie_band": got[reading]["within_band"], "n": per_n, "cheap_rollouts": float(cheap), "cheap_share": share,
           "scored_share": scored, "lr_rule": rule, **{k: got[k] for k in ("best", "final", "method", "frozen", "frozen_commit",
                                                         "measured", "simulated", "theta", "v0", "rms",
                                                         "points", "scores_nine_sweeps")}}
    out["tie_band_value"] = got["tie_band"]
    out["lr_read"] = got["lr_read"]
    out["note"] = note(out)
    return out


def lr_read_pick(bank: Mapping[str, Any], runs: Mapping[int, Mapping[int, Sequence[tuple[float, float]]]],
                 grid: Sequence[int], budget: float, lrs: Mapping[int, float], anchor: Any) -> dict[str, Any]:
    """:func:`isosim.predict.lr_read.read_runs` under the frozen prior and tie band, with the learner's
    lr calibration: one n, or every n (two or more measured), with what :func:`note` reads."""
    doc = lrr.frozen()
    prior, band = lrr.prior_and_band(doc)
    got = lrr.read_runs(bank, runs, grid, budget, lrs, anchor, prior, band, lrr.learner_calibration(),
                        every=len(runs) > 1)
    measured = {int(n): max(r for c in seeds.values() for r, _ in c) for n, seeds in runs.items()}
    got.update({"method": LR_EVERY if got["form"] == "every n" else LR_ONE, "frozen": False,
                "frozen_commit": doc["commit"], "tie_band": band,
                "measured": {str(n): measured[n] for n in sorted(measured)},
                "simulated": [int(n) for n in grid if n not in measured], "budget": float(budget),
                "scores_nine_sweeps": None})
    return got


def finished_runs(path: str | Path, reach: float, budget: float) -> str:
    """The one line for runs that already reach the budget (either form of ``recommend --runs``): nothing
    is left to predict; where to read them."""
    return (f"the runs already reach {reach:.3g} rollouts, at or past the budget {budget:.3g}: nothing is left to "
            f"predict; read them as they are with `isosim analyze {path}` (n* at each budget they reach), or give a "
            "larger --budget to carry them further")


PROSPECTIVE_FILE = Path(__file__).resolve().parents[2] / "studies" / "results" / "organism_const8" / "measured.json"
"""the read-out of the sweep the lr-read forms were frozen before (one lr for every n, set where the sqrt rule
puts n = 8): their only prospective test on a sweep whose lr departs from the calibration"""
PROSPECTIVE_FORMS = {LR_ONE: "lr-read one n", LR_EVERY: "lr-read every n"}


def prospective_record(method: str, path: Path = PROSPECTIVE_FILE) -> str:
    """What the lr-read form ``method`` scored where it was predicted before the records (both seeds'
    runs in one fit, as ``recommend --runs`` reads them), or "" where that read-out is not at hand."""
    from isosim.frontier.wording import short_budget

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        bar = doc["lr_read_bar"]
        got = bar["summary"][PROSPECTIVE_FORMS[method]]["pooled"]
        rows = [r for r in bar["rows"] if r["form"] == PROSPECTIVE_FORMS[method] and r["version"] == "pooled"]
        older = bar["summary"]["07a27e7"]["pooled"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    picks = "/".join(str(r["picks"][0]) for r in rows if r["reading"] == "best")
    best, final = ("/".join(str(r["best_n"]) for r in rows if r["reading"] == reading) for reading in ("best", "final"))
    verdict = "met its bar" if got["meets"] else "missed its bar"
    return (f"Its one test made before the records, at one lr for every n set where the sqrt rule puts n = 8 "
            f"({doc['sweep']}, {', '.join(map(short_budget, bar['budgets']))}): it picked n = {picks} where the best n was {best} (best "
            f"reading) and {final} (final), with regret no higher than a fixed n = 8's in "
            f"{got['no_higher_than_fixed']} of {got['cells']} budget-readings and within 1 se of a difference of the best n in {got['within_1se']} "
            f"(asked: {got['cells']} and {got['cells'] - 1}): it {verdict}; reading the lr as set at 1,024 rollouts a "
            f"step (the method of 07a27e7) was within 1 se in {older['within_1se']} (studies/results/organism_const8/)")


def note(out: Mapping[str, Any]) -> str:
    """What the answer is and how far to trust it, with the scored numbers."""
    k = len(out["measured"])
    s = out["scores_nine_sweeps"]
    many = {1: "one n", 2: "two n"}.get(k, f"{k} n")
    txt = (f"a simulation from cheap runs of {many} ({len(out['simulated'])} n simulated), "
           "not a measurement of the other n" if out["simulated"] else
           f"a simulation calibrated on the cheap runs of {many}, each carried to C by the model")
    if s:
        cmp = "; ".join(f"{r}: {s[r]:.4f} vs {s['fixed n = 8'][r]:.4f}" for r in ("best", "final"))
        verdict = ("marginally below a fixed n = 8's, within the seed noise, and in-sample (chosen after scoring)"
                   if out["frozen"] else "above a fixed n = 8's: this calibration is worse than that constant there")
        txt += (f". On the nine organism sweeps ({s['replays']} replays, overhead {s['overhead']:.3f}) its mean regret "
                f"({cmp}) is {verdict}")
    lr = out.get("lr_read") or {}
    if lr.get("rho") is None:
        txt += (". No run's lr was found: each n was read as if it had the lr the calibration gives it (the sqrt rule "
                "from where the lr was set); give the runs' lr (their settings files, or --set lr=...) to read it")
    elif not lr.get("at_calibration"):
        off = ", ".join(f"n = {n}: x{r:.2g}" for n, r in lr["rho"].items() if abs(r - 1) > 1e-3)
        a = lr["anchor"]
        txt += (f". These runs' lr departs from what the calibration gives each n from {a['lr']:.3g} at {a['batch']:g} "
                f"rollouts a step ({a['from']}): {off}. Each n is read at its own lr: the simulated step scaled by it, "
                "and a run that over-steps loses value at the learner's measured rate (isosim.predict.lr_read, "
                "studies/results/organism_lr_grid/calibration.json)")
        if out["method"] == LR_EVERY:
            txt += ("; every n's cheap curve calibrates the model and the model carries each to C (the cheap part "
                    "alone cannot see a small n fall later), keeping the cheap leader where it is in the band. From "
                    "one n's runs alone the other n would be the model's alone, so that form's pick can differ from "
                    "this one")
        else:
            txt += ("; the other n are the model's alone. With cheap runs of every n the model is fitted to each n's "
                    "own curve and keeps the cheap leader where it is in the band, so that form's pick can differ "
                    "from this one")
        record = prospective_record(out["method"])
        if record:
            txt += ". " + record
    elif out["method"] == LR_ONE or (out["method"] == LR_EVERY and k > 2):
        txt += ". Every n's lr is the calibration's: read as the frozen method on one n (the sqrt-rule sweeps scored it "
        txt += "above every reading of the cheap part alone)"
    if out["cheap_share"] > 2 * out["scored_share"]:
        txt += (f". The runs reach {out['cheap_share']:.1%} of C; the method was scored at "
                f"{out['scored_share']:.1%} per measured n")
    return txt


def _lr_lines(r: Mapping[str, Any]) -> list[str]:
    lr = r.get("lr_read") or {}
    if lr.get("anchor") is None:
        return ["lr each run had: none found (read at the calibration's lr)"]
    a = lr["anchor"]
    return [f"lr set where: {a['lr']:.4g} at {a['batch']:g} rollouts a step ({a['from']}); each n's lr over what the "
            f"calibration (the sqrt rule from there) gives it: "
            + ", ".join(f"n = {n} x{v:.3g}" for n, v in lr["rho"].items())]


def lines(r: Mapping[str, Any]) -> list[str]:
    """``recommend --runs --profile`` in words."""
    other, = r["pick_other_reading"].items()
    kind = (f"the frozen method (frozen at {r['frozen_commit'][:7]})" if r["frozen"]
            else "the two-run calibration (scored, not frozen)" if r["method"] == lrr.TWO_RUNS
            else "the frozen calibration read at each run's lr")
    st, src = r["setting"], r["setting_from"]
    th = r["theta"]
    out = [f"{r['runs']}: {r['read']}; calibrated simulator: {r['method']}, {kind}; reading {r['reading']}",
           f"lr rule: {r['lr_rule']} ({src['lr_rule']}); the pick assumes the full run trains every n by this rule",
           *_lr_lines(r),
           f"setting simulated: B_p {st['b_p']} ({src['b_p']}), training set {st['n_train']} ({src['n_train']}), "
           f"validation set {st['n_val']} ({src['n_val']}), warm-up {st['warmup']} ({src['warmup']}); "
           f"bank simulated in {r['bank_seconds']:.0f} s",
           f"pick n = {r['pick']} ({r['reading']} reading); {other[0]} reading: n = {other[1]}; tie band: n in "
           f"{{{', '.join(map(str, r['tie_band']))}}} (within {r['tie_band_value']:.4f} of the simulator's best, "
           f"n = {r[r['reading']]['simulator_best']}; a measured n in the band is kept)"]
    for n, v in r["n"].items():
        how = (f"measured to {v['measured_to']:.3g} rollouts (seeds {', '.join(map(str, v['seeds']))})"
               if v["status"] == "measured" else "simulated")
        gain = v["predicted_gain"]
        tail = (f"predicted gain at C: best {gain['best']:.3f}, final {gain['final']:.3f}" if v["in_grid"]
                else "not compared (fewer than 20 updates at C)")
        out.append(f"  n = {int(n):>4}: {how}; {tail}")
    out.append(f"fit: step size exp({th['log_lr']:.2f}), ceiling x{math.exp(th['log_h']):.2f}, exponent {th['power']:.3f}; "
               f"rms {r['rms']:.4f} on {r['points']} points")
    out.append(f"note: {r['note']}")
    return out


def direct_lr_note(path: str | Path, df: pd.DataFrame, lr_tuned_at: int | None = None,
                   metric: str | None = None) -> dict[str, Any] | None:
    """For ``recommend --runs`` without ``--profile``: where the runs' lr departs from what the
    calibration gives each n, why the direct reading of the cheap part can differ from the model's
    (``--profile``), in one line; None where every run is at the calibration or no lr is found.
    ``df``: the runs at ``path`` as the direct reader compares them
    (:func:`isosim.integrations.load_inspected`)."""
    from isosim.integrations import default_metric
    from isosim.predict.from_runs import cheap_curves

    path = Path(path)
    metric = metric or default_metric(df)
    _, b_p, _ = cheap_curves(df, metric)
    ns = measured_n(df, metric)
    rule, _ = lr_rule_of(path, df, b_p)
    lrs, _ = runs_lrs(path, df, ns, b_p, rule)
    if not lrs:
        return None
    anchor = anchor_of(path, lrs, b_p, lr_tuned_at)
    rho = lrr.rhos(lrs, b_p, anchor)
    if lrr.at_calibration(rho):
        return None
    off = ", ".join(f"n = {n}: x{r:.2g}" for n, r in sorted(rho.items()) if abs(r - 1) > 1e-3)
    line = (f"the runs' lr departs from what the calibration gives each n (the sqrt rule from {anchor.lr:.3g} at "
            f"{anchor.batch:g} rollouts a step, {anchor.source}): {off}. The cheap part alone cannot see a small n "
            "that over-steps fall later, nor a large n that under-steps rise later (on both measured one-lr sweeps "
            "n = 64-256 led by 1e6, the one set for n = 8 included); `recommend --runs ... --profile FILE` reads every n's cheap curve with the "
            "model and carries it to C, and its pick can differ from this one for that reason")
    return {"at_calibration": False, "rho": {str(n): rho[n] for n in sorted(rho)},
            "anchor": {"lr": anchor.lr, "batch": anchor.batch, "from": anchor.source}, "line": line}
