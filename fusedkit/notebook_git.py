"""Saved notebooks and git: JupyterLab writes outputs into the notebooks, git should not see them.

``make env`` sets nbstripout up as the clean filter of ``*.ipynb`` (``.gitattributes``, the
Makefile's ``git-filter``): git stores and compares a notebook without its outputs, execution
counts and widget state, so ``git diff`` stays empty after a run. ``git status`` alone would
still list the notebook, because git takes a changed file size as a change without reading the
file. :func:`refresh_index`, JupyterLab's post-save hook under ``make lab``, settles that: after
each save of a notebook whose stripped content is what git already holds, it refreshes git's
record of the file (``git add`` of identical content stages nothing). A real edit is left for
its author to stage.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _git(folder: Path, *args: str) -> str | None:
    """stdout of ``git -C folder args``, or None when git is missing or fails."""
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                             timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def unchanged_for_git(path: str | os.PathLike[str]) -> bool:
    """True when ``path``, through its clean filter, is the blob git's index holds for it."""
    path = Path(path).resolve()
    staged = _git(path.parent, "ls-files", "--stage", "--", path.name)
    if not staged:
        return False   # not tracked, or not in a git checkout
    blob = _git(path.parent, "hash-object", "--path", path.name, "--", path.name)
    return blob is not None and staged.split()[1] == blob


def refresh_index(os_path: str, **_: object) -> None:
    """JupyterLab's post-save hook (``--ContentsManager.post_save_hook``): after a notebook is
    saved, refresh git's record of it if only what the filter strips has changed."""
    if os_path.endswith(".ipynb") and unchanged_for_git(os_path):
        path = Path(os_path).resolve()
        _git(path.parent, "add", "--", path.name)   # same blob: only the file's size and times change
