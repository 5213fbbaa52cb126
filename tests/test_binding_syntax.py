"""Every problem's ``binding.cpp`` (and ``binding_hopper.cpp``) passes the C++ front end on a machine without a GPU.

The extension is only built on a GPU machine (it links cuBLAS), so a typo in a binding
would otherwise surface only there, in a lent call that costs device time. Here g++ checks
each file's syntax and types against torch's headers, the CUDA toolkit's runtime headers and
declaration-only stand-ins for the cuBLAS headers this machine lacks (tests/cuda_stubs/).

Torch's headers take g++ about 15 s to parse, and a binding a second or two, so all bindings are
checked in one translation unit: the headers they include (system and kernels/common) first, then
each binding in a namespace of its own, under its own TORCH_EXTENSION_NAME. What this cannot
see is a binding that forgets an include another one makes; the GPU build sees that.
"""

from __future__ import annotations

import re
import shutil
import subprocess
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


def one_unit(bindings: list[Path]) -> str:
    """The translation unit that holds every binding, each in its own namespace."""
    headers = [*bindings, *build.KERNELS_DIR.glob("*/*.h")]
    system = sorted({m for h in headers for m in re.findall(r"^\s*#\s*include\s*(<[^>]+>)", h.read_text(), re.M)})
    lines = [f"#include {s}" for s in system]
    lines += [f'#include "{h}"' for h in sorted((build.KERNELS_DIR / "common").glob("*.h"))]
    for b in bindings:
        name = f"{b.parent.name}_{b.stem}"
        lines += [f"namespace {name} {{", "#undef TORCH_EXTENSION_NAME",
                  f"#define TORCH_EXTENSION_NAME {name}", f'#include "{b}"', "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.skipif(_cuda_include() is None, reason="needs the CUDA toolkit's headers (nvcc)")
def test_every_binding_compiles_syntax_only(tmp_path: Path) -> None:
    assert {b.name for b in BINDINGS} == {"binding.cpp", "binding_hopper.cpp"} and len(BINDINGS) >= 4
    unit = tmp_path / "bindings.cpp"
    unit.write_text(one_unit(BINDINGS))
    inc = Path(torch.__file__).parent / "include"
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-w", f"-I{inc}", f"-I{inc / 'torch' / 'csrc' / 'api' / 'include'}",
           f"-I{_cuda_include()}", f"-I{STUBS}", f"-I{sysconfig.get_paths()['include']}", str(unit)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
    assert proc.returncode == 0, "\n".join(errors[:10])
