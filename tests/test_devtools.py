"""The GPU devtools still run: in Triton's interpreter on the CPU they check logic only."""

import subprocess
import sys

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU run is the real probe")
@pytest.mark.parametrize("tool", ["probe_p12_tf32", "probe_tma_tf32"])
def test_probe_runs_in_the_interpreter(tool):
    out = subprocess.run([sys.executable, "-m", f"fusedkit.devtools.{tool}"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rel. error" in out.stdout and "FAILED" not in out.stdout


def test_shell_tools_parse():
    from pathlib import Path

    for sh in Path(__file__).resolve().parents[1].glob("fusedkit/devtools/*.sh"):
        assert subprocess.run(["bash", "-n", str(sh)]).returncode == 0, sh
