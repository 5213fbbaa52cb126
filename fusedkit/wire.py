"""What a worker sends its caller: typed, bounded frames of plain data, never a pickle.

The worker runs the candidate kernel, so everything it sends may be forged, and whatever the
caller unpickled could run code in the judging process when it arrived (``pickle`` calls any
function a message names). So a message is read here as data alone:

- one header frame: UTF-8 JSON of null, booleans, numbers, strings, lists and objects with
  string keys, at most :data:`MAX_HEADER_BYTES` long and :data:`MAX_DEPTH` deep;
- then one frame of raw bytes for each tensor the header declares, in order, as
  ``{"$tensor": i, "dtype": "float32", "shape": [rows, cols]}``: a dtype of
  :data:`DTYPES`, dimensions that are whole numbers, at most :data:`MAX_TENSOR_BYTES` in all,
  the frame exactly that long (read into a buffer of that size: a longer one is refused before
  it is copied).

Anything else (a frame of another length, a number where a list belongs, a key that is not a
string, a NaN spelled in a way JSON does not know) is :class:`Malformed`: the caller refuses the
measurement and ends the worker. The caller checks every value it reads against what it
expected (a tensor's shape against the problem's output shape, say); this module checks only
that nothing but data arrives.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

MAX_HEADER_BYTES = 16 * 2**20
"""The longest header frame read."""
MAX_TENSOR_BYTES = 8 * 2**30
"""The most bytes one tensor may declare (the rows of a thousand timed calls of problem 12 are
about 260 MB; the whole output of one check call 32 MB)."""
MAX_DEPTH = 16
"""The deepest nesting of lists and objects in a header."""
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "uint8": torch.uint8, "bool": torch.bool}
"""The tensor types that may cross."""
_TENSOR = "$tensor"


class Malformed(ValueError):
    """A message that is not the data it should be; the text says what was wrong."""


# -- the worker's side ----------------------------------------------------------------------

def send(conn: Any, message: object) -> None:
    """Send ``message`` (plain data and plain CPU or GPU tensors, in tuples, lists and dicts with
    string keys) on ``conn``, a :mod:`multiprocessing` connection."""
    buffers: list[torch.Tensor] = []
    header = json.dumps(_encode(message, buffers), allow_nan=True).encode()
    conn.send_bytes(header)
    for t in buffers:
        conn.send_bytes(t.view(torch.uint8).numpy().data if t.numel() else b"")


def _encode(value: object, buffers: list) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise TypeError(f"a {t.dtype} tensor cannot cross to the caller; allowed: {', '.join(DTYPES)}")
        buffers.append(t.reshape(-1))
        return {_TENSOR: len(buffers) - 1, "dtype": dtype, "shape": list(t.shape)}
    if isinstance(value, (list, tuple)):
        return [_encode(v, buffers) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v, buffers) for k, v in value.items()}
    raise TypeError(f"a {type(value).__name__} cannot cross to the caller; send plain data")


# -- the caller's side ----------------------------------------------------------------------

def receive(conn: Any) -> object:
    """The next message on ``conn``, read as data alone (see the module's docstring). Raises
    :class:`Malformed` for anything else, EOFError when the worker has gone."""
    try:
        header = conn.recv_bytes(MAX_HEADER_BYTES)
    except OSError as e:   # longer than allowed: multiprocessing refuses it unread
        if "bad message length" in str(e):
            raise Malformed(f"a header frame longer than {MAX_HEADER_BYTES} bytes") from None
        raise
    try:
        tree = json.loads(header.decode("utf-8"), parse_constant=_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as e:
        raise Malformed(f"a header that is not JSON ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:120] if str(e) else ''})") from None
    declared: list[tuple[torch.dtype, list[int], int]] = []
    _check(tree, 0, declared)
    tensors = [_read_tensor(conn, i, *d) for i, d in enumerate(declared)]
    return _decode(tree, tensors)


def _constant(name: str) -> float:
    # json's own spellings of what float() prints (NaN, Infinity, -Infinity): a timing of a
    # call that was never made is NaN.
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def _check(value: object, depth: int, declared: list) -> None:
    if depth > MAX_DEPTH:
        raise Malformed(f"nested deeper than {MAX_DEPTH}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for v in value:
            _check(v, depth + 1, declared)
        return
    if not isinstance(value, dict):   # json.loads makes nothing else; kept for the reader
        raise Malformed(f"a {type(value).__name__} in the header")
    if _TENSOR in value:
        declared.append(_tensor_spec(value, len(declared)))
        return
    for v in value.values():
        _check(v, depth + 1, declared)


def _tensor_spec(value: dict, index: int) -> tuple[torch.dtype, list[int], int]:
    if set(value) != {_TENSOR, "dtype", "shape"} or value[_TENSOR] != index or \
            type(value[_TENSOR]) is not int:
        raise Malformed(f"tensor #{index} is declared as {_short(value)}")
    dtype, shape = value["dtype"], value["shape"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise Malformed(f"tensor #{index} has dtype {_short(dtype)}; allowed: {', '.join(DTYPES)}")
    if not isinstance(shape, list) or len(shape) > 8 or \
            not all(type(d) is int and 0 <= d < 2**40 for d in shape):
        raise Malformed(f"tensor #{index} has shape {_short(shape)}")
    nbytes = math.prod(shape) * torch.empty(0, dtype=DTYPES[dtype]).element_size()
    if nbytes > MAX_TENSOR_BYTES:
        raise Malformed(f"tensor #{index} declares {nbytes} bytes; at most {MAX_TENSOR_BYTES}")
    return DTYPES[dtype], shape, nbytes


def _read_tensor(conn: Any, index: int, dtype: torch.dtype, shape: list[int],
                 nbytes: int) -> torch.Tensor:
    flat = torch.empty(nbytes, dtype=torch.uint8)
    if nbytes:
        try:
            got = conn.recv_bytes_into(flat.numpy())
        except Exception as e:  # noqa: BLE001 - BufferTooShort: a frame longer than declared
            raise Malformed(f"tensor #{index}'s frame is not the {nbytes} bytes declared "
                            f"({type(e).__name__})") from None
    else:
        try:
            got = len(conn.recv_bytes(1))
        except OSError:
            raise Malformed(f"tensor #{index}'s frame is not the 0 bytes declared") from None
    if got != nbytes:
        raise Malformed(f"tensor #{index}'s frame holds {got} bytes, not the {nbytes} declared")
    return flat.view(dtype).reshape(shape)


def _decode(value: object, tensors: list[torch.Tensor]) -> object:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if isinstance(value, dict):
        if _TENSOR in value:
            return tensors[value[_TENSOR]]
        return {k: _decode(v, tensors) for k, v in value.items()}
    return value


def fields(value: object, kinds: dict[str, type | tuple[type, ...]]) -> dict:
    """``value`` as the dict a report must be: exactly the keys of ``kinds``, each of its type
    (an int stands for a float; a list's items are the reader's to check), else
    :class:`Malformed` naming the first that is not."""
    if not isinstance(value, dict) or set(value) != set(kinds):
        got = sorted(value) if isinstance(value, dict) else type(value).__name__
        raise Malformed(f"a report with {got}, not the fields {sorted(kinds)}")
    out = {}
    for key, kind in kinds.items():
        v = value[key]
        want = kind if isinstance(kind, tuple) else (kind,)
        if float in want and type(v) is int:
            v = float(v)
        if type(v) not in want:
            raise Malformed(f"{key} is a {type(v).__name__}, not a "
                            f"{' or '.join(k.__name__ for k in want)}")
        out[key] = v
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = ["DTYPES", "MAX_DEPTH", "MAX_HEADER_BYTES", "MAX_TENSOR_BYTES", "Malformed", "fields",
           "receive", "send"]
