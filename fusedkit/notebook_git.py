"""Saved notebooks and git: JupyterLab writes outputs into the notebooks, git should not see them.

nbstripout is git's clean filter (``make env``); :func:`refresh_index`, JupyterLab's post-save hook,
keeps ``git status`` clean; the smudge side (:func:`with_language_info`) writes back the
``language_info`` that JupyterLab would add at once, marking the notebook unsaved. As a script
(``python -I fusedkit/notebook_git.py smudge | fill NOTEBOOK...``) it imports nothing of fusedkit.
"""

from __future__ import annotations

import contextlib
import json
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


def refresh_index(os_path: str, **_: object) -> None:
    """JupyterLab's post-save hook: refresh git's record of a notebook whose stripped blob it holds."""
    path = Path(os_path).resolve()
    staged = _git(path.parent, "ls-files", "--stage", "--", path.name) if os_path.endswith(".ipynb") else None
    if staged and staged.split()[1] == _git(path.parent, "hash-object", "--path", path.name, "--", path.name):
        _git(path.parent, "add", "--", path.name)   # same blob: only the file's size and times change


def kernel_language_info() -> dict:
    """The ``language_info`` the notebooks' kernel (ipykernel, on this Python) reports."""
    from ipykernel.ipkernel import IPythonKernel  # noqa: PLC0415 - IPython: only for the filter

    return dict(IPythonKernel.language_info)


def with_language_info(text: str, info: dict | None = None) -> str:
    """A Python notebook's JSON ``text`` given the kernel's ``language_info`` where it has none."""
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
    """:func:`with_language_info` for each notebook of ``paths``, git's record refreshed."""
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
        with contextlib.suppress(Exception):   # no ipykernel here, say: the file as git holds it
            notebook = with_language_info(notebook)
        sys.stdout.write(notebook)
    elif sys.argv[1:2] == ["fill"]:
        fill(sys.argv[2:])
    else:
        sys.exit("usage: python -I fusedkit/notebook_git.py smudge | fill NOTEBOOK...")
