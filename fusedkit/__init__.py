"""fusedkit: the shared helpers of a workbook on fused GPU kernels written from PyTorch.

Importing the package settles the run mode once (see :mod:`fusedkit.mode`): with no CUDA
GPU, Triton kernels run in Triton's CPU interpreter, which must be chosen before Triton
is first imported.
"""

from fusedkit import interrupts as _interrupts

if _interrupts.launched_as_command():
    # Before torch is imported (a second or two): a Ctrl-C or SIGTERM while the command
    # starts is one line and exit status 2, not a traceback from inside an import.
    _interrupts.exit_while_starting()

from fusedkit.mode import ensure_triton_mode as _ensure_triton_mode  # noqa: E402

_ensure_triton_mode()

__version__ = "0.1.0"
