#!/usr/bin/python3
"""Block-sparse attention as models call it, from Python: `sparse_attention` on
(batch, heads, seq, head_dim) tensors against dense torch attention and against the 2-D
entry point looped over batch and heads, all on the same data in the same run.

Prints one JSON object per line. Attention rows:
  {"op": "attention", "pass": "fwd" | "fwd_bwd", "impl": ..., "mask": ..., "batch": 2,
   "heads": 8, "kv_heads": 8, "seq": 8192, "head_dim": 64, "block": 128, "density": ...,
   "dtype": "float32", "threads": 2, "cpu": ..., "median_s": ..., "gflops": ...,
   "max_rel_err": ...}
impl is one of
  - "trnsparse": sparse_attention on the 4-D tensors (query as the transpose(1, 2) view of
    a (B, L, H, E) projection, as a model holds it);
  - "trnsparse_2d_loop": block_sparse_attention_tiled called per (batch, head) in Python,
    timed in the same rounds as "trnsparse" (each round runs one then the other); its rows
    carry "vs_2d_loop", the loop's time over the 4-D call's;
  - "dense_torch": softmax(Q Kᵀ · scale + mask) V written in torch with autograd, one
    (batch, head) at a time (all heads at once would hold batch·heads·seq² scores: 4.3 GB
    at the default size), allocating its seq² intermediates on every call as such code
    does (fresh pages cost about 11 µs per 4 KiB on these hosts);
  - "dense_torch_reuse": the same products and softmax, forward and backward written out,
    into seq² buffers allocated once (the fastest dense baseline this torch allows: no SDPA).
`gflops` counts useful multiply-adds over allowed (query, key) pairs (4·pairs·E forward,
12·pairs·E forward + backward, for every implementation), so rates compare work done.
`max_rel_err` is max |x − ref| / max |ref| over O (and dQ, dK, dV) against dense_torch in
float64 on the first (batch, head) slices (--check-heads).

Also printed: {"op": "sgemm", ...} (torch.mm of 2048³ and of the attention's Q Kᵀ
shape, the rate the forward is compared with; and 2048³ in a child with OPENBLAS_CORETYPE
unset, OpenBLAS's own kernel choice, after checking its result) and {"op": "python_overhead", ...}: the
time of a sparse_attention call at seq 256 minus the core's kernel called directly on
the same buffers (what the Python layer adds per call).

Both libraries get 2 threads (torch.set_num_threads(2): torch sees one thread by default
on these VMs).

    PYTHONPATH=build/python /usr/bin/python3 bench/attention_models.py --seq 8192
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

# OpenBLAS's pthread workers spin for about 0.1 s after each call; on a 2-core host a dense
# baseline timed just before our kernels would leave them spinning beside us.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import torch  # noqa: E402

import trnsparse as ts  # noqa: E402
from trnsparse import _core  # noqa: E402

# torch.mm of 2048³ in a child without OPENBLAS_CORETYPE (the machine pins it to Haswell for
# the tests), after checking its result against float64 on a sample of entries.
_SGEMM_CHILD = """
import json, statistics, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
c = torch.mm(a, b)
ref = a[:64].double() @ b.double()
ok = bool(((c[:64].double() - ref).abs().max() / ref.abs().max()) < 1e-5)
times = []
for _ in range(5):
    t = time.perf_counter(); torch.mm(a, b, out=c); times.append(time.perf_counter() - t)
