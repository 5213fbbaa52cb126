"""Saved notebooks and git: JupyterLab writes outputs into the notebooks, git should not see them.

``make env`` sets nbstripout up as the clean filter of ``*.ipynb`` (``.gitattributes``, the
Makefile's ``git-filter``): git stores and compares a notebook without its outputs, execution
counts and widget state, so ``git diff`` stays empty after a run. ``git status`` alone would
still list the notebook, because git takes a changed file size as a change without reading the
file. :func:`refresh_index`, JupyterLab's post-save hook under ``make lab``, settles that: after
each save of a notebook whose stripped content is what git already holds, it refreshes git's
record of the file (``git add`` of identical content stages nothing). A real edit is left for
its author to stage.

The filter also strips ``language_info``, what the kernel says of itself (its Python's version),
which differs from machine to machine. JupyterLab writes it into a notebook as soon as the
kernel starts, so a notebook stored without it opened marked unsaved, untouched ("Save changes
before closing?"). The filter's smudge side (:func:`with_language_info`, run by git on checkout)
and ``make git-filter`` for the notebooks already checked out write this machine's kernel's
``language_info`` into the working files, which git still stores without it.

Run as a script (``python -I fusedkit/notebook_git.py smudge``, as git's filter does, or
``fill NOTEBOOK...``) it imports nothing of fusedkit, whose package would import torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def kernel_language_info() -> dict:
    """The ``language_info`` the notebooks' kernel (ipykernel, on this Python) reports, which
    JupyterLab writes into a notebook when the kernel starts."""
    from ipykernel.ipkernel import IPythonKernel  # noqa: PLC0415 - IPython: only for the filter

    return dict(IPythonKernel.language_info)


def with_language_info(text: str, info: dict | None = None) -> str:
    """``text`` (a notebook's JSON) with ``metadata.language_info`` set to ``info`` (default:
    :func:`kernel_language_info`) where it has none, in nbformat's layout; anything else, or
    text that is no notebook, is returned as it is."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    if not isinstance(meta, dict) or "language_info" in meta or \
            meta.get("kernelspec", {}).get("language", "python") != "python":
        return text
    meta["language_info"] = info or kernel_language_info()
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def fill(paths: list[str]) -> None:
    """Write the kernel's ``language_info`` into each notebook of ``paths`` that has none, and
    refresh git's record of it (its size changed, its stored content did not: :func:`refresh_index`)."""
    info = kernel_language_info()
    for path in map(Path, paths):
        text = path.read_text(encoding="utf-8")
        new = with_language_info(text, info)
        if new != text:
            path.write_text(new, encoding="utf-8")
            refresh_index(str(path))


if __name__ == "__main__":
    if sys.argv[1:2] == ["smudge"]:   # git's smudge filter: the notebook on stdin, out on stdout
        notebook = sys.stdin.read()
        try:
            notebook = with_language_info(notebook)
        except Exception:  # noqa: BLE001 - no ipykernel here, say: the file as git holds it
            pass
        sys.stdout.write(notebook)
    elif sys.argv[1:2] == ["fill"]:
        fill(sys.argv[2:])
    else:
        sys.exit("usage: python -I fusedkit/notebook_git.py smudge | fill NOTEBOOK...")
