"""Where fusedkit writes: :func:`check`, one check of a path at the edge (in one line, before
anything runs), and :func:`replace`, one way to write a file whole (a temporary file beside it,
synced and renamed over it: a crash or a full disk leaves the old file or the new one).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"))


class PathError(OSError):
    """A path that may not be written; the message (one line) names it and says why."""


def kind(path: Path) -> str:
    """What ``path`` is, as a phrase ("a folder", "a file", ...); "" when nothing is there."""
    try:
        mode = os.stat(path).st_mode   # opens nothing: a FIFO does not block here
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError as e:
        return ("a symbolic link that loops (it leads back to itself), naming no file"
                if e.errno == errno.ELOOP else f"a path that cannot be checked ({e.strerror or e})")
    return next((name for test, name in _KINDS if test(mode)), "a file")


def _unwritable(path: Path) -> str:
    """Why nothing can be written at the existing ``path`` ("" when it can)."""
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return f"{path} is on a read-only file system"
    mode = os.stat(path).st_mode
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        return f"{path} is read-only (mode {stat.S_IMODE(mode):#o})"
    return ""


def target(path: str | os.PathLike[str]) -> Path:
    """``path`` with its symbolic links followed (a dangling link names the file to create)."""
    real = os.path.realpath(path)
    return Path(path) if real == os.path.abspath(path) else Path(real)


def check(path: str | os.PathLike[str], allowed: str, *, folder: bool = False) -> Path:
    """The path a write of ``path`` replaces (links followed), or :class:`PathError` naming it,
    what is wrong and ``allowed``; ``folder``: a folder to write files into (made where missing)."""
    text = os.fspath(path)
    fault = ""
    if text == "-":
        fault = "'-' names no file here (nothing is written to stdout)"
    elif not folder and text.endswith(("/", os.sep)):
        fault = f"{text} ends in '/', so it names a folder"
    else:
        path = target(text)
        what = kind(path)
        if what not in ("", "a folder" if folder else "a file"):
            fault = f"{path} is {what}" + ("" if folder or "loops" in what else ", not a regular file")
        elif what:
            fault = _unwritable(path) if not folder else ""
            fault += " and is left as it is" if fault else ""
        if not fault:
            fault = _folder_fault(path if folder else path.parent)
    if fault:
        raise PathError(f"{fault}; allowed: {allowed}")
    return path


def _folder_fault(folder: Path) -> str:
    """Why no file can be made in ``folder`` or its nearest existing ancestor ("" when one can)."""
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    what = kind(folder)
    if what != "a folder":
        return f"{folder} is {what or 'missing'}, not a folder"
    if fault := _unwritable(folder):
        return fault.replace(f"{folder} is read-only", f"the folder {folder} is not writable", 1)
    probe = folder / f".fusedkit-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as e:
        return f"no file can be created in {folder} ({e.strerror or e})"
    return ""


def replace(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Make ``data`` (text as UTF-8) the content of ``path``, keeping its mode, in one rename."""
    path = Path(path)
    tmp, existed = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"), path.exists()
    view = memoryview(data.encode() if isinstance(data, str) else data)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)   # umask applies
        try:
            if existed:
                os.fchmod(fd, stat.S_IMODE(path.stat().st_mode))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)   # readers see the old file or the new one, never a mix
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)   # the rename itself survives a crash
        finally:
            os.close(folder)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
        kept = "it is left as it was" if existed else "no file was made"
        raise PathError(e.errno, f"{e.strerror or e}: {path} was not written; {kept}") from None