print(json.dumps({"ok": ok, "gflops": 2 * 2048 ** 3 / statistics.median(times) / 1e9}))
"""


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def measure(fn, repeats: int) -> float:
    """Median seconds of fn (trnsparse.measure: warmed up until settled, retried while the
    spread is wide)."""
    return ts.measure(fn, reps=repeats).median_ms / 1e3


def measure_side_by_side(fns, repeats: int) -> list:
    """Median seconds of each of fns (one or two), two timed alternately one run a turn
    (trnsparse.measure_pair): on a shared host whose load drifts, both see the drift."""
    if len(fns) == 1:
        return [measure(fns[0], repeats)]
    tf, tg = ts.measure_pair(fns[0], fns[1], reps=repeats, chunk=1)
    return [tf.median_ms / 1e3, tg.median_ms / 1e3]


def masks(kind: str, seq: int, block: int, heads: int):
    """(name, AttentionMask) of a mask kind."""
    if kind == "causal":
        return ts.mask.causal(seq, block)
    if kind == "local3":  # three blocks per block row: |I - J| <= 1
        return ts.mask.local_window(seq, block, 1)
    if kind == "per_head":  # head h: a local window of 1 + (h mod 4) blocks each side, plus one global block
        return ts.mask.stack([ts.mask.global_tokens(seq, block, 1 + h % 4, 1) for h in range(heads)])
    raise ValueError(f"unknown mask {kind!r}")


def slice_masks(m) -> torch.Tensor:
    """The (mask batch, mask heads, seq, seq) bool tensor of allowed pairs."""
    d = m.to_dense()
    return d[None, None] if d.dim() == 2 else d


class DenseReuse:
    """Dense masked attention of one (seq, E) head, forward and backward written out,
    into seq² buffers allocated once."""

    def __init__(self, seq: int, dtype):
        self.S = torch.empty(seq, seq, dtype=dtype)
        self.dP = torch.empty(seq, seq, dtype=dtype)

    def forward(self, q, k, v, neg, scale, out):
        torch.mm(q, k.t(), out=self.S)
        self.S.mul_(scale).add_(neg)  # neg: 0 where allowed, -inf elsewhere
        self.S.sub_(self.S.amax(-1, keepdim=True)).exp_()  # softmax in place (every row allows a key)
        self.S.div_(self.S.sum(-1, keepdim=True))
        torch.mm(self.S, v, out=out)

    def backward(self, q, k, v, o, do, scale, dq, dk, dv):
        # S holds P from the forward.
        torch.mm(self.S.t(), do, out=dv)
        torch.mm(do, v.t(), out=self.dP)
        D = (do * o).sum(-1, keepdim=True)
        self.dP.sub_(D).mul_(self.S)
        torch.mm(self.dP, k, out=dq).mul_(scale)
        torch.mm(self.dP.t(), q, out=dk).mul_(scale)


def dense_autograd(q, k, v, allowed, scale):
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def run(args) -> None:
    torch.set_num_threads(args.threads)
    ts.set_num_threads(args.threads)
    B, H, G, L, E, b = args.batch, args.heads, args.kv_heads, args.seq, args.head_dim, args.block
    group = H // G
    head = {"batch": B, "heads": H, "kv_heads": G, "seq": L, "head_dim": E, "block": b, "dtype": "float32",
            "threads": args.threads, "cpu": cpu_name()}
    gen = torch.Generator().manual_seed(args.seed)
    # Projections as a model holds them: (B, L, H, E), viewed as (B, H, L, E).
    q = torch.randn(B, L, H, E, generator=gen).transpose(1, 2)
    k = torch.randn(B, L, G, E, generator=gen).transpose(1, 2)
    v = torch.randn(B, L, G, E, generator=gen).transpose(1, 2)
    dO = torch.randn(B, L, H, E, generator=gen).transpose(1, 2)
    scale = 1.0 / math.sqrt(E)
    emit = lambda row: print(json.dumps({**head, **row}), flush=True)  # noqa: E731

    for kind in args.masks:
        m = masks(kind, L, b, H)
        allowed_all = slice_masks(m)  # (1 or B, 1 or H, L, L)
        pairs = float(allowed_all.flatten(2).sum(-1, dtype=torch.float64).sum()) * \
            (B // allowed_all.shape[0]) * (H // allowed_all.shape[1])
        mask_of = lambda z, h: allowed_all[z % allowed_all.shape[0], h % allowed_all.shape[1]]  # noqa: E731
        common = {"op": "attention", "mask": kind, "density": m.density}
        flops = {"fwd": 4.0 * pairs * E, "fwd_bwd": 12.0 * pairs * E}
        enable_gqa = G != H

        # Reference slices in float64 for the error columns.
        checks = []
        for s in range(min(args.check_heads, B * H)):
            z, h = divmod(s, H)
            qs, ks, vs, ds = (t[z, i].double().requires_grad_() for t, i in
                              ((q, h), (k, h // group), (v, h // group), (dO, h)))
            allowed = mask_of(z, h)
            o = dense_autograd(qs, ks, vs, allowed, scale)
            grads = torch.autograd.grad(o, (qs, ks, vs), ds.detach())
            checks.append((z, h, o.detach(), grads))

        def rel_err(O, grads=None) -> float:
            worst = 0.0
            for z, h, o_ref, g_ref in checks:
                pairs_ = [(O[z, h], o_ref)]
                if grads is not None:
                    dq, dk, dv = grads
                    pairs_ += [(dq[z, h], g_ref[0])]
                    if group == 1:  # a key head's gradient sums its group's query heads
                        pairs_ += [(dk[z, h], g_ref[1]), (dv[z, h], g_ref[2])]
                for x, r in pairs_:
                    err = float((x.double() - r).abs().max() / r.abs().max().clamp_min(1e-30))
                    worst = err if not err <= worst else worst  # a NaN sticks
            return worst

        # trnsparse, 4-D.
        def ts_fwd():
            return ts.sparse_attention(q, k, v, m, enable_gqa=enable_gqa)

        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

        def ts_fwd_bwd():
            o = ts.sparse_attention(qg, kg, vg, m, enable_gqa=enable_gqa)
            return o, torch.autograd.grad(o, (qg, kg, vg), dO)

        # The 2-D entry point in a Python loop (single-slice masks only; it has no GQA),
        # timed side by side with the 4-D call.
        def loop_fwd():
            return [ts.block_sparse_attention_tiled(q[z, h], k[z, h // group], v[z, h // group], m)
                    for z in range(B) for h in range(H)]

        def loop_fwd_bwd():
            for z in range(B):
                for h in range(H):
                    qs, ks, vs = (x.detach().requires_grad_() for x in (q[z, h], k[z, h // group], v[z, h // group]))
                    o = ts.block_sparse_attention_tiled(qs, ks, vs, m)
                    torch.autograd.grad(o, (qs, ks, vs), dO[z, h])

        loop = m.batch == m.heads == 1
        for name, fn, loop_fn in (("fwd", ts_fwd, loop_fwd), ("fwd_bwd", ts_fwd_bwd, loop_fwd_bwd)):
            t, *t_loop = measure_side_by_side([fn] + ([loop_fn] if loop else []), args.reps)
            err = rel_err(ts_fwd()) if name == "fwd" else rel_err(*ts_fwd_bwd())
            emit({**common, "pass": name, "impl": "trnsparse", "median_s": t, "gflops": flops[name] / t / 1e9,
                  "max_rel_err": err})
            if loop:
                emit({**common, "pass": name, "impl": "trnsparse_2d_loop", "median_s": t_loop[0],
                      "gflops": flops[name] / t_loop[0] / 1e9, "vs_2d_loop": t_loop[0] / t})

        if args.no_dense:
            continue
        # Dense torch with autograd, one slice at a time, allocating as written.
        def dense_fwd():
            for z in range(B):
                for h in range(H):
                    with torch.no_grad():
                        dense_autograd(q[z, h], k[z, h // group], v[z, h // group], mask_of(z, h), scale)

        def dense_fwd_bwd():
            for z in range(B):
                for h in range(H):
                    qs, ks, vs = (x.detach().requires_grad_() for x in (q[z, h], k[z, h // group], v[z, h // group]))
                    o = dense_autograd(qs, ks, vs, mask_of(z, h), scale)
                    torch.autograd.grad(o, (qs, ks, vs), dO[z, h])

        t = measure(dense_fwd, args.reps)
        emit({**common, "pass": "fwd", "impl": "dense_torch", "median_s": t, "gflops": flops["fwd"] / t / 1e9})
        t = measure(dense_fwd_bwd, args.reps)
        emit({**common, "pass": "fwd_bwd", "impl": "dense_torch", "median_s": t, "gflops": flops["fwd_bwd"] / t / 1e9})

        # Dense torch into buffers allocated once (additive -inf masks precomputed).
        negs = torch.zeros(allowed_all.shape).masked_fill_(~allowed_all, float("-inf"))
        neg_of = lambda z, h: negs[z % negs.shape[0], h % negs.shape[1]]  # noqa: E731
        work = DenseReuse(L, torch.float32)
        out = torch.empty(L, E)
        dq, dk, dv = torch.empty(L, E), torch.empty(L, E), torch.empty(L, E)

        def reuse_fwd():
            for z in range(B):
                for h in range(H):
                    work.forward(q[z, h], k[z, h // group], v[z, h // group], neg_of(z, h), scale, out)

        def reuse_fwd_bwd():
            for z in range(B):
                for h in range(H):
                    qs, ks, vs = q[z, h], k[z, h // group], v[z, h // group]
                    work.forward(qs, ks, vs, neg_of(z, h), scale, out)
                    work.backward(qs, ks, vs, out, dO[z, h], scale, dq, dk, dv)

        t = measure(reuse_fwd, args.reps)
        emit({**common, "pass": "fwd", "impl": "dense_torch_reuse", "median_s": t, "gflops": flops["fwd"] / t / 1e9})
        t = measure(reuse_fwd_bwd, args.reps)
        emit({**common, "pass": "fwd_bwd", "impl": "dense_torch_reuse", "median_s": t,
              "gflops": flops["fwd_bwd"] / t / 1e9})

    # SGEMM rates: 2048³ and the attention's S = Q Kᵀ shape (seq x E by E x seq).
    for name, (m_, k_, n_) in (("2048^3", (2048, 2048, 2048)), ("qk", (L, E, L))):
        a, c = torch.randn(m_, k_), torch.randn(k_, n_)
        out = torch.empty(m_, n_)
        t = measure(lambda: torch.mm(a, c, out=out), args.reps)
        print(json.dumps({"op": "sgemm", "shape": name, "m": m_, "k": k_, "n": n_, "threads": args.threads,
                          "cpu": head["cpu"], "median_s": t, "gflops": 2.0 * m_ * k_ * n_ / t / 1e9}), flush=True)

    env = {k_: v_ for k_, v_ in os.environ.items() if k_ != "OPENBLAS_CORETYPE"}
    child = subprocess.run([sys.executable, "-c", _SGEMM_CHILD, str(args.threads)], env=env, capture_output=True,
                           text=True, check=False)
    try:
        r = json.loads(child.stdout.strip().splitlines()[-1])
        row = {"gflops": r["gflops"]} if r["ok"] else {"skipped": "wrong result without OPENBLAS_CORETYPE"}
    except (IndexError, ValueError, KeyError):
        row = {"skipped": f"child failed: {child.stderr.strip()[-200:]}"}
    print(json.dumps({"op": "sgemm", "shape": "2048^3", "coretype": "unset (child)", "threads": args.threads,
                      "cpu": head["cpu"], **row}), flush=True)

    # Python overhead per call at seq 256: the call against the core's kernel on the same buffers.
    small = 256
    qs, ks, vs = (torch.randn(1, 1, small, E) for _ in range(3))
    ms = ts.mask.local_window(small, min(b, 64), 1)
    O, lse = torch.empty_like(qs), torch.empty(1, 1, small)
    arg = lambda x: (x.data_ptr(), 1, 1, small, E, x.stride(0), x.stride(1), x.stride(2))  # noqa: E731
    kernel = lambda: _core.attention_forward(ms._core, "float32", arg(qs), arg(ks), arg(vs), arg(O),  # noqa: E731
                                             lse.data_ptr(), lse.numel(), scale, [], 0.0)
    call = lambda: ts.sparse_attention(qs, ks, vs, ms)  # noqa: E731
    n_calls = 2000
    for f in (kernel, call):
        f()
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n_calls):
            kernel()
        t1 = time.perf_counter()
        for _ in range(n_calls):
            call()
        t2 = time.perf_counter()
        rounds.append(((t1 - t0) / n_calls, (t2 - t1) / n_calls))
    k_s, c_s = min(r[0] for r in rounds), min(r[1] for r in rounds)
    print(json.dumps({"op": "python_overhead", "seq": small, "head_dim": E, "kernel_us": k_s * 1e6,
                      "call_us": c_s * 1e6, "overhead_us": (c_s - k_s) * 1e6, "cpu": head["cpu"]}), flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=None, help="key/value heads (GQA; default: --heads)")
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--masks", default="causal,local3,per_head", help="comma-separated: causal, local3, per_head")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--check-heads", type=int, default=1, help="slices checked against float64 dense")
    p.add_argument("--no-dense", action="store_true", help="skip the dense baselines")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.kv_heads = args.heads if args.kv_heads is None else args.kv_heads
    if args.heads % args.kv_heads:
        p.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")
    args.masks = [x for x in args.masks.split(",") if x]
    run(args)


if __name__ == "__main__":
    main()
