"""From logged scalars (TensorBoard, W&B) to isosim's records table.

A reader turns each run into a :class:`LoggedRun`: a table of scalars (one row per training step,
one column per logged tag) and what the trainer logged about its own configuration. Here the tags
are mapped to records columns, ``n``, ``b_p`` and rollouts per step are taken from that
configuration or from the user's ``--set``, and rollouts and tokens are computed from the steps.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from isosim.errors import IsosimError

# Default tags per records column, first match wins. Plain strings are exact tags; compiled
# patterns may match several tags, of which the one with the largest @N is taken (verl logs
# mean@N, best@N and worst@N for every N up to its n_val; one data source at a time).
DEFAULT_TAGS: dict[str, tuple[str | re.Pattern, ...]] = {
    # TRL GRPOTrainer (through the Hugging Face Trainer's TensorBoard / W&B callbacks) | verl
    "train_reward": ("train/reward", "critic/score/mean"),
    "val_avg": ("eval/reward", re.compile(r"val-core/(?P<src>.+)/(?:acc|reward)/mean@(?P<k>\d+)")),
    "val_best": (re.compile(r"val-core/(?P<src>.+)/(?:acc|reward)/best@(?P<k>\d+)/mean"),),
    "val_worst": (re.compile(r"val-(?:core|aux)/(?P<src>.+)/(?:acc|reward)/worst@(?P<k>\d+)/mean"),),
    "response_length": ("train/completions/mean_length", "response_length/mean"),
    "entropy": ("train/entropy", "actor/entropy"),
    "kl": ("train/kl", "actor/kl_loss", "actor/reward_kl_penalty"),
}
METRICS = ("train_reward", "val_avg", "val_best", "val_worst")
INT_SETTINGS = ("n", "b_p", "seed", "k")
# Columns --map may target besides the defaults: a cumulative token counter.
MAPPABLE = (*DEFAULT_TAGS, "tokens")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class LoggedRun:
    """One run as a reader found it."""

    name: str
    scalars: pd.DataFrame  # index: step (int); columns: tags; NaN where a tag was not logged
    config: dict[str, Any] = field(default_factory=dict)  # the trainer's own arguments, if logged
    origin: str = ""  # where it was read (a folder, a file)
    settings: dict[str, Any] = field(default_factory=dict)  # records columns logged as such (n, b_p)


def describe_tags(col: str) -> str:
    return ", ".join(t if isinstance(t, str) else t.pattern for t in DEFAULT_TAGS.get(col, ()))


# ----------------------------------------------------------------------------------------------
# --map and --set
# ----------------------------------------------------------------------------------------------
def parse_maps(items: Iterable[str]) -> dict[str, str]:
    """``column=TAG`` items (repeatable, or comma-free lists) -> {column: tag}."""
    out: dict[str, str] = {}
    for item in items:
        col, sep, tag = item.partition("=")
        col, tag = col.strip(), tag.strip()
        if not sep or not col or not tag:
            raise IsosimError(f"--map {item!r}: expected column=TAG, e.g. --map train_reward=train/reward")
        if col not in MAPPABLE:
            raise IsosimError(f"--map {item!r}: unknown column {col!r} (one of {', '.join(MAPPABLE)})")
        if col in out and out[col] != tag:
            raise IsosimError(f"--map: column {col!r} mapped twice ({out[col]!r} and {tag!r})")
        out[col] = tag
    return out


def _value(key: str, text: str, where: str) -> Any:
    text = text.strip()
    if key in INT_SETTINGS or key == "rollouts_per_step":
        try:
            v = float(text)
        except ValueError:
            raise IsosimError(f"{where}: {key}={text!r} is not a number") from None
        if not math.isfinite(v) or (key != "rollouts_per_step" and v != int(v)):
            raise IsosimError(f"{where}: {key}={text!r} must be a whole number")
        if key in ("n", "b_p", "k") and v < 1 or key == "rollouts_per_step" and v <= 0:
            raise IsosimError(f"{where}: {key} must be positive, got {text}")
        return int(v) if key != "rollouts_per_step" else v
    try:
        return float(text)
    except ValueError:
        return text


def _put(target: dict[str, Any], key: str, value: Any, where: str) -> None:
    if key in target and target[key] != value:
        raise IsosimError(f"{where}: conflicting values for {key} ({target[key]} and {value})")
    target[key] = value


def parse_sets(items: Iterable[str], runs_file: str | Path | None = None
               ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``--set [RUN:]key=value,key=value`` items and a runs file -> (for all runs, per run).

    A key given twice with different values for the same run (or for all runs) is an error;
    a per-run value overrides the all-runs value.
    """
    every: dict[str, Any] = {}
    per_run: dict[str, dict[str, Any]] = {}
    for item in items:
        head = item.split("=", 1)[0]
        run, body = None, item
        if ":" in head:
            cut = head.rindex(":")
            run, body = item[:cut].strip(), item[cut + 1:]
            if not run:
                raise IsosimError(f"--set {item!r}: empty run name before ':'")
        target = every if run is None else per_run.setdefault(run, {})
        for part in body.split(","):
            key, sep, val = part.partition("=")
            key = key.strip()
            if not sep or not IDENT.match(key) or not val.strip():
                raise IsosimError(f"--set {item!r}: expected [RUN:]key=value[,key=value], e.g. --set n=8,b_p=32")
            _put(target, key, _value(key, val, f"--set {item!r}"), f"--set {item!r}")
    if runs_file is not None:
        for run, settings in read_runs_file(runs_file).items():
            target = per_run.setdefault(run, {})
            for key, val in settings.items():
                _put(target, key, val, f"{runs_file}: run {run!r}")
    return every, per_run


