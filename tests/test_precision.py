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


def test_fp16_and_bf16_round_to_nearest_even_with_their_own_ranges():
    from fusedkit.precision import to_bf16, to_fp16
    x = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8 + 2**-9, 2.0**-20 * (1 + 2**-6), 70000.0])
    h, b = to_fp16(x), to_bf16(x)
    assert h.dtype == b.dtype == torch.float32
    assert h[0] == 1.0 and h[1] == 1 + 2 * 2**-10          # ties to even at 10 mantissa bits
    assert b[2] == 1 + 2**-7                                # 7 bits: 1 + 0.75 ulp rounds up to 1 ulp
    assert h[3] != x[3] and b[3] == x[3]                    # below 2**-14 fp16 keeps fewer bits
    assert torch.isinf(h[4]) and torch.isfinite(b[4])       # fp16 overflows above 65504
