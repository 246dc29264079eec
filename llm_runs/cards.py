"""Shipped models and their cards: the settings a shipped model is meant to be run with.

A shipped model is a name (``--model organism``) for a folder under ``llm_runs/organism/`` that
holds the model (``model/``), its problem pool and its card (``organism.json``). The card records
how the model was built and how its runs sample, score and learn: the prompt template, the
instruction and the answer fallback at its top level (what the build wrote), and a
``run_defaults`` block of further run settings (temperature, response length, learning rate,
evaluation size, sampler), and ``run_threads``, the torch threads of a run (one: the organism's
runs are small, and several share the cores; its committed records were made at one thread). Wherever ``--model NAME`` is given (``isosim calibrate``,
``isosim validate``, ``python -m llm_runs.training.train``) these are the defaults; a config file,
``--set`` or a flag still overrides each of them.

Another shipped model is one more entry of :data:`SHIPPED` (its folder holding the same files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError

ORGANISM_ROOT = Path(__file__).resolve().parent / "organism"
SHIPPED: dict[str, Path] = {
    "organism": ORGANISM_ROOT / "shipped",
    "organism-hard": ORGANISM_ROOT / "shipped_hard",  # the harder task family: sums of 2-6 terms of 1-3 digits
}
CARD = "organism.json"
CARD_TOP_KEYS = ("prompt_template", "instruction", "answer_fallback")  # the run settings a build writes


def shipped_name(model: str | None) -> str | None:
    """The shipped model ``model`` names (case-insensitive), or None."""
    if not isinstance(model, str):
        return None
    name = model.strip().lower()
    return name if name in SHIPPED else None


def shipped_folder(name: str) -> Path:
    """The folder of the shipped model ``name`` (its ``model/``, pool and card)."""
    return SHIPPED[name]


def card_path(name: str) -> Path:
    return SHIPPED[name] / CARD


def read_card(name: str) -> dict[str, Any]:
    path = card_path(name)
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise IsosimError(f"model {name!r}: its card {path} is unreadable ({type(exc).__name__}); "
                          "reinstall isosim") from None
    if not isinstance(card, dict):
        raise IsosimError(f"model {name!r}: its card {path} is not a JSON object")
    return card


def run_defaults(model: str | None) -> dict[str, Any]:
    """The run settings the card of the shipped model ``model`` gives ({} for any other model)."""
    name = shipped_name(model)
    if name is None:
        return {}
    card = read_card(name)
    out = {k: card[k] for k in CARD_TOP_KEYS if k in card}
    block = card.get("run_defaults", {})
    if not isinstance(block, dict):
        raise IsosimError(f"model {name!r}: run_defaults in {card_path(name)} is not a mapping")
    out.update(block)
    return out


def run_threads(model: str | None) -> int | None:
    """Torch threads a run of the shipped model ``model`` uses (its card's ``run_threads``), or None."""
    name = shipped_name(model)
    if name is None:
        return None
    threads = read_card(name).get("run_threads")
    return int(threads) if isinstance(threads, int) and threads >= 1 else None


def apply_threads(model: str | None, log: Any = None) -> int | None:
    """Set torch's threads to the card's ``run_threads`` unless ``OMP_NUM_THREADS`` is set; the threads set."""
    import os

    threads = run_threads(model)
    if threads is None or os.environ.get("OMP_NUM_THREADS"):
        return None
    import torch

    torch.set_num_threads(threads)
    if log is not None:
        log(f"threads: {threads} (the {defaults_source(model)}; OMP_NUM_THREADS overrides it)")
    return threads


def defaults_source(model: str | None) -> str:
    """How a plan names where the card's settings came from: ``organism card (llm_runs/...)``."""
    name = shipped_name(model)
    if name is None:
        return ""
    path = card_path(name)
    try:
        path = path.relative_to(ORGANISM_ROOT.parents[1])
    except ValueError:
        pass
    return f"{name} card ({path})"


def with_defaults(model: str | None, settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``settings`` with the card's defaults under them: (merged settings, the defaults used)."""
    used = {k: v for k, v in run_defaults(model).items() if k not in settings}
    return {**used, **settings}, used
