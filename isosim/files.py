"""Writing files: one atomic write (temporary file, fsync, rename, fsync the folder) and one JSON
writer that never writes ``NaN`` or ``Infinity`` (invalid JSON): every file isosim writes goes
through here, so a reader sees the old file or the new one, never half of one. ``check_out`` says,
before a command does any work, why its ``--out`` cannot be written.

Only the standard library, numpy and ``isosim.errors`` are imported.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from isosim.errors import IsosimError


def fsync_dir(path: str | Path) -> None:
    """Make a rename inside ``path`` durable (no-op where directories cannot be fsynced)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def tmp_name(path: str | Path) -> Path:
    """The temporary name ``atomic_write`` uses for ``path``: ``.<name>.<pid>.tmp`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def is_tmp_name(path: str | Path) -> bool:
    """True for a leftover temporary file of ``atomic_write`` (a writer killed mid-write)."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(".tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: a process of another user holds the pid
        return True
    return True


def is_stale_tmp(path: str | Path) -> bool:
    """True for a temporary file or folder (:func:`tmp_name`, ``.NAME.PID.tmp``) whose writer is
    gone: its pid runs no process. A name without a pid is not isosim's and is left alone."""
    name = Path(path).name
    if not is_tmp_name(name):
        return False
    pid = name[:-len(".tmp")].rsplit(".", 1)[-1]
    return pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid))


def remove_stale_tmp(folder: str | Path, name: str | None = None) -> list[Path]:
    """Remove the leftovers of writers killed mid-write in ``folder`` (temporary files and staging
    folders of dead processes; only those of ``name`` where given); return what was removed. A
    writer still running keeps its temporary file."""
    folder = Path(folder)
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for p in entries:
        if (name is None or p.name.startswith(f".{name}.")) and is_stale_tmp(p):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()
            removed.append(p)
    return removed


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def full_disk_error(exc: OSError, path: str | Path) -> IsosimError:
    """The one line for a write that ran out of space (``ENOSPC``) or quota (``EDQUOT``)."""
    what = "no space left on the device" if exc.errno == errno.ENOSPC else "the disk quota is exceeded"
    return IsosimError(f"{path}: cannot be written, {what}; free some space and rerun")


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> Path:
    """Write ``path`` via a temporary file: ``write(fh)``, flush, fsync, ``os.replace``, fsync the
    folder. On any error the temporary file is removed and ``path`` is left as it was; a full disk
    is one line (:func:`full_disk_error`)."""
    path = Path(path)
    tmp = tmp_name(path)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.errno in FULL_DISK:
            raise full_disk_error(exc, path) from None
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """``atomic_write`` of a UTF-8 text."""
    return atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def jsonable(obj: Any) -> Any:
    """Plain Python types for json: numpy scalars, arrays and 0-d tensors unwrapped, NaN/inf -> None."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if hasattr(obj, "item") and not isinstance(obj, str):  # a 0-d array or tensor (torch's too)
        return jsonable(obj.item())
    return obj


def dumps_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``jsonable(obj)``: valid JSON always (NaN and infinities become null)."""
    return json.dumps(jsonable(obj), allow_nan=False, **kwargs)


