#!/usr/bin/python3
"""PNG plots of benchmark JSON lines, for the shapes that docs/benchmarks.md's tables hide:

- crossover.png: BSR SpMM time against block density (`trnsparse bench --section bsr`),
  one line per dtype beside dense OpenBLAS GEMM and Eigen, with the density at which the
  block-sparse product stops beating dense marked;
- roofline.png: the bandwidth SpMV (`--section spmv`) and CG (`--section solve`) achieve
  against the STREAM triad and read-only yardsticks measured in the same runs;
- attention.png: block-sparse attention's speedup over dense attention against mask
  density, from `--section attn` and from bench/attention_models.py (speedup = the dense
  baseline's median_s / trnsparse's, for the same mask, pass and shapes);
- solvers.png: iterations and time to solution (setup + solve) against problem size for
  each solver and preconditioner of `--section krylov`, ours and PETSc's, one pair of
  panels per problem family (poisson3d, elasticity3d, convdiff3d).

    build/bin/trnsparse bench --section bsr --json > bsr.jsonl
    /usr/bin/python3 bench/plot.py bsr.jsonl [more.jsonl ...] --out-dir plots \
        [--which crossover,roofline,attention,solvers]

Reads every line of every input; lines that are not JSON objects (progress text) are
skipped and counted on stderr. Writes the plots that have rows and prints their paths;
exits non-zero when none has.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

# bf16 products are compared with fp32 baselines (bench/sections.cpp: no bf16 GEMM here).
BASELINE_PRECISION = {"fp32": "fp32", "bf16": "fp32", "fp64": "fp64"}
GEMM_NAME = {"fp32": "SGEMM", "fp64": "DGEMM"}
DTYPE_ORDER = ("fp32", "bf16", "fp64")
# Keys in which attention_models.py's rows of one case (mask, pass, shapes) differ.
PER_IMPL_KEYS = {"impl", "median_s", "gflops", "max_rel_err"}
DENSE_IMPLS = {"dense_torch": "dense torch", "dense_torch_reuse": "dense torch (buffers reused)"}
PASS_LABEL = {"fwd": "forward", "fwd_bwd": "forward + backward"}
MASK_MARKERS = "osD^vP*Xph"


def read_rows(paths: list[str]) -> tuple[list[dict], int]:
    """The JSON objects of all lines of `paths`, and how many non-blank lines were not one."""
    rows, skipped = [], 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    row = None
                if isinstance(row, dict):
                    rows.append(row)
                else:
                    skipped += 1
    return rows, skipped


def number(row: dict, key: str) -> float | None:
    """row[key] as a finite float, or None (missing, null, NaN or not a number)."""
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def usable(rows: list[dict], *keys: str, **where) -> list[dict]:
    """Rows whose `where` keys have the given values and whose `keys` are finite numbers."""
    return [r for r in rows
            if all(r.get(k) == v for k, v in where.items()) and all(number(r, k) is not None for k in keys)]


def series(rows: list[dict], x: str, y) -> tuple[list[float], list[float]]:
    """(xs, ys) sorted by x, the median y over rows sharing an x; y is a key or a function of a row."""
    get = y if callable(y) else (lambda r: number(r, y))
    by_x = defaultdict(list)
    for r in rows:
        by_x[number(r, x)].append(get(r))
    xs = sorted(by_x)
    return xs, [statistics.median(by_x[v]) for v in xs]


def machine_note(rows: list[dict]) -> str:
    """The distinct CPU, ISA and thread counts of `rows`, for a footnote."""
    notes = []
    for r in rows:
        note = str(r.get("machine") or r.get("cpu") or "unknown CPU")
        if r.get("isa"):
            note += f", {r['isa']}"
        if r.get("threads") is not None:
            note += f", {r['threads']} threads"
        notes.append(note)
    return "; ".join(dict.fromkeys(notes))


class PlainLogFormatter(LogFormatter):
    """Labels the log ticks matplotlib would label, as plain numbers (0.2, not 2e-01)."""

    def __call__(self, x, pos=None):
        return f"{x:g}" if super().__call__(x, pos) else ""


def log_axes(ax) -> None:
    """Log scales on both axes, ticks labelled as plain numbers (0.2, not 2×10⁻¹)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(PlainLogFormatter())
        axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))
    ax.grid(True, which="both", alpha=0.3)


