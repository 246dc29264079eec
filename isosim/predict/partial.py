"""``isosim recommend --runs DIR --profile FILE``: n for a budget from a *partial* cheap set.

The runs (whatever ``isosim analyze`` reads: isosim records, TRL / verl TensorBoard logs, W&B CSV
exports, through :func:`isosim.integrations.load_runs`) hold one or two n, any number of seeds, each
run to a small share of the budget C. The calibrated simulator of
:mod:`isosim.predict.simfit_frozen` reads them: a bank of the frozen recipe is simulated on the
runs' setting and the base model's profile (:func:`~isosim.predict.simfit_frozen.user_bank`), the
step size and the ceiling (and with two n the exponent) are fitted to the measured points, and every
other n of the grid is simulated to C (:func:`~isosim.predict.simfit_frozen.user_pick`). One
measured n is the frozen method; two is the two-run calibration (scored on the nine organism
sweeps, not frozen).

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
from isosim.predict import simfit_frozen as sff

DEFAULT_VAL_SIZE = 512
"""validation problems simulated when neither the runs nor ``--val-size`` say (SimConfig's default)"""
GRID_N = (2, 4, 8, 16, 32, 64, 128, 256)
"""the n compared (the plane's grid), with the measured n added; each kept where C affords 20 updates"""
SCORED_SHARE = {sff.FROZEN: 0.05, sff.TWO_RUNS: 0.025}
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
    from isosim.predict import simfit_lr as slr

    if given is not None:
        slr.check_rule(given)
    found = {str(v) for v in _config_values(path, "lr_rule")}
    if len(found) > 1:
        raise IsosimError(f"the runs' config.json files hold several lr rules ({', '.join(sorted(found))}); "
                          "calibrate on runs of one rule")
    if found:
        rule = slr.check_rule(found.pop())
        if given is not None and given != rule:
            raise IsosimError(f"--lr-rule {given} contradicts the runs' config.json (lr_rule {rule}): drop --lr-rule")
        return rule, "config.json (lr_rule)"
    if given is not None:
        return given, "--lr-rule"
    if "lr" in df.columns and "n" in df.columns:
        lrs = df.dropna(subset=["lr", "n"]).groupby("n")["lr"].first()
        rule = infer_rule([(b_p * int(n), float(v)) for n, v in lrs.items()])
        if rule in slr.RULE_EXPONENT:
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


def _profile_key(profile: str | Path) -> str:
    return hashlib.sha256(Path(profile).read_bytes()).hexdigest()


def bank_path(digest: str, setting: Mapping[str, Any], ns: tuple[int, ...], budget: float) -> Path:
    """Where a bank of these inputs is kept between calls: the recommend cache (``ISOSIM_CACHE``),
    named by a hash of the profile's bytes, the setting, the n, the budget and the frozen method."""
    from isosim.files import cache_root

    key = json.dumps({"profile": digest, "setting": dict(sorted(setting.items())), "n": list(ns), "budget": float(budget),
                      "frozen": sff.frozen()["commit"], "variant": sff.VARIANT}, sort_keys=True)
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
    bank = sff.user_bank(profile, dict(setting), ns, budget)
    write_json(path, bank, indent=None)
    return bank


def bank_for(profile: str | Path, setting: Mapping[str, Any], ns: list[int], budget: float) -> dict[str, Any]:
    """:func:`isosim.predict.simfit_frozen.user_bank`, kept between calls (same profile bytes,
    setting, n, budget and frozen method: the same bank, read from the cache; written atomically)."""
    return _bank(str(profile), _profile_key(profile), tuple(sorted(setting.items())), tuple(ns), float(budget))


def recommend_partial(path: str | Path, profile: str | Path, budget: float, reading: str = "best",
                      train_size: int | None = None, val_size: int | None = None,
                      warmup: int | None = None, lr_rule: str | None = None, maps: Sequence[str] = (),
                      sets: Sequence[str] = ()) -> dict[str, Any]:
    """The calibrated simulator's answer for the cheap runs at ``path`` (one or two n) at ``budget``,
    read under the runs' lr rule (:func:`lr_rule_of`; ``maps``, ``sets``: ``--map`` and ``--set``
    for TensorBoard and W&B logs)."""
    from isosim.integrations import default_metric, load_competing_runs
    from isosim.predict.from_runs import cheap_curves
    from isosim.sim.profiles import read_profile
    from isosim.validation.readings import check_reading

    check_reading(reading)
    if not (budget and math.isfinite(budget) and budget > 0):
        raise IsosimError(f"--budget must be a positive number of rollouts, got {budget}")
    problems = int(read_profile(profile).rates.size)
    path = Path(path)
    # a run that stopped short of its planned budget: every run is read at the budget every run
    # reached, and the line read names it (as the direct reader does)
    df, what, _ = load_competing_runs(path, maps=maps, sets=sets)
    metric = default_metric(df)
    ns = measured_n(df, metric)
    if len(ns) > 2:
        raise IsosimError(f"--profile goes with one or two measured n, the runs hold {len(ns)} "
                          f"(n = {', '.join(map(str, ns))}): drop --profile, the direct reader reads every n")
    by_seed, b_p, _ = cheap_curves(df, metric)
    runs: dict[int, dict[int, list]] = {}
    for seed, curves in by_seed.items():
        for n, c in curves.items():
            runs.setdefault(int(n), {})[int(seed)] = c
    if not any(r > 0 for seeds in runs.values() for c in seeds.values() for r, _ in c):
        raise IsosimError(f"{path}: the runs have no evaluation after step 0: nothing to calibrate on")
    cheap = max(r for seeds in runs.values() for c in seeds.values() for r, _ in c)
    if cheap >= budget:
        raise IsosimError(f"the runs already reach {cheap:.3g} rollouts, at or past the budget {budget:.3g}")
    setting, sources = setting_of(path, df, b_p, problems, train_size, val_size, warmup)
    rule, sources["lr_rule"] = lr_rule_of(path, df, b_p, lr_rule)
    setting = sff.user_setting(runs, b_p, setting["n_train"], setting["n_val"], setting["warmup"])
    grid = sff.grid_for(budget, b_p, sorted(set(GRID_N) | set(runs)))
    t0 = time.perf_counter()
    bank = bank_for(profile, setting, sorted(set(grid) | set(runs)), budget)
    got = sff.user_pick(bank, runs, grid, budget, rule)
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
    out["note"] = note(out)
    return out


def note(out: Mapping[str, Any]) -> str:
    """What the answer is and how far to trust it, with the scored numbers."""
    k = len(out["measured"])
    s = out["scores_nine_sweeps"]
    txt = (f"a simulation from cheap runs of {'one n' if k == 1 else 'two n'} ({len(out['simulated'])} n simulated), "
           "not a measurement of the other n")
    if s:
        cmp = "; ".join(f"{r}: {s[r]:.4f} vs {s['fixed n = 8'][r]:.4f}" for r in ("best", "final"))
        verdict = ("marginally below a fixed n = 8's, within the seed noise, and in-sample (chosen after scoring)"
                   if out["frozen"] else "above a fixed n = 8's: this calibration is worse than that constant there")
        txt += (f". On the nine organism sweeps ({s['replays']} replays, overhead {s['overhead']:.3f}) its mean regret "
                f"({cmp}) is {verdict}")
    if out.get("lr_rule", "sqrt") != "sqrt":
        txt += (f". Those sweeps trained at the sqrt rule; these runs' {out['lr_rule']} rule is read by a decay for the "
                "walk a run takes beyond the sqrt rule, fitted to the cheap runs (isosim.predict.simfit_lr): a "
                "mechanism chosen after one constant-lr sweep's cheap part. Its picks for that sweep, committed "
                "before its runs (after n = 64's runs at its lr were on record), beat a fixed n = 8 by 2.8-4.9 se of "
                "the difference of two seed means in five of six budget-readings, but not the cheap leader at 5 % of "
                "C in three (docs/organism.md)")
    if out["cheap_share"] > 2 * out["scored_share"]:
        txt += (f". The runs reach {out['cheap_share']:.1%} of C; the method was scored at "
                f"{out['scored_share']:.1%} per measured n")
    return txt


def lines(r: Mapping[str, Any]) -> list[str]:
    """``recommend --runs --profile`` in words."""
    other, = r["pick_other_reading"].items()
    kind = (f"the frozen method (frozen at {r['frozen_commit'][:7]})" if r["frozen"]
            else "the two-run calibration (scored, not frozen)")
    st, src = r["setting"], r["setting_from"]
    th = r["theta"]
    out = [f"{r['runs']}: {r['read']}; calibrated simulator: {r['method']}, {kind}; reading {r['reading']}",
           f"lr rule: {r['lr_rule']} ({src['lr_rule']}); the pick assumes the full run trains every n by this rule",
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
