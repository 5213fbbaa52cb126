"""The figures the notebooks draw. Each names its device and the source of its numbers in its title,
keeps its key outside the axes it explains, and draws without a warning (tests/test_plot_warnings.py).
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox
import numpy as np
import pandas as pd
import seaborn as sns

from fusedkit import hopper_layout as hl, present
from fusedkit.hardware import GpuSpec
from fusedkit.problems import Problem, Sizes
from fusedkit.roofline import Floor, fused_floor, ridge_point, stage_floor

sns.set_theme(style="whitegrid", context="notebook")

_ROOF_COLOURS = {"fp32": "#4c72b0", "tf32": "#dd8452", "tf32x3": "#c44e52", "bf16": "#55a868",
                 "fp16x3": "#8172b3"}


def _legend_below(fig: plt.Figure, handles: Sequence[object], labels: Sequence[str], *, ncol: int = 2,
                  title: str | None = None, top: float = 1.0) -> None:
    """One key for the whole figure, below its axes, laid out so that it covers nothing."""
    legend = fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                        fontsize=8, title=title, title_fontsize=8, frameon=False)
    height = legend.get_window_extent(fig.canvas.get_renderer()).height / fig.bbox.height
    fig.tight_layout(rect=(0, min(height + 0.01, 0.6), 1, top))


def _log_axes(ax: plt.Axes, xlabel: str, ylabel: str, base: int = 2) -> None:
    ax.set_xscale("log", base=base)
    ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel)


def roofline_points(problem: Problem, sizes: Sizes, gpu: GpuSpec,
                    precision: str = "fp32") -> pd.DataFrame:
    """One point per stage and one for the fused whole, at the best rate the roofline allows: label,
    intensity (FLOP/B), tflops, floor_ms, kind."""
    def point(label: str, f: Floor, kind: str) -> dict:
        return {"label": label, "intensity": f.intensity, "tflops": f.flops / (f.floor_ms * 1e-3) / 1e12,
                "floor_ms": f.floor_ms, "kind": kind}

    rows = [point(s.name, stage_floor(s, gpu, precision), "stage (unfused)") for s in problem.stages(sizes)]
    fused = fused_floor(problem, sizes, gpu, precision)
    return pd.DataFrame([*rows, point("fused: " + problem.title, fused, "fused")])


def roofline_chart(gpu: GpuSpec, points: pd.DataFrame, *,
                   precisions: Sequence[str] = ("fp32", "tf32", "bf16"),
                   title: str = "") -> plt.Figure:
    """Log-log roofline of ``gpu``: the memory roof, one compute roof per precision, and ``points``
    (label, intensity, tflops, optional kind)."""
    if points.empty:
        raise ValueError("points is empty: nothing to place on the roofline")
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    lo = min(0.05, points["intensity"].min() / 2)
    hi = max(5e3, points["intensity"].max() * 2)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    bw = gpu.mem_gbps * 1e9
    for p in precisions:
        peak = gpu.peak_tflops(p)
        ax.plot(x, np.minimum(peak, bw * x / 1e12), color=_ROOF_COLOURS.get(p, "grey"),
                lw=2, label=f"{p} roof: {peak:.0f} TFLOP/s")
        ax.axvline(peak * 1e12 / bw, color=_ROOF_COLOURS.get(p, "grey"), ls=":", lw=1)   # the ridge
    pts = points if "kind" in points else points.assign(kind="point")
    markers = dict(zip(sorted(pts["kind"].unique()), "osD^v<>"))
    for _, r in pts.iterrows():
        ax.scatter(r["intensity"], r["tflops"], s=60, marker=markers[r["kind"]], zorder=5,
                   color="black" if r["kind"] != "measured" else "#c44e52")
    _log_axes(ax, "arithmetic intensity (FLOP per byte of device memory)", "TFLOP/s", base=10)
    src = "measured ceilings" if gpu.measured else "datasheet ceilings"
    ax.set_title(title or f"Roofline on {gpu.name} ({src}, memory {gpu.mem_gbps:.0f} GB/s)")
    legend = ax.legend(loc="upper left", fontsize=8)
    key = _point_key(ax, pts)
    fig.tight_layout()
    _place_numbers(ax, key, avoid=[legend])
    return fig


def _point_key(ax: plt.Axes, pts: pd.DataFrame) -> pd.DataFrame:
    """The points as numbered markers, with the key that names each number."""
    merged = (pts.groupby(["intensity", "tflops"], sort=False)["label"].apply(", ".join)
              .reset_index().sort_values("tflops", ascending=False).reset_index(drop=True))
    key = "\n".join(f"{i + 1}  {label}" for i, label in enumerate(merged["label"]))
    ax.text(1.02, 1.0, key, transform=ax.transAxes, va="top", ha="left", fontsize=8,
            gid="roofline-key")
    return merged


_GAP = 2.0   # points between a number and anything it must not touch


def _place_numbers(ax: plt.Axes, merged: pd.DataFrame, avoid: Sequence[object] = ()) -> None:
    """Each point's number beside it, clear of the other markers, numbers and ``avoid``."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0                                   # display pixels per point
    fixed = [a.get_window_extent(renderer) for a in avoid if a is not None]
    fixed += [t.get_window_extent(renderer) for t in ax.texts if t.get_gid() == "roofline-key"]
    centres = ax.transData.transform(merged[["intensity", "tflops"]].to_numpy(dtype=float))
    rad = 4.5 * px                                        # marker radius (s=60) plus a margin
    markers = [Bbox.from_extents(x - rad, y - rad, x + rad, y + rad) for x, y in centres]
    numbers: list[tuple[Bbox, float]] = []               # placed numbers and their rates
    right_edge = ax.get_window_extent(renderer).x1

    def place(text: plt.Annotation, rate: float, side: int, *, step_over_all: bool) -> bool:
        """Step ``text`` outwards on ``side`` (1 right, -1 left) until it is clear."""
        text.set_ha("left" if side == 1 else "right")
        dx = 6.0 * side
        for _ in range(60):
            text.set_position((dx, 0))
            box = text.get_window_extent(renderer)
            if side == 1 and box.x1 > right_edge:
                return False
            hits = [o for o in markers + fixed if box.overlaps(o.padded(_GAP * px / 2))]
            near = [(o, r) for o, r in numbers if box.overlaps(o.padded(_GAP * px / 2))]
            if not step_over_all and (hits or any(max(r, rate) / min(r, rate) > 1.25 for _, r in near)):
                return False
            hits += [o for o, _ in near]
            if not hits:
                return True
            # Step just past what it touches, on this side.
            edge = max(o.x1 for o in hits) - box.x0 if side == 1 else box.x1 - min(o.x0 for o in hits)
            dx += side * (edge / px + _GAP)
        return False

    for i, row in merged.iterrows():
        text = ax.annotate(str(i + 1), (row["intensity"], row["tflops"]), xytext=(6, 0),
                           textcoords="offset points", va="center", ha="left", fontsize=8,
                           weight="bold", gid="roofline-number")
        rate = float(row["tflops"])
        (place(text, rate, 1, step_over_all=False) or place(text, rate, -1, step_over_all=True)
         or place(text, rate, 1, step_over_all=True))
        numbers.append((text.get_window_extent(renderer), rate))


