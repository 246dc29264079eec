"""Problems: loading, splitting, difficulty filtering, prompts and epoch-wise batch order.

A problem set is JSON Lines, one ``{"id", "problem", "answer"}`` object a line (the files in
``shared/data``), or a Hugging Face dataset named ``hf:NAME[:CONFIG]`` with a field mapping.
Nothing here imports torch: a malformed file is reported before any model is loaded.

Difficulty filtering reads a *calibration file* (JSON)::

    {"ids": ["gsm8k-train-00000", ...], "rates": [0.4375, ...], "k": 16, "meta": {...}}

where ``rates[i]`` is the base model's measured pass rate (avg@k) on problem ``ids[i]``.
``write_calibration`` writes one (``isosim calibrate`` uses it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isosim import files
from isosim.errors import IsosimError
from isosim.sim import epochs


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    answer: str


# --- loading --------------------------------------------------------------------------------


def _problem_from_record(rec: Any, where: str, id_field: str, problem_field: str, answer_field: str,
                         default_id: str) -> Problem:
    if not isinstance(rec, dict):
        raise IsosimError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    for name in (problem_field, answer_field):
        val = rec.get(name)
        if val is None or (isinstance(val, str) and not val.strip()):
            raise IsosimError(f"{where}: record has no {name!r}")
    pid = rec.get(id_field, default_id)
    answer = rec[answer_field]
    if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
        raise IsosimError(f"{where}: {answer_field!r} must be a string or a number, got {type(answer).__name__}")
    if not isinstance(rec[problem_field], str):
        raise IsosimError(f"{where}: {problem_field!r} must be a string")
    return Problem(id=str(pid), problem=rec[problem_field], answer=str(answer).strip())


def load_jsonl(path: str | Path, id_field: str = "id", problem_field: str = "problem",
               answer_field: str = "answer") -> list[Problem]:
    """Read a JSON Lines problem file; any malformed line raises ``IsosimError`` naming it."""
    path = Path(path)
    if not path.is_file():
        raise IsosimError(f"{path}: no such data file")
    problems: list[Problem] = []
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise IsosimError(f"{path}: cannot open ({exc.strerror})") from None
    with fh:
        try:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise IsosimError(f"{where}: not valid JSON ({exc.msg})") from None
                problems.append(_problem_from_record(rec, where, id_field, problem_field, answer_field,
                                                     default_id=str(lineno - 1)))
        except UnicodeDecodeError:
            raise IsosimError(f"{path}: not UTF-8 text") from None
    if not problems:
        raise IsosimError(f"{path}: no problems in the file")
    _check_unique(problems, str(path))
    return problems


def load_hf(spec: str, split: str, id_field: str, problem_field: str, answer_field: str) -> list[Problem]:
    """Load ``hf:NAME[:CONFIG]`` with the ``datasets`` library (lazily imported)."""
    _, _, rest = spec.partition(":")
    name, _, config = rest.partition(":")
    try:
        import datasets
    except ImportError:
        raise IsosimError(f"{spec}: Hugging Face datasets need `pip install datasets`") from None
    try:
        ds = datasets.load_dataset(name, config or None, split=split)
    except Exception as exc:  # network, missing split, bad name: one line for the user
        raise IsosimError(f"{spec}: cannot load split {split!r} ({type(exc).__name__}: {exc})") from None
    problems = [
        _problem_from_record(dict(rec), f"{spec}[{i}]", id_field, problem_field, answer_field, default_id=str(i))
        for i, rec in enumerate(ds)
    ]
    if not problems:
        raise IsosimError(f"{spec}: split {split!r} is empty")
    _check_unique(problems, spec)
    return problems


def load_problems(spec: str, split: str = "train", id_field: str = "id", problem_field: str = "problem",
                  answer_field: str = "answer") -> list[Problem]:
    if spec.startswith("hf:"):
        return load_hf(spec, split, id_field, problem_field, answer_field)
    return load_jsonl(spec, id_field, problem_field, answer_field)


def _check_unique(problems: Sequence[Problem], source: str) -> None:
    seen: set[str] = set()
    for p in problems:
        if p.id in seen:
            raise IsosimError(f"{source}: duplicate id {p.id!r} (ids must be unique within a file)")
        seen.add(p.id)


def split_train_val(problems: Sequence[Problem], val_size: int, seed: int) -> tuple[list[Problem], list[Problem]]:
    """Hold out ``val_size`` problems, chosen with a generator seeded by ``seed``."""
    if val_size >= len(problems):
        raise IsosimError(
            f"val_size ({val_size}) must be smaller than the number of problems ({len(problems)}): "
            "training needs problems that are not held out"
        )
    order = np.random.default_rng([seed, 0x5A11]).permutation(len(problems))
    val_idx = set(order[:val_size].tolist())
    train = [p for i, p in enumerate(problems) if i not in val_idx]
    val = [problems[i] for i in sorted(val_idx)]
    return train, val


# --- difficulty calibration -----------------------------------------------------------------


def write_calibration(path: str | Path, ids: Sequence[str], rates: Sequence[float], k: int,
                      meta: dict[str, Any] | None = None) -> Path:
    """Write a calibration file (atomically): per-problem pass rates measured with k samples."""
    ids = [str(i) for i in ids]
    rates = [float(r) for r in rates]
    if len(ids) != len(rates):
        raise IsosimError(f"calibration: {len(ids)} ids but {len(rates)} rates")
    if any(not (0.0 <= r <= 1.0) for r in rates):
        raise IsosimError("calibration: pass rates must lie in [0, 1]")
    if int(k) < 1:
        raise IsosimError("calibration: k must be >= 1")
    return files.write_json(path, {"ids": ids, "rates": rates, "k": int(k), "meta": meta or {}}, indent=None)


def read_calibration(path: str | Path) -> dict[str, Any]:
    """Read a calibration file; returns {"rates": {id: rate}, "k": int, "meta": dict}."""
    path = Path(path)
    if not path.is_file():
        raise IsosimError(f"{path}: no such calibration file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IsosimError(f"{path}: calibration file is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("ids"), list) or not isinstance(data.get("rates"), list):
        raise IsosimError(f"{path}: a calibration file needs lists 'ids' and 'rates'")
    ids, rates = data["ids"], data["rates"]
    if len(ids) != len(rates):
        raise IsosimError(f"{path}: {len(ids)} ids but {len(rates)} rates")
    try:
        rate_map = {str(i): float(r) for i, r in zip(ids, rates)}
    except (TypeError, ValueError):
        raise IsosimError(f"{path}: rates must be numbers") from None
    if any(not (0.0 <= r <= 1.0) or math.isnan(r) for r in rate_map.values()):
        raise IsosimError(f"{path}: pass rates must lie in [0, 1]")
    return {"rates": rate_map, "k": int(data.get("k", 0) or 0), "meta": data.get("meta", {})}


def filter_by_pass_rate(problems: Sequence[Problem], rates: dict[str, float], lo: float, hi: float,
                        source: str = "calibration") -> list[Problem]:
    """Keep problems whose calibrated rate lies in [lo, hi]; problems without a rate are dropped."""
    kept = [p for p in problems if p.id in rates and lo <= rates[p.id] <= hi]
    if not kept:
        covered = sum(p.id in rates for p in problems)
        raise IsosimError(
            f"{source}: no problem has a pass rate in [{lo}, {hi}] "
            f"({covered} of {len(problems)} problems have a calibrated rate)"
        )
    return kept


# --- prompts --------------------------------------------------------------------------------


def build_prompt(tokenizer: Any, problem: str, template: str, instruction: str,
                 system_prompt: str | None = None) -> list[int]:
    """Token ids of the prompt: the model's chat template (answer in \\boxed{}) or plain text."""
    text = f"{problem.strip()}\n{instruction}" if instruction else problem.strip()
    if template == "chat" and getattr(tokenizer, "chat_template", None):
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": text}
        ]
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    plain = f"Question: {text}\nAnswer:"
    return list(tokenizer(plain, add_special_tokens=True)["input_ids"])


# --- batch order ----------------------------------------------------------------------------


class EpochSampler(epochs.EpochSampler):
    """Draws batches of problem indices: a fresh seeded permutation every epoch.

    :class:`isosim.sim.epochs.EpochSampler` with seeded epochs (:func:`isosim.sim.epochs.seeded_order`),
    batches as lists and a checkpoint state. A batch that runs past the end of an epoch continues
    into the next epoch's permutation, so every problem is seen once per epoch. The whole state is
    ``(epoch, pos)``: the permutation of epoch ``e`` is a pure function of ``(seed, e)``, which
    makes resuming exact.
    """

    def __init__(self, num_items: int, seed: int, epoch: int = 0, pos: int = 0):
        super().__init__(num_items, epochs.seeded_order(num_items, seed), epoch, pos)
        self.seed = seed

    def next(self, size: int) -> list[int]:
        return super().next(size).tolist()

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "pos": self.pos, "num_items": self.num_items, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state.get("num_items") != self.num_items or state.get("seed") != self.seed:
            raise IsosimError("checkpoint: the training set or seed differs from the one it was saved with")
        self.seek(int(state["epoch"]), int(state["pos"]))
