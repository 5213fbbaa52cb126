"""Timing, the ladder runner and a real bench from the command line, recorded."""

import dataclasses
import sys

import pytest
import torch

from fusedkit import records
from fusedkit.device import time_fn
from fusedkit.cli import main
from fusedkit.problems import extensions, get
from fusedkit.runner import run_ladder


def test_cpu_timing_is_labelled_ordered_and_keeps_what_it_is_asked_to():
    t, kept = time_fn(lambda: torch.randn(64, 64) @ torch.randn(64, 64), warmup_ms=5, rep_ms=30,
                      device="cpu", keep=2)
    assert t.timer == "cpu-wall" and t.repeats >= 3 and 0 < t.p10_ms <= t.median_ms <= t.p90_ms
    assert len(kept) == 2 and all(out.shape == (64, 64) for _, out in kept)


def test_ladder_on_cpu_records_rows(tmp_path):
    """The Triton steps run in the interpreter in their own problems' tests."""
    path = tmp_path / "records.csv"
    p = get("p12")
    df = run_ladder(p, p.sizes(batch_size=8, in_features=64, out_features=16),
                    variants=["eager", "addmm_alpha_beta"], seeds=2, warmup_ms=1,
                    rep_ms=10, records_path=path, progress=False)
    on_disk = records.read_records(path)
    assert list(df["variant"]) == list(on_disk["variant"]) == ["eager", "addmm_alpha_beta"]
    assert (on_disk["timer"] == ("cpu-wall" if not torch.cuda.is_available() else "cuda-events")).all()
    assert df.loc[df["variant"] == "eager", "speedup"].item() == pytest.approx(1.0)
    assert (on_disk["median_ms"] > 0).all()
    assert on_disk["tier"].isin(["reference", "fp32-faithful"]).all()


def test_every_extension_builds_at_once_before_the_first_is_needed(tmp_path, capsys):
    """A cold GPU machine built each extension on first use, one at a time (issue 36). Here, with
    a stand-in build command (no CUDA torch): every build starts before the first ends, and a
    failed one is named in one line. Without a GPU the command refuses in one line."""
    from fusedkit import build

    log = tmp_path / "log"

    def stand_in(problem, hopper):
        fails = "print('kernels/p45/x.cu(3): error: nope'); raise SystemExit(1)" if problem == "p45" and hopper else ""
        return [sys.executable, "-c", f"import time; open({str(log)!r}, 'a').write('start %f\\n' % time.time()); "
                f"time.sleep(1); open({str(log)!r}, 'a').write('end %f\\n' % time.time()); {fails}"]
    got = build.build_all(extensions(), command=stand_in)
    assert list(got) == extensions() == [("p12", False), ("p12", True), ("p45", False), ("p45", True)]
    assert [error for _, error in got.values()] == ["", "", "", "kernels/p45/x.cu(3): error: nope"]
    times = {kind: [float(ln.split()[1]) for ln in log.read_text().splitlines() if ln.startswith(kind)]
             for kind in ("start", "end")}
    assert len(times["start"]) == 4 and max(times["start"]) < min(times["end"])
    if not torch.cuda.is_available():
        assert main(["build"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: fusedkit build: this step needs a CUDA GPU") and "\n" not in err


def test_info_says_the_mode_and_versions(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "mode" in out and "torch" in out and "roofline gpu" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU default")
def test_a_cpu_bench_records_to_the_ignored_local_file_and_prints_its_rows(tmp_path, monkeypatch, capsys):
    tracked = tmp_path / "data" / "records.csv"
    monkeypatch.delenv("FUSEDKIT_RECORDS", raising=False)
    monkeypatch.setattr(records, "default_path", lambda: tracked)
    assert main(["bench", "--problem", "p45", "--sizes", "batch_size=4,input_size=8,hidden_size=16,output_size=8",
                 "--variants", "eager", "--seeds", "1", "--rep-ms", "2"]) == 0
    assert "eager" in capsys.readouterr().out
    assert not tracked.exists()
    local = records.read_records(tmp_path / "data" / "local" / "records.csv")
    assert list(local["variant"]) == ["eager"] and (local["timer"] == "cpu-wall").all()


def test_a_caught_variant_is_named_not_recorded_and_fails_the_bench(tmp_path, monkeypatch, capsys):
    import adversaries as bad
    p = get("p12")
    monkeypatch.setitem(p.variants, "addmm_alpha_beta",
                        dataclasses.replace(p.variants["addmm_alpha_beta"], build=bad.caching))
    path = tmp_path / "r.csv"
    rc = main(["bench", "--problem", "p12", "--sizes", "batch_size=8,in_features=16,out_features=8",
               "--variants", "eager,addmm_alpha_beta", "--seeds", "1", "--rep-ms", "2",
               "--records", str(path)])
    err = capsys.readouterr().err
    assert rc == 1 and "not recorded: addmm_alpha_beta" in err and "result reuse" in err
    assert list(records.read_records(path)["variant"]) == ["eager"]
