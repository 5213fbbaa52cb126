"""The kernel tests' operands and float64 yardstick, taken from the problem itself.

:func:`operands` draws what a step is given: KernelBench's inputs (``problem.get_inputs``) and
nn.Linear's weights (``problem.make_model``), at sizes in the order of the problem's dims (p12:
M, K, N; p45: M, K, H, N). :func:`reference64` runs the model in float64
(``fusedkit.harness.reference64``) on exactly the tensors a kernel got, strided or not; :func:`tier`
is the harness's verdict on an output beside that reference and eager fp32.
"""

from __future__ import annotations

import torch

from fusedkit import problems
from fusedkit.harness import classify, eager32, rel_error
from fusedkit.harness import reference64 as model_reference64

P12, P45 = problems.get("p12"), problems.get("p45")
MULT, SLOPE = P12.constants["multiplier"], P12.constants["negative_slope"]


def operands(key: str, *dims: int, seed: int = 0, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    """(x, *the model's parameters) at ``dims``: p12 (x, w, b), p45 (x, w1, b1, w2, b2)."""
    p = problems.get(key)
    sizes = p.sizes(dict(zip((d.name for d in p.dims), dims)))
    (x,) = p.get_inputs(sizes, seed=seed, device=device)
    return (x, *(t.detach() for t in p.make_model(sizes, seed=seed, device=device).parameters()))


def model(key: str, x: torch.Tensor, *params: torch.Tensor) -> torch.nn.Module:
    """The problem's model holding ``params``, at the sizes their shapes give (every weight is
    (out, in), so the dims are x's two and each weight's first)."""
    p = problems.get(key)
    dims = (*x.shape, *(t.shape[0] for t in params if t.dim() == 2))
    return p.model_with(p.sizes(dict(zip((d.name for d in p.dims), dims))), *params, device=x.device)


def reference64(key: str, x: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:
    """The model on these tensors in float64."""
    return model_reference64(model(key, x, *params), [x])


def tier(key: str, out: torch.Tensor, x: torch.Tensor, *params: torch.Tensor) -> str:
    """The tier the harness gives ``out`` on these tensors: fp32-faithful, kb-pass or fast."""
    m = model(key, x, *params)
    ref, eager = model_reference64(m, [x]), eager32(m, [x])
    return classify(rel_error(out, ref), rel_error(eager, ref),
                    torch.allclose(out, eager, atol=1e-4, rtol=1e-4))
