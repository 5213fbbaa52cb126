"""Every problem's ``binding.cpp`` (and ``binding_hopper.cpp``) passes the C++ front end on a machine without a GPU.

The extension is only built on a GPU machine (it links cuBLAS), so a typo in a binding
would otherwise surface only there, in a lent call that costs device time. Here g++ checks
the file's syntax and types against torch's headers, the CUDA toolkit's runtime headers and
declaration-only stand-ins for the cuBLAS headers this machine lacks (tests/cuda_stubs/).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from fusedkit import build

STUBS = Path(__file__).parent / "cuda_stubs"
BINDINGS = sorted(build.KERNELS_DIR.glob("*/binding*.cpp"))  # binding.cpp and binding_hopper.cpp


def _cuda_include() -> Path | None:
    nvcc = build._nvcc_path()
    if nvcc is None:
        return None
    for root in (Path(nvcc).resolve().parent.parent, Path("/usr/local/cuda")):
        if (root / "include" / "cuda_runtime.h").is_file():
            return root / "include"
    return None


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.skipif(_cuda_include() is None, reason="needs the CUDA toolkit's headers (nvcc)")
@pytest.mark.parametrize("binding", BINDINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_binding_compiles_syntax_only(binding: Path) -> None:
    inc = Path(torch.__file__).parent / "include"
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=syntax_check",
           f"-I{inc}", f"-I{inc / 'torch' / 'csrc' / 'api' / 'include'}", f"-I{_cuda_include()}",
           f"-I{STUBS}", f"-I{sysconfig.get_paths()['include']}", f"-I{binding.parent}", str(binding)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert proc.returncode == 0, f"{binding.parent.name}/{binding.name}:\n" + "\n".join(errors[:10])


def test_there_is_a_binding_to_check() -> None:
    assert BINDINGS, f"no */binding.cpp under {build.KERNELS_DIR}"
    assert sys.version_info >= (3, 10)