def variant_bars(df: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """Horizontal bars of each variant's ``median_ms`` (p10 to p90 whiskered where given), coloured
    by tier where given, each labelled with its ``speedup`` over eager in its own run."""
    if df.empty or "speedup" not in df:
        raise ValueError("df needs rows with variant, median_ms and speedup (results.add_speedup)")
    d = df.sort_values("median_ms", ascending=False).reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * len(d) + 1.6))
    hue = "tier" if "tier" in d else None
    sns.barplot(data=d, y="variant", x="median_ms", hue=hue, dodge=False, ax=ax, orient="h")
    if {"p10_ms", "p90_ms"} <= set(d.columns):
        ax.errorbar(d["median_ms"], range(len(d)), xerr=[d["median_ms"] - d["p10_ms"], d["p90_ms"] - d["median_ms"]],
                    fmt="none", ecolor="black", capsize=3, lw=1)
    for i, (t, x) in enumerate(zip(d["median_ms"], d["speedup"])):
        ax.text(t, i, f"  {present.ms(t)} ms, {present.speedup(x)}", va="center", fontsize=8)
    ax.set_xlabel("median time (ms, lower is better)")
    ax.set_ylabel("")
    ax.set_xlim(0, d["median_ms"].max() * 1.35)
    if hue is not None:   # the tiers' key above the bars, under the title, not over the bars
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=max(len(ax.get_legend_handles_labels()[1]), 1),
                  fontsize=8, frameon=False, title=None)
    ax.set_title(title, pad=22 if hue is not None else 6)
    fig.tight_layout()    # the key belongs to the axes: a later tight_layout() keeps room for it
    return fig