def read_runs_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """A small mapping file: CSV with a ``run`` column, or JSON ``{run: {key: value}}``."""
    path = Path(path)
    if not path.is_file():
        raise IsosimError(f"{path}: no such runs file")
    out: dict[str, dict[str, Any]] = {}
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise IsosimError(f"{path}: cannot read JSON ({exc})") from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise IsosimError(f'{path}: expected {{"run name": {{"n": 4, "b_p": 16}}, ...}}')
        rows = {str(r): {str(k): str(v) for k, v in d.items()} for r, d in data.items()}
    else:
        try:
            table = pd.read_csv(path, dtype=str)
        except Exception as exc:  # pandas raises many kinds
            raise IsosimError(f"{path}: cannot read CSV ({type(exc).__name__}: {exc})") from None
        if "run" not in table.columns:
            raise IsosimError(f"{path}: a runs file needs a 'run' column (and n, b_p, ... columns)")
        if table["run"].duplicated().any():
            raise IsosimError(f"{path}: run {table['run'][table['run'].duplicated()].iloc[0]!r} listed twice")
        rows = {str(r["run"]): {k: v for k, v in r.items() if k != "run" and isinstance(v, str)}
                for r in table.to_dict("records")}
    for run, d in rows.items():
        out[run] = {}
        for key, val in d.items():
            if not IDENT.match(key):
                raise IsosimError(f"{path}: bad column name {key!r}")
            out[run][key] = _value(key, val, f"{path}: run {run!r}")
    return out


# ----------------------------------------------------------------------------------------------
# The trainer's configuration
# ----------------------------------------------------------------------------------------------
def _num(cfg: dict[str, Any], key: str) -> float | None:
    v = cfg.get(key)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def trl_allocation(cfg: dict[str, Any]) -> dict[str, Any]:
    """``n``, ``b_p``, rollouts per optimizer step and seed from TRL's ``GRPOConfig`` as logged.

    TRL generates ``generation_batch_size`` completions (all processes together) once every
    ``steps_per_generation * num_iterations`` micro-batches and steps the optimizer every
    ``gradient_accumulation_steps`` micro-batches, so one optimizer step spends
    ``generation_batch_size * gradient_accumulation_steps / (steps_per_generation * num_iterations)``
    new rollouts; ``b_p`` is the prompts of one generation batch. Older TRL versions that log no
    ``generation_batch_size`` are read as one process (``per_device_train_batch_size *
    gradient_accumulation_steps`` completions per step).
    """
    out: dict[str, Any] = {}
    n = _num(cfg, "num_generations")
    seed = _num(cfg, "seed")
    if seed is not None:
        out["seed"] = int(seed)
    lr = _num(cfg, "learning_rate")
    if lr is not None:
        out["lr"] = lr
    if n is None or n < 1:
        return out
    ga = _num(cfg, "gradient_accumulation_steps") or 1.0
    gen = _num(cfg, "generation_batch_size")
    spg = _num(cfg, "steps_per_generation") or ga
    mu = _num(cfg, "num_iterations") or 1.0
    if gen is None:
        per_device = _num(cfg, "per_device_train_batch_size")
        if per_device is None:
            return out
        gen, spg = per_device * ga, ga
    out["n"] = int(n)
    out["b_p"] = max(int(round(gen / n)), 1)
    out["rollouts_per_step"] = gen * ga / (spg * mu)
    return out


