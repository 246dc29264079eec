"""A validation plan and its runs (:class:`ValidationPlan`, :class:`RunSpec`): what
``isosim validate`` makes (:mod:`validate`) and the launchers run (:mod:`launchers`), below both."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunSpec:
    name: str
    n: int
    b_p: int
    seed: int
    steps: int
    lr: float
    dir: str
    config: dict[str, Any] = field(repr=False)

    @property
    def config_path(self) -> Path:
        return Path(self.dir) / "config.json"


@dataclass
class ValidationPlan:
    request: dict[str, Any]  # what the user asked for (a rerun must ask the same to resume)
    predicted: dict[str, Any]
    ns: list[int]
    b_p: int
    notes: list[str]
    runs: list[RunSpec]
    out: str
    b_max: int | None = None
    min_steps: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ValidationPlan:
        d = dict(d)
        d["runs"] = [RunSpec(**r) for r in d["runs"]]
        return cls(**d)