def ridge_crossing(problem: Problem, sizes: Sizes, dim: str, gpu: GpuSpec,
                   precision: str = "fp32") -> float | None:
    """The smallest ``dim`` at which the fused kernel's intensity reaches ``precision``'s ridge on
    ``gpu``; None if it never does."""
    dims = {d.name: d for d in problem.dims}
    if dim not in dims:
        raise ValueError(f"dim={dim!r} is not a size of {problem.key}; valid: {', '.join(dims)}")
    ridge = ridge_point(gpu, precision)

    def above(v: int) -> bool:
        return fused_floor(problem, {**sizes, dim: v}, gpu, precision).intensity >= ridge

    # Scan a log grid for the first value above the ridge, then bisect between neighbours.
    grid = sorted({int(round(x)) for x in np.geomspace(1, dims[dim].maximum, 64)})
    hit = next((i for i, v in enumerate(grid) if above(v)), None)
    if hit is None:
        return None
    if hit == 0:
        return float(grid[0])
    lo, hi = grid[hit - 1], grid[hit]   # above(lo) is False, above(hi) is True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if above(mid) else (mid, hi)
    return float(hi)


def floor_chart(problem: Problem, gpu: GpuSpec, *, dim: str = "batch_size",
                precisions: Sequence[str] = ("fp32", "fp16x3"), title: str = "") -> plt.Figure:
    """The floors of a fused kernel against ``dim``, log-log: the memory floor and one compute floor
    per precision, each ridge crossing dashed."""
    if dim not in {d.name for d in problem.dims}:
        raise ValueError(f"dim={dim!r} is not a size of {problem.key}; valid: "
                         f"{', '.join(d.name for d in problem.dims)}")
    values = [2**i for i in range(int(np.log2(max(problem.defaults[dim], 1024))) + 1)]
    base = problem.defaults
    fig, ax = plt.subplots(figsize=(8.2, 4.6))
    memory = [fused_floor(problem, {**base, dim: v}, gpu, precisions[0]).memory_ms for v in values]
    ax.plot(values, memory, color="black", marker="o", ms=3, label=f"memory floor ({gpu.mem_gbps:.0f} GB/s)")
    for prec in precisions:
        floors = [fused_floor(problem, {**base, dim: v}, gpu, prec) for v in values]
        colour = _ROOF_COLOURS.get(prec, "grey")
        ax.plot(values, [f.compute_ms for f in floors], color=colour, marker="o", ms=3,
                label=f"compute floor, {prec} ({floors[0].peak_tflops:.1f} TFLOP/s)")
        cross = ridge_crossing(problem, base, dim, gpu, prec)
        if cross is not None:
            ax.axvline(cross, color=colour, ls="--", lw=1)
            ax.annotate(f"{prec} ridge\n{dim} = {cross:.0f}", (cross, 0.98), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", va="top", fontsize=8, color=colour)
    _log_axes(ax, dim, "floor (ms)")
    src = "measured" if gpu.measured else "datasheet"
    ax.set_title(title or f"{problem.key}: what binds a fused kernel as {dim} grows ({gpu.name}, {src} rates)",
                 fontsize=10)
    _legend_below(fig, *ax.get_legend_handles_labels(), ncol=2)
    plt.close(fig)
    return fig


def step_colours(problem: Problem, slugs: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """One colour per step of ``slugs``, eager grey."""
    slugs = [s for s in slugs if s != "eager"]
    unknown = [s for s in slugs if s not in problem.variants]
    if unknown:
        raise ValueError(f"slugs {', '.join(unknown)} are not steps of {problem.key}")
    palette = sns.color_palette("tab10" if len(slugs) <= 10 else "husl", len(slugs))
    return {"eager": (0.5, 0.5, 0.5), **dict(zip(slugs, palette))}


def spread_chart(sweeps: pd.DataFrame, dim: str, *, problem: Problem,
                 variants: Sequence[str] | None = None, title: str = "") -> plt.Figure:
    """Time against ``dim`` for each variant over recorded sweeps: the newest sweep's medians as a
    line with p10 to p90 shaded, every older sweep's median as a ring."""
    need = {"variant", dim, "median_ms", "p10_ms", "p90_ms", "run_id", "timestamp"}
    if sweeps.empty:
        raise ValueError("sweeps is empty: no recorded sweep to plot (see results.every_sweep)")
    if not need <= set(sweeps.columns):
        raise ValueError(f"sweeps lacks columns {sorted(need - set(sweeps.columns))}; "
                         "build it with results.every_sweep")
    variants = list(variants) if variants is not None else list(dict.fromkeys(sweeps["variant"]))
    colours = step_colours(problem, variants)
    fig, ax = plt.subplots(figsize=(8.2, 4.8))
    newest = sweeps.sort_values("timestamp")["run_id"].iloc[-1]
    for v in variants:
        rows = sweeps[sweeps["variant"] == v]
        if rows.empty:
            continue
        colour = colours.get(v, (0.3, 0.3, 0.3))
        last = rows[rows["run_id"] == newest].sort_values(dim)
        older = rows[rows["run_id"] != newest]
        label = f"{problem.variant(v).number}: {v}"
        if not last.empty:
            ax.plot(last[dim], last["median_ms"], color=colour, marker="o", ms=4, lw=1.5, label=label)
            ax.fill_between(last[dim], last["p10_ms"], last["p90_ms"], color=colour, alpha=0.2, lw=0)
        if not older.empty:
            ax.scatter(older[dim], older["median_ms"], s=22, facecolors="none", edgecolors=[colour],
                       lw=1, label=None if not last.empty else label)
    _log_axes(ax, dim, "time (ms, lower is better)")
    ax.set_title(title or f"{problem.key}: the newest sweep (line, p10 to p90 shaded) and the older ones (rings)",
                 fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels, ncol=min(3, max(len(labels), 1)))
    plt.close(fig)
    return fig


ROLE_COLOURS = {"eager": "#7f7f7f", "by-batch": "#000000", "routed": "#dd8452"}
"""One colour per role in :func:`route_chart`, the same in every panel."""


def route_chart(panels: Sequence[tuple[Problem, str, pd.DataFrame]], dim: str = "batch_size",
                title: str = "") -> plt.Figure:
    """One panel per (problem, by-batch slug, :func:`fusedkit.results.route_check` frame): eager,
    the by-batch step and the step each point routes to, p10 to p90 as bars, the band edges dotted."""
    if not panels:
        raise ValueError("panels is empty: pass (problem, slug, route_check frame) for each panel")
    fig, axes = plt.subplots(1, len(panels), figsize=(8.2, 4.2), squeeze=False)
    for ax, (problem, slug, check) in zip(axes[0], panels):
        if check.empty:
            ax.text(0.5, 0.5, f"{problem.key}: no sweep timed {slug} and its steps", ha="center",
                    va="center", transform=ax.transAxes, color="grey", fontsize=8)
            continue
        x = check[dim]
        ax.plot(x, check["eager_ms"], color=ROLE_COLOURS["eager"], marker="s", ms=4, lw=1.2,
                label="eager fp32")
        ax.errorbar(x, check["routed_ms"], yerr=[check["routed_ms"] - check["routed_p10_ms"],
                                                 check["routed_p90_ms"] - check["routed_ms"]],
                    color=ROLE_COLOURS["routed"], marker="o", ms=5, lw=1.2, capsize=3,
                    label="the step it routes to")
        ax.errorbar(x, check["ms"], yerr=[check["ms"] - check["p10_ms"], check["p90_ms"] - check["ms"]],
                    color=ROLE_COLOURS["by-batch"], marker="x", ms=6, lw=1, ls="--", capsize=3,
                    label=f"{slug} (step {problem.variant(slug).number})")
        for b, ms, step in zip(x, check["routed_ms"], check["routed_step"]):
            ax.annotate(f"{step}", (b, ms), xytext=(4, -10), textcoords="offset points", fontsize=7,
                        color=ROLE_COLOURS["routed"])
        for r in problem.variant(slug).routes[:-1]:
            ax.axvline(r.max_rows + 0.5, color="black", ls=":", lw=0.8)   # up to max_rows: left
        _log_axes(ax, dim, "time (ms, p10 to p90 as bars)")
        ax.set_title(f"{problem.key}: step {problem.variant(slug).number} and where it routes", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    # One key under the panels: the roles have one colour in every panel; each panel's title
    # names its by-batch step.
    keys: dict[str, object] = {}
    for ax, (problem, slug, _) in zip(axes[0], panels):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            role = "by-batch" if label.startswith(slug) else label
            keys.setdefault(role, (handle, label if len(panels) == 1 else
                                   f"{slug}, the by-batch step" if role == "by-batch" else label))
    handles, labels = zip(*keys.values()) if keys else ((), ())
    _legend_below(fig, handles, labels, ncol=3)
    plt.close(fig)
    return fig


def label_points(ax: plt.Axes, x: Sequence[float], y: Sequence[float], labels: Sequence[str]) -> None:
    """Label scattered points, each label at least 9 points above the one below it."""
    if not (len(x) == len(y) == len(labels)):
        raise ValueError(f"x, y and labels must have one entry per point; got {len(x)}, {len(y)}, {len(labels)}")
    if not len(labels):
        return
    pts = ax.transData.transform(np.column_stack([np.asarray(x, float), np.asarray(y, float)]))
    to_pt = 72.0 / ax.figure.dpi
    placed = -np.inf
    for i in np.argsort(pts[:, 1]):
        here = pts[i, 1] * to_pt
        at = max(here - 3.0, placed + 9.0)
        placed = at
        moved = at - (here - 3.0) > 1.0
        ax.annotate(labels[i], (x[i], y[i]), xytext=(6, at - here), textcoords="offset points",
                    fontsize=7, va="bottom", bbox={"fc": "white", "ec": "none", "alpha": 0.75, "pad": 0.4},
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"} if moved else None)


def run_spread_chart(spread: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """Run to run: one row per variant, one dot per run against the variant's median over runs (%),
    its result in colour, eager's spread shaded."""
    need = {"problem", "variant", "vs_median_pct", "recorded"}
    if spread.empty or not need <= set(spread.columns):
        raise ValueError(f"spread needs rows with columns {sorted(need)} (results.run_spread)"
                         + (": it has no rows" if spread.empty else f"; got {sorted(spread.columns)}"))
    keys = list(dict.fromkeys(spread["problem"]))
    counts = [spread.loc[spread["problem"] == k, "variant"].nunique() for k in keys]
    fig, axes = plt.subplots(len(keys), 1, figsize=(8.0, 1.0 + 0.24 * sum(counts) + 0.5 * len(keys)),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": counts})
    for ax, key in zip(axes[:, 0], keys):
        d = spread[spread["problem"] == key]
        names = list(dict.fromkeys(d["variant"]))
        y = d["variant"].map({v: i for i, v in enumerate(names)})
        eager = d.loc[d["variant"] == "eager", "vs_median_pct"]
        if not eager.empty:
            ax.axvspan(eager.min(), eager.max(), color="#c8c8c8", alpha=0.6, lw=0)
        old = ~d["recorded"].astype(bool)
        ax.scatter(d.loc[old, "vs_median_pct"], y[old], s=16, color="#9a9a9a", label="an earlier run", zorder=2)
        ax.scatter(d.loc[~old, "vs_median_pct"], y[~old], s=30, color="#c44e52", label="the recorded result",
                   zorder=3)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_title(key, fontsize=10, loc="left")
        ax.grid(axis="y", lw=0.4)
    axes[-1, 0].set_xlabel("time against the variant's median over its runs (%, right: slower); "
                           "shaded: eager's spread", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    _legend_below(fig, *axes[0, 0].get_legend_handles_labels(), ncol=2)
    plt.close(fig)
    return fig


STALL_REASONS = {   # ncu's stall reasons, as the key names them
    "long_sb": "long scoreboard (global memory, mbarrier)", "barrier": "barrier (wgmma wait)",
    "wait": "fixed latency", "selected": "nothing: issuing", "not_selected": "another warp issued",
    "dispatch": "dispatch", "mio": "MIO queue (shared memory, wgmma issue)",
    "short_sb": "short scoreboard (SFU, shared memory)", "math": "a math pipe",
    "branch_resolving": "a branch", "lg": "global-memory queue"}


def stall_chart(regions: dict[str, pd.DataFrame], *, reasons: int = 6, title: str = "") -> plt.Figure:
    """Stacked bars of warp-stall samples, one per page and region, one segment per stall reason
    (the ``reasons`` largest)."""
    if not regions:
        raise ValueError("regions is empty: no source page to plot")
    fixed = {"samples", "samples_share", "executed", "executed_share"}
    rows = []
    for label, r in regions.items():
        for region, row in r.iterrows():
            if region == "other":
                continue
            rows.append({"bar": f"{label}: {region}",
                         **{c: row[c] for c in r.columns if c not in fixed}})
    df = pd.DataFrame(rows).set_index("bar").fillna(0)
    top = df.sum().sort_values(ascending=False).index[:reasons]
    shown = df[top].assign(**{"other reasons": df.drop(columns=top).sum(axis=1)})
    shown = shown.rename(columns=lambda c: STALL_REASONS.get(c, c))
    colours = sns.color_palette("tab10", len(shown.columns))
    fig, ax = plt.subplots(figsize=(8.2, 0.42 * len(shown) + 2.6))   # at most 824 px wide
    shown.iloc[::-1].plot.barh(stacked=True, ax=ax, color=colours, width=0.7)
    ax.set_xlabel("warp-stall samples (more is longer)")
    ax.set_ylabel("")
    labels = ax.get_legend_handles_labels()[1]
    ax.legend(title="the warp waits for", fontsize=8, title_fontsize=8, loc="lower center",
              bbox_to_anchor=(0.5, 0.0), bbox_transform=fig.transFigure, ncol=3,
              frameon=False)   # under the bars, inside the figure's width
    ax.set_title(title, fontsize=10)
    legend_in = 0.25 + 0.2 * -(-len(labels) // 3)
    fig.tight_layout(rect=(0, legend_in / fig.get_size_inches()[1], 1, 1))
    plt.close(fig)   # shown once, where the notebook displays it
    return fig


def _cell_grid(ax: plt.Axes, rows: int, cols: int) -> None:
    """Cells (r, c) span [c, c + 1] x [r, r + 1], row 0 at the top."""
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.grid(False)
    ax.tick_params(length=0)


def swizzle_atom_figure(highlight: int = 2) -> plt.Figure:
    """The 128-byte swizzle atom: 8 rows of 8 16-byte chunks as the kernel means them and as TMA
    stores them, chunk ``highlight`` marked."""
    highlight = hl._check_int("highlight", highlight, 0, hl.CHUNKS)
    stored = hl.swizzle_atom()
    logical = np.tile(np.arange(hl.CHUNKS), (hl.ATOM_ROWS, 1))
    colours = sns.color_palette("husl", hl.CHUNKS)
    fig, axes = plt.subplots(1, 2, figsize=(8.2, 4.4))
    panels = ((axes[0], logical, "as the kernel means it",
               "logical chunk c (fp16 k = 8c .. 8c + 7)"),
              (axes[1], stored, "as stored: chunk c at position c ^ (r % 8)",
               "position p in the row (banks 4p .. 4p + 3)"))
    for ax, grid, title, xlabel in panels:
        _cell_grid(ax, hl.ATOM_ROWS, hl.CHUNKS)
        ax.imshow(np.array([[colours[c] for c in row] for row in grid]),
                  extent=(0, hl.CHUNKS, hl.ATOM_ROWS, 0), interpolation="nearest", alpha=0.55, aspect="auto")
        for r in range(hl.ATOM_ROWS):
            for p in range(hl.CHUNKS):
                c = int(grid[r, p])
                ax.text(p + 0.5, r + 0.5, str(c), ha="center", va="center", fontsize=11,
                        fontweight="bold" if c == highlight else "normal")
                if c == highlight:
                    ax.add_patch(Rectangle((p + 0.06, r + 0.06), 0.88, 0.88, fill=False, lw=2.2,
                                           ec="black"))
        ax.set_xticks(np.arange(hl.CHUNKS) + 0.5, [str(p) for p in range(hl.CHUNKS)])
        ax.set_yticks(np.arange(hl.ATOM_ROWS) + 0.5, [f"row {r}" for r in range(hl.ATOM_ROWS)])
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_title(title, fontsize=10)
    axes[1].set_yticklabels([f"byte {r * hl.ROW_BYTES}" for r in range(hl.ATOM_ROWS)])
    fig.suptitle(f"The 128-byte swizzle atom: {hl.ATOM_BYTES} bytes, 8 rows x 8 chunks of "
                 f"{hl.CHUNK_BYTES} bytes\nchunk {highlight} of rows 0-7 (outlined) lands in all 8 "
                 f"positions: one column is read from all 32 banks", fontsize=10.5)
    fig.tight_layout()
    plt.close(fig)
    return fig


def accumulator_fragment_figure() -> plt.Figure:
    """The fp32 accumulator of wgmma m64n128k16: the thread and register holding each element of the
    first 16 columns (two 8-column slabs), coloured by warp."""
    cols, n = 16, 128
    warp_colours = sns.color_palette("pastel", 4)
    dark = sns.color_palette("muted", 4)
    fig, ax = plt.subplots(figsize=(8.2, 12.5))
    _cell_grid(ax, hl.FRAGMENT_ROWS, cols)
    image = np.zeros((hl.FRAGMENT_ROWS, cols, 3))
    for r in range(hl.FRAGMENT_ROWS):
        for c in range(cols):
            t, i = hl.accumulator_owner(r, c, n)
            w = t // 32
            image[r, c] = dark[w] if (i // 2) % 2 else warp_colours[w]
            ax.text(c + 0.5, r + 0.5, f"{t}:{i}", ha="center", va="center", fontsize=6.5)
    ax.imshow(image, extent=(0, cols, hl.FRAGMENT_ROWS, 0), interpolation="nearest", alpha=0.8, aspect="auto")
    for c in range(8, cols, 8):                    # 8-column slabs: d[4j .. 4j + 3]
        ax.axvline(c, color="black", lw=1.6)
    for r in range(8, hl.FRAGMENT_ROWS, 8):        # 8-row halves; 16 rows a warp
        ax.axhline(r, color="black", lw=1.6 if r % 16 == 0 else 0.6)
    ax.set_xticks(np.arange(cols) + 0.5, [str(c) for c in range(cols)], fontsize=7)
    ax.set_yticks(np.arange(0, hl.FRAGMENT_ROWS, 4) + 0.5,
                  [str(r) for r in range(0, hl.FRAGMENT_ROWS, 4)], fontsize=7)
    ax.set_xlabel(f"column of the 64 x {n} tile (the first {cols}; slab j = column // 8)", fontsize=9)
    ax.set_ylabel("row (warp w holds rows 16w .. 16w + 15)", fontsize=9)
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=warp_colours[w]) for w in range(4)]
              + [plt.Rectangle((0, 0), 1, 1, color=dark[0])],
              labels=[f"warp {w}: threads {32 * w}-{32 * w + 31}" for w in range(4)]
              + ["darker: rows + 8 (d[4j + 2], d[4j + 3])"],
              loc="upper center", bbox_to_anchor=(0.5, -0.045), ncol=3, fontsize=8, frameon=False)
    ax.set_title(f"wgmma m64n{n}k16 fp32 accumulator: cell = thread t : register d[i]\n"
                 "(lanes 4q .. 4q + 3 share one row; each holds 2 adjacent columns per slab)",
                 fontsize=10)
    fig.tight_layout()
    plt.close(fig)
    return fig
