"""Whether a file or folder may be written, the same way for every command that writes one.

Every writer in fusedkit writes a temporary file beside its target and renames it over the
target (the records, the reports, the exported solutions): a crash leaves the old file or the
new one, never half of one. Two facts follow, and both are settled here once:

- a rename replaces a symbolic link itself, so the file to write is the link's target
  (:func:`write_target`): the link stays and the file it names gets the new content;
- a rename needs the folder to be writable and ignores the file's own mode, and root may
  write anything, so a file or folder marked read-only (``chmod a-w``) is refused by its mode
  bits, as it would be for anyone else (:func:`read_only`);
- a rename replaces whatever the name held, so a name that is not a regular file (a device
  such as ``/dev/full``, a FIFO, a socket, a symbolic link that loops) is refused, or it
  would become a regular file (:func:`file_fault`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_ANY_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def write_target(path: str | os.PathLike[str]) -> Path:
    """The file a write-and-rename of ``path`` must replace: ``path`` with every symbolic link
    followed (a dangling link names the file to create). Relative paths stay relative."""
    path = Path(path)
    real = os.path.realpath(path)
    return path if real == os.path.abspath(path) else Path(real)


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"))


def file_fault(path: str | os.PathLike[str]) -> str:
    """Why a write-and-rename must not replace ``path`` (as returned by :func:`write_target`),
    as the end of a sentence about it, e.g. "is a character device, not a regular file"; ""
    when it may: a regular file, or nothing yet (a missing file, or one under a missing folder,
    which :func:`folder_fault` judges)."""
    try:
        mode = os.stat(path).st_mode   # stat opens nothing: a FIFO does not block here
    except FileNotFoundError:
        return ""
    except NotADirectoryError:
        return ""
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "is a symbolic link that loops (it leads back to itself), naming no file"
        return f"cannot be checked ({e.strerror or e})"
    kind = next((name for test, name in _KINDS if test(mode)), None)
    return f"is {kind}, not a regular file" if kind else ""


def read_only(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` (which exists) may not be written: no write bit in its mode for anyone,
    or none for this user. Root passes os.access everywhere; the mode bits still say "keep"."""
    mode = os.stat(path).st_mode
    return not mode & _ANY_WRITE or not os.access(path, os.W_OK)


def mode_text(path: str | os.PathLike[str]) -> str:
    """The permission bits of ``path`` as ``0o444``, for messages."""
    return f"{stat.S_IMODE(os.stat(path).st_mode):#o}"


def folder_fault(folder: str | os.PathLike[str]) -> str:
    """Why files cannot be created in ``folder`` (made with its parents where missing), as the
    end of a sentence about it; "" when they can.

    The nearest existing folder on the way decides: it must be a folder, searchable and not
    read-only (:func:`read_only`).
    """
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent   # mkdir(parents=True) creates the rest from here
    if str(existing) == "":
        existing = Path(".")
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if read_only(existing) or not os.access(existing, os.W_OK | os.X_OK):
        return f"the folder {existing} is not writable (mode {mode_text(existing)})"
    return ""


def write_failed(e: OSError, path: str | os.PathLike[str], kept: str) -> OSError:
    """``e`` (a failed write: a full disk, an I/O error) as the same kind of OSError whose one
    line names ``path`` and says what was kept, e.g. ``[Errno 28] No space left on device:
    data/records.csv was not written; it is left as it was``; a bare ``[Errno 28]`` names no
    file."""
    text = f"{e.strerror or e}: {path} was not written; {kept}"
    return type(e)(e.errno, text) if e.errno is not None else type(e)(text)