def write_json(path: str | Path, obj: Any, *, indent: int | None = 1, mkdir: bool = True, **kwargs: Any) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (``dumps_json`` + ``atomic_write_text``)."""
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, dumps_json(obj, indent=indent, **kwargs) + "\n")


def _nearest_existing(path: Path) -> Path:
    """``path`` itself or its nearest ancestor that exists (the current folder for a relative path)."""
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            return p
    return Path(".")


def _can_create_in(folder: Path) -> bool:
    """True when a file can be made in ``folder``: tried for real with an unnamed temporary file,
    since permission bits and ``os.access`` do not tell what capabilities (root's) allow."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


TMP_EXTRA = 20
"""bytes a temporary name (``.NAME.PID.tmp``, a replaced folder's ``.NAME.old.PID.tmp``) adds to a name"""


def _name_max(folder: Path) -> tuple[int, int]:
    """(longest file name, longest path) the file system under ``folder`` takes."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):
        return 255, 4096


def long_name_problem(path: str | Path) -> str | None:
    """Why ``path`` is too long for the file system (``ENAMETOOLONG``), before anything touches it:
    a name longer than its ``NAME_MAX`` or a whole path longer than its ``PATH_MAX``; None if neither."""
    path = Path(path)
    name_max, path_max = _name_max(Path("."))
    full = len(os.fsencode(os.path.abspath(path)))
    if full >= path_max:
        return f"the path is {full} bytes long, longer than the {path_max - 1} the file system takes"
    for i, part in enumerate(path.parts):
        most = name_max - (TMP_EXTRA if i == len(path.parts) - 1 else 0)  # its temporary name is longer
        if len(os.fsencode(part)) > most:
            return (f"a name in it is {len(os.fsencode(part))} bytes long, more than the {most} isosim can use "
                    f"(the file system takes {name_max}; a file is written under a temporary name {TMP_EXTRA} longer)")
    return None


def out_problem(path: str | Path, kind: str = "folder") -> str | None:
    """Why ``path`` cannot be written as an output ``kind`` (``folder`` or ``file``): it is empty,
    too long, the other kind, it lies under a file, or its folder (or nearest existing ancestor)
    takes no new files; None when it can. Nothing is created."""
    if not str(path).strip():
        return "an empty path (name a folder or a file)"
    path = Path(path)
    too_long = long_name_problem(path)
    if too_long:
        return too_long
    if kind == "folder" and path.exists() and not path.is_dir():
        return "it is a file, not a folder"
    if kind == "file" and path.is_dir():
        return "it is a folder, not a file"
    base = _nearest_existing(path if kind == "folder" else path.parent)
    if not base.is_dir():
        return f"it lies under {base}, which is a file, not a folder"
    if not _can_create_in(base):
        where = "it" if base == path else str(base)
        return f"{where} is not writable (permission denied)"
    return None


def check_out(path: str | Path, kind: str = "folder", flag: str = "--out") -> None:
    """Raise ``IsosimError`` with one line naming ``path`` and the reason when it cannot be written as
    an output ``kind`` (:func:`out_problem`); commands call it before any work."""
    why = out_problem(path, kind)
    if why is not None:
        raise IsosimError(f"{flag} {path}: {why}")


def cache_root() -> Path:
    """isosim's cache folder: ``ISOSIM_CACHE``, else ``~/.cache/isosim``."""
    return Path(os.environ.get("ISOSIM_CACHE") or Path.home() / ".cache" / "isosim")


# ----------------------------------------------------------------------------------------------
# Files isosim wrote into a folder it shares with the user: never overwrite one that is not as written
# ----------------------------------------------------------------------------------------------
LEDGER = ".isosim-written.json"
"""beside the files isosim writes into a folder a user also works in (explore's report, recommend
--for's full run): each file's path under the folder and the sha256 of what isosim wrote there"""


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _under(folder: Path, path: str | Path) -> str:
    """``path``'s name in ``folder``'s ledger: relative to the folder."""
    return str(Path(path).resolve().relative_to(folder.resolve()))


def read_ledger(folder: str | Path) -> dict[str, str]:
    """What isosim last wrote under ``folder`` (relative path -> sha256); {} where nothing is recorded
    (or the record is unreadable: then every file there counts as not isosim's)."""
    try:
        doc = json.loads((Path(folder) / LEDGER).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in doc.get("files", {}).items()} if isinstance(doc, dict) else {}


def not_as_written(folder: str | Path, paths: Any) -> list[Path]:
    """Of ``paths`` (files isosim is about to write under ``folder``), those that exist and are not
    byte for byte what isosim last wrote there: the user's own, or isosim's changed since."""
    folder = Path(folder)
    ledger = read_ledger(folder)
    out = []
    for p in map(Path, paths):
        if p.is_file() and ledger.get(_under(folder, p)) != _sha256(p.read_bytes()):
            out.append(p)
    return out


def refuse_overwrite(folder: str | Path, paths: Any, force: bool, what: str) -> None:
    """One line (``IsosimError``) naming the files of ``paths`` under ``folder`` that isosim did not
    write as they are now (:func:`not_as_written`), unless ``force``: ``what`` says who would overwrite them."""
    if force:
        return
    theirs = not_as_written(folder, paths)
    if theirs:
        shown = ", ".join(str(p) for p in theirs[:3]) + (f" and {len(theirs) - 3} more" if len(theirs) > 3 else "")
        raise IsosimError(f"{what} would overwrite {shown}: not as isosim wrote {'it' if len(theirs) == 1 else 'them'} "
                          "(your own file, or changed since); move it away, choose another folder, or pass --force "
                          "to overwrite")


def ledger_text(folder: str | Path, written: dict[Path, bytes]) -> str:
    """The ledger of ``folder`` with ``written`` (path under it -> the bytes isosim writes) added to
    what it already records of files still there."""
    folder = Path(folder)
    ledger = {k: v for k, v in read_ledger(folder).items() if (folder / k).is_file()}
    ledger.update({_under(folder, p): _sha256(data) for p, data in written.items()})
    return dumps_json({"about": "files isosim wrote here and the sha256 of what it wrote: a file that no longer "
                                "matches is not overwritten without --force", "files": dict(sorted(ledger.items()))},
                      indent=1) + "\n"


def record_written(folder: str | Path, paths: Any) -> None:
    """After writing ``paths`` under ``folder``: record them in its ledger, as they are now."""
    folder = Path(folder)
    atomic_write_text(folder / LEDGER, ledger_text(folder, {Path(p): Path(p).read_bytes() for p in paths}))
