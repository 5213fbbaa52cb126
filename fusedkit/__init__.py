"""fusedkit: the shared helpers of a workbook on fused GPU kernels written from PyTorch.

Importing the package settles the run mode once (see :mod:`fusedkit.mode`): with no CUDA
GPU, Triton kernels run in Triton's CPU interpreter, which must be chosen before Triton
is first imported.
"""

from fusedkit.mode import ensure_triton_mode as _ensure_triton_mode

_ensure_triton_mode()

__version__ = "0.1.0"
