"""Rules every CUDA step file of every problem keeps (fusedkit/kernels/<problem>/NN_*.cu):
three opening comment lines (what it computes, what changed, its bound: the notebook shows them),
and nvcc compiles it alone, without torch or a GPU, to PTX with an extern "C" entry named after
its problem; the Hopper steps to the PTX whose timings the records hold."""

from __future__ import annotations

import hashlib
import re

import pytest

from fusedkit import build
from kernel_helpers import needs_nvcc

PROBLEMS = sorted(p.name for p in build.KERNELS_DIR.iterdir() if p.is_dir() and re.match(r"p\d+$", p.name))
# Every step file: those of the main extension and the sm_90a (Hopper) ones built apart.
SOURCES = [src for problem in PROBLEMS
           for src in sorted([*build.kernel_sources(problem), *build.hopper_sources(problem)])]
ids = lambda p: f"{p.parent.name}/{p.name}"  # noqa: E731


def test_every_problem_has_cuda_steps():
    assert {"p12", "p45"} <= set(PROBLEMS) and all(build.kernel_sources(p) for p in PROBLEMS)


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_each_source_opens_with_three_comment_lines(src):
    head = src.read_text().splitlines()[:4]
    assert all(line.startswith("// ") for line in head[:3]), head
    assert not head[3].startswith("//"), "exactly three opening comment lines"
    assert "Bound:" in head[2]


@needs_nvcc
@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_every_step_compiles_to_ptx(src):
    # build.ptx's cache is keyed by the sources, headers, flags and nvcc's version
    # (test_p12_cuda.py shows it follows an edit): a hit is this very compile's PTX.
    text = build.ptx(src)
    assert ".target sm_90" in text
    problem = src.parent.name
    assert re.search(rf"\.entry {problem}_\w+_kernel", text), f'expected an extern "C" {problem}_*_kernel entry'


# The PTX of every sm_90a step as nvcc 13.0.88 wrote it at f07ed99, the kernels whose H200
# timings data/records.csv holds (sha256 of build.ptx's text, the path-derived part of the names
# of anonymous-namespace symbols masked). A refactor of the Hopper steps or their headers must
# leave these as they are; a change that means to alter a kernel updates its digest here and
# re-times the step, since the records no longer describe it otherwise.
HOPPER_PTX_NVCC = "Build cuda_13.0.r13.0/compiler.36424714_0"   # nvcc --version, last line
HOPPER_PTX_SHA256 = {
    "p12/11_wgmma_tma.cu": "8e65f045c9cdbb8997bec354a010d291209778f252a5c7a20a941b771324a649",
    "p12/12_wgmma_warpspec.cu": "c19f3304b6e00297dc4ad0a15d252118b436b980274f76fe1734c4c8fcdf3854",
    "p12/13_wgmma_persistent.cu": "1dffeb5aa25ea4a7faa70cb75719f2ff7ac7b5c5bfb944fc058499dade8e367c",
    "p12/14_wgmma_fp16x3.cu": "4e04d99e3c35ced9536d3782e160d5935d4c9bf15ed6bbcbe2f57248d59ccb83",
    "p12/15_wgmma_fp16x3_fused_split.cu": "619c98908f1a2aaba4ed36c2f8a4dfb2538cf2938d354d04733141a2d2cedd0e",
    "p12/16_wgmma_fp16x3_multicast.cu": "027ca00408aa2e366ea8790f7e75f8bb52e4876f3374911b853d8084200c0afc",
    "p45/07_wgmma_fp16x3_lse.cu": "200ac33524a6d05cfc678381d513a5272e35fb78d3b828c59d4ca5cae7de44bb",
    # Not timed yet (fp16 and its bf16 twin): the PTX its first GPU run times (the records will then
    # describe this one).
    "p45/08_wgmma_fp16_lse.cu": "6afb2bdc5385332c9ce68f19a8a6d8006179e4052c9613e1e9d525b831af71c1",
    # Not timed yet, as p45's step 08 above: the PTX its first GPU run times.
    "p12/18_wgmma_fp16x3_splitk.cu": "80c9e8eead86ef99de6b006d1b4c98ac692984dddfdd1adc1a3800773f3f3936",
}
# nvcc names an anonymous namespace after a hash of the source's path: _INTERNAL_0d8259f4_22_07_...
_PATH_HASHED = re.compile(r"[0-9a-f]{8}_(\d+_\w+?_cu)_[0-9a-f]{8}")


def _nvcc_is_the_recorded_one() -> bool:
    return build.nvcc_available() and build._nvcc_version(build._nvcc_path()) == HOPPER_PTX_NVCC


@pytest.mark.skipif(not _nvcc_is_the_recorded_one(),
                    reason=f"the digests are of nvcc {HOPPER_PTX_NVCC}'s PTX; another nvcc writes other PTX")
@pytest.mark.parametrize("step", sorted(HOPPER_PTX_SHA256))
def test_the_hopper_steps_compile_to_the_measured_ptx(step):
    text = _PATH_HASHED.sub(r"H_\1_H", build.ptx(build.KERNELS_DIR / step))
    got = hashlib.sha256(text.encode()).hexdigest()
    assert got == HOPPER_PTX_SHA256[step], (
        f"{step}: its PTX is not the one measured on the H200 (sha256 {got}); if the kernel is "
        "meant to change, re-time it and record the new digest here")


def test_every_hopper_step_has_a_recorded_ptx_digest():
    hopper = {f"{p}/{s.name}" for p in PROBLEMS for s in build.hopper_sources(p)}
    assert hopper == set(HOPPER_PTX_SHA256)
