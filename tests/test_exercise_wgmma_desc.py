"""Exercise p12_wgmma_desc: the learner's descriptor, checked against the mirror on the CPU,
built into the wgmma_tma step's kernel (PTX for sm_90a here, a measured run on a Hopper GPU).

CPU: the worked solution passes and its PTX carries the descriptor's constant and mask; each
typical slip gets a line naming it (never a traceback); the learner's formula, traced into
C++, computes in a host-compiled program what the Python function computes; a compile error is
one line; the reads a wrong descriptor would make outside the shared tiles are found before
anything runs; the binding passes the C++ front end. GPU (``-m gpu``, Hopper): the solution is
right against float64 and timed, a wrong descriptor gives wrong numbers and the verdict names
the slip, a dangerous one is not run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sysconfig
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fusedkit import exercises, hopper_layout as hl, problems
from fusedkit.exercises import p12_wgmma_desc as ex
from fusedkit.exercises._protocol import source_of
from kernel_helpers import gpu_test, needs_nvcc

SOLUTION = source_of(ex.sw128_desc)

# (slip, [(text in the solution, replacement)], words the line must hold)
SLIPS = {
    "strides swapped": ([("leading = 16 >> 4", "leading = 1024 >> 4"), ("stride = 1024 >> 4", "stride = 16 >> 4")],
                        "the two byte offsets are swapped"),
    "start not shifted": ([("start = (smem_byte_addr & 0x3FFFF) >> 4", "start = smem_byte_addr & 0x3FFFF")],
                          "it was not shifted by 4"),
    "bytes, not 16-byte units": ([("leading = 16 >> 4", "leading = 16"), ("stride = 1024 >> 4", "stride = 1024")],
                                 "byte counts, where the fields hold bytes >> 4"),
    "64-byte swizzle": ([("swizzle = 1", "swizzle = 2")], "is 2 (64-byte swizzle)"),
    "no swizzle": ([("swizzle = 1", "swizzle = 0")], "is 0 (no swizzle)"),
    "mode shifted twice": ([("swizzle = 1", "swizzle = 1 << 62")], "does not fit in 64 bits"),
    "no 18-bit mask": ([("start = (smem_byte_addr & 0x3FFFF) >> 4", "start = smem_byte_addr >> 4")],
                       "not cut to the 18 bits"),
    "14-bit mask before the shift": ([("(smem_byte_addr & 0x3FFFF) >> 4", "(smem_byte_addr & 0x3FFF) >> 4")],
                                     "cut to 14 bits (0x3FFF) before the shift"),
    "one row, not one atom": ([("stride = 1024 >> 4", "stride = 128 >> 4")], "holds 8 = 128 bytes"),
    "leading left at 0": ([("leading = 16 >> 4", "leading = 0")], "assumed to be 1"),
    "stride in the wrong bits": ([("(stride << 32)", "(stride << 31)")], "it went to bit 31, not 32"),
    "leading far off its bits": ([("(leading << 16)", "(leading << 14)")], "in no field"),
    "a branch on the address": ([("start = (smem_byte_addr & 0x3FFFF) >> 4",
                                  "start = (smem_byte_addr & 0x3FFFF) >> 4 if smem_byte_addr else 0")],
                                "not as one formula the kernel can use"),
    "true division": ([("start = (smem_byte_addr & 0x3FFFF) >> 4", "start = (smem_byte_addr & 0x3FFFF) / 16")],
                      "divide with // or >> 4, not /"),
}


def cell(src: str):
    """The ``sw128_desc`` a notebook cell of ``src`` defines."""
    namespace: dict = {}
    exec(src, namespace)  # noqa: S102 - our own solution's text
    return namespace["sw128_desc"]


def slipped(name: str):
    src = SOLUTION
    for old, new in SLIPS[name][0]:
        assert src.count(old) == 1, (name, old)
        src = src.replace(old, new)
    return cell(src)


def run(fn, capsys, **kw):
    result = exercises.check(problems.get("p12"), "p12_wgmma_desc", fn, **kw)
    out, err = capsys.readouterr()
    assert out.splitlines() == [result.message] and "Traceback" not in out + err
    assert result.ok == result.message.startswith("✓")
    return result


# -- on the CPU --------------------------------------------------------------------------------

_DESC_PTX = re.compile(r"and\.b32\s+(%r\d+), (%r\d+), (\d+);\s*\n\s*shr\.u32\s+(%r\d+), \1, (\d+);"
                       r"\s*\n\s*cvt\.u64\.u32\s+(%rd\d+), \4;\s*\n\s*or\.b64\s+%rd\d+, \6, (\d+);")


@needs_nvcc
def test_the_solution_passes_and_its_kernel_compiles_for_sm90a(capsys):
    r = run(ex.sw128_desc, capsys, device="cpu")
    n, ptx = r.values["addresses"], r.values["ptx"]
    assert r.ok and n == len(ex.ADDRESSES) > 16384
    assert r.message.startswith(f"✓ right: your descriptor is hopper.cuh's on all {n:,} addresses, "
                                f"and {ex.STEP_LABEL} built with it compiles for sm_90a (8 wgmma.mma_async")
    assert ".target sm_90a" in ptx
    consts = {(int(m), int(s), int(c)) for *_, m, _, s, _, c in _DESC_PTX.findall(ptx)}
    assert consts == {(0x3FFF0, 4, hl.sw128_desc(0))}     # as in the ladder's own step


def test_the_blank_skeleton_names_what_is_missing(capsys):
    r = run(cell(exercises.get("p12_wgmma_desc").skeleton), capsys, device="cpu")
    assert not r.ok and r.message.startswith("✗ your function raised NameError: name 'start' is not defined")
    assert "Hint: complete TODO 1-4" in r.message


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_a_slip_gets_its_own_line(slip, capsys):
    r = run(slipped(slip), capsys, device="cpu")
    assert not r.ok and r.message.startswith("✗ ") and "Hint: " in r.message
    assert SLIPS[slip][1] in r.message, r.message


FORMULAS = {
    "solution": ex.sw128_desc,
    "strides swapped": slipped("strides swapped"),
    "wraps below zero": lambda a: (a - 1024) & 0xFFFF,            # uint64_t wrap-around
    "every operator": lambda a: ((a * 3 + 7) // 5 % 1000 ^ ~a) | (a << 2) >> 1,
}


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_traced_cpp_computes_what_the_python_function_computes(tmp_path):
    body, calls = [], []
    for i, fn in enumerate(FORMULAS.values()):
        expr = ex.trace(fn)
        body.append(ex.cpp_function(expr).replace("exercise_sw128_desc", f"f{i}"))
        calls.append(f"f{i}(a)")
    src = tmp_path / "trace.cpp"
    src.write_text("#include <cstdint>\n#include <cstdio>\n#define __device__\n#define __forceinline__ inline\n"
                   + "\n".join(body) + "\nint main() { unsigned a; while (std::scanf(\"%u\", &a) == 1) "
                   "std::printf(\"" + " ".join(["%llu"] * len(calls)) + "\\n\", "
                   + ", ".join(f"(unsigned long long){c}" for c in calls) + "); }\n")
    exe = tmp_path / "trace"
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(exe), str(src)], check=True, timeout=120)
    addrs = ex.ADDRESSES[::37]
    out = subprocess.run([str(exe)], input="\n".join(map(str, addrs)), capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()
    assert len(out) == len(addrs)
    for a, line in zip(addrs, out):
        got = [int(v) for v in line.split()]
        want = [ex.trace(fn).value(a) for fn in FORMULAS.values()]
        assert got == want, a
        assert want[:2] == [FORMULAS["solution"](a), FORMULAS["strides swapped"](a)]   # = Python


REST = (1 << 16) | (64 << 32) | (1 << 62)     # the three constant fields, right


def test_uint64_semantics_that_python_does_not_share_are_refused(capsys):
    r = run(lambda a: ((a & 0x3FFFF) >> 4) - 1 + 1 + REST, capsys, device="cpu")
    assert r.ok                                           # wraps to the same value both ways
    r = run(lambda a: ((((a & 0x3FFFF) >> 4) << 70) >> 70) | REST, capsys, device="cpu")
    assert not r.ok and "C++ shifts a 64-bit value by 0 .. 63" in r.message
    r = run(lambda a: ((((a & 0x3FFFF) >> 4) << 60) >> 60) | REST, capsys, device="cpu")
    assert not r.ok and "in the kernel's uint64_t arithmetic your formula gives" in r.message


@needs_nvcc
def test_a_compile_error_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(ex, "cpp_function", lambda expr: "this is not C++;\n")
    r = run(ex.sw128_desc, capsys, device="cpu")
    assert not r.ok and r.message.startswith(f"✗ {ex.STEP_LABEL} with your descriptor does not compile for sm_90a: ")
    assert "error" in r.message and "\n" not in r.message


def test_the_exercise_follows_the_registered_step():
    step = ex.exercise_folder(ex.trace(ex.sw128_desc))
    assert step.name == problems.get("p12").variant("wgmma_tma").source.split("/")[1]
    text = step.read_text()
    assert "sm90::sw128_desc(" not in text and text.count("exercise_sw128_desc(") >= 3
    assert text.rstrip().endswith(f'#include "{ex.ENTRY.name}"   // the entry point the binding calls')
    assert (step.parent / ex.BINDING.name).is_file() and (step.parent / ex.ENTRY.name).is_file()
    assert (step.parent / "hopper_epilogue.cuh").is_file() and (step.parent.parent / "common" / "hopper.cuh").is_file()


def test_reads_outside_the_tiles_are_found_before_anything_runs():
    assert ex.outside_reads(ex.sw128_desc) == ""
    assert ex.outside_reads(slipped("strides swapped")) == ""        # inside, just wrong
    for slip in ("bytes, not 16-byte units", "start not shifted", "14-bit mask before the shift"):
        assert "outside the tiles" in ex.outside_reads(slipped(slip)), slip


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_exercise_binding_passes_the_cpp_front_end():
    """The binding needs pybind11 alone (torch ships it); its entry point's definition, at the end
    of the step's copy, passes nvcc with the step (the PTX above)."""
    inc = Path(torch.__file__).parent / "include"
    proc = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=syntax_check",
                           f"-I{inc}", f"-I{sysconfig.get_paths()['include']}", str(ex.BINDING)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_wrong_arguments():
    with pytest.raises(ValueError, match="belongs to problem p12, not p45"):
        exercises.check("p45", "p12_wgmma_desc", ex.sw128_desc)
    r = exercises.check("p12", "p12_wgmma_desc", 42, show=False, device="cpu")
    assert not r.ok and r.message.startswith("✗ got int, not a function")


@pytest.mark.parametrize("slip,outcome,words", [
    (None, dict(ok=True, rel=3.1e-4), ["✓ right: your descriptor is hopper.cuh's", "ran on Fake H200",
                                       "rel. error 3.1e-04 against float64 (one fp16 product allows 6.0e-04)",
                                       "0.25 ms per call"]),
    ("strides swapped", dict(ok=True, rel=1.0), ["✗ wrong numbers on Fake H200: rel. error 1.0e+00",
                                                 "the two byte offsets are swapped"]),
    ("strides swapped", dict(ok=False, failure="result reuse: the second input got ..."),
     ["✗ wrong numbers on Fake H200: the check found result reuse", "swapped"]),
    ("no 18-bit mask", dict(ok=True, rel=3.0e-4), ["the kernel still computed the right numbers on Fake H200",
                                                   "not cut to the 18 bits"]),
    ("start not shifted", None, ["✗ not run on the GPU: ", "outside the tiles", "not shifted by 4"]),
])
def test_the_hopper_verdicts_say_what_the_gpu_showed(slip, outcome, words, monkeypatch, capsys):
    """The GPU branch of the check with the GPU faked (the run itself is the -m gpu tests')."""
    calls = []

    def fake_measure(problem, build_, sizes, **kw):
        calls.append(kw)
        check = SimpleNamespace(rel_error=outcome.get("rel", float("nan")))
        timing = SimpleNamespace(median_ms=0.25) if kw["time_it"] else None
        return SimpleNamespace(ok=outcome["ok"], check=check, failure=outcome.get("failure", ""),
                               timing=timing)
    monkeypatch.setattr(ex, "measure", fake_measure)
    monkeypatch.setattr(ex, "_fp16_error", lambda *a: 3.0e-4 - ex.ERROR_SLACK / ex.FP16_FACTOR)
    monkeypatch.setattr(ex.build, "nvcc_available", lambda: False)       # no PTX needed here
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake H200")
    r = run(ex.sw128_desc if slip is None else slipped(slip), capsys, device=torch.device("cuda"))
    assert r.ok == (slip is None)
    assert all(w in r.message for w in words), r.message
    if outcome is None:
        assert not calls                                   # never launched
    else:
        assert calls[0]["precision"] == "fp16" and calls[0]["time_it"] == (slip is None)


# -- on a Hopper GPU ---------------------------------------------------------------------------

def _hopper():
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a Hopper (sm_90) GPU: wgmma")


@gpu_test
def test_on_hopper_the_solution_is_right_against_float64_and_timed(capsys):
    _hopper()
    r = run(ex.sw128_desc, capsys)
    assert r.ok, r.message
    m = r.measurement
    assert m.timed and m.sizes == m.problem.defaults and m.timing.timer == "cuda-events"
    assert r.message.startswith("✓ right: ") and torch.cuda.get_device_name() in r.message


@gpu_test
@pytest.mark.parametrize("slip,words", [
    ("strides swapped", "✗ wrong numbers on "),
    ("64-byte swizzle", "✗ wrong numbers on "),
    ("start not shifted", "✗ not run on the GPU: "),
    ("no 18-bit mask", "the kernel still computed the right numbers"),
])
def test_on_hopper_a_wrong_descriptor_gives_wrong_numbers_and_its_name(slip, words, capsys):
    _hopper()
    r = run(slipped(slip), capsys)
    assert not r.ok and words in r.message and SLIPS[slip][1] in r.message, r.message
