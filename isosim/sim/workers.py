"""A second process for :func:`isosim.sim.engine.simulate` (``workers=2``): batches of runs are
independent computations, so some of a call's batches can step in a helper process on another core
while the caller steps the others.

The helper is a plain ``python -m isosim.sim.engine.serve`` child started on first use and kept for
the rest of the caller's life (its imports, about 2 s, are paid once, while the caller steps its own
batches); it reads pickled requests on its stdin and answers on its stdout: progress (the rollouts of
each batched step, a few times a second) and the records' rows, or an error line. Once warm it also
takes half of a list of calls whose values do not depend on the process (:func:`beside`: the
frontier analyses of a sweep's B_p). A batch computes
the same numbers in either process (the same code, one torch thread, each run's own generators), so
the records do not depend on where a batch ran. It serves one call at a time: a call that finds it
busy (another thread's), or finds none that can start, or loses it before the answer, steps those
batches itself.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from isosim.errors import IsosimError

STARTUP_S = 2.0
"""what starting the helper costs before its first step (imports: torch, isosim), in the units of
:func:`batch_cost`"""
SEND_EVERY_S = 0.1
"""the helper sends its progress at most this often"""


def batch_cost(batch: Sequence) -> float:
    """About the seconds one batch takes on one core of the 2-core machine: a fixed cost per batched
    step and one per (run, problem) step, which is dear with dense memorisation features (a padded or
    real problem slot gathers and multiplies ``K x mem_dim`` rows) and cheap otherwise."""
    dense = any(c.dense_features for c in batch)
    per_slot = 1.4e-6 * max(c.responses * c.mem_dim for c in batch) / 1024 if dense else 1e-7
    return 1e-4 * max(c.total_steps for c in batch) + per_slot * sum(c.total_steps * c.b_p for c in batch)


def split(batches: list[list], warm: bool) -> tuple[list[int], list[int]]:
    """Which batches the caller steps and which the helper does (indices): longest first, each to the
    side that will be free first, the helper starting late by ``STARTUP_S`` unless ``warm``."""
    load = [0.0, 0.0 if warm else STARTUP_S]
    sides: tuple[list[int], list[int]] = ([], [])
    for i in sorted(range(len(batches)), key=lambda i: -batch_cost(batches[i])):
        side = 0 if load[0] <= load[1] else 1
        sides[side].append(i)
        load[side] += batch_cost(batches[i])
    return sides


class HelperGone(IsosimError):
    """The helper process could not start or stopped before answering (the caller steps its batches itself)."""


class Helper:
    """The helper process and a thread reading its answers."""

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[2])  # the folder holding this isosim package
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "isosim.sim.engine.serve"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=env)
        except OSError as exc:
            raise HelperGone(f"the helper process could not start ({exc})") from None
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def start(self, batches: list[list], device: str, dtype, threads: int | None,
              progress: Callable[[float], None] | None) -> Callable[[], list[dict]]:
        """Send the batches; return a function that waits for their rows (calling ``progress``, under
        the caller's lock, from a reader thread meanwhile)."""
        return self._send(("run", batches, device, dtype, threads, progress is not None, tuple(_WARM)), "rows",
                          progress, "simulate")

    def call(self, target: str, args: tuple) -> Callable[[], Any]:
        """Send a call of ``target`` (``"module:function"``, importable in the helper) with ``args``
        (picklable); return a function that waits for its value."""
        return self._send(("call", target, args), "result", None, target)

    def _send(self, request: tuple, answer: str, progress: Callable[[float], None] | None,
              what: str) -> Callable[[], Any]:
        if not self.lock.acquire(blocking=False):  # another thread of the caller's is using it
            raise HelperGone("the helper process is busy")
        box: dict = {}

        def read() -> None:
            try:
                while True:
                    kind, value = pickle.load(self.proc.stdout)
                    if kind == "progress":
                        if progress is not None:
                            for r in value:
                                progress(r)
                        continue
                    box[kind] = value
                    return
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                box["stopped"] = f"the helper process stopped ({type(exc).__name__})"

        try:
            pickle.dump(request, self.proc.stdin)
            self.proc.stdin.flush()
        except OSError as exc:
            self.lock.release()
            close()
            raise HelperGone(f"the helper process stopped ({type(exc).__name__})") from None
        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def wait() -> Any:
            reader.join()
            self.lock.release()
            if "stopped" in box:
                close()
                raise HelperGone(box["stopped"])
            if "error" in box:  # the engine's error in the helper, which goes on serving
                raise IsosimError(f"{what} (in the helper process): {box['error']}")
            return box[answer]

        return wait

    def stop(self, now: bool = False, wait: bool = True) -> None:
        """End the helper: at once (``now``, e.g. when the caller was interrupted mid-call), or once it
        has read the end of its input; without ``wait`` (the caller is exiting) it ends on its own, on
        the other core, while the caller goes on (its exit, about 0.5 s, is then nobody's wait)."""
        if now and self.alive():
            self.proc.kill()
        if self.alive():
            try:
                self.proc.stdin.close()
                if not wait:
                    return
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.proc.wait()


_HELPER: Helper | None = None
_GUARD = threading.Lock()
_WARM: list[str] = []
"""modules the helper imports once idle after a simulation (:func:`warm_after`)"""


def warm_after(*modules: str) -> None:
    """Have the helper import ``modules`` once it has answered a simulation, while the caller may still
    be stepping: what the caller will send it next through :func:`beside` (e.g. the frontier analysis)
    is then ready. Named, not imported, here: the engine's layer does not depend on them."""
    _WARM.extend(m for m in modules if m not in _WARM)


def helper() -> tuple[Helper, bool]:
    """The helper process (started now if none is running) and whether it was already running."""
    global _HELPER
    with _GUARD:
        if _HELPER is not None and _HELPER.alive():
            return _HELPER, True
        _HELPER = Helper()
        return _HELPER, False


def running() -> bool:
    return _HELPER is not None and _HELPER.alive()


def resolve(target: str) -> Callable:
    """The function ``"module:function"`` names (imported here, or in the helper)."""
    import importlib

    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def share(send: Callable[[], Callable[[], list]], mine: Callable[[], list], theirs: Callable[[], list]) -> list:
    """``mine()`` here while the helper computes what ``send()`` sent it (``send`` returns the wait for
    its values), then those values after mine. Where no helper takes the work (``send`` raises
    :class:`HelperGone`) or it stops before answering, ``theirs()`` computes its share here; Ctrl-C or an
    error here ends the helper at once (its answer is not wanted any more)."""
    try:
        wait = send()
    except HelperGone:
        return mine() + theirs()
    try:
        got = mine()
    except BaseException:
        close(now=True)
        raise
    try:
        return got + list(wait())
    except HelperGone:
        return got + theirs()


def beside(target: str, calls: list[tuple]) -> list:
    """``function(*args)`` for each ``args`` of ``calls`` (``target``: ``"module:function"``), in order:
    the second half in the helper process when one is running and free (it is already warm from a
    simulation: starting one for this would cost more than it saves), the rest here meanwhile. For
    work whose result does not depend on the process (the same code on the same numbers), like a
    frontier analysis. A helper that is busy, gone or stops leaves its calls to this process."""
    fn = resolve(target)
    here, there = calls[: len(calls) // 2], calls[len(calls) // 2:]
    if not (here and running()):  # (one call alone is made here: nothing would run beside it)
        return [fn(*args) for args in calls]
    return share(lambda: _HELPER.call(target, tuple(there)), lambda: [fn(*args) for args in here],
                 lambda: [fn(*args) for args in there])


def close(now: bool = False, wait: bool = True) -> None:
    """Stop the helper (after it failed, at once with ``now``, or at exit without ``wait``)."""
    global _HELPER
    if _HELPER is not None:
        _HELPER.stop(now, wait)
        _HELPER = None


@atexit.register
def _at_exit() -> None:
    """At the caller's exit an idle helper reads the end of its input and exits by itself."""
    close(wait=False)
