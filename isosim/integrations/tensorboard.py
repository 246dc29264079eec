"""Read runs from TensorBoard event files with TensorBoard's own event reader.

A run is a folder of event files. The Hugging Face Trainer (and so TRL) writes them to
``<output_dir>/runs/<date>_<host>/``, a new folder each time a run starts or resumes; those folders
are read as one run named after ``<output_dir>``. verl writes ``tensorboard_log/<project>/<experiment>/``.
Scalars become a table of steps by tags; the JSON text the Hugging Face Trainer logs about its
arguments (``args/text_summary``) is the run's configuration. Nothing is unpickled.
Needs the ``tensorboard`` package (``pip install 'isosim[tensorboard]'``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from isosim.errors import IsosimError
from isosim.integrations._runs import LoggedRun

EVENT_GLOB = "events.out.tfevents.*"
ARGS_TAGS = ("args/text_summary", "args")


def find_event_files(root: Path) -> list[Path]:
    return sorted(p for p in Path(root).rglob(EVENT_GLOB) if p.is_file())


def _loader():
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util import tensor_util
    except ImportError:
        raise IsosimError("reading TensorBoard logs needs the tensorboard package: "
                          "pip install 'isosim[tensorboard]'") from None
    return EventFileLoader, tensor_util


def read_event_file(path: Path) -> tuple[list[tuple[float, int, str, float]], dict[str, str]]:
    """(wall_time, step, tag, value) of every scalar, and the last text logged under each tag."""
    EventFileLoader, tensor_util = _loader()
    scalars: list[tuple[float, int, str, float]] = []
    texts: dict[str, str] = {}
    try:
        for event in EventFileLoader(str(path)).Load():
            if not event.HasField("summary"):
                continue
            for v in event.summary.value:
                kind = v.WhichOneof("value")
                plugin = v.metadata.plugin_data.plugin_name
                if kind == "simple_value":
                    scalars.append((event.wall_time, int(event.step), v.tag, float(v.simple_value)))
                elif kind == "tensor" and plugin in ("scalars", ""):
                    arr = tensor_util.make_ndarray(v.tensor)
                    if arr.size == 1 and arr.dtype.kind in "fiub":
                        scalars.append((event.wall_time, int(event.step), v.tag, float(arr.reshape(-1)[0])))
                elif kind == "tensor" and plugin == "text":
                    arr = tensor_util.make_ndarray(v.tensor).reshape(-1)
                    if arr.size:
                        raw = arr[0]
                        texts[v.tag] = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    except IsosimError:
        raise
    except Exception as exc:  # a corrupt or foreign file: one line, not a traceback
        raise IsosimError(f"{path}: cannot read TensorBoard events ({type(exc).__name__}: {exc})") from None
    return scalars, texts


def _config(texts: dict[str, str]) -> dict:
    for tag in ARGS_TAGS:
        if tag in texts:
            try:
                cfg = json.loads(texts[tag])
            except ValueError:
                continue
            if isinstance(cfg, dict):
                return cfg
    return {}


def run_root(event_dir: Path, root: Path) -> Path:
    """The Hugging Face layout <output_dir>/runs/<stamp>/ is one run: <output_dir>."""
    if event_dir.parent.name == "runs" and event_dir.parent != root and event_dir != root:
        return event_dir.parent.parent
    return event_dir


def read_runs(root: str | Path) -> list[LoggedRun]:
    """Every run under ``root`` (a folder of runs, one run, or one event file's folder)."""
    root = Path(root)
    files = find_event_files(root) if root.is_dir() else [root]
    groups: dict[Path, list[Path]] = {}
    for f in files:
        groups.setdefault(run_root(f.parent, root), []).append(f)
    runs = []
    for run_dir, run_files in sorted(groups.items()):
        rows: list[tuple[float, int, str, float]] = []
        texts: dict[str, str] = {}
        for f in run_files:
            s, t = read_event_file(f)
            rows += s
            texts.update(t)
        name = run_dir.name if run_dir == root else run_dir.relative_to(root).as_posix()
        if rows:
            long = pd.DataFrame(rows, columns=["wall_time", "step", "tag", "value"])
            # a resumed run logs some steps again: the later value wins
            long = long.sort_values("wall_time", kind="stable").drop_duplicates(["step", "tag"], keep="last")
            table = long.pivot(index="step", columns="tag", values="value").sort_index()
            table.columns.name = None
        else:
            table = pd.DataFrame(index=pd.Index([], name="step", dtype=int))
        runs.append(LoggedRun(name=name, scalars=table, config=_config(texts), origin=str(run_dir)))
    return runs
