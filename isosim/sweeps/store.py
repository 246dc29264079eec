"""The sweep store: a folder that a plan fills chunk by chunk, killable and resumable at any
moment (:func:`run_sweep`, :func:`store_status`, :func:`load_store`); see :mod:`isosim.sweeps.sweep`."""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from isosim.errors import IsosimError
from isosim.files import atomic_write, atomic_write_text, dumps_json, is_tmp_name
from isosim.records import normalize
from isosim.sim.config import SimConfig
from isosim.sweeps.plans import SweepPlan, run_rollouts

STORE_FORMAT = 1

# --- chunking of the store -----------------------------------------------------------------
# A chunk is one engine call and the unit of loss on a kill. Its wall time is at least its
# longest run's and grows with the run-steps it holds (sum over runs of their steps), so the
# default cuts on runs and run-steps: the engine's step costs about 1-2 ms on CPU whatever the
# number of runs in the batch (up to a few dozen), so big chunks are cheap.
CHUNK_MAX_RUNS = {"cpu": 32, "cuda": 128}
"""most runs in one chunk by default, per device kind"""
CHUNK_MAX_RUN_STEPS = {"cpu": 1_000_000, "cuda": 4_000_000}
"""most run-steps (summed over the chunk's runs) in one chunk by default, per device kind: a
chunk batches well (one step of many runs costs little more than one) and a kill loses at most
one chunk (about a minute or two on 2 CPU cores)"""

_CHUNK_RE = re.compile(r"^chunk-(\d{5,})\.parquet$")

# ===========================================================================================
# The store
# ===========================================================================================

SimulateFn = Callable[..., pd.DataFrame]


_HELD: set[Path] = set()
"""the stores whose lock this process holds (a nested hold of one of them is a no-op)"""


@contextlib.contextmanager
def hold(out_dir: str | Path, wait: bool = False) -> Iterator[None]:
    """Hold the store ``out_dir``'s lock for a whole command (filling it, then writing the report
    into it): another process that opens the store meanwhile is refused (or waits, ``wait``), so it
    never tidies away what this one is still writing. Nested holds in one process are free."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with _store_lock(out_dir, wait=wait):
        yield


@contextlib.contextmanager
def _store_lock(out_dir: Path, wait: bool = False) -> Iterator[None]:
    """Hold ``out_dir/.lock`` (flock) so that two processes never fill one store at once.

    ``wait``: when another process holds the lock, block until it is released (then the store
    holds that process's finished runs) instead of raising. The kernel drops the lock when its
    holder dies, SIGKILL included. A process that holds it already holds it again for free.
    """
    key = out_dir.resolve()
    if key in _HELD:
        yield
        return
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; one process per store is on the user
        yield
        return
    fh = open(out_dir / ".lock", "a+b")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if not wait:
                raise IsosimError(f"folder {out_dir} is in use by another running sweep; "
                                  "wait for it or use a new --out") from None
            print(f"waiting for another process that is filling {out_dir} ...", file=sys.stderr, flush=True)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
    finally:
        fh.close()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise IsosimError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None


def _read_plan(out_dir: Path) -> SweepPlan | None:
    path = out_dir / "plan.json"
    if not path.exists():
        return None
    try:
        text = path.read_text()
    except OSError as exc:
        raise IsosimError(f"{path}: cannot read ({exc})") from None
    return SweepPlan.from_json(text, source=str(path))


def _empty_manifest(plan_id: str) -> dict:
    return {"format": STORE_FORMAT, "plan_id": plan_id, "chunks": []}


def _read_manifest(out_dir: Path, plan_id: str) -> dict:
    path = out_dir / "manifest.json"
    if not path.exists():
        return _empty_manifest(plan_id)
    man = _read_json(path)
    if not isinstance(man, dict) or not isinstance(man.get("chunks"), list):
        raise IsosimError(f"{path}: not a sweep manifest")
    if man.get("format") != STORE_FORMAT:
        raise IsosimError(f"{path}: unknown store format {man.get('format')!r} (this isosim reads {STORE_FORMAT})")
    if man.get("plan_id") != plan_id:
        raise IsosimError(f"{path}: belongs to plan {man.get('plan_id')}, but plan.json is plan {plan_id}")
    return man


def _open_store(out_dir: Path, plan: SweepPlan) -> dict:
    """Create the store or check that it holds ``plan``; return its manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "records").mkdir(exist_ok=True)
    held = _read_plan(out_dir)
    if held is None:
        if (out_dir / "manifest.json").exists():
            raise IsosimError(f"folder {out_dir} has a manifest.json but no plan.json; "
                              "it is damaged or not a sweep: use a new --out")
        atomic_write_text(out_dir / "plan.json", plan.to_json())
    elif held.plan_id != plan.plan_id:
        raise IsosimError(f"folder {out_dir} holds a sweep of another plan (id {held.plan_id}, "
                          f"this one is {plan.plan_id}); use a new --out")
    return _read_manifest(out_dir, plan.plan_id)


