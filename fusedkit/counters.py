"""Hardware counters of every kernel step, read with Nsight Compute (``ncu``) on a GPU and kept in
``data/counters.csv`` (one row per kernel launch of one call, with the run's context; columns and
metrics: :data:`METRICS`, ``data/README.md``), so that a reader without a GPU sees them too. Kept
source pages (``data/logs/ncu``) say where a kernel's warps wait, instruction by instruction.

On the GPU machine ``python -m fusedkit.counters collect --problem p12 --out DIR [--variants ...]
[--sizes batch_size=1]`` runs ncu over ``... profile``; ``... import DIR`` turns its files into rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from fusedkit import problems, records
from fusedkit.problems import Problem, Sizes, fmt_sizes, parse_sizes

MARKER = "fusedkit_marker"
"""Name of the tiny kernel launched before each variant's call: it splits the profile."""

# Column -> candidate ncu metrics (the first the device knows is used; several are combined
# by ``max`` where the column is "the larger of").
METRICS: dict[str, tuple[str, ...]] = {
    "duration_us": ("gpu__time_duration.sum",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "tensor_pct": ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"),
    "fma_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",),
    "dram_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_gb": ("dram__bytes.sum",),
    "occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "registers": ("launch__registers_per_thread",),
    "local_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
                    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "grid": ("launch__grid_size",),
    "block": ("launch__block_size",),
    "smem_kb": ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
    "gld_sectors_per_request": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
    "l1_hit_pct": ("l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",),
    "l2_l1_gb": ("lts__t_sectors_srcunit_tex_op_read.sum",),
    "smem_ld_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "smem_st_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
}
SUMMED = {"local_bytes", "smem_kb"}       # columns that add their metrics; the rest take the max
RATIOS = {"gld_sectors_per_request"}      # columns that divide their first metric by the second
COUNTER_COLUMNS = tuple(METRICS)
COLUMNS: tuple[str, ...] = (*records.CONTEXT_COLUMNS, "problem", "sizes", "variant", "launch",
                            "kernel", *COUNTER_COLUMNS)


def default_path() -> Path:
    """``data/counters.csv`` beside the records file."""
    return records.default_path().parent / "counters.csv"


