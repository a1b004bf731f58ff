#!/usr/bin/python3
"""Sparse-dense products and block-sparse attention from Python, in one run: trnsparse
against torch.sparse (CSR, and BSR where this torch can multiply it on CPU), scipy.sparse
and dense torch.matmul; block_sparse_attention_tiled against dense torch attention.

Prints one JSON object per line:
  {"op": "bsr_spmm", "impl": "trnsparse", "n": 2048, "k": 64, "block": 64, "density": 0.05,
   "dtype": "float32", "median_s": ..., "gflops": ..., "max_rel_err": ...}
`gflops` counts the useful multiply-adds (2 * stored entries * k), and `max_rel_err` is
the error against a float64 dense product. Times are medians from the library's harness
(trnsparse.measure). An implementation this machine's torch lacks
prints {"impl": ..., "skipped": "<reason>"} instead.

Attention rows ("op": "attention_fwd" or "attention_fwd_bwd", float32, one head of
(seq, d), a local_window mask) compare block_sparse_attention_tiled with dense torch
attention, softmax(Q Kᵀ · scale + mask) V with a dense boolean (seq, seq) mask, on the
same data. `gflops` counts the useful multiply-adds over the allowed (query, key) pairs
(4 · pairs · d forward, 12 · pairs · d forward + backward) and `max_rel_err` is the
largest of max |x - ref| / max |ref| over O (and dQ, dK, dV) against a float64 dense
reference.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py --n 2048 --k 64

`--spgemm SPEC_OR_FILE,...` prints instead, for each named problem (ts.named_problem) or
Matrix Market file, the sparse × sparse product A @ A in float64 by trnsparse (matmul)
and scipy.sparse, one row each ("op": "spgemm", median_s, nnz_c, and max_rel_err against
scipy's product). trnsparse's median_s is the first product of a structure (its plan
cache cleared before each call); cached_s reuses the plan, as a product of new values on
the same structures does:

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py --spgemm elasticity3d:24,poisson3d:64
"""
from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scipy.sparse
import torch

import trnsparse as ts

warnings.filterwarnings("ignore", message="Sparse .* tensor support is in beta state")


def measure(fn, repeats: int) -> tuple[float, object]:
    """Median seconds of fn (trnsparse.measure: warmed up until settled, retried while the
    spread is wide) and what its last run returned."""
    out = []

    def run():
        out[:] = [fn()]

    return ts.measure(run, reps=repeats).median_ms / 1e3, out[0]


