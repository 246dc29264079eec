"""The learning rate that goes with each n: written by ``isosim plan``, read back by ``recommend --runs``.

A run with ``n`` completions per prompt and ``B_p`` prompts a step spends ``B = B_p * n`` rollouts a
step. Its lr comes from one ``BASE`` at the reference batch ``B_ref`` = 1024 rollouts by a rule, with
the one formula the simulator and isosim's runner use (:func:`isosim.sim.config.scaled_lr`):

* ``sqrt``: ``lr = BASE * sqrt(B / 1024)`` (the IsoCompute paper's rule, isosim's default);
* ``constant``: ``lr = BASE`` for every n (what TRL and verl do unless told otherwise).

Why sqrt is the default is what the measured learners showed (``MEASURED``). Here: each run's lr
read back from what its trainer wrote (:func:`run_lrs`), the rule the runs followed
(:func:`infer_rule`), and the lines ``plan`` and ``recommend`` print about them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from isosim.sim.config import LR_POWER, LR_REF_BATCH, scaled_lr

__all__ = ["RULES", "DEFAULT_RULE", "DEFAULT_BASE", "TRL_DEFAULT_N", "LR_REF_BATCH", "scaled_lr", "lr_for", "base_of",
           "infer_rule", "run_lrs", "runs_rule", "MEASURED", "CONSTANT_ON_MEASURED"]

RULES = ("sqrt", "constant")
"""the rules ``isosim plan --lr-rule`` writes"""
DEFAULT_RULE = "sqrt"
DEFAULT_BASE = 1e-6
"""the lr at the reference batch when ``--lr`` is not given: TRL's GRPOConfig default learning_rate
(and the paper's base), taken as the lr of a 1024-rollout step"""
TRL_DEFAULT_N = 8
"""TRL's GRPOConfig default num_generations: where ``plan --for trl`` anchors TRL's default lr when
``--lr`` is not given (n = 8's runs get TRL's default exactly, as a run without isosim would)"""
REL_TOL = 1e-3
"""two lrs are the same rule's when they agree to this relative tolerance (YAML and logs round)"""
MEASURED = ("on the measured learners the sqrt rule gave a flat top (a fixed n = 8 within noise of the best n), "
            "while one lr for every n made small n peak early and fall (organism-hard-128 at lr 3e-4, to 1e6 "
            "rollouts: n = 2 collapsed to .001, n = 8 ended at .099 against n = 256's .195), even where that one lr "
            "was the sqrt rule's for n = 8 (organism-hard-256-const8 at 1.06e-4: n = 8 ended at .543 against "
            "n = 256's .597)")
CONSTANT_ON_MEASURED = ("on the measured learner, one lr for every n (organism-hard-128 at lr 3e-4, to 1e6 rollouts) made "
                        "n = 2 collapse (to .001) and small n peak early and fall: n = 8 ended at .099 against n = 256's "
                        ".195 (7.7 se behind, in se of the difference of two seed means; 3.1 by its best value), while "
                        "the sqrt rule gave a flat top (n = 8 within 1.0 such se of the best by its best value); with "
                        "one lr set where the sqrt rule puts n = 8 (organism-hard-256-const8 at 1.06e-4, the first "
                        "learner), the larger n still won by 1e6: n = 8 ended at .543 against n = 256's .597 (2.8 se "
                        "behind; 1.8 by its best value, against n = 128's .608)")


def lr_for(n: int, b_p: int, base: float, rule: str = DEFAULT_RULE, ref_batch: float = LR_REF_BATCH) -> float:
    """The lr of a run of ``n`` completions per prompt and ``b_p`` prompts a step, by ``rule`` from
    ``base`` at ``ref_batch`` rollouts a step (at that batch, ``base`` itself, exactly)."""
    return scaled_lr(base, b_p * n, ref_batch, rule)


def base_of(lr: float, batch: float, rule: str) -> float:
    """The BASE (lr at the reference batch) from which ``rule`` gives ``lr`` at ``batch`` rollouts a step."""
    return float(lr) / scaled_lr(1.0, batch, LR_REF_BATCH, rule)


def infer_rule(points: list[tuple[float, float]]) -> str:
    """The rule a set of runs' ``(batch, lr)`` follow: ``constant`` (one lr), ``sqrt`` or ``linear``
    (lr proportional to sqrt(B) or B), ``mixed`` (none of them), or ``unknown`` (fewer than two
    batch sizes: every rule gives one lr)."""
    pts = [(float(b), float(v)) for b, v in points if b and v and math.isfinite(v) and v > 0]
    if len({b for b, _ in pts}) < 2:
        return "unknown"
    for rule in ("constant", "sqrt", "linear"):
        bases = [base_of(v, b, rule) for b, v in pts]
        if max(bases) <= min(bases) * (1 + REL_TOL):
            return rule
    return "mixed"


# ----------------------------------------------------------------------------------------------
# Each run's lr, from what its trainer wrote
# ----------------------------------------------------------------------------------------------
SETTINGS_FILES = ("config.json", "config.yaml", "overrides.txt")
VERL_LR = "actor_rollout_ref.actor.optim.lr"


def lr_in_file(path: Path) -> tuple[float | None, str | None]:
    """The lr a run's settings file states, and the rule it names (isosim's only): isosim's
    ``config.json`` (``lr``, ``lr_rule``), TRL's ``config.yaml`` (``learning_rate``) or verl's
    ``overrides.txt`` (``actor_rollout_ref.actor.optim.lr``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, None
    value: Any = None
    rule = None
    if path.name == "config.json":
        try:
            doc = json.loads(text)
        except ValueError:
            return None, None
        doc = doc if isinstance(doc, dict) else {}
        value = doc.get("lr", doc.get("learning_rate"))
        rule = doc.get("lr_rule") if doc.get("lr_rule") in LR_POWER else None
    elif path.name == "config.yaml":
        value = next((line.split(":", 1)[1] for line in text.splitlines()
                      if line.split(":", 1)[0].strip() == "learning_rate" and ":" in line), None)
    else:
        value = next((line.split("=", 1)[1] for line in text.splitlines()
                      if line.split("=", 1)[0].strip().lstrip("+") == VERL_LR and "=" in line), None)
    try:
        v = float(str(value).strip())
    except (TypeError, ValueError):
        return None, rule
    return (v if math.isfinite(v) and v > 0 else None), rule


def _settings_files(root: Path) -> dict[str, Path]:
    """Run folder (relative path, and its last part) -> its settings file, up to three levels down."""
    if not root.is_dir():
        return {}
    found: dict[str, Path] = {}
    for depth in ("", "*/", "*/*/", "*/*/*/"):
        for name in SETTINGS_FILES:
            for f in sorted(root.glob(depth + name)):
                rel = f.parent.relative_to(root).as_posix()
                found.setdefault(rel, f)
                found.setdefault(f.parent.name, f)
    return found


def run_lrs(path: str | Path, df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Each run's lr (``None`` where nothing says it) with its n, B_p and where the lr was read: the
    records' ``lr`` column (TRL's records callback, a W&B export's ``learning_rate``, TensorBoard's
    logged arguments, a plan's run table), else the run folder's settings file (:func:`lr_in_file`)."""
    files = _settings_files(Path(path))
    out: dict[str, dict[str, Any]] = {}
    for run, g in df.groupby("run_id", sort=True):
        lr, source, rule = None, None, None
        if "lr" in g.columns:
            vals = pd.to_numeric(g["lr"], errors="coerce").dropna()
            if len(vals):
                lr, source = float(vals.iloc[0]), "records"
        f = files.get(str(run)) or files.get(str(run).split("/")[-1])
        if f is not None:
            v, rule = lr_in_file(f)
            if lr is None and v is not None:
                lr, source = v, f.name
        out[str(run)] = {"lr": lr, "n": int(g["n"].iloc[0]), "b_p": int(g["b_p"].iloc[0]), "from": source,
                         "rule": rule}
    return out


def runs_rule(per_run: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The rule the runs' lrs follow and its BASE at the reference batch (see :func:`infer_rule`; with one
    batch size, the rule every run's isosim config names); ``rule`` is ``none`` where no run's lr was found."""
    pts = [(r["n"] * r["b_p"], r["lr"]) for r in per_run.values() if r["lr"] is not None]
    if not pts:
        return {"rule": "none", "base": None, "runs_with_lr": 0, "runs_read": len(per_run)}
    rule = infer_rule(pts)
    named = {r.get("rule") for r in per_run.values()}
    if rule == "unknown" and len(named) == 1 and None not in named:  # one batch size: the rule the runs name
        rule = named.pop()
    base = None
    if rule in LR_POWER:
        base = float(sum(base_of(v, b, rule) for b, v in pts) / len(pts))
    return {"rule": rule, "base": base, "runs_with_lr": len(pts), "runs_read": len(per_run)}


def pick_lr(info: dict[str, Any], per_run: dict[str, dict[str, Any]], n: int, b_p: int) -> float | None:
    """The lr that goes with the pick (n at B_p): the runs' rule from their BASE; where their lrs follow
    no rule, the pick's own cheap run's lr; None where nothing says."""
    if info["base"] is not None:
        return lr_for(n, b_p, info["base"], info["rule"])
    own = [r["lr"] for r in per_run.values() if r["n"] == n and r["lr"] is not None]
    return own[0] if own else None


def rule_text(rule: str, base: float | None) -> str:
    """A rule and its BASE in words."""
    if rule == "constant":
        return f"constant (one lr, {base:.3g}, for every n)"
    if rule in LR_POWER:
        power = {0.5: "sqrt(B_p n / 1024)", 1.0: "B_p n / 1024"}[LR_POWER[rule]]
        return f"{rule} (lr = {base:.3g} x {power})"
    return {"mixed": "mixed (the lrs follow neither one lr nor the sqrt or linear rule)",
            "unknown": "unknown (the runs share one batch size, so every rule gives one lr)",
            "none": "not found (no run's lr was logged or written beside it)"}[rule]


def runs_lines(per_run: dict[str, dict[str, Any]], info: dict[str, Any], pick: int, b_p: int,
               assumed: str | None) -> list[str]:
    """What ``recommend --runs`` says about lr: each run's lr, the runs' rule, the pick's lr, and where
    the pick assumes another rule (``assumed``; None: the runs' own), or the runs ran at one lr, what
    that did on the measured learner."""
    order = sorted(per_run, key=lambda run: (per_run[run]["n"], run))
    each = ", ".join(f"{run} {per_run[run]['lr']:.3g}" if per_run[run]["lr"] is not None else f"{run} ?"
                     for run in order)
    lines = [f"lr of each run: {each}", f"the runs' lr rule: {rule_text(info['rule'], info['base'])}"]
    lr = pick_lr(info, per_run, pick, b_p)
    if lr is not None:
        how = ("the runs' one lr" if info["rule"] == "constant" else
               f"the runs' {info['rule']} rule from {info['base']:.3g} at B_p n = {LR_REF_BATCH}" if info["base"]
               is not None else "the lr of its own cheap run (the runs follow no rule)")
        lines.append(f"lr for the pick (n = {pick}, B_p = {b_p}): {lr:.3g}, by {how}")
    if assumed is not None and info["rule"] in LR_POWER and info["rule"] != assumed:
        lines.append(f"warning: the runs were made at the {info['rule']} rule; this pick assumes the {assumed} rule, "
                     "so it speaks for runs at that rule, not for yours")
    if info["rule"] == "mixed":
        lines.append("warning: the runs' lrs follow no rule, so comparing their n also compares their lrs")
    if info["rule"] == "constant":
        lines.append(f"note: the runs were made at one lr for every n; {CONSTANT_ON_MEASURED}. At one lr, a small n "
                     "may lose for want of a step size scaled to its batch: `isosim plan --lr-rule sqrt` writes the "
                     "sqrt rule's lrs")
    return lines