def _tidy_records(out_dir: Path, manifest: dict) -> dict:
    """Delete what the manifest does not vouch for; drop manifest entries whose file is gone.

    Only called with the store's lock held, so no other process is writing here.
    """
    rec = out_dir / "records"
    listed = {Path(c["file"]).name for c in manifest["chunks"]}
    for p in rec.iterdir():
        if is_tmp_name(p):
            p.unlink()  # a write that a kill interrupted
        elif _CHUNK_RE.match(p.name) and p.name not in listed:
            p.unlink()  # finished but never listed: its runs are redone
    for p in out_dir.iterdir():
        if is_tmp_name(p):
            p.unlink()
    kept = [c for c in manifest["chunks"] if (out_dir / c["file"]).exists()]
    if len(kept) != len(manifest["chunks"]):
        manifest = {**manifest, "chunks": kept}
        atomic_write_text(out_dir / "manifest.json", dumps_json(manifest, indent=1))
    return manifest


def plan_chunks(
    configs: Sequence[SimConfig],
    chunk_size: int | None = None,
    *,
    device: str = "cpu",
) -> list[list[SimConfig]]:
    """Split runs into chunks that the engine can batch, one engine call each.

    Runs are grouped by ``cfg.batch_key`` (groups in order of first appearance), sorted inside
    a group by length (steps) so that a chunk's runs finish together, then cut greedily: at
    most ``chunk_size`` runs per chunk, or by default at most ``CHUNK_MAX_RUNS`` runs and
    ``CHUNK_MAX_RUN_STEPS`` run-steps for the device kind (a run longer than that is a chunk of
    its own). Cutting is prefix-stable: once the first k chunks are done, the remaining runs are
    cut into the same chunks as before, so a resumed sweep batches runs as an uninterrupted one.
    """
    if chunk_size is not None and (int(chunk_size) != chunk_size or chunk_size < 1):
        raise IsosimError(f"chunk_size must be an integer >= 1 (got {chunk_size!r})")
    kind = "cpu" if str(device).startswith("cpu") else "cuda"
    max_runs = int(chunk_size) if chunk_size is not None else CHUNK_MAX_RUNS[kind]
    max_steps = float("inf") if chunk_size is not None else CHUNK_MAX_RUN_STEPS[kind]
    groups: dict[tuple, list[SimConfig]] = {}
    for cfg in configs:
        groups.setdefault(cfg.batch_key, []).append(cfg)
    chunks: list[list[SimConfig]] = []
    for group in groups.values():
        group = sorted(group, key=lambda c: (c.total_steps, c.b_p * c.n, c.n, c.run_id))
        cur: list[SimConfig] = []
        cur_steps = 0
        for cfg in group:
            if cur and (len(cur) >= max_runs or cur_steps + cfg.total_steps > max_steps):
                chunks.append(cur)
                cur, cur_steps = [], 0
            cur.append(cfg)
            cur_steps += cfg.total_steps
        if cur:
            chunks.append(cur)
    return chunks