# ----------------------------------------------------------------------------------------------
# Tags -> columns
# ----------------------------------------------------------------------------------------------
def _resolve(run: LoggedRun, col: str, maps: dict[str, str]) -> tuple[str | None, int | None]:
    """The tag of ``run`` that feeds ``col`` (and the k it carries, from ``@k``), or None."""
    tags = [str(t) for t in run.scalars.columns]
    if col in maps:
        tag = maps[col]
        if tag not in tags:
            return None, None
        m = re.search(r"@(\d+)", tag)
        return tag, int(m.group(1)) if m else None
    for cand in DEFAULT_TAGS.get(col, ()):
        if isinstance(cand, str):
            if cand in tags:
                return cand, None
            continue
        hits = [(t, cand.fullmatch(t)) for t in tags]
        hits = [(t, m) for t, m in hits if m]
        if not hits:
            continue
        sources = sorted({m.group("src") for _, m in hits})
        if len(sources) > 1:
            raise IsosimError(f"run {run.name}: {col} is logged for several validation sets "
                              f"({', '.join(sources)}); choose one with --map {col}=TAG")
        tag, m = max(hits, key=lambda h: int(h[1].group("k")))
        return tag, int(m.group("k"))
    return None, None


VALIDATION_WORDS = ("eval", "val", "test", "held")
"""a logged column whose name holds one of these is a validation metric (``--map val_avg=TAG``)"""


def map_hint(tags: Sequence[str]) -> str:
    """The ``--map`` that would read ``tags``: ``val_avg=TAG`` for the first validation-like tag,
    ``train_reward=TAG`` for the first reward-like one, else both forms."""
    def low(t: str) -> str:
        return t.lower().replace("-", "/").replace("_", "/")
    val = [t for t in tags if any(w in low(t).split("/")[0] or low(t).startswith(w) for w in VALIDATION_WORDS)]
    val.sort(key=lambda t: not any(w in t.lower() for w in ("acc", "reward", "pass", "score", "correct")))
    if val:
        return f"--map val_avg={val[0]}"
    reward = [t for t in tags if "reward" in t.lower() or "acc" in t.lower()]
    if reward:
        return f"--map train_reward={reward[0]}"
    return "--map val_avg=TAG (validation) or --map train_reward=TAG (training reward)"


def _cumulative_tokens(lengths: pd.Series, rollouts_per_step: float) -> pd.Series:
    """Response tokens spent by each logged step from the mean response length of each window.

    A logged mean length is the mean over the steps since the previous log (each of those steps
    generated the same number of rollouts), so length x rollouts since the previous log is the
    window's exact token count.
    """
    lengths = lengths.dropna().sort_index()
    steps = lengths.index.to_numpy(float)
    gaps = np.diff(np.concatenate([[0.0], steps]))
    return pd.Series(np.cumsum(lengths.to_numpy(float) * gaps * rollouts_per_step), index=lengths.index)


def _match_run(name: str, runs: Sequence[str]) -> str:
    if name in runs:
        return name
    hits = [r for r in runs if r.split("/")[-1] == name or r.endswith("/" + name)]
    if len(hits) == 1:
        return hits[0]
    shown = ", ".join(runs[:8]) + (" ..." if len(runs) > 8 else "")
    if not hits:
        raise IsosimError(f"--set/--runs: no run named {name!r} (runs: {shown})")
    raise IsosimError(f"--set/--runs: {name!r} matches several runs ({', '.join(hits[:4])}); use the full name")


