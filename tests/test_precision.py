"""TF32 emulation: the rounding is to nearest at 10 mantissa bits, and its error has the size
TF32 is known for."""

import secrets

import pytest
import torch

from fusedkit.precision import tf32_linear, to_tf32


def test_to_tf32_keeps_10_bits_and_rounds_to_nearest():
    g = torch.Generator().manual_seed(secrets.randbits(31))
    t = (torch.rand(10_000, generator=g) - 0.5) * 10.0 ** torch.randint(-8, 8, (10_000,), generator=g).float()
    r = to_tf32(t)
    assert (r.view(torch.int32) & 0x1FFF == 0).all()           # low 13 bits cleared
    rel = ((r.double() - t.double()).abs() / t.double().abs()).max().item()
    assert 2.0**-13 < rel <= 2.0**-11                             # half an ulp of 10 bits, reached
    assert to_tf32(torch.tensor([1.0 + 2.0**-11 + 2.0**-20]))[0].item() == 1.0 + 2.0**-10


def test_tf32_linear_error_is_tf32_sized():
    g = torch.Generator().manual_seed(secrets.randbits(31))
    x, w, b = torch.rand(8, 2048, generator=g), torch.rand(16, 2048, generator=g) - 0.5, torch.rand(16, generator=g)
    exact = x.double() @ w.double().T + b.double()
    err = ((tf32_linear(x, w, b) - exact).norm() / exact.norm()).item()
    assert 1e-5 < err < 1e-2


def test_to_tf32_refuses_other_dtypes():
    with pytest.raises(TypeError, match="float32"):
        to_tf32(torch.ones(3, dtype=torch.float64))
