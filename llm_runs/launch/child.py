"""One training process run from ``isosim validate``: its progress relayed, and a stop passed on.

:func:`run_child` starts the trainer in a process group of its own and waits for it, printing a
line every :data:`PROGRESS_EVERY_S` seconds (the run's step, from its records and checkpoint, and
the last line of its log), also when the output is piped to a file. SIGTERM or SIGINT (Ctrl-C)
to ``validate`` is passed to the trainer's whole process group as SIGTERM: the trainer ends its
step (or drops an evaluation under way), checkpoints where it can, and exits; after
:data:`STOP_GRACE_S` seconds the group is killed. On Linux the trainer also gets SIGTERM when
``validate`` itself dies (``kill -9``), so no training process is ever left running on its own.
A rerun of the same command resumes from the checkpoints.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

PROGRESS_EVERY_S = 15.0
STOP_GRACE_S = 20.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(KeyboardInterrupt):
    """``validate`` was asked to stop (SIGTERM / SIGINT); the trainer has stopped too."""


def _die_with_parent() -> None:  # in the child, before exec (Linux: PR_SET_PDEATHSIG = 1)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _last_line(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            lines = [ln for ln in fh.read().decode("utf-8", "replace").splitlines()
                     if ln.strip() and not ln.startswith(("[RANK", "#")) and "warn" not in ln.lower()]
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(cmd: list[str], out: IO[str], *, env: dict[str, str], log: Callable[[str], None],
              head: str, progress: Callable[[], str], log_path: Path,
              every_s: float = PROGRESS_EVERY_S, grace_s: float = STOP_GRACE_S) -> int:
    """Run ``cmd`` (output to ``out``) to its end and return its exit code; raise :class:`Stopped`
    once the trainer has stopped when a stop signal came. ``progress()`` says how far the run got."""
    stop: list[int] = []
    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            saved[sig] = signal.signal(sig, lambda signum, frame: stop.append(signum))
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        try:
            last_report = time.perf_counter()
            while True:
                try:
                    rc = proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if stop:
                    return _stop(proc, stop[0], log, head, grace_s)
                if time.perf_counter() - last_report >= every_s:
                    last_report = time.perf_counter()
                    tail = _last_line(log_path)
                    log(f"{head}: {progress()}, {time.perf_counter() - t0:.0f}s" + (f" | {tail}" if tail else ""))
        except BaseException:  # anything else that ends validate ends its trainer too
            if proc.poll() is None:
                _kill_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    _kill_group(proc.pid, signal.SIGKILL)
                    proc.wait()
            raise
        return rc
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _stop(proc: subprocess.Popen, signum: int, log: Callable[[str], None], head: str, grace_s: float) -> int:
    name = signal.Signals(signum).name
    log(f"{head}: {name}: stopping the run (it checkpoints where it can; at most {grace_s:.0f}s)")
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        log(f"{head}: the run did not stop in {grace_s:.0f}s: killed (a rerun resumes from its last checkpoint)")
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
    _kill_group(proc.pid, signal.SIGKILL)  # anything of its group still there (none, normally)
    raise Stopped(name)