def block_sparse(n: int, block: int, density: float, seed: int) -> torch.Tensor:
    """n x n float64 with about `density` of its block x block tiles dense, the rest zero."""
    g = torch.Generator().manual_seed(seed)
    grid = -(-n // block)
    mask = torch.rand(grid, grid, generator=g) < density
    full = mask.repeat_interleave(block, 0).repeat_interleave(block, 1)[:n, :n]
    return (torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1) * full


def run(args) -> None:
    dense64 = block_sparse(args.n, args.block, args.density, args.seed)
    B64 = torch.rand(args.n, args.k, generator=torch.Generator().manual_seed(args.seed + 1), dtype=torch.float64)
    ref = dense64 @ B64
    scale = float(ref.abs().max()) or 1.0
    for dtype in (torch.float32, torch.float64):
        D, B = dense64.to(dtype), B64.to(dtype)
        bsr = ts.BSRMatrix.from_dense(D, block_size=args.block)
        csr = ts.from_dense(D)
        useful = 2.0 * csr.nnz * args.k
        impls = {
            ("bsr_spmm", "trnsparse"): lambda: ts.bsr_spmm(bsr, B),
            ("csr_spmm", "trnsparse"): lambda: ts.spmm(csr, B),
            ("csr_spmm", "torch.sparse"): lambda t=D.to_sparse_csr(): torch.sparse.mm(t, B),
            ("bsr_spmm", "torch.sparse"): lambda t=D.to_sparse_bsr((args.block, args.block)): t @ B,
            ("csr_spmm", "scipy.sparse"): lambda s=scipy.sparse.csr_matrix(D.numpy()), b=B.numpy(): s @ b,
            ("bsr_spmm", "scipy.sparse"): lambda s=scipy.sparse.bsr_matrix(D.numpy(), blocksize=(args.block,) * 2),
            b=B.numpy(): s @ b,
            ("dense", "torch.matmul"): lambda: torch.matmul(D, B),
        }
        for (op, impl), fn in impls.items():
            row = {"op": op, "impl": impl, "n": args.n, "k": args.k, "block": args.block, "density": args.density,
                   "dtype": str(dtype).replace("torch.", ""), "torch_threads": torch.get_num_threads(),
                   "trnsparse_threads": ts.get_num_threads()}
            try:
                seconds, out = measure(fn, args.repeats)
            except (RuntimeError, NotImplementedError) as e:  # e.g. BSR @ dense without MKL
                print(json.dumps({**row, "skipped": str(e).splitlines()[0][:160]}), flush=True)
                continue
            out = torch.as_tensor(np.asarray(out)) if not isinstance(out, torch.Tensor) else out
            err = float((out.double() - ref).abs().max()) / scale
            print(json.dumps({**row, "median_s": seconds, "gflops": useful / seconds / 1e9, "max_rel_err": err}),
                  flush=True)


def dense_attention(Q, K, V, allowed, scale):
    """softmax(Q Kᵀ · scale, masked by the boolean `allowed`) V with dense torch ops; rows
    with no allowed key give zeros (as block_sparse_attention_tiled)."""
    S = (Q @ K.T * scale).masked_fill(~allowed, float("-inf"))
    empty = ~allowed.any(dim=1, keepdim=True)
    return torch.softmax(S.masked_fill(empty, 0.0), dim=1).masked_fill(empty, 0.0) @ V


def fwd_bwd(f, Q, K, V, dO):
    """(O, dQ, dK, dV) of f(Q, K, V) for the output gradient dO."""
    leaves = [t.detach().requires_grad_() for t in (Q, K, V)]
    O = f(*leaves)
    return (O.detach(), *torch.autograd.grad(O, leaves, dO))


def run_attention(args) -> None:
    for seq in args.attn_seqs:
        d, block, window = args.attn_d, args.attn_block, args.attn_window
        g = torch.Generator().manual_seed(args.seed + seq)
        Q64, K64, V64, dO64 = (torch.rand(seq, d, generator=g, dtype=torch.float64) * 2 - 1 for _ in range(4))
        mask = ts.mask.local_window(seq, block, window)
        allowed = mask.to_dense()
        pairs = int(allowed.sum())
        scale = d ** -0.5
        ref = fwd_bwd(lambda q, k, v: dense_attention(q, k, v, allowed, scale), Q64, K64, V64, dO64)
        Q, K, V, dO = (t.float() for t in (Q64, K64, V64, dO64))
        sparse = lambda q, k, v: ts.block_sparse_attention_tiled(q, k, v, mask)  # noqa: E731
        dense = lambda q, k, v: dense_attention(q, k, v, allowed, scale)  # noqa: E731
        impls = {
            ("attention_fwd", "trnsparse"): lambda: (sparse(Q, K, V),),
            ("attention_fwd", "torch.dense"): lambda: (dense(Q, K, V),),
            ("attention_fwd_bwd", "trnsparse"): lambda: fwd_bwd(sparse, Q, K, V, dO),
            ("attention_fwd_bwd", "torch.dense"): lambda: fwd_bwd(dense, Q, K, V, dO),
        }
        for (op, impl), fn in impls.items():
            row = {"op": op, "impl": impl, "seq": seq, "d": d, "block": block, "mask": "local_window",
                   "window": window, "density": mask.n_blocks / (-(-seq // block)) ** 2, "dtype": "float32",
                   "torch_threads": torch.get_num_threads(), "trnsparse_threads": ts.get_num_threads()}
            with torch.no_grad() if op == "attention_fwd" else torch.enable_grad():
                seconds, outs = measure(fn, args.repeats)
            err = max(float((o.double() - r).abs().max()) / (float(r.abs().max()) or 1.0) for o, r in zip(outs, ref))
            useful = (4.0 if op == "attention_fwd" else 12.0) * pairs * d
            print(json.dumps({**row, "median_s": seconds, "gflops": useful / seconds / 1e9, "max_rel_err": err}),
                  flush=True)


def run_spgemm(args) -> None:
    for spec in args.spgemm:
        A = ts.read_mtx(spec) if spec.endswith(".mtx") else ts.named_problem(spec)
        S = A.to_scipy()
        seconds_scipy, ref = measure(lambda: S @ S, args.repeats)
        def full():
            ts.clear_spgemm_plan_cache()
            return ts.matmul(A, A)

        seconds_ts, C = measure(full, args.repeats)
        seconds_cached, _ = measure(lambda: ts.matmul(A, A), args.repeats)
        got = C.to_scipy()
        scale = float(abs(ref).max()) or 1.0
        err = float(abs(got - ref).max()) / scale
        base = {"op": "spgemm", "problem": spec, "n": A.shape[0], "nnz": A.nnz, "dtype": "float64",
                "trnsparse_threads": ts.get_num_threads()}
        print(json.dumps({**base, "impl": "scipy.sparse", "median_s": seconds_scipy, "nnz_c": int(ref.nnz)}),
              flush=True)
        print(json.dumps({**base, "impl": "trnsparse", "median_s": seconds_ts, "cached_s": seconds_cached,
                          "nnz_c": C.nnz, "max_rel_err": err, "speedup_vs_scipy": seconds_scipy / seconds_ts,
                          "cached_vs_scipy": seconds_scipy / seconds_cached}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2048, help="rows and columns of A")
    p.add_argument("--k", type=int, default=64, help="columns of the dense operand")
    p.add_argument("--block", type=int, default=64, help="block size of the pattern and of BSR")
    p.add_argument("--density", type=float, default=0.05, help="fraction of stored blocks")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--attn-seqs", type=lambda s: [int(x) for x in s.split(",") if x], default=[1024, 2048],
                   help="comma-separated attention sequence lengths (empty: no attention rows)")
    p.add_argument("--attn-d", type=int, default=64, help="attention head dimension")
    p.add_argument("--attn-block", type=int, default=64, help="attention block size")
    p.add_argument("--attn-window", type=int, default=1, help="local_window mask: blocks on each side")
    p.add_argument("--spgemm", type=lambda s: [x for x in s.split(",") if x], default=[],
                   help="comma-separated problems or .mtx files: A @ A against scipy (and nothing else)")
    args = p.parse_args()
    if args.spgemm:
        run_spgemm(args)
        return
    run(args)
    run_attention(args)


if __name__ == "__main__":
    main()
