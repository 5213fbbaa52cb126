"""The frames between the caller and its worker: plain data and raw tensor bytes, never a pickle.

A message is a length-prefixed JSON header, then a length-prefixed frame per tensor it declares
(``{"$tensor": i, "dtype", "shape"}``). The caller reads every frame against a deadline, so half
a frame, or bytes that are no frame, is a verdict in time, never a hang."""

from __future__ import annotations

import json
import math
import select
import socket
import struct
import time
from typing import Callable

import torch

MAX_HEADER_BYTES = 16 * 2**20
MAX_TENSOR_BYTES = 8 * 2**30
MAX_DEPTH = 16
DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "uint8": torch.uint8, "bool": torch.bool}
GPU_SPIN_S = 1.0
_TENSOR = "$tensor"
_LENGTH = struct.Struct("<Q")


class Malformed(ValueError):
    """A message that is not the data it should be; the text says what was wrong."""


def send(sock: socket.socket, message: object) -> None:
    """Send ``message`` (plain data, CPU or GPU tensors inside lists and dicts)."""
    tensors: list[torch.Tensor] = []
    header = json.dumps(_encode(message, tensors)).encode()
    sock.sendall(_LENGTH.pack(len(header)) + header)
    for t in tensors:
        data = t.view(torch.uint8).numpy() if t.numel() else b""
        sock.sendall(_LENGTH.pack(len(data)))
        sock.sendall(memoryview(data))


def _encode(value: object, tensors: list) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous().reshape(-1)
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise TypeError(f"a {value.dtype} tensor cannot cross; allowed: {', '.join(DTYPES)}")
        tensors.append(t)
        return {_TENSOR: len(tensors) - 1, "dtype": dtype, "shape": list(value.shape)}
    if isinstance(value, (list, tuple)):
        return [_encode(v, tensors) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v, tensors) for k, v in value.items()}
    raise TypeError(f"a {type(value).__name__} cannot cross the process line; send plain data")


def spin_s(device: torch.device) -> float:
    """How long a worker for ``device`` and its caller poll for a message before sleeping: a second on
    a GPU, whose host work is inside the events (docs/measuring.md); none on a CPU (its CPU time counts)."""
    return GPU_SPIN_S if device.type == "cuda" else 0.0


def receive(sock: socket.socket, deadline: float, tick: Callable[[], None] = lambda: None,
            pair: bool = False, spin_s: float = 0.0) -> object:
    """The next message, read by ``deadline`` (a ``time.monotonic()`` value): TimeoutError after it,
    EOFError when the other side has gone, :class:`Malformed` for anything but data (or, with
    ``pair``, anything but a ``[kind, body]`` pair, returned as a tuple). ``tick`` runs every
    50 ms of waiting (a run asked to stop raises there). For its first ``spin_s`` seconds it polls
    without sleeping (see :func:`spin_s`)."""
    spin_until = time.monotonic() + spin_s

    def read(n: int, into: memoryview | None = None) -> memoryview:
        return read_exact(sock, n, deadline, tick, into, spin_until)
    size = _LENGTH.unpack(read(_LENGTH.size))[0]
    if size > MAX_HEADER_BYTES:
        raise Malformed(f"a header of {size} bytes; at most {MAX_HEADER_BYTES}")
    try:
        tree = json.loads(bytes(read(size)).decode(),
                          parse_constant=lambda name: {"NaN": math.nan, "Infinity": math.inf,
                                                       "-Infinity": -math.inf}[name])
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Malformed(f"a header that is not JSON ({type(e).__name__})") from None
    message = _decode(tree, 0, read, [0])
    if pair and not (isinstance(message, list) and len(message) == 2 and isinstance(message[0], str)):
        raise Malformed("a reply that is not a [kind, body] pair")
    return tuple(message) if pair else message


def read_exact(sock: socket.socket, n: int, deadline: float, tick: Callable[[], None],
               into: memoryview | None = None, spin_until: float = 0.0) -> memoryview:
    buf = into if into is not None else memoryview(bytearray(n))
    got = 0
    while got < n:
        tick()
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            raise TimeoutError
        wait = 0.0 if now < spin_until else min(left, 0.05 if math.isfinite(left) else 1.0)
        ready, _, _ = select.select([sock], [], [], wait)
        if not ready:
            continue
        k = sock.recv_into(buf[got:], n - got)
        if k == 0:
            raise EOFError
        got += k
    return buf


def _decode(value: object, depth: int, read: Callable, count: list[int]) -> object:
    """``value`` with each tensor it declares read from its frame (frames follow the header in
    the order the tensors appear in it)."""
    if depth > MAX_DEPTH:
        raise Malformed(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, list):
        return [_decode(v, depth + 1, read, count) for v in value]
    if not isinstance(value, dict):
        return value
    if _TENSOR not in value:
        return {k: _decode(v, depth + 1, read, count) for k, v in value.items()}
    i, dtype, shape = count[0], value.get("dtype"), value.get("shape")
    if set(value) != {_TENSOR, "dtype", "shape"} or value[_TENSOR] != i or dtype not in DTYPES \
            or not isinstance(shape, list) or len(shape) > 8 \
            or not all(type(d) is int and 0 <= d < 2**40 for d in shape):
        raise Malformed(f"tensor #{i} is declared as {str(value)[:80]}")
    nbytes = math.prod(shape) * DTYPES[dtype].itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise Malformed(f"tensor #{i} declares {nbytes} bytes; at most {MAX_TENSOR_BYTES}")
    got = _LENGTH.unpack(read(_LENGTH.size))[0]
    if got != nbytes:
        raise Malformed(f"tensor #{i}'s frame holds {got} bytes, not the {nbytes} declared")
    flat = torch.empty(nbytes, dtype=torch.uint8)
    if nbytes:
        read(nbytes, memoryview(flat.numpy()))
    count[0] += 1
    return flat.view(DTYPES[dtype]).reshape(shape)