def _next_index(manifest: dict) -> int:
    idx = [int(m.group(1)) for c in manifest["chunks"] if (m := _CHUNK_RE.match(Path(c["file"]).name))]
    return max(idx, default=-1) + 1


def _default_simulate() -> SimulateFn:
    try:
        from isosim.sim.engine import simulate
    except ImportError as exc:
        raise IsosimError(f"the simulator engine is not available ({exc})") from None
    return simulate


def _check_chunk(df: Any, chunk: Sequence[SimConfig], where: str) -> pd.DataFrame:
    """The engine's records for one chunk, validated: every run there, no stranger."""
    if not isinstance(df, pd.DataFrame):
        raise RuntimeError(f"{where}: the engine returned {type(df).__name__}, not a DataFrame")
    df = normalize(df, source=where)
    want = {c.run_id for c in chunk}
    got = set(df["run_id"].unique())
    if got != want:
        missing, extra = sorted(want - got), sorted(got - want)
        raise RuntimeError(f"{where}: the engine's records do not match the chunk's runs "
                           f"(missing {missing[:3]}, unexpected {extra[:3]})")
    return df


STEP_OVERHEAD = 2
"""cost of one batched engine step beyond its runs', in run-steps: a chunk's step costs about
``STEP_OVERHEAD + runs still in the batch`` run-steps (fitted to the wall time of the easy q1
sweep's 27 runs to 1e6-4e6 rollouts on 2 CPU cores, 2026-12-06). Progress is counted in this
cost, not in rollouts: the large-n runs spend most rollouts in a few cheap steps and leave the
batch early, so a bar in rollouts ran to ~90 % in the first half of the time and its ETA read
about 5x too low."""
LOG_EVERY_S = 10.0
"""seconds between the plain progress lines written when no terminal shows a bar"""


def progress_line(description: str, share: float, rollouts: float, total_rollouts: float, elapsed: float,
                  left: str) -> str:
    """A plain progress line: the share of the simulation time done (what the ETA follows) and,
    apart, the rollouts simulated with their own share (the two differ: see ``STEP_OVERHEAD``)."""
    spent = rollouts / total_rollouts if total_rollouts else 1.0
    return (f"{description}: {share:.0%} of the simulation time done; {rollouts:.3g} of {total_rollouts:.3g} "
            f"rollouts ({spent:.0%}) simulated, {elapsed:.0f} s elapsed, {left}")


def chunk_cost(chunk: Sequence[SimConfig]) -> float:
    """A chunk's simulation cost in run-steps, as the engine spends it (see ``STEP_OVERHEAD``)."""
    return STEP_OVERHEAD * max((c.total_steps for c in chunk), default=0) + sum(c.total_steps for c in chunk)


