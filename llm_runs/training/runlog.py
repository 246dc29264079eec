"""The run folder: config.json, append-only JSON Lines logs, and atomic checkpoints.

::

    OUT/
      config.json          the full RunConfig (written when a run starts afresh)
      records.jsonl        one row per evaluation point (isosim.records columns), append-only
      metrics.jsonl        one row per step (see docs/real_runs.md for the keys)
      checkpoint/          the latest complete checkpoint (Accelerate state + trainer_state.json)
      checkpoint.old/      exists only while a newer checkpoint is being swapped in
      .lock                held (flock) by the process training the run: a second one waits for it

Kill safety (SIGKILL at any instant): a checkpoint is written into ``checkpoint.tmp/``, its
``trainer_state.json`` last, then swapped in by two renames; a folder counts only if it holds
``trainer_state.json``. The trainer state records the byte sizes of both logs at that moment; on
resume the logs are cut back to those sizes, so lines written after the checkpoint (or half a
line) disappear and are written again, identically, when the steps are replayed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from isosim import files
from isosim.errors import IsosimError

STATE_FILE = "trainer_state.json"
# Settings that may change between a run and its resumption: they do not change its results.
RESUMABLE_CHANGES = frozenset({
    "overwrite", "save_every", "tensorboard", "save_final_model", "reward_workers", "sampler_batch_size",
    "vllm_gpu_memory_utilization", "vllm_sleep", "micro_batch_size", "gradient_checkpointing", "out",
    "pause_at_rollouts",
})


class JsonlLog:
    """An append-only JSON Lines file that can be cut back to a byte size on resume."""

    def __init__(self, path: Path, fsync: bool = False):
        self.path, self.fsync = Path(path), fsync

    def append(self, row: dict[str, Any]) -> None:
        line = files.dumps_json(row)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def truncate(self, size: int) -> None:
        if not self.path.exists():
            if size:
                raise IsosimError(f"{self.path}: missing, but the checkpoint expects {size} bytes")
            self.path.touch()
            return
        if self.size() < size:
            raise IsosimError(f"{self.path}: shorter than the checkpoint expects ({self.size()} < {size} bytes)")
        with self.path.open("r+b") as fh:
            fh.truncate(size)

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]


# settings added after runs were saved without them: a missing one reads as its default
ADDED_SETTINGS = {"train_forward": "hf", "allocation": "uniform"}


def config_diff(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    keys = (set(saved) | set(current)) - RESUMABLE_CHANGES
    saved = {**ADDED_SETTINGS, **saved}
    return [f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in sorted(keys) if saved.get(k) != current.get(k)]


def find_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint folder in ``out`` (one holding trainer_state.json), if any."""
    for name in ("checkpoint", "checkpoint.old"):
        path = out / name
        if (path / STATE_FILE).is_file():
            return path
    return None


def read_state(ckpt: Path) -> dict[str, Any]:
    try:
        return json.loads((ckpt / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IsosimError(f"{ckpt}: unreadable checkpoint ({type(exc).__name__}: {exc})") from None


def write_state(folder: Path, state: dict[str, Any]) -> None:
    # (the state as json.dumps writes it: the trainer reads back exactly what it saved)
    files.atomic_write_text(folder / STATE_FILE, json.dumps(state))


def commit_checkpoint(out: Path, tmp: Path) -> Path:
    """Swap ``tmp`` in as ``out/checkpoint`` (two renames; see the module docstring)."""
    final, old = out / "checkpoint", out / "checkpoint.old"
    if old.exists() and final.exists():
        shutil.rmtree(old)
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    if old.exists():
        shutil.rmtree(old)
    return final


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a run folder's JSON file: :func:`isosim.files.write_json` (atomic with fsync, no NaN
    literals), in the run folder's layout (indent 2, sorted keys)."""
    files.write_json(path, data, indent=2, sort_keys=True, mkdir=False)


def read_state_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IsosimError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise IsosimError(f"{path}: expected a JSON object")
    return data


@contextlib.contextmanager
def run_lock(out: str | Path, log: Callable[[str], None]) -> Iterator[None]:
    """Hold ``OUT/.lock`` while training: a rerun started while a stopped run is still writing its
    checkpoint (e.g. after its launcher was killed) waits for it instead of racing it. POSIX, and
    the first process of a run only (``RANK`` 0); elsewhere a no-op."""
    if os.name != "posix" or int(os.environ.get("RANK", "0") or 0) != 0:
        yield
        return
    import fcntl

    Path(out).mkdir(parents=True, exist_ok=True)
    with open(Path(out) / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"{out}: another process is training this run; waiting for it to stop")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield
