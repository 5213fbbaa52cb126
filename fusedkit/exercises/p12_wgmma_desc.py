"""Exercise p12_wgmma_desc: the shared-memory descriptor through which step ``wgmma_tma``'s wgmma reads its
tiles (PTX ISA, "Matrix Descriptor Format"; ``kernels/common/hopper.cuh`` explains each field,
:mod:`fusedkit.hopper_layout` mirrors it), written in Python: ``sw128_desc(smem_byte_addr)``.

The check compares it with the reference on every aligned shared address, naming the usual slips field by
field; traces it on a symbolic address into ``uint64_t`` C++, which replaces hopper.cuh's ``sw128_desc`` in a
copy of the step, compiled to PTX for sm_90a; on a Hopper GPU measures that kernel against float64, unless
the descriptor would send wgmma past the block's shared memory.
"""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from fusedkit import build
from fusedkit import hopper_layout as hl
from fusedkit.exercises._protocol import Exercise, Verdict
from fusedkit.exercises._triton import GPU_CHECK, p12_weights
from fusedkit.harness import measure, reference64, rel_error
from fusedkit.kernels import load_step
from fusedkit.problems import Problem, Sizes
from fusedkit.problems import get as get_problem

NAME, STEP = "p12_wgmma_desc", "wgmma_tma"   # the ladder step whose descriptors the learner writes
STEP_SOURCE = build.KERNELS_DIR / get_problem("p12").variant(STEP).source
STEP_LABEL = f"step {get_problem('p12').variant(STEP).number}"
BINDING, ENTRY = (Path(__file__).with_name(f"p12_wgmma_desc_{f}") for f in ("binding.cpp", "entry.cuh"))
ADDRESSES = (*range(0, 1 << 18, 16), *((1 << 18) + 16 * k for k in (0, 1, 64, 1000)), (1 << 32) - 16)
"""Every aligned shared-memory byte address, and a few past the 18 bits the encoding keeps."""
FP16_FACTOR, ERROR_SLACK = 2.0, 1e-6
"""A right kernel's rel. error is within FP16_FACTOR x what rounding x and W to fp16 costs + ERROR_SLACK."""
HINT_ALL = "complete TODO 1-4, one field each, as the comments above them say"
_MASK64 = (1 << 64) - 1


def sw128_desc(smem_byte_addr: int) -> int:
    """The 64-bit wgmma descriptor of a K-major fp16 tile at shared-memory byte address
    smem_byte_addr, laid out by TMA with 128-byte swizzle (rows of 128 bytes, 8-row atoms of
    1024 bytes, every tile 1024-byte aligned). Fields hold bytes >> 4, 14 bits each."""
    # 1: start: bits 0-13, the start address in 16-byte units; PTX's matrix-descriptor-encode
    #    keeps the address's low 18 bits (0x3FFFF) before it drops the 4 it does not store
    start = (smem_byte_addr & 0x3FFFF) >> 4
    # 2: leading: bits 16-29, the leading byte offset in 16-byte units; a swizzled K-major
    #    operand does not use it and the PTX ISA assumes 1 (16 bytes)
    leading = 16 >> 4
    # 3: stride: bits 32-45, the stride byte offset in 16-byte units: the bytes from one
    #    8-row atom (8 rows of 128 bytes) to the next
    stride = 1024 >> 4
    # 4: swizzle: bits 62-63, the swizzle mode TMA wrote the tiles with: 0 none, 1 128-byte,
    #    2 64-byte, 3 32-byte
    swizzle = 1
    # The four fields in their places:
    return start | (leading << 16) | (stride << 32) | (swizzle << 62)


# -- the learner's formula as C++ ----------------------------------------------------------------

class TraceError(Exception):
    """The learner's function cannot be written as one C++ expression; the message says why."""


class Traced:
    """A value computed from the address: its C++ text (``uint64_t`` on ``a``) and its value as C++ has it."""

    def __init__(self, cpp: str, value: Callable[[int], int]) -> None:
        self.cpp, self.value = cpp, value

    @staticmethod
    def of(x: Any) -> "Traced":
        if isinstance(x, Traced):
            return x
        if isinstance(x, bool) or not isinstance(x, int):
            raise TraceError(f"{x!r} ({type(x).__name__}) is not an integer: the descriptor is "
                             "built from integers only (use //, not /)")
        if not 0 <= x <= _MASK64:
            raise TraceError(f"the constant {x} is outside 0 .. 2**64 - 1: the kernel's uint64_t "
                             "has no negative or wider numbers")
        return Traced(f"{x}ull", lambda a: x)

    def binary(self, other: Any, op: str, reflected: bool = False) -> "Traced":
        left, right = (Traced.of(other), self) if reflected else (self, Traced.of(other))
        if op in ("<<", ">>") and right.cpp.endswith("ull") and int(right.cpp[:-3]) >= 64:
            raise TraceError(f"a shift by {right.cpp[:-3]}: C++ shifts a 64-bit value by 0 .. 63")

        def value(a: int) -> int:
            x, y = left.value(a), right.value(a)
            if op in ("<<", ">>") and y >= 64:
                raise TraceError(f"a shift by {y} at smem_byte_addr={a}: C++ shifts by 0 .. 63")
            if op in ("/", "%") and y == 0:
                raise TraceError(f"a division by zero at smem_byte_addr={a}")
            return _OPS[op](x, y) & _MASK64
        return Traced(f"({left.cpp} {op} {right.cpp})", value)

    def __invert__(self) -> "Traced":
        return Traced(f"(~{self.cpp})", lambda a: ~self.value(a) & _MASK64)

    def _refuse(self, *_: Any) -> Any:
        raise TraceError("the function compares or converts the address (if, min, max, int(), a comparison "
                         "...): the kernel needs one formula of integer operations (+ - * // % << >> & | ^ ~)")

    __bool__ = __index__ = __int__ = __float__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__ = _refuse
    __ne__ = __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __neg__ = __abs__ = __round__ = _refuse


_OPS = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__, "/": int.__floordiv__, "%": int.__mod__,
        "<<": int.__lshift__, ">>": int.__rshift__, "&": int.__and__, "|": int.__or__, "^": int.__xor__}
for _op, _name in zip(_OPS, ("add", "sub", "mul", "floordiv", "mod", "lshift", "rshift", "and", "or", "xor")):
    setattr(Traced, f"__{_name}__", lambda self, o, op=_op: self.binary(o, op))
    setattr(Traced, f"__r{_name}__", lambda self, o, op=_op: self.binary(o, op, True))


def trace(fn: Callable[[int], int]) -> Traced:
    """``fn`` on a symbolic address: its result as C++; TraceError when it is not one integer formula."""
    try:
        return Traced.of(fn(Traced("a", lambda a: a)))
    except TraceError:
        raise
    except Exception as e:  # noqa: BLE001 - the learner's function may fail in any way
        raise TraceError(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def cpp_function(expr: Traced) -> str:
    """The C++ helper that replaces hopper.cuh's sw128_desc in the exercise's copy of the step."""
    return ("// The learner's descriptor (exercise p12_wgmma_desc), traced from their Python function.\n"
            "__device__ __forceinline__ uint64_t exercise_sw128_desc(uint32_t smem_byte_addr) {\n"
            f"    const uint64_t a = smem_byte_addr;\n    return {expr.cpp};\n}}\n")


def exercise_folder(expr: Traced) -> Path:
    """The step's copy calling the learner's descriptor, beside copies of its headers and the binding, in a
    folder per source hash under ``build/exercises/`` (the includes resolve unchanged)."""
    src, anchor = STEP_SOURCE, '#include "launchers_hopper.h"\n'   # the step's test holds both to the step
    text = (src.read_text().replace("sm90::sw128_desc(", "exercise_sw128_desc(")
            .replace(anchor, anchor + "\n" + cpp_function(expr), 1)
            + f'\n#include "{ENTRY.name}"   // the entry point the binding calls\n')
    headers = [p for d in (src.parent, build.KERNELS_DIR / "common")
               for p in sorted(d.iterdir()) if p.suffix in (".h", ".cuh")]
    sha = hashlib.sha256(text.encode() + b"".join(p.read_bytes() for p in (BINDING, ENTRY, *headers)))
    sha = sha.hexdigest()[:12]
    root = build.build_root() / "exercises" / NAME / sha
    if not (root / src.parent.name / src.name).is_file():
        tmp = root.with_name(sha + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for h in headers:
            (tmp / h.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(h, tmp / h.parent.name / h.name)
        (tmp / src.parent.name / src.name).write_text(text)
        for f in (BINDING, ENTRY):
            shutil.copy2(f, tmp / src.parent.name / f.name)
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    return root / src.parent.name / src.name


# -- what the learner's descriptor says, field by field --------------------------------------------

def _start_is(fn: Callable[[int], int], formula: Callable[[int], int], addrs: tuple[int, ...]) -> bool:
    try:
        return all(hl.Descriptor.decode(int(fn(a)) & _MASK64).start == formula(a) for a in addrs)
    except Exception:  # noqa: BLE001 - a probe must not raise
        return False


def diagnose(fn: Callable[[int], int], addr: int, got: int) -> tuple[str, str]:
    """(what is wrong, the hint) for ``fn``, whose ``got`` at ``addr`` is not the reference's."""
    want = hl.sw128_desc(addr)
    g, w = hl.Descriptor.decode(got), hl.Descriptor.decode(want)
    at = f"sw128_desc({addr}) = {got:#x}, want {want:#x}"
    if addr >= (1 << 18) and all(fn(a) == hl.sw128_desc(a) for a in (16, 4096, 20000, (1 << 18) - 16)):
        return (f"{at}: right below 2**18 but not above: the address was not cut to the 18 bits "
                "the encoding keeps, so its high bits spill out of the start field",
                "TODO 1: mask, then shift: (smem_byte_addr & 0x3FFFF) >> 4 (PTX's matrix-descriptor-encode); "
                "no shared address of this kernel reaches 2**18, but the field is 14 bits wide")
    if g.leading == w.stride and g.stride == w.leading and g.leading != g.stride:
        return (f"{at}: the leading field (bits 16-29) holds {g.leading} and the stride field "
                f"(bits 32-45) {g.stride}: the two byte offsets are swapped",
                "TODO 2-3: leading is 16 >> 4 = 1 (unused, 1 by convention), stride is the 1024 "
                "bytes from one 8-row atom to the next, 1024 >> 4 = 64")
    if g.start != w.start:
        if _start_is(fn, lambda a: a & 0x3FFF, (16, 48, 4096)):
            return (f"{at}: the start field holds the byte address itself ({g.start}): it was "
                    "not shifted by 4", "TODO 1: the fields count 16-byte units: start = "
                    "(smem_byte_addr & 0x3FFFF) >> 4")
        if _start_is(fn, lambda a: (a & 0x3FFF) >> 4, (16, 16384, 20000)):
            return (f"{at}: the start field holds {g.start}: the address was cut to 14 bits "
                    "(0x3FFF) before the shift, which loses every address from 16 KB up",
                    "TODO 1: keep the 18 bits of the address, then shift: (smem_byte_addr & 0x3FFFF) >> 4")
        return (f"{at}: the start field (bits 0-13) holds {g.start}, want {w.start} "
                f"(= {addr & 0x3FFFF} >> 4)", "TODO 1: start = (smem_byte_addr & 0x3FFFF) >> 4")
    if g.stray:
        bits = [i for i in range(64) if g.stray >> i & 1]
        return (f"{at}: bit{'s' if len(bits) > 1 else ''} {', '.join(map(str, bits[:6]))} "
                f"{'are' if len(bits) > 1 else 'is'} set, in no field",
                "each field has its own bits (0-13, 16-29, 32-45, 49-51, 62-63): shift leading "
                "by 16, stride by 32 and the swizzle mode by 62, each value small enough for its field")
    if (g.leading, g.stride) in ((16, 1024), (16, w.stride), (w.leading, 1024)):
        return (f"{at}: leading {g.leading}, stride {g.stride}: byte counts, where the fields "
                "hold bytes >> 4 (16-byte units)", "TODO 2-3: leading = 16 >> 4, stride = 1024 >> 4")
    if g.stride == 128 >> 4:
        return (f"{at}: the stride field (bits 32-45) holds 8 = 128 bytes, one row; the stride "
                "byte offset goes from one 8-row atom to the next: 8 rows x 128 bytes = 1024 bytes",
                "TODO 3: stride = 1024 >> 4")
    for field, bit, todo in (("leading", 16, 2), ("stride", 32, 3)):
        have, right = getattr(g, field), getattr(w, field)
        off = next((k for k in (-3, -2, -1, 1, 2, 3) if have and have == (right << k if k > 0 else right >> -k)), 0)
        if off:
            return (f"{at}: the {field} field holds {have}, which is {right} shifted {abs(off)} "
                    f"bit{'s' if abs(off) > 1 else ''} {'up' if off > 0 else 'down'}: it went "
                    f"to bit {bit + off}, not {bit}", f"TODO {todo}: place {field} with << {bit}")
    if g.stride != w.stride:
        return (f"{at}: the stride field (bits 32-45) holds {g.stride} = {g.stride * 16} bytes; "
                "from one 8-row atom to the next is 8 rows x 128 bytes = 1024 bytes", "TODO 3: stride = 1024 >> 4")
    if g.swizzle != w.swizzle:
        return (f"{at}: the swizzle mode (bits 62-63) is {g.swizzle} ({hl.SWIZZLE_MODES[g.swizzle]}); "
                "TMA wrote the tiles with the 128-byte swizzle, mode 1",
                "TODO 4: swizzle = 1 (0 none, 1 128-byte, 2 64-byte, 3 32-byte)")
    if g.leading != w.leading:
        return (f"{at}: the leading field (bits 16-29) holds {g.leading}; for a swizzled K-major "
                "operand the PTX ISA says it is not used and assumed to be 1",
                "TODO 2: leading = 16 >> 4 = 1, as hopper.cuh writes it")
    return (f"{at}: the base offset (bits 49-51) is {g.base_offset}; it is 0 when the tile starts "
            "on a 1024-byte boundary, as every tile here does", "leave bits 49-51 at 0")


def _values(fn: Callable[[int], int]) -> tuple[int | None, str, str]:
    """(the first wrong address or None, what is wrong, the hint) over :data:`ADDRESSES`."""
    for a in ADDRESSES:
        try:
            got = fn(a)
        except Exception as e:  # noqa: BLE001 - the learner's function may fail in any way
            text = str(e).splitlines()[0] if str(e) else ""
            hint = ("the fields are integers: divide with // or >> 4, not /"
                    if isinstance(e, TypeError) and "float" in text else HINT_ALL)
            return a, f"your function raised {type(e).__name__}: {text} (smem_byte_addr={a})", hint
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            return a, f"sw128_desc({a}) returned {got!r} ({type(got).__name__}), not an integer", \
                "build it with integer operators (>> << | &), not / or float"
        if not 0 <= int(got) <= _MASK64:
            return a, (f"sw128_desc({a}) = {int(got):#x} does not fit in 64 bits" if got > 0 else
                       f"sw128_desc({a}) = {got} is negative"), \
                "the swizzle mode goes at bit 62 (swizzle << 62 with swizzle = 1), nothing above bit 63"
        if int(got) != hl.sw128_desc(a):
            return (a, *diagnose(fn, a, int(got)))
    return None, "", ""


def _traced(fn: Callable[[int], int]) -> tuple[Traced | None, str]:
    """(the formula as C++, "") when it computes what Python does, else (None, why)."""
    try:
        expr = trace(fn)
        for a in ADDRESSES[::7]:
            if expr.value(a) != fn(a):
                return None, (f"in the kernel's uint64_t arithmetic your formula gives {expr.value(a):#x} "
                              f"at smem_byte_addr={a}, Python {fn(a):#x}: keep every intermediate value "
                              "between 0 and 2**64")
    except TraceError as e:
        return None, str(e)
    return expr, ""


# -- reads outside the block's shared memory ------------------------------------------------------

_SWIZZLE_ROW = {1: 128, 2: 64, 3: 32}      # bytes per row of the swizzle atom, per mode


def _read_span(desc: int, rows: int) -> tuple[int, int]:
    """Bytes [lo, hi) one wgmma k16 slice may read through ``desc`` for ``rows`` rows of a K-major operand
    (an upper bound): swizzled, row r of 8-row group g at start + g * stride + (r % 8) * row, the XOR inside
    that row; unswizzled, 8 x 16-byte core matrices at start + g * stride, two along k a leading offset apart."""
    d, groups = hl.Descriptor.decode(desc), rows // 8 - 1
    if d.swizzle in _SWIZZLE_ROW:
        row = _SWIZZLE_ROW[d.swizzle]
        lo = d.start_address - d.start_address % row
        return lo, lo + groups * d.stride_bytes + 8 * row
    return d.start_address, d.start_address + groups * d.stride_bytes + d.leading_bytes + 128


def outside_reads(fn: Callable[[int], int]) -> str:
    """Where a read through a descriptor the step forms with ``fn`` would leave the stage tiles of the block's
    shared memory (its 1024-byte aligned base anywhere in the first 8 KB); "" when none would."""
    text, names = STEP_SOURCE.read_text(), ("BM", "BN", "BK", "kStages")   # the step's tile sizes
    bm, bn, bk, stages = (int(re.search(rf"constexpr int {n} = (\d+);", text)[1]) for n in names)
    tile_a, stage = bm * bk * 2, (bm + bn) * bk * 2
    for base in range(1024, 8193, 1024):
        end = base + stages * stage
        for s in range(stages):
            a0, b0 = base + s * stage, base + s * stage + tile_a
            uses = [(b0 + 32 * k, bn, "B") for k in range(bk // 16)]
            uses += [(a0 + h * 64 * bk * 2 + 32 * k, 64, "A") for h in range(bm // 64) for k in range(bk // 16)]
            for addr, rows, what in uses:
                lo, hi = _read_span(fn(addr), rows)
                if lo < base or hi > end:
                    return (f"for the {what} tile of stage {s} at byte {addr} the descriptor lets "
                            f"wgmma read bytes {lo} .. {hi - 1}, outside the tiles at {base} .. {end - 1}")
    return ""


# -- the kernel on a Hopper GPU ---------------------------------------------------------------------

def _fp16_error(problem: Problem, sizes: Sizes, device: torch.device) -> float:
    """rel. error against float64 of p12 with x and W rounded to fp16, all else exact (a fresh draw)."""
    model = problem.make_model(sizes, seed=31337, device=device)
    (x,) = problem.get_inputs(sizes, seed=31337, device=device)
    ref = reference64(model, [x])
    with torch.no_grad():
        model.gemm.weight.copy_(model.gemm.weight.half().float())
    return rel_error(reference64(model, [x.half().float()]), ref)


def builder(fn: Callable[[int], int]) -> Callable[[torch.nn.Module], Callable[..., torch.Tensor]]:
    """The step built with the learner's descriptor (Hopper), fed as the ladder feeds it (fp16, K padded)."""
    step = exercise_folder(trace(fn))

    def build_(model: torch.nn.Module) -> Callable[..., torch.Tensor]:
        ext = build.load_sources(f"fusedkit_exercise_{NAME}", [step, step.with_name(BINDING.name)],
                                 hopper=True)

        def wgmma_tma(x16: torch.Tensor, w16: torch.Tensor, b: torch.Tensor, c: float, s: float) -> torch.Tensor:
            y = torch.empty(x16.shape[0], w16.shape[0], device=x16.device)   # x16, w16 fresh, contiguous
            with torch.cuda.device(x16.device):
                ext.wgmma_tma(x16.data_ptr(), w16.data_ptr(), b.data_ptr(), y.data_ptr(), *y.shape,
                              x16.shape[1], c, s, torch.cuda.current_stream().cuda_stream)
            return y
        call_fp16, bound = load_step("common", "fp16_operands.py").call_fp16, p12_weights(model)
        return lambda x: call_fp16(wgmma_tma, x, *bound)
    return build_


class WgmmaDescriptor(Exercise):
    name, problem_key, notebook, answer = NAME, "p12", "02", "sw128_desc"
    solution = staticmethod(sw128_desc)
    imports = ""

    def about(self) -> str:
        return (f"checked on {len(ADDRESSES):,} shared-memory addresses against the reference, then "
                f"built into the {STEP} step's kernel (PTX for sm_90a here); on a Hopper GPU that "
                f"kernel runs through fusedkit.harness at the problem's sizes, judged against float64")

    def judge(self, problem: Problem, fn: Any, *, device: torch.device, sizes: Sizes | None = None,
              time_it: bool = True, **budget: Any) -> Verdict:
        n, found = len(ADDRESSES), dict(addresses=len(ADDRESSES), ptx="")
        if not callable(fn):
            return Verdict(f"✗ got {type(fn).__name__}, not a function. Hint: pass the function itself: "
                           "exercises.check(problem, \"p12_wgmma_desc\", sw128_desc)", values=found)
        bad, seen, hint = _values(fn)
        expr, why = _traced(fn) if bad is None or "raised" not in seen else (None, "")
        if bad is None and expr is None:
            return Verdict(f"✗ right values, but not as one formula the kernel can use: {why}. Hint: write "
                           "each field with integer operators on smem_byte_addr, no branches", values=found)
        hopper = device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9
        if bad is not None and not (hopper and expr is not None):
            return Verdict(f"✗ {seen}. Hint: {hint}", values=found)
        try:   # the kernel with the learner's formula: PTX here, and on Hopper a measured run
            found["ptx"] = ptx = build.ptx(exercise_folder(expr), arch="sm_90a") if build.nvcc_available() else ""
        except build.BuildError as e:
            line = next((ln.strip() for ln in str(e).splitlines() if "error" in ln.lower()), str(e).splitlines()[0])
            return Verdict(f"✗ {STEP_LABEL} with your descriptor does not compile for sm_90a: {line[:200]}. "
                           f"Hint: {HINT_ALL}", values=found)
        wgmmas = len(build.ptx_instructions(ptx, r"wgmma\.mma_async")) if ptx else 0
        compiled = (f"{STEP_LABEL} built with it compiles for sm_90a ({wgmmas} wgmma.mma_async in its PTX)"
                    if ptx else "(nvcc not found: the kernel was not compiled)")
        if not hopper:
            where = ("on a Hopper GPU this check also runs it against float64" if device.type == "cpu" else
                     f"this GPU, {torch.cuda.get_device_name(device)}, has no wgmma: it was not run")
            return Verdict(f"✓ right: your descriptor is hopper.cuh's on all {n:,} addresses, and "
                           f"{compiled}; {where}", values=found)
        try:
            outside = outside_reads(fn)
        except Exception as e:  # noqa: BLE001 - the learner's function may fail in any way
            outside = f"its reads could not be bounded ({type(e).__name__}: {e})"
        if outside:
            return Verdict(f"✗ not run on the GPU: {outside} (there it would end with an illegal address, "
                           f"which says less). {seen or 'Its values match'}. Hint: {hint or HINT_ALL}",
                           values=found)
        sizes = problem.sizes(sizes or problem.defaults)
        with warnings.catch_warnings():   # a descriptor known wrong is checked, not timed: its numbers tell
            warnings.simplefilter("ignore")
            m = measure(problem, builder(fn), sizes, device=device, name=f"exercise_{NAME}", precision="fp16",
                        time_it=time_it and bad is None, **{**GPU_CHECK, **budget})
        allowed = FP16_FACTOR * _fp16_error(problem, sizes, device) + ERROR_SLACK
        gpu, rel = torch.cuda.get_device_name(device), m.check.rel_error
        numbers = (f"rel. error {rel:.1e} against float64 (one fp16 product allows {allowed:.1e})"
                   if m.ok else f"the check found {m.failure.splitlines()[0][:160]}")
        right_numbers = m.ok and math.isfinite(rel) and rel <= allowed
        if bad is None and right_numbers:
            timing = f", {m.timing.median_ms:.3g} ms per call" if m.timing else ""
            line = (f"✓ right: your descriptor is hopper.cuh's on all {n:,} addresses; {STEP_LABEL} built "
                    f"with it ran on {gpu}: {numbers}{timing}")
        elif bad is None:
            line = (f"✗ {STEP_LABEL} failed on {gpu} although your descriptor is hopper.cuh's: {numbers}. "
                    "Hint: run the check again; if it stays, the step itself changed")
        elif right_numbers:
            line = (f"✗ {seen}; the kernel still computed the right numbers on {gpu} ({numbers}): the "
                    f"addresses or fields it uses do not show the slip. Hint: {hint}")
        else:
            line = f"✗ wrong numbers on {gpu}: {numbers}. {seen}. Hint: {hint}"
        return Verdict(line, m, found)


EXERCISE = WgmmaDescriptor()