class _Bar:
    """Progress of a sweep, counted in simulation cost (run-steps, see ``STEP_OVERHEAD``) and shown
    with the rollouts spent: a rich bar with an ETA on a terminal, else (with ``log``) a start line
    at once and a plain line every ``LOG_EVERY_S`` seconds, or nothing."""

    def __init__(self, enabled: bool, total: float, done: float, rollouts: float, total_rollouts: float,
                 description: str, log: Callable[[str], None] | None = None) -> None:
        self.progress = None
        self.log = None
        self.total, self.done, self.rollouts, self.total_rollouts = total, done, rollouts, total_rollouts
        self.description = description
        self.chunk_steps: list[int] = []
        self.chunk_cost = self.chunk_start = 0.0
        self.step = 0
        self.t0 = self.last_line = time.perf_counter()
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        if not console.is_terminal and not console.is_jupyter:
            self.log = log
            return
        self.progress = Progress(
            TextColumn("[progress.description]{task.description}"), BarColumn(),
            TextColumn("{task.fields[rollouts]:.3g}/{task.fields[total_rollouts]:.3g} rollouts"),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=console, transient=False,
        )
        self.task = self.progress.add_task(description, total=total, completed=done, rollouts=rollouts,
                                           total_rollouts=total_rollouts)

    def __enter__(self) -> "_Bar":
        if self.progress is not None:
            self.progress.start()
        if self.log is not None:
            self.log(f"{self.description}: simulating {self.total_rollouts - self.rollouts:.3g} of "
                     f"{self.total_rollouts:.3g} rollouts (a progress line every {LOG_EVERY_S:g} s)")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def fraction(self) -> float:
        """Share of the sweep's simulation cost done."""
        return self.done / self.total if self.total else 1.0

    def start_chunk(self, chunk: Sequence[SimConfig]) -> None:
        self.chunk_steps = sorted(c.total_steps for c in chunk)
        self.chunk_cost, self.chunk_start, self.step = chunk_cost(chunk), self.done, 0

    @property
    def callback(self) -> Callable[[float], None] | None:
        if self.progress is None and self.log is None:
            return None
        import bisect

        def advance(rollouts: float) -> None:  # the engine calls it once per batched step
            alive = len(self.chunk_steps) - bisect.bisect_left(self.chunk_steps, self.step + 1)
            self.step += 1
            self.done = min(self.done + STEP_OVERHEAD + alive, self.chunk_start + self.chunk_cost)
            self.rollouts += float(rollouts)
            self._show()

        return advance

    def set(self, done: float, rollouts: float) -> None:
        self.done, self.rollouts = done, rollouts
        self._show()

    def _show(self) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=self.done, rollouts=self.rollouts)
            return
        now = time.perf_counter()
        if self.log is None or now - self.last_line < LOG_EVERY_S:
            return
        self.last_line = now
        f, elapsed = self.fraction(), now - self.t0
        left = f"about {elapsed * (1 - f) / f:.0f} s left" if 0 < f < 1 else "finishing"
        self.log(progress_line(self.description, f, self.rollouts, self.total_rollouts, elapsed, left))


def run_sweep(
    plan: SweepPlan,
    out_dir: str | Path,
    *,
    device: str = "cpu",
    chunk_size: int | None = None,
    progress: bool = True,
    simulate_fn: SimulateFn | None = None,
    wait: bool = False,
    log: Callable[[str], None] | None = None,
    workers: int = 1,
) -> pd.DataFrame:
    """Run every run of ``plan`` not yet in the store ``out_dir``; return all its records.

    Resumable: kill it at any moment and call it again with the same plan and folder; finished
    chunks are kept, unfinished ones redone (see the module docstring for the layout and the
    guarantees). ``chunk_size`` caps the runs per engine call (default: see
    :func:`plan_chunks`). ``simulate_fn`` replaces
    ``isosim.sim.engine.simulate`` (tests inject a fake). Raises IsosimError when ``out_dir`` holds
    another plan, or when another process is filling it and ``wait`` is false (with ``wait``: waits
    for that process, then runs what it left undone, usually nothing). ``progress`` shows a bar
    (ETA from the simulation cost, see ``STEP_OVERHEAD``) when stderr is a terminal; where it is
    not, ``log`` (if given) receives a start line at once and a progress line every ``LOG_EVERY_S``
    seconds. ``workers`` 2 steps a chunk's batches on two cores (``simulate``'s helper process,
    started before the engine is imported here so that its imports overlap this process's).
    """
    out_dir = Path(out_dir)
    simulate = simulate_fn  # the engine (torch) is imported only when something is left to simulate
    configs = plan.configs()
    ids = [c.run_id for c in configs]
    if len(set(ids)) != len(ids):
        raise IsosimError(f"plan {plan.plan_id} names some run twice (duplicate run_id)")
    out_dir.mkdir(parents=True, exist_ok=True)
    with _store_lock(out_dir, wait=wait):
        manifest = _open_store(out_dir, plan)
        manifest = _tidy_records(out_dir, manifest)
        done = {rid for c in manifest["chunks"] for rid in c["run_ids"]}
        todo = [c for c in configs if c.run_id not in done]
        total = sum(run_rollouts(c) for c in configs)
        spent = total - sum(run_rollouts(c) for c in todo)
        chunks = plan_chunks(todo, chunk_size, device=device)
        cost = sum(chunk_cost(c) for c in plan_chunks(configs, chunk_size, device=device))
        done_cost = max(cost - sum(chunk_cost(c) for c in chunks), 0.0)
        index = _next_index(manifest)
        if workers > 1 and chunks and simulate is None and str(device).startswith("cpu"):
            from isosim.sim import workers as helper  # (no torch: the helper imports it, in parallel)

            helper.helper()
        with _Bar(progress, cost, done_cost, spent, total, f"sweep {plan.plan_id}", log) as bar:
            for chunk in chunks:
                name = f"chunk-{index:05d}.parquet"
                t0 = time.perf_counter()
                bar.start_chunk(chunk)
                simulate = simulate or _default_simulate()
                df = simulate(list(chunk), device=device, progress=bar.callback,
                              **({"workers": workers} if workers > 1 else {}))
                df = _check_chunk(df, chunk, f"{out_dir}/records/{name}")
                atomic_write(out_dir / "records" / name, lambda fh: df.to_parquet(fh, index=False))
                manifest["chunks"].append({
                    "file": f"records/{name}",
                    "run_ids": [c.run_id for c in chunk],
                    "rows": int(len(df)),
                    "device": device,
                    "seconds": round(time.perf_counter() - t0, 3),
                })
                atomic_write_text(out_dir / "manifest.json", dumps_json(manifest, indent=1))
                spent += sum(run_rollouts(c) for c in chunk)
                done_cost += chunk_cost(chunk)
                bar.set(done_cost, spent)
                index += 1
        if not (out_dir / "manifest.json").exists():  # nothing to run and no manifest yet
            atomic_write_text(out_dir / "manifest.json", dumps_json(manifest, indent=1))
    _, records = load_store(out_dir)
    return records