def to_records(runs: Sequence[LoggedRun], *, source: str, maps: dict[str, str] | None = None,
               every: dict[str, Any] | None = None, per_run: dict[str, dict[str, Any]] | None = None,
               where: str = "") -> tuple[pd.DataFrame, str]:
    """Records table of ``runs`` and a one-line description of what was read."""
    maps, every, per_run = maps or {}, every or {}, per_run or {}
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise IsosimError(f"{where}: two runs are both named {dup!r}")
    overrides = {_match_run(k, names): v for k, v in per_run.items()}
    if maps:
        logged = set().union(*(map(str, r.scalars.columns) for r in runs)) if runs else set()
        for col, tag in maps.items():
            if tag not in logged:
                some = ", ".join(sorted(logged)[:8])
                raise IsosimError(f"--map {col}={tag}: no run logs {tag!r} (tags include: {some})")

    frames, skipped = [], []
    for run in runs:
        tags = {col: _resolve(run, col, maps) for col in (*DEFAULT_TAGS, "tokens")}
        if not any(tags[m][0] for m in METRICS):
            skipped.append(run.name)
            continue
        settings = trl_allocation(run.config)
        explicit = {**run.settings, **every, **overrides.get(run.name, {})}
        from_config = "rollouts_per_step" in settings
        settings.update(explicit)
        if "n" not in settings or "b_p" not in settings:
            missing = " and ".join(k for k in ("n", "b_p") if k not in settings)
            raise IsosimError(
                f"run {run.name}: {missing} unknown (the logs hold no num_generations / batch settings); "
                f"give them with --set {run.name.split('/')[-1]}:n=N,b_p=B")
        if "rollouts_per_step" not in explicit and ("n" in explicit or "b_p" in explicit or not from_config):
            settings["rollouts_per_step"] = settings["n"] * settings["b_p"]
        rps = float(settings.pop("rollouts_per_step"))
        settings.setdefault("seed", 0)  # not logged (W&B panels, verl): runs are told apart by run_id
        sc = run.scalars
        metric_tags = [tags[m][0] for m in METRICS if tags[m][0]]
        steps = sc.index[sc[metric_tags].notna().any(axis=1)]
        rows = pd.DataFrame({"step": np.asarray(steps, dtype=int)})
        for col, (tag, _) in tags.items():
            if tag and col not in ("response_length", "tokens"):
                rows[col] = sc.loc[steps, tag].to_numpy(float)
        if tags["tokens"][0]:
            rows["tokens"] = sc.loc[steps, tags["tokens"][0]].to_numpy(float)
        elif tags["response_length"][0]:
            cum = _cumulative_tokens(sc[tags["response_length"][0]], rps)
            rows["tokens"] = cum.reindex(steps).to_numpy(float)
        else:
            rows["tokens"] = np.nan
        ks = [tags[m][1] for m in ("val_best", "val_worst") if tags[m][0] and tags[m][1]]
        if "k" in settings:
            rows["k"] = settings.pop("k")
        elif ks:
            rows["k"] = ks[0]
        rows["rollouts"] = rows["step"] * rps
        rows.insert(0, "run_id", run.name)
        for key, val in settings.items():
            rows[key] = val
        rows["source"] = source
        frames.append(rows)
    if not frames:
        what = f"{len(runs)} run{'s' if len(runs) != 1 else ''} in {source}"
        logged = sorted(set().union(*(map(str, r.scalars.columns) for r in runs))) if runs else []
        raise IsosimError(
            f"{where}: {what}, but none logs a reward or validation tag isosim knows "
            f"(looked for {describe_tags('train_reward')}, {describe_tags('val_avg')}); its columns: "
            f"{', '.join(logged[:12]) or 'none'}{' ...' if len(logged) > 12 else ''}; name yours with {map_hint(logged)}")
    df = pd.concat(frames, ignore_index=True)
    ns = sorted(int(v) for v in df["n"].unique())
    text = f"{df['run_id'].nunique()} run{'s' if df['run_id'].nunique() != 1 else ''} from {source}, n = {', '.join(map(str, ns))}"
    if skipped:
        text += f" (skipped {len(skipped)} without a reward tag: {', '.join(skipped[:3])}{' ...' if len(skipped) > 3 else ''})"
    return df, text
