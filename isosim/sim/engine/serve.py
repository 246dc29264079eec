"""The helper process of :mod:`isosim.sim.workers` (``python -m isosim.sim.engine.serve``): it steps the
batches a caller sends (pickled, on stdin) and answers on stdout with their progress and record rows, or
an error line; or calls a function of the caller's (``workers.beside``) and answers its values."""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import time

from isosim.sim.engine.batch import run_batches
from isosim.sim.workers import SEND_EVERY_S, resolve


def _serve() -> None:
    """The helper's loop: one request at a time from stdin, answers on the original stdout (anything
    else the engine prints goes to stderr)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle: it ends the helper
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        try:
            request = pickle.load(inp)
        except EOFError:  # the caller is done (or gone): every answer is flushed, nothing is left to tidy
            sys.stderr.flush()
            os._exit(0)  # (as multiprocessing's children end: the interpreter's teardown would hold the caller's stderr)
        if request[0] == "call":  # a function of the caller's on its own arguments (workers.beside)
            _call(request[1], request[2], out)
            continue
        _, batches, device, dtype, threads, with_progress, warm = request
        pending: list[float] = []
        last = [time.perf_counter()]

        def progress(rollouts: float) -> None:
            pending.append(rollouts)
            now = time.perf_counter()
            if now - last[0] >= SEND_EVERY_S:
                pickle.dump(("progress", pending[:]), out)
                out.flush()
                pending.clear()
                last[0] = now

        try:
            rows = run_batches(batches, device, dtype, threads, progress if with_progress else None)
        except Exception as exc:  # the caller needs one line; the helper keeps serving
            pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
        else:
            if pending:
                pickle.dump(("progress", pending), out)
            pickle.dump(("rows", rows), out)
        out.flush()
        _warm(warm)


def _warm(modules: tuple[str, ...]) -> None:
    """Import, while idle after a simulation, the modules the caller said it will call next
    (``workers.warm_after``: e.g. the frontier analysis, scipy's fits, about 0.3 s), so that the call
    does not wait for them. One that cannot be imported is left to the call to report."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _call(target: str, calls: tuple, out) -> None:
    """Answer the values of ``module:function`` on each of ``calls``' argument tuples, or an error line."""
    try:
        fn = resolve(target)
        values = [fn(*args) for args in calls]
    except Exception as exc:  # the caller needs one line; the helper keeps serving
        pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
    else:
        pickle.dump(("result", values), out)
    out.flush()


if __name__ == "__main__":
    try:
        _serve()
    except BrokenPipeError:  # the caller is gone
        sys.exit(1)
