"""What a step derives from a weight (an fp16x3 split, an fp16 copy, a transposed copy), kept while
the weight is alive and unchanged, so that a call pays for it once per weight version, not once
per call.

Loaded like a step (``load_step("common", "weight_cache.py")``): one cache per process, or per
exported ModelNew, shared by every step that loads it.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Callable, TypeVar

import torch

T = TypeVar("T")

CACHE_SIZE = 8  # entries; each is about as many bytes as its fp32 weight (or half of it)
_cache: OrderedDict[tuple, tuple[weakref.ref, object]] = OrderedDict()


def clear() -> None:
    """Forget every cached entry (use after changing a weight behind autograd's back, e.g.
    through ``weight.data`` or a custom kernel, which does not bump ``weight._version``)."""
    _cache.clear()


def size() -> int:
    """Entries held now."""
    return len(_cache)


def weight_key(weight: torch.Tensor) -> tuple:
    """(address, version, shape, strides, device) of a weight.

    ``_version`` counts in-place writes through this tensor and its views (copy_, mul_, an
    optimizer step ...), so a changed weight gets a new key even at the same address."""
    return (weight.data_ptr(), weight._version, tuple(weight.shape), tuple(weight.stride()),
            str(weight.device))


def cached(weight: torch.Tensor, tag: str, make: Callable[[torch.Tensor], T]) -> T:
    """``make(weight)``, computed once per (``tag``, :func:`weight_key`) and reused while the
    same tensor stays alive and unmodified. ``tag`` names what is derived ("fp16x3",
    "fp16" ...): one weight can have several entries. Inference-mode tensors have no version
    counter, so for them ``make`` runs on every call."""
    # Drop entries whose tensor died: its memory may now hold a different tensor with the
    # same address and a fresh version counter, which would otherwise hit a stale entry.
    for key in [k for k, (ref, _) in _cache.items() if ref() is None]:
        del _cache[key]
    if weight.is_inference():
        return make(weight)
    key = (tag, *weight_key(weight))
    if key in _cache:
        _cache.move_to_end(key)  # least recently used goes first when full
        return _cache[key][1]
    value = make(weight)
    # Older versions of this same tensor are stale now; free their memory at once.
    same_tensor = lambda k: k[:2] == key[:2] and k[3:] == key[3:]  # noqa: E731 - all but the version
    for k in [k for k in _cache if same_tensor(k)]:
        del _cache[k]
    _cache[key] = (weakref.ref(weight), value)
    while len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return value
