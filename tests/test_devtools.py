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


def test_gpu_session_sweep_defaults_name_real_variants_and_sizes():
    """A typo in the sweep stage's defaults would surface only on a lent GPU, costing device time."""
    import re
    from pathlib import Path

    from fusedkit import problems
    from fusedkit.sweep import parse_sweep

    text = (Path(__file__).resolve().parents[1] / "fusedkit/devtools/gpu_session.sh").read_text()
    specs = dict(re.findall(r"spec=\$\{SWEEP_(P\d+):-([^}]+)\}", text))
    variants = dict(re.findall(r"v=\$\{SWEEP_VARIANTS_(P\d+):-([^}]+)\}", text))
    assert specs.keys() == variants.keys() == {"P12", "P45"}
    for key, spec in specs.items():
        p = problems.get(key.lower())
        axes = parse_sweep(p, [spec])
        assert max(axes["batch_size"]) == p.defaults["batch_size"], "the series must reach KernelBench's size"
        assert {v.slug for v in p.ladder(variants[key].split(","))} >= {"eager"}


def test_probe_logs_are_read_as_they_print():
    from fusedkit import records as rec
    from fusedkit.devtools import probe_p12_tf32

    for path in sorted((rec.default_path().parent / "logs").glob("probe_p12_tf32_h200*.txt")):
        log = probe_p12_tf32.read_log(path)
        assert log["eager"] and all(0.1 < e < 1.0 for e in log["eager"])
        cfg = log["configs"]
        assert len(cfg) > 0 and cfg.loc[~cfg["failed"], "ms"].notna().all()
        assert cfg.loc[cfg["failed"], "ms"].isna().all()
