"""Writing a file whole or not at all: the one rule every writer of the tools' files follows
(shard files and manifests, merged embeddings, line indexes, mining TSVs and their sidecars,
bitexts, thresholds, reports, tries, model directories).

The bytes go to ``<path>.tmp<pid>``, are flushed and synced, and the file is renamed over
``path``; a failed write (a full disk, a quota) removes the partial file and raises
:class:`~triemine.errors.OutputError` naming ``path`` and the reason, so a reader sees the old
file or the new one, and a rerun with ``--resume`` goes on from the finished work.

Also here, the two rules every tool applies to its outputs before any work:
:func:`check_distinct` (no output is an input or another output) and :func:`output_lock` (one
job per output).
"""
from __future__ import annotations

import contextlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Optional, Union

from triemine.errors import InputError, OutputError, describe


@contextmanager
def atomic_open(path: Path, what: str = "file", hint: Optional[str] = None):
    """A binary file (``with atomic_open(path) as f``) whose bytes replace ``path`` atomically
    when the body ends: for writers that need a file object (the candidates' column files,
    which write their header last), with the rules of
    :func:`atomic_write`; a body that raises leaves ``path`` as it was.  ``hint``: the
    :class:`~triemine.errors.OutputError`'s advice (default: rerun with ``--resume``)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a read-only file system refuses the unlink too
            tmp.unlink(missing_ok=True)
        if not path.parent.is_dir():  # say so, rather than the temporary file's ENOENT
            exc = OSError(exc.errno, f"its folder {path.parent} does not exist")
        elif path.is_dir():
            exc = OSError(exc.errno, "it is a directory")
        raise OutputError(path, exc, what, hint) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: Path, chunks: Union[bytes, Iterable[bytes]], what: str = "file",
                 hint: Optional[str] = None) -> None:
    """Write ``chunks`` (bytes, or an iterable of bytes written one after the other) to
    ``path`` atomically."""
    with atomic_open(path, what, hint) as f:
        for chunk in ([chunks] if isinstance(chunks, (bytes, bytearray, memoryview))
                      else chunks):
            f.write(chunk)


def write_text(path, text: str, what: str = "file", hint: Optional[str] = None) -> None:
    """``text`` as UTF-8, atomically (:func:`atomic_write`): the reports, thresholds and
    sidecar files the tools write."""
    atomic_write(Path(os.fspath(path)), text.encode("utf-8"), what, hint)


def npy_bytes(arr) -> bytes:
    """``arr`` as the bytes of a ``.npy`` file (for :func:`atomic_write`)."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def npy_header(dtype, shape) -> bytes:
    """The header of a C-order ``.npy`` file of ``shape`` and ``dtype``: what a writer that
    streams the rows after it (merged shards, neighbour lists, column files) writes first."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
        "shape": tuple(shape)})
    return buf.getvalue()


# -- outputs that are not inputs -----------------------------------------------------------------

# what ``trie-mine -o OUT`` writes beside OUT: files, then folders (every stage's state)
SIDE_FILES = (".meta.json", ".progress", ".lock")
SIDE_DIRS = (".work", ".shards", ".dedup")


def _real(path) -> str:
    return os.path.realpath(os.fspath(path))


def same_file(a, b) -> bool:
    """Whether the paths ``a`` and ``b`` name one file: the same inode when both exist (hard
    links, symbolic links), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return _real(a) == _real(b)


def _expand_inputs(inputs):
    """``(label, path)`` of every input file: a folder (a model directory) stands for itself
    and the files in it; ``(label, path, True)``: a job's output read back, with its side
    files."""
    for x in inputs:
        label, path, sides = (tuple(x) + (False,))[:3]
        if path is None:
            continue
        yield label, os.fspath(path)
        if sides:
            yield from ((f"{label}'s {s}", os.fspath(path) + s) for s in SIDE_FILES)
        if os.path.isdir(path):
            with os.scandir(path) as entries:
                for e in entries:
                    if e.is_file():
                        yield label, e.path


def _expand_outputs(outputs):
    """``(label, path, is_folder)`` of every file and folder the ``outputs`` write: each is
    ``(label, path)``, ``(label, path, True)`` for a job's ``-o`` with its side files and
    folders (:data:`SIDE_FILES`, :data:`SIDE_DIRS`), or ``(label, path, "folder")`` for a
    folder written whole (an imported model directory)."""
    for out in outputs:
        label, path, sides = (tuple(out) + (False,))[:3]
        if path is None:
            continue
        path = os.fspath(path)
        yield label, path, sides == "folder"
        if sides is True:
            for suffix in SIDE_FILES:
                yield f"{label} (its {suffix})", path + suffix, False
            for suffix in SIDE_DIRS:
                yield f"{label} (its {suffix}/)", path + suffix, True


