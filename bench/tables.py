#!/usr/bin/python3
"""Markdown tables for docs/benchmarks.md from `trnsparse bench --json` output.

    build/bin/trnsparse bench --section bsr --json > bsr.jsonl
    /usr/bin/python3 bench/tables.py bsr.jsonl [more.jsonl ...]

Rows are grouped by section; each section prints the columns docs/benchmarks.md quotes.
"""
import json
import sys

COLUMNS = {
    "bsr": [("n", "n", "{}"), ("width", "width", "{}"), ("block_density", "block density", "{}"),
            ("trnsparse_ms", "trnsparse ms", "{:.2f}"), ("gflops", "GFLOP/s", "{:.0f}"),
            ("dense_ms", "dense ms", "{:.2f}"), ("eigen_ms", "Eigen ms", "{:.2f}"),
            ("speedup_vs_dense", "× dense", "{:.2f}"), ("speedup_vs_eigen", "× Eigen", "{:.1f}"),
            ("rel_err", "rel. error", "{:.1e}")],
    "csr": [("n", "n", "{}"), ("width", "width", "{}"), ("density", "density", "{}"), ("nnz", "nnz", "{}"),
            ("trnsparse_ms", "trnsparse ms", "{:.3f}"), ("eigen_ms", "Eigen ms", "{:.3f}"),
            ("speedup_vs_eigen", "× Eigen", "{:.2f}"), ("rel_err", "rel. error", "{:.1e}")],
    "spmv": [("matrix", "matrix", "{}"), ("n", "n", "{}"), ("nnz", "nnz", "{}"), ("trnsparse_ms", "trnsparse ms", "{:.3f}"),
             ("gbps", "GB/s", "{:.1f}"), ("stream_gbps", "STREAM GB/s", "{:.1f}"), ("eigen_ms", "Eigen ms", "{:.3f}"),
             ("speedup_vs_eigen", "× Eigen", "{:.2f}"), ("sym_ms", "symmetric ms", "{:.3f}"),
             ("sym_speedup_vs_eigen", "symmetric × Eigen", "{:.2f}")],
    # `--section bsr --problem/--matrix`: the natural block size's row per matrix (all
    # candidates are in the JSON), then the advisor's pick against the fastest.
    "bsr-problem": [("problem", "matrix", "{}"), ("dtype", "dtype", "{}"), ("width", "width", "{}"),
                    ("block_size", "b", "{}"), ("fill", "fill", "{:.2f}"), ("trnsparse_ms", "BSR ms", "{:.3f}"),
                    ("csr_ms", "our CSR ms", "{:.3f}"), ("eigen_ms", "Eigen ms", "{:.3f}"),
                    ("petsc_baij_ms", "PETSc BAIJ ms", "{:.3f}"), ("speedup_vs_csr", "× CSR", "{:.2f}"),
                    ("speedup_vs_eigen", "× Eigen", "{:.1f}"), ("speedup_vs_petsc_baij", "× BAIJ", "{:.2f}"),
                    ("gbps", "BSR GB/s", "{:.0f}"), ("stream_read_gbps", "read GB/s", "{:.0f}")],
    # The half storage of a symmetric matrix, SpMV, at its natural block size.
    "bsr-symmetric": [("problem", "matrix", "{}"), ("dtype", "dtype", "{}"), ("block_size", "b", "{}"),
                      ("trnsparse_ms", "BSR half ms", "{:.3f}"), ("bsr_full_ms", "BSR full ms", "{:.3f}"),
                      ("csr_symmetric_ms", "CSR half ms", "{:.3f}"), ("csr_ms", "CSR full ms", "{:.3f}"),
                      ("petsc_sbaij_ms", "PETSc SBAIJ ms", "{:.3f}"), ("speedup_vs_bsr_full", "× BSR full", "{:.2f}"),
                      ("speedup_vs_csr_symmetric", "× CSR half", "{:.2f}"),
                      ("speedup_vs_petsc_sbaij", "× SBAIJ", "{:.2f}")],
    # bf16 against fp32 on the same pattern (bf16 rows), the two timed side by side.
    "bsr-bf16": [("problem", "matrix", "{}"), ("width", "width", "{}"), ("format", "format", "{}"),
                 ("block_size", "b", "{}"), ("fp32_ms", "fp32 ms", "{:.3f}"), ("bf16_ms", "bf16 ms", "{:.3f}"),
                 ("speedup_vs_fp32", "bf16 × fp32", "{:.2f}")],
    "advise": [("problem", "matrix", "{}"), ("dtype", "dtype", "{}"), ("width", "width", "{}"),
               ("choice_block_size", "pick (1 = CSR)", "{}"), ("choice_ms", "pick ms", "{:.3f}"),
               ("best_block_size", "fastest", "{}"), ("best_ms", "fastest ms", "{:.3f}"),
               ("choice_vs_best", "pick ÷ fastest", "{:.3f}")],
}

# The block size a problem-mode table quotes: the matrix's natural one.
NATURAL = {"elasticity3d": 3, "block_stencil3d": 5, "poisson3d": 1}


def natural_block(row):
    name, *args = row["problem"].split(":")
    if name == "random_blocks":
        return int(args[1])
    return NATURAL.get(name)


def sections_of(row):
    section = row.get("section")
    if section in ("bsr", "bsr-symmetric") and "problem" in row:
        natural = row.get("block_size") == natural_block(row)
        if section == "bsr-symmetric":
            return [section] if natural else []
        bf16 = ["bsr-bf16"] if row.get("speedup_vs_fp32") is not None and (natural or row.get("format") == "csr") else []
        return (["bsr-problem"] if natural else []) + bf16
    return [section]


def cell(row, key, fmt):
    value = row.get(key)
    return "–" if value is None else fmt.format(value)


def main(paths):
    rows = [json.loads(line) for path in paths for line in open(path) if line.strip()]
    for section, columns in COLUMNS.items():
        chosen = [r for r in rows if section in sections_of(r)]
        if not chosen:
            continue
        print(f"\n{section} ({chosen[0].get('dtype')}, {chosen[0].get('threads')} threads, {chosen[0].get('isa')}):\n")
        print("| " + " | ".join(title for _, title, _ in columns) + " |")
        print("|" + " --- |" * len(columns))
        for r in chosen:
            print("| " + " | ".join(cell(r, key, fmt) for key, _, fmt in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
