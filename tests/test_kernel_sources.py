"""Rules every CUDA step file of every problem keeps (fusedkit/kernels/<problem>/NN_*.cu):
three opening comment lines (what it computes, what changed, its bound), no torch or cuBLAS
includes (so nvcc compiles it alone, without a GPU), and PTX with an extern "C" entry named
after its problem."""

from __future__ import annotations

import re

import pytest

from fusedkit import build

PROBLEMS = sorted(p.name for p in build.KERNELS_DIR.iterdir() if p.is_dir() and re.match(r"p\d+$", p.name))
# Every step file: those of the main extension and the sm_90a (Hopper) ones built apart.
SOURCES = [src for problem in PROBLEMS
           for src in sorted([*build.kernel_sources(problem), *build.hopper_sources(problem)])]
HEADERS = [h for problem in PROBLEMS for h in sorted((build.KERNELS_DIR / problem).glob("*.h"))]
needs_nvcc = pytest.mark.skipif(not build.nvcc_available(),
                                reason="nvcc (CUDA toolkit) not found; PTX checks need it, not a GPU")
ids = lambda p: f"{p.parent.name}/{p.name}"  # noqa: E731


def test_every_problem_has_cuda_steps():
    assert {"p12", "p45"} <= set(PROBLEMS) and all(build.kernel_sources(p) for p in PROBLEMS)


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_each_source_opens_with_three_comment_lines(src):
    head = src.read_text().splitlines()[:4]
    assert all(line.startswith("// ") for line in head[:3]), head
    assert not head[3].startswith("//"), "exactly three opening comment lines"
    assert "Bound:" in head[2]


@pytest.mark.parametrize("src", [*SOURCES, *HEADERS], ids=ids)
def test_sources_are_pure_cuda(src):
    includes = re.findall(r'#include\s+[<"]([^>"]+)[>"]', src.read_text())
    assert not [i for i in includes if "torch" in i or "ATen" in i or "c10" in i or "cublas" in i]


@needs_nvcc
@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_every_step_compiles_to_ptx(src, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEDKIT_BUILD_DIR", str(tmp_path / "build"))  # no cache from earlier runs
    text = build.ptx(src)
    assert ".target sm_90" in text
    problem = src.parent.name
    assert re.search(rf"\.entry {problem}_\w+_kernel", text), f'expected an extern "C" {problem}_*_kernel entry'