def new_figure(panels: int, title: str, rows: list[dict], width: float = 6.0, per_row: int = 3) -> tuple[Figure, list]:
    """A figure of `panels` side-by-side axes (at most `per_row` a row), its title, and the machine footnote."""
    cols = min(panels, per_row)
    grid_rows = -(-panels // cols)
    fig = Figure(figsize=(width * cols, 4.8 * grid_rows + 0.6), layout="constrained")
    axes = fig.subplots(grid_rows, cols, squeeze=False).ravel()
    for ax in axes[panels:]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.supxlabel("Machine: " + machine_note(rows), fontsize=8, color="0.35")
    return fig, list(axes[:panels])


# --- crossover ---------------------------------------------------------------------------

def crossover_density(rows: list[dict]) -> float | None:
    """The block density at which trnsparse's time reaches the dense GEMM's (of the same
    run), interpolated in log density between the two rows that straddle it."""
    xs, ratio = series(rows, "block_density", lambda r: math.log(number(r, "trnsparse_ms") / number(r, "dense_ms")))
    for (x0, r0), (x1, r1) in zip(zip(xs, ratio), zip(xs[1:], ratio[1:])):
        if r0 < 0 <= r1:
            t = -r0 / (r1 - r0)
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return None


def baseline_rows(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows to draw each baseline precision's dense and Eigen lines from: fp32 rows
    when there are any, else bf16 rows (whose baselines are fp32 too); fp64 rows for fp64."""
    chosen = {}
    for dtype in DTYPE_ORDER:
        picked = [r for r in rows if r.get("dtype") == dtype]
        if picked:
            chosen.setdefault(BASELINE_PRECISION[dtype], picked)
    return chosen


def crossover_panel(ax, rows: list[dict]) -> None:
    """Time against density of the rows of one (n, width, block size): each dtype, dense, Eigen."""
    dtypes = [d for d in DTYPE_ORDER if any(r.get("dtype") == d for r in rows)]
    for dtype in dtypes:
        mine = [r for r in rows if r.get("dtype") == dtype]
        line, = ax.plot(*series(mine, "block_density", "trnsparse_ms"), "o-", label=f"trnsparse BSR, {dtype}")
        density = crossover_density(mine)
        if density is not None:
            ax.axvline(density, color=line.get_color(), ls=":", lw=1)
            ax.annotate(f"{dtype} = dense at {density:.2f}", (density, 0.02), xycoords=("data", "axes fraction"),
                        rotation=90, fontsize=7, color=line.get_color(), ha="right", va="bottom")
    for precision, base in baseline_rows(rows).items():
        ax.plot(*series(base, "block_density", "dense_ms"), "k--", label=f"dense {GEMM_NAME[precision]} (OpenBLAS)")
        ax.plot(*series(base, "block_density", "eigen_ms"), "s-.", color="0.45", ms=4,
                label=f"Eigen SparseMatrix × dense, {precision}")
    r = rows[0]
    ax.set_title(f"n = {r.get('n')}, width {r.get('width')}, block {r.get('block_size')}")
    log_axes(ax)
    ax.set_xlabel("block density (fraction of blocks stored)")
    ax.set_ylabel("time per product (ms, median)")
    ax.legend(fontsize=7)


def crossover(rows: list[dict]) -> Figure | None:
    chosen = usable(rows, "n", "width", "block_size", "block_density", "trnsparse_ms", "dense_ms", "eigen_ms",
                    section="bsr")
    chosen = [r for r in chosen if min(number(r, k) for k in ("block_density", "trnsparse_ms", "dense_ms")) > 0]
    if not chosen:
        return None
    groups = defaultdict(list)
    for r in chosen:
        groups[(number(r, "n"), number(r, "width"), number(r, "block_size"))].append(r)
    title = "BSR SpMM against dense GEMM and Eigen\n(trnsparse bench --section bsr)"
    fig, axes = new_figure(len(groups), title, chosen)
    for ax, key in zip(axes, sorted(groups)):
        crossover_panel(ax, groups[key])
    return fig


# --- roofline ----------------------------------------------------------------------------

def bandwidth_entries(rows: list[dict]) -> list[tuple[str, float, float, float | None]]:
    """(label, achieved GB/s, STREAM triad GB/s, read-only GB/s or None) of each SpMV
    product (full and half storage) and each single-right-hand-side CG solve."""
    entries = []
    for r in usable(rows, "gbps", "stream_gbps", section="spmv"):
        read = number(r, "stream_read_gbps")
        entries.append((f"SpMV {r.get('matrix')}\n{r.get('dtype')}", number(r, "gbps"), number(r, "stream_gbps"), read))
        if number(r, "sym_gbps") is not None:
            entries.append((f"SpMV {r.get('matrix')}\n{r.get('dtype')}, half storage", number(r, "sym_gbps"),
                            number(r, "stream_gbps"), read))
    for r in usable(rows, "bytes_per_iter", "trnsparse_iter_ms", "stream_gbps", section="solve"):
        gbps = number(r, "bytes_per_iter") / number(r, "trnsparse_iter_ms") / 1e6
        entries.append((f"CG {r.get('problem')}\n{r.get('storage')} storage", gbps, number(r, "stream_gbps"), None))
    return entries


def roofline(rows: list[dict]) -> Figure | None:
    entries = bandwidth_entries(rows)
    if not entries:
        return None
    used = usable(rows, "stream_gbps", section="spmv") + usable(rows, "stream_gbps", section="solve")
    fig, (ax,) = new_figure(1, "Memory-bound kernels: achieved bandwidth against STREAM yardsticks of the same run",
                            used, width=max(7.0, 1.3 * len(entries)))
    xs = range(len(entries))
    ax.bar(xs, [e[1] for e in entries], width=0.6, color="tab:blue", label="trnsparse, achieved")
    ax.hlines([e[2] for e in entries], [x - 0.4 for x in xs], [x + 0.4 for x in xs], colors="k",
              label="STREAM triad")
    reads = [(x, e[3]) for x, e in zip(xs, entries) if e[3] is not None]
    if reads:
        ax.hlines([r for _, r in reads], [x - 0.4 for x, _ in reads], [x + 0.4 for x, _ in reads], colors="tab:red",
                  linestyles="--", label="read-only stream (two arrays summed)")
    for x, (_, achieved, triad, _) in zip(xs, entries):
        ax.annotate(f"{achieved / triad:.2f}× triad", (x, achieved), textcoords="offset points", xytext=(0, 3),
                    ha="center", fontsize=7)
    ax.set_xticks(list(xs), [e[0] for e in entries], fontsize=7)
    ax.set_ylabel("GB/s (bytes moved per product or CG iteration / time)")
    ax.set_ylim(0, 1.3 * max(max(e[1], e[2], e[3] or 0) for e in entries))  # room for the legend
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", ncol=3)
    return fig


# --- attention ---------------------------------------------------------------------------

def cli_attention_points(rows: list[dict]) -> list[tuple[str, str, str, float, float]]:
    """(series, mask, pass, block density, speedup over masked dense) of `--section attn` rows."""
    points = []
    for r in usable(rows, "block_density", section="attn"):
        name = f"{r.get('dtype')}, seq {r.get('seq')}, d {r.get('head_dim')}"
        for p in PASS_LABEL:
            if number(r, f"speedup_{p}") is not None:
                points.append((name, str(r.get("mask")), p, number(r, "block_density"), number(r, f"speedup_{p}")))
    return points


def case_key(row: dict) -> tuple:
    """What an attention_models.py row measured, less which implementation and its results."""
    return tuple(sorted((k, str(v)) for k, v in row.items() if k not in PER_IMPL_KEYS))


def model_attention_points(rows: list[dict]) -> list[tuple[str, str, str, float, float]]:
    """(series, mask, pass, density, dense median_s / trnsparse median_s) of attention_models.py
    rows, trnsparse paired with each dense baseline of the same mask, pass and shapes."""
    chosen = usable(rows, "median_s", "density", op="attention")
    ours = {case_key(r): r for r in chosen if r.get("impl") == "trnsparse" and number(r, "median_s") > 0}
    points = []
    for r in chosen:
        mine = ours.get(case_key(r))
        if r.get("impl") in DENSE_IMPLS and mine is not None:
            name = f"vs {DENSE_IMPLS[r['impl']]}, seq {r.get('seq')}, d {r.get('head_dim')}"
            points.append((name, str(r.get("mask")), str(r.get("pass")), number(r, "density"),
                           number(r, "median_s") / number(mine, "median_s")))
    return points


def speedup_panel(ax, points: list, title: str, target: bool) -> None:
    """Speedups against density: colour per series, marker per mask, filled for forward +
    backward and hollow for forward; the break-even line and, if `target`, 0.5 / density."""
    colors = {s: f"C{i % 10}" for i, s in enumerate(dict.fromkeys(p[0] for p in points))}
    masks = {m: MASK_MARKERS[i % len(MASK_MARKERS)] for i, m in enumerate(dict.fromkeys(p[1] for p in points))}
    for name, mask, p, density, speedup in points:
        ax.plot(density, speedup, masks[mask], ms=7, color=colors[name],
                markerfacecolor=colors[name] if p == "fwd_bwd" else "none")
    ax.axhline(1.0, color="0.3", lw=1, ls="--")
    densities = sorted({p[3] for p in points})
    if target:
        ax.plot(densities, [0.5 / d for d in densities], ":", color="0.3")
    handles = [Line2D([], [], color=c, marker="o", ls="", label=s) for s, c in colors.items()]
    handles += [Line2D([], [], color="0.4", marker=m, ls="", label=f"mask {k}") for k, m in masks.items()]
    handles += [Line2D([], [], color="0.4", marker="o", ls="", label=PASS_LABEL["fwd_bwd"]),
                Line2D([], [], color="0.4", marker="o", ls="", markerfacecolor="none", label=PASS_LABEL["fwd"]),
                Line2D([], [], color="0.3", ls="--", label="break-even (1×)")]
    if target:
        handles.append(Line2D([], [], color="0.3", ls=":", label="target 0.5 / density"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title, fontsize=10)
    log_axes(ax)
    ax.set_xlabel("mask block density (fraction of blocks allowed)")
    ax.set_ylabel("speedup over dense (× = dense time / trnsparse time)")


def attention(rows: list[dict]) -> Figure | None:
    panels = [(points, title, target) for points, title, target in (
        (cli_attention_points(rows), "C++: trnsparse bench --section attn (vs masked dense OpenBLAS)", True),
        (model_attention_points(rows), "Python: bench/attention_models.py (batch × heads)", False)) if points]
    if not panels:
        return None
    used = usable(rows, "block_density", section="attn") + usable(rows, "median_s", op="attention")
    fig, axes = new_figure(len(panels), "Block-sparse attention: speedup over dense against mask density", used,
                           width=8.5)
    for ax, panel in zip(axes, panels):
        speedup_panel(ax, *panel)
    return fig


# --- solvers -----------------------------------------------------------------------------

def solvers(rows: list[dict]) -> Figure | None:
    used = [r for r in usable(rows, "n", "iterations", "total_seconds", section="krylov")
            if r.get("converged") in (True, "true")]
    families = sorted({str(r["problem"]).split(":")[0] for r in used})
    if not families:
        return None
    fig, axes = new_figure(2 * len(families), "Time to solution (relative residual 1e-8) against problem size", used,
                           width=6.0, per_row=2)
    for f, family in enumerate(families):
        mine = [r for r in used if str(r["problem"]).split(":")[0] == family]
        configs = sorted({(r["solver"], r["method"], r["precond"]) for r in mine})
        its_ax, time_ax = axes[2 * f], axes[2 * f + 1]
        for solver, method, precond in configs:
            pts = [r for r in mine if (r["solver"], r["method"], r["precond"]) == (solver, method, precond)]
            style = dict(marker="o" if solver == "trnsparse" else "s", linestyle="-" if solver == "trnsparse" else "--",
                         label=f"{'ours' if solver == 'trnsparse' else 'PETSc'} {method}+{precond}")
            its_ax.plot(*series(pts, "n", "iterations"), **style)
            time_ax.plot(*series(pts, "n", "total_seconds"), **style)
        for ax, what in ((its_ax, "iterations"), (time_ax, "setup + solve (s)")):
            log_axes(ax)
            ax.set_xlabel(f"{family}: rows")
            ax.set_ylabel(what)
            ax.legend(fontsize=7)
    return fig


PLOTS = {"crossover": crossover, "roofline": roofline, "attention": attention, "solvers": solvers}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", help="files of JSON lines from `trnsparse bench --json` or bench/*.py")
    p.add_argument("--out-dir", required=True, type=Path, help="where the PNGs go (created if missing)")
    p.add_argument("--which", default=",".join(PLOTS), help=f"comma-separated subset of {', '.join(PLOTS)}")
    args = p.parse_args(argv)
    args.which = [w for w in args.which.split(",") if w]
    unknown = [w for w in args.which if w not in PLOTS]
    if unknown or not args.which:
        p.error(f"--which: unknown plot(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(PLOTS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        rows, skipped = read_rows(args.inputs)
    except OSError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 1
    if skipped:
        print(f"plot.py: skipped {skipped} line(s) that are not JSON objects", file=sys.stderr)
    written = []
    for name in args.which:
        fig = PLOTS[name](rows)
        if fig is None:
            print(f"plot.py: no rows for the {name} plot", file=sys.stderr)
            continue
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path = args.out_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        print(path)
        written.append(path)
    if not written:
        print(f"plot.py: no plot had data in {', '.join(args.inputs)} (wanted: {', '.join(args.which)}; "
              "expected rows of trnsparse bench --section bsr/spmv/solve/attn/krylov --json or "
              "bench/attention_models.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
