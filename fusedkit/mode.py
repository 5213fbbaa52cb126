"""Which of the workbook's two modes this process runs in: a CUDA GPU, or none.

With a GPU, kernels build and run and benchmarks are live. Without one (CI, a laptop),
CUDA sources are compiled to PTX with ``nvcc`` where it exists, Triton kernels run in
Triton's interpreter at small sizes, and timings come from the records in ``data/``.
A missing GPU or ``nvcc`` is a stated mode, never an error.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
from dataclasses import dataclass

import torch


def ensure_triton_mode() -> None:
    """Choose Triton's interpreter when there is no GPU, before Triton is imported, and keep
    autotuning results on disk (Triton's ``TRITON_CACHE_AUTOTUNING``).

    An explicit ``TRITON_INTERPRET`` or ``TRITON_CACHE_AUTOTUNING`` in the environment is respected.
    """
    if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    # Each candidate runs in a fresh worker process (fusedkit.harness): without its results
    # on disk, an autotuned kernel would benchmark every config again in every one of them.
    os.environ.setdefault("TRITON_CACHE_AUTOTUNING", "1")


def triton_interprets() -> bool:
    """True when this process runs Triton kernels in Triton's CPU interpreter
    (``TRITON_INTERPRET=1``, set before Triton is imported); False when Triton compiles them for
    a GPU, where a Triton kernel cannot take CPU tensors at all."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


@dataclass(frozen=True)
class Mode:
    """What this process can do. ``gpu`` is the deciding flag for every notebook cell."""

    gpu: bool
    device: str          # "NVIDIA H200" or "cpu: <processor>"
    capability: str      # "9.0" with a GPU, "" without
    nvcc: str            # path to nvcc, "" when absent
    triton: str          # Triton version, "" when not installed
    triton_interpreter: bool

    @property
    def name(self) -> str:
        """One word for tables and figure labels: "gpu" or "cpu"."""
        return "gpu" if self.gpu else "cpu"

    def describe(self) -> str:
        """A short paragraph saying what runs live in this mode and what is read from records."""
        if self.gpu:
            lines = [f"GPU mode on {self.device} (compute capability {self.capability}):",
                     "kernels build and run here; checks and timings are live."]
        else:
            lines = [f"CPU mode on {self.device}: no CUDA GPU is visible.",
                     "Roofline and layout sections run fully; timings are read from the "
                     "GPU records in data/ and labelled with their device and date."]
            lines.append("CUDA sources compile to PTX with " + self.nvcc if self.nvcc
                         else "nvcc was not found, so PTX listings are skipped.")
            if self.triton:
                lines.append(f"Triton {self.triton} kernels run in its CPU interpreter at small sizes.")
            else:
                lines.append("Triton is not installed, so Triton kernels are not run.")
        return "\n".join(lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown processor"


def detect_mode() -> Mode:
    """Inspect the process: GPU, its capability, nvcc and Triton."""
    gpu = torch.cuda.is_available()
    if gpu:
        props = torch.cuda.get_device_properties(0)
        device, capability = props.name, f"{props.major}.{props.minor}"
    else:
        device, capability = "cpu: " + _cpu_name(), ""
    triton = ""
    if importlib.util.find_spec("triton") is not None:
        import triton  # noqa: PLC0415 - imported only when present

        triton = triton.__version__
    return Mode(gpu=gpu, device=device, capability=capability,
                nvcc=shutil.which("nvcc") or "", triton=triton,
                triton_interpreter=triton_interprets())