def read_counters(path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Every recorded counter row (columns :data:`COLUMNS`, counters as floats); empty if none.
    Raises :class:`fusedkit.records.RecordsError` naming the file and line of a malformed row."""
    path = Path(path) if path is not None else default_path()
    rows = [r for _, r in records.read_table(path, "counters", [COLUMNS], _row_fault)]
    df = pd.DataFrame(rows, columns=list(COLUMNS), dtype=str)
    for c in (*COUNTER_COLUMNS, "launch"):
        df[c] = pd.to_numeric(df[c].replace("", math.nan)).astype(float)
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True, format="ISO8601")
    return df


def _row_fault(row: dict[str, str]) -> str:
    """The first fault of a counters row as a sentence ("" when it is valid)."""
    return records.timestamp_fault(row["timestamp"]) or next(
        (f for c in (*COUNTER_COLUMNS, "launch") if (f := records.number_fault(c, row[c]))), "")


def short_kernel(name: str) -> str:
    """A kernel's name without namespaces, template arguments and parameters, whole otherwise; a
    PyTorch elementwise kernel keeps its operation (``vectorized_elementwise_kernel: Abs``)."""
    text = name.replace("void ", "", 1).strip()
    cut = min([i for i in (text.find("<"), text.find("(")) if i >= 0], default=len(text))
    base = text[:cut].split("::")[-1].strip()
    rest = text[cut:]
    ops = [m for m in re.findall(r"(CUDAFunctor_\w+|\w+Functor|\w+_kernel_cuda|\w+_kernel)\b", rest)
           if m != base]
    if ops and rest.startswith("<"):
        op = re.sub(r"_kernel(_cuda)?$|Functor$|^CUDAFunctor_", "", ops[-1])
        return f"{base}: {op}"
    return base


def _of_variant(problem: Problem | str, variant: str, sizes: str | dict | None,
                path: str | os.PathLike[str] | None) -> pd.DataFrame:
    p = problems.get(problem) if isinstance(problem, str) else problem
    want = sizes if isinstance(sizes, str) else fmt_sizes(p.sizes(sizes or p.defaults))
    df = read_counters(path)
    return df[(df["problem"] == p.key) & (df["variant"] == variant) & (df["sizes"] == want)]


def step_counters(problem: Problem | str, variant: str, sizes: str | dict | None = None,
                  path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The newest recorded counters of one variant at ``sizes`` (default the problem's), one row per
    launch in order; ``attrs["label"]`` says where they come from."""
    df = _of_variant(problem, variant, sizes, path)
    if df.empty:
        out = df.iloc[0:0]
        out.attrs["label"] = "no counters recorded"
        return out
    newest = df[df["run_id"] == df.sort_values("timestamp")["run_id"].iloc[-1]]
    out = newest.sort_values("launch").reset_index(drop=True)
    r = out.iloc[0]
    out.attrs["label"] = (f"Nsight Compute on {r['device']}, {r['timestamp']:%Y-%m-%d %H:%M} UTC, "
                          f"commit {r['commit']}")
    return out


# -- one kernel's source page: where its warps wait, instruction by instruction -----------------

STALL_PREFIX = "stall_"   # columns of a kept source page holding the stall samples of one reason each


def read_source_page(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A kept source page: one row per SASS instruction with ``executed``, ``samples`` and a
    ``stall_<reason>`` column per reason; ``attrs["label"]`` is its first line."""
    path = Path(path)
    with path.open() as f:
        label = f.readline().lstrip("# ").strip()
        df = pd.read_csv(f)
    df = df.rename(columns={"Source": "sass", "Warp Stall Sampling (All Samples)": "samples",
                            "Instructions Executed": "executed"})
    missing = [c for c in ("sass", "samples", "executed") if c not in df.columns]
    if missing:
        raise records.RecordsError(f"{path}:2: not a kept source page (missing {', '.join(missing)})")
    df.attrs["label"] = label
    return df


def source_regions(page: pd.DataFrame, regions: dict[str, int]) -> pd.DataFrame:
    """Stall samples and executed instructions of a source page summed by region, a region named by
    how often its instructions run in one launch (``{"k-loop": tiles * k_tiles * 8, ...}``)."""
    by_count = {count: name for name, count in regions.items()}
    region = page["executed"].map(by_count).fillna("other")
    reasons = [c for c in page.columns if c.startswith(STALL_PREFIX)]
    out = page[["samples", "executed", *reasons]].groupby(region).sum()
    out = out.reindex([*regions, "other"]).fillna(0)
    out.insert(1, "samples_share", out["samples"] / max(out["samples"].sum(), 1))
    out.insert(3, "executed_share", out["executed"] / max(out["executed"].sum(), 1))
    out.columns = [c.removeprefix(STALL_PREFIX) for c in out.columns]
    return out.rename_axis("region")


def source_pages(problem: Problem | str, variant: str, folder: str | os.PathLike[str] | None = None
                 ) -> list[pd.DataFrame]:
    """Every kept source page of one variant, oldest first, each with ``attrs["commit"]`` and
    ``attrs["when"]``."""
    p = problems.get(problem) if isinstance(problem, str) else problem
    folder = Path(folder) if folder is not None else default_path().parent / "logs" / "ncu"
    at_commit = _of_variant(p, variant, None, None).groupby("commit")["timestamp"].max().to_dict()
    pages = []
    for path in sorted(folder.glob(f"source_{p.key}_{variant}_*.csv")):
        stem, commit = path.stem.removeprefix(f"source_{p.key}_").rsplit("_", 1)
        if stem != variant:          # another step whose name starts with this one's
            continue
        page = read_source_page(path)
        dated = re.search(r"\d{4}-\d{2}-\d{2}", page.attrs["label"])
        when = at_commit.get(commit, pd.Timestamp(dated.group(0), tz="UTC") if dated else pd.NaT)
        page.attrs.update(commit=commit, when=when)
        pages.append(page)
    undated = pd.Timestamp.max.tz_localize("UTC")      # a page without a date goes last
    return sorted(pages, key=lambda pg: undated if pd.isna(pg.attrs["when"]) else pg.attrs["when"])


def instructions(page: pd.DataFrame, pattern: str) -> pd.DataFrame:
    """The instructions of a page whose SASS matches ``pattern``, summed by opcode: instructions,
    executed, samples and their share of the page's."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"pattern={pattern!r} is not a regular expression: {e}") from None
    hit = page[page["sass"].map(lambda sass: rx.search(str(sass)) is not None)]
    opcode = hit["sass"].str.replace(r"^@!?U?P\w*\s+", "", regex=True).str.split().str[0]
    out = hit.groupby(opcode).agg(instructions=("sass", "size"), executed=("executed", "sum"),
                                  samples=("samples", "sum"))
    out["share"] = out["samples"] / max(page["samples"].sum(), 1)
    return out.rename_axis("opcode").sort_values("samples", ascending=False)


_MARKER: list = []   # the marker kernel and its buffer, made once, outside the profiler's window


def _marker() -> None:
    """Launch the marker kernel: a one-element Triton kernel whose name ncu reports."""
    import triton  # noqa: PLC0415
    import triton.language as tl  # noqa: PLC0415

    if not _MARKER:
        @triton.jit
        def fusedkit_marker(ptr):
            tl.store(ptr, tl.load(ptr) + 1)
        _MARKER.extend([fusedkit_marker, torch.zeros(1, device="cuda")])
    _MARKER[0][(1,)](_MARKER[1])


def size_list(problem: Problem, sizes: str | Sizes | Sequence[Sizes] | None) -> list[Sizes]:
    """Validated sizes to profile at: one dict, several, or text separated by ``;``; None: the
    defaults."""
    if isinstance(sizes, str):
        sizes = [parse_sizes(part) for part in sizes.split(";") if part.strip()]
    elif isinstance(sizes, dict):
        sizes = [sizes]
    return [problem.sizes(s) for s in (sizes or [{}])]


def sizes_tag(problem: Problem, sizes: Sequence[Sizes]) -> str:
    """The file-name part of one collection: the problem, then each size that differs from its
    default."""
    parts = ["-".join(f"{k}-{v}" for k, v in s.items() if v != problem.defaults[k]) for s in sizes]
    given = "_".join(p for p in parts if p)
    return f"{problem.key}-{given}" if given else problem.key


def profile(problem: Problem, variants: Sequence[str], order_path: Path,
            sizes: str | Sizes | Sequence[Sizes] | None = None) -> None:
    """Run each variant once inside the profiler's window at each set of sizes, after three warm-up
    calls, a marker kernel before each; write the runs in order to ``order_path``."""
    runs = []
    for s in size_list(problem, sizes):
        for slug in variants:
            fn = problem.variant(slug).build(problem.make_model(s, seed=1, device="cuda"))
            inputs = problem.get_inputs(s, seed=1, device="cuda")
            with torch.no_grad():
                for _ in range(3):
                    fn(*inputs)
                _marker()                 # compiled outside the window
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStart()
                _marker()
                fn(*inputs)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
            runs.append([slug, fmt_sizes(s)])
            print(f"profiled {slug} at {fmt_sizes(s)}", flush=True)
    order_path.write_text(json.dumps({"problem": problem.key, "runs": runs,
                                      "context": asdict(records.RunContext.collect())}))


def collect(problem: Problem, out_dir: Path, variants: Sequence[str] | None = None,
            sizes: str | Sizes | Sequence[Sizes] | None = None) -> Path:
    """Run ncu (clocks left alone) over :func:`profile` for the problem's steps (or ``variants``) at
    each set of ``sizes``; return the raw CSV's path."""
    sizes = size_list(problem, sizes)
    slugs = [problem.variant(s).slug for s in (variants or [v.slug for v in problem.ladder()])]
    ncu = shutil.which("ncu")
    if not ncu:
        raise FileNotFoundError("ncu (Nsight Compute) is not on the PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    listed = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, check=False).stdout
    known = {line.split()[0] for line in listed.splitlines() if line.strip() and "__" in line.split()[0]}
    # Launch attributes and the duration are always there; other names a device may lack
    # (an unknown metric makes ncu profile nothing), so they are kept only when listed.
    wanted = [m for ms in METRICS.values() for m in ms
              if m.startswith(("launch__", "gpu__time_duration")) or not known
              or m.split(".")[0] in known]
    tag = sizes_tag(problem, sizes)
    raw = out_dir / f"ncu_{tag}.csv"
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--csv", "--page", "raw",
           "--metrics", ",".join(wanted), "--log-file", str(raw),
           sys.executable, "-m", "fusedkit.counters", "profile", "--problem", problem.key,
           "--order", str(out_dir / f"order_{tag}.json"), "--variants", ",".join(slugs),
           "--sizes", ";".join(fmt_sizes(s) for s in sizes)]
    subprocess.run(cmd, check=True)
    return raw


# -- from ncu's CSV to rows ---------------------------------------------------------------------

def _number(text: str) -> float:
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return math.nan


def _unit_scale(units: dict[str, str], metric: str) -> float:
    """Factor that turns ncu's unit for ``metric`` into ours (us, GB, KB, bytes)."""
    unit = units.get(metric, "").strip().lower()
    if metric == "gpu__time_duration.sum":
        return {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
    if metric == "dram__bytes.sum":
        return {"byte": 1e-9, "kbyte": 1e-6, "mbyte": 1e-3, "gbyte": 1.0}.get(unit, 1e-9)
    if metric == "lts__t_sectors_srcunit_tex_op_read.sum":
        return 32e-9   # 32-byte sectors -> GB
    if metric.startswith("launch__shared_mem"):
        return {"byte": 1 / 1024, "kbyte": 1.0, "mbyte": 1024.0}.get(unit, 1 / 1024)
    if "bytes" in metric:
        return {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9}.get(unit, 1.0)
    return 1.0


def rows_from_ncu(text: str, order: dict) -> list[dict[str, object]]:
    """Counter rows from ncu's kernel rows and the order file: the launches of each call between its
    markers, with the run's context."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\") in the output")
    units = dict(zip(*csv.reader(lines[start:start + 2])))
    kernels = [r for r in csv.DictReader(lines[start:]) if r.get("ID", "").strip().isdigit()]
    ctx = order["context"]
    # (variant, sizes) of each profiled call; an older order file names its variants and one sizes
    runs = order["runs"] if "runs" in order else [(v, order["sizes"]) for v in order["variants"]]
    out: list[dict[str, object]] = []
    variant_index, launch = -1, 0
    for i, k in enumerate(kernels):
        name = k.get("Kernel Name", "")
        following = kernels[i + 1].get("Kernel Name", "") if i + 1 < len(kernels) else ""
        if MARKER in following and "FillFunctor" in name:
            continue   # the marker's own buffer (runs recorded before it was made outside the window)
        if MARKER in name:
            variant_index += 1
            launch = 0
            continue
        if variant_index < 0 or variant_index >= len(runs):
            continue
        variant, sizes = runs[variant_index]
        row: dict[str, object] = dict(ctx, problem=order["problem"], sizes=sizes, variant=variant,
                                      launch=launch, kernel=name[:120])
        for col, metrics in METRICS.items():
            if col in RATIOS:
                num, den = (_number(k.get(m, "")) for m in metrics)
                row[col] = num / den if den > 0 else math.nan   # NaN when either is missing
                continue
            vals = [_number(k[m]) * _unit_scale(units, m) for m in metrics if m in k]
            vals = [v for v in vals if not math.isnan(v)]
            row[col] = (sum(vals) if col in SUMMED else max(vals)) if vals else math.nan
        out.append(row)
        launch += 1
    return out


def import_dir(folder: Path, path: Path | None = None) -> int:
    """Import every collection in ``folder`` into the counters file; returns the rows added."""
    path = path or default_path()
    rows = []
    for raw in sorted(folder.glob("ncu_*.csv")):
        tag = raw.stem.removeprefix("ncu_")
        order = json.loads((folder / f"order_{tag}.json").read_text())
        rows += rows_from_ncu(raw.read_text(), order)
    if not rows:
        return 0
    new = pd.DataFrame(rows, columns=list(COLUMNS)).astype(str).replace("nan", "")
    if path.exists():
        new = pd.concat([pd.read_csv(path, dtype=str, keep_default_na=False), new], ignore_index=True)
    new.to_csv(path, index=False)
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fusedkit.counters", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="run ncu over every GPU kernel step of a problem")
    pr = sub.add_parser("profile", help="(run by collect, under ncu)")
    for a in (c, pr):
        a.add_argument("--problem", required=True)
        a.add_argument("--out" if a is c else "--order", required=True)
        a.add_argument("--variants", required=a is pr)
        a.add_argument("--sizes", help="e.g. batch_size=1 (the others at their defaults); several "
                       "sets separated by ';': \"batch_size=1;batch_size=4\"")
    i = sub.add_parser("import", help="turn collected ncu CSVs into rows of data/counters.csv")
    i.add_argument("folder")
    args = p.parse_args(argv)
    try:   # bad names and sizes: one line naming the parameter, before anything runs
        if args.command == "import":
            print(f"{import_dir(Path(args.folder))} counter rows added to {default_path()}")
            return 0
        problem = problems.get(args.problem)
        sizes = size_list(problem, args.sizes)
        names = [n.strip() for n in args.variants.split(",")] if args.variants else None
        if args.command == "collect":
            print(collect(problem, Path(args.out), names, sizes))
        else:
            profile(problem, names or [], Path(args.order), sizes)
    except (ValueError, FileNotFoundError) as e:   # SizeError, an unknown name, no ncu
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