def store_status(out_dir: str | Path) -> dict:
    """What a store holds: plan_id, runs finished and planned, chunks written."""
    out_dir = Path(out_dir)
    plan = _read_plan(out_dir)
    if plan is None:
        raise IsosimError(f"folder {out_dir} holds no sweep (no plan.json)")
    manifest = _read_manifest(out_dir, plan.plan_id)
    done = {rid for c in manifest["chunks"] for rid in c["run_ids"]}
    return {"plan_id": plan.plan_id, "runs_done": len(done), "runs": plan.n_runs,
            "chunks": len(manifest["chunks"]), "complete": len(done) >= plan.n_runs}


def load_store(out_dir: str | Path) -> tuple[SweepPlan, pd.DataFrame]:
    """The plan and every finished record of the store ``out_dir``.

    Reads only the chunks that ``manifest.json`` lists, checks each against its entry (run_ids
    and row count), drops duplicate ``(run_id, step)`` rows defensively and validates the table
    with ``records.normalize`` (sorted by run_id, rollouts). A store with no finished run yet
    raises IsosimError.
    """
    out_dir = Path(out_dir)
    plan = _read_plan(out_dir)
    if plan is None:
        raise IsosimError(f"folder {out_dir} holds no sweep (no plan.json)")
    manifest = _read_manifest(out_dir, plan.plan_id)
    frames = []
    for entry in manifest["chunks"]:
        path = out_dir / entry["file"]
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises many kinds; the user needs one line
            raise IsosimError(f"{path}: cannot read a chunk the manifest lists "
                              f"({type(exc).__name__}: {exc})") from None
        if len(df) != entry["rows"] or set(df["run_id"].astype(str)) != set(entry["run_ids"]):
            raise IsosimError(f"{path}: does not match its manifest entry (rows or run_ids differ)")
        frames.append(df)
    if not frames:
        raise IsosimError(f"folder {out_dir} holds no finished run yet")
    records = pd.concat(frames, ignore_index=True)
    records = normalize(records, source=str(out_dir))
    records = records.drop_duplicates(["run_id", "step"], keep="first").reset_index(drop=True)
    return plan, records
