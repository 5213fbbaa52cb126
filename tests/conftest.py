"""Shared test set-up: the run mode is settled before Triton is imported anywhere."""

import os

import torch

if not torch.cuda.is_available():
    # Triton kernels run in its CPU interpreter here; this must precede `import triton`.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import fusedkit  # noqa: E402,F401  (settles the mode for every test module)


import pytest  # noqa: E402


@pytest.fixture
def own_build_dir(tmp_path, monkeypatch):
    """Build products of this test go to a fresh folder (no cache from earlier runs)."""
    monkeypatch.setenv("FUSEDKIT_BUILD_DIR", str(tmp_path / "build"))
    return tmp_path / "build"