def check_distinct(outputs, inputs=()) -> None:
    """Refuse, before any work, an output that is an input or another output: an
    :class:`~triemine.errors.InputError` naming both (``--bitext X is the same file as -o X``).

    ``outputs``: ``(label, path)`` pairs, ``(label, path, True)`` for a job's ``-o`` whose
    side files and work folders count as outputs too, or ``(label, path, "folder")`` for a
    folder that is replaced whole; ``inputs``: ``(label, path)`` pairs (a
    folder, such as a model directory, stands for the files in it); ``None`` paths are left
    out; an empty path is refused.  Two paths are one file when :func:`same_file` says so (hard
    links and symbolic links
    count); an input inside an output folder is refused too (a work folder is removed when a
    job starts over, an imported model directory replaced whole).  An existing output that is not a
    regular file (a folder, a
    FIFO, a device) is refused: the atomic writer would replace it."""
    for label, path, *_ in list(outputs) + list(inputs):
        if path is not None and not os.fspath(path):
            raise InputError(f"{label}: an empty path (name a file)")
    outs = list(_expand_outputs(outputs))
    ins = list(_expand_inputs(inputs))
    for i, (label, path, folder) in enumerate(outs):
        if not folder and os.path.lexists(path) and not os.path.isfile(path):
            raise InputError(f"{label} {path} {describe(path)}: an output must be a regular "
                             "file")
        for in_label, in_path in ins:
            if same_file(path, in_path) or (folder and _real(in_path).startswith(
                    _real(path) + os.sep)):
                where = "is the same file as" if same_file(path, in_path) else "holds"
                raise InputError(f"{label} {path} {where} the {in_label} {in_path}: an output "
                                 "must not be an input (choose another output path)")
        for other_label, other, _ in outs[:i]:
            if same_file(path, other):
                raise InputError(f"{label} {path} is the same file as {other_label} {other}: "
                                 "two outputs must be different files")


# -- one job per output --------------------------------------------------------------------------

LOCK_SUFFIX = ".lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _lock_holder(lock: Path):
    """``(pid, host)`` the lock file records; ``(None, None)`` when unreadable."""
    try:
        pid, _, host = lock.read_text(encoding="utf-8").strip().partition(" ")
        return int(pid), host
    except (OSError, ValueError, UnicodeDecodeError):
        return None, None


@contextmanager
def output_lock(output):
    """Hold ``OUTPUT.lock`` (the writing process's pid and host) while the body runs: a second
    job on the same output is refused at once (:class:`~triemine.errors.InputError` naming the
    lock and the pid holding it); a lock left by a process that is gone (same host, dead pid) is
    taken over with a warning; an output whose folder does not exist is an
    :class:`~triemine.errors.InputError` naming it.  Removed when the body ends, however it
    ends."""
    import logging
    import socket

    lock = Path(os.fspath(output) + LOCK_SUFFIX)
    if not lock.parent.is_dir():  # say so, rather than the lock's temporary file's ENOENT
        raise InputError(f"its folder {lock.parent} does not exist (create it, or choose "
                         "another path)", os.fspath(output))
    host = socket.gethostname()
    mine = f"{os.getpid()} {host}\n".encode("utf-8")
    tmp = lock.with_name(f"{lock.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:  # linked below; a lock need not survive a power cut
            f.write(mine)
        for _ in range(3):
            try:
                os.link(tmp, lock)  # atomic: fails when a lock exists
                break
            except FileExistsError:
                pid, where = _lock_holder(lock)
                if pid is not None and (where != host or _pid_alive(pid)):
                    on = "" if where == host else f" on {where}"
                    raise InputError(f"another job (pid {pid}{on}) is writing "
                                     f"{os.fspath(output)}: wait for it to end, or remove the "
                                     "lock if that process is gone", lock) from None
                logging.getLogger(__name__).warning(
                    "%s: taking over the lock of pid %s, which is no longer running", lock, pid)
                lock.unlink(missing_ok=True)
        else:
            raise InputError("cannot take the lock (other jobs keep taking it)", lock)
    except OSError as exc:
        raise OutputError(lock, exc, "lock file", hint="") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    try:
        yield lock
    finally:
        with contextlib.suppress(OSError):
            if lock.read_bytes() == mine:
                lock.unlink()


@contextmanager
def output_locks(paths):
    """:func:`output_lock` on every path of ``paths`` (``None`` left out, each file once, in the
    order given) while the body runs: the one lock of every output of every command; what
    was taken is let go when a later lock is refused."""
    seen = set()
    with contextlib.ExitStack() as stack:
        for p in paths:
            if p is None or os.path.abspath(os.fspath(p)) in seen:
                continue
            seen.add(os.path.abspath(os.fspath(p)))
            stack.enter_context(output_lock(p))
        yield
