#!/usr/bin/python3
"""trnsparse.nn.BlockSparseLinear against dense torch.nn.Linear in the same run.

Prints one JSON object per line:
  {"op": "fwd" | "fwd_bwd" | "decode", "impl": "trnsparse" | "torch_dense", "in": 4096, "out": 4096,
   "tokens": 2048, "block": 32, "density": 0.25, "dtype": "float32", "threads": 2,
   "median_s": ..., "spread": ..., "stable": ..., "speedup": ...}
`speedup` is the dense layer's median time over this row's (dense rows: 1); each sparse
row is timed alternately with a dense row of its own (same `block`), so a change in the
load of a shared machine falls on both. Times come from the library's harness
(trnsparse.measure_pair: warmed up until settled; `spread` the interquartile range over
the median, retried while above 10%, `stable` false if it stayed there). Decode rows
("op": "decode": forward without autograd, 1 to 16 tokens) add "bytes_per_s": the stored
blocks' bytes (the weight the layer must read) per second, and two "op": "read_bandwidth"
rows give this machine's read bandwidth with the same threads (a sum over a buffer much
larger than the caches), measured beside them: "pages": "4K" over memory as torch
allocates it, "pages": "2M" over huge pages. Every decode layer is first run
STREAMS_BEFORE_HUGE_PAGES times on one token, as a model's layers are by its 64th token:
by then the core has moved a sparse weight onto huge pages (docs/sparse_weights.md, "Huge pages").
With --dense-huge-pages the dense layers' weights are copied onto huge pages too. With
--decode-cold each call runs the next of enough copies of the layer (dense and sparse
alike) to fill twice the last-level cache, so that both read their weights from memory
however large the cache is (rows say "cold": true). With --bf16-vs-fp32, "op": "fwd_bwd_dtypes"
rows time a bf16 and an fp32 layer of the same layout against each other (`speedup`: the
fp32 time over the bf16 time).

Both sides run with --threads threads: torch.set_num_threads (torch defaults to 1 thread
on these VMs) and trnsparse.set_num_threads, with OMP_WAIT_POLICY=PASSIVE and
OPENBLAS_THREAD_TIMEOUT=4 unless set (see below).

    PYTHONPATH=build/python /usr/bin/python3 bench/sparse_linear.py --shapes 4096x4096 --blocks 32
"""
from __future__ import annotations

import argparse
import copy
import glob
import json
import os

# torch's OpenMP threads spin after each parallel region by default, its OpenBLAS threads
# (fp32 nn.Linear) call sched_yield for 2^28 cycles after each product, and trnsparse's
# pool polls for 200 µs after each team: on 2 cores each side's idle threads then take the
# cores the other's next call needs. Passive waiting, and OpenBLAS's shortest spin (2^4
# cycles), unless the caller chose otherwise, are set before torch loads either library.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
import torch  # noqa: E402

import trnsparse as ts  # noqa: E402
from trnsparse._interop import empty  # noqa: E402
from trnsparse.nn import BlockSparseLinear  # noqa: E402

# Streams of a weight after which the core moves it onto huge pages
# (runtime/huge_pages.hpp, kCollapseAfter).
STREAMS_BEFORE_HUGE_PAGES = 64

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def median_time(fn, repeats: int) -> float:
    """Median seconds of fn (trnsparse.measure: warmed up, retried while the spread is wide)."""
    return ts.measure(fn, reps=repeats).median_ms / 1e3


def paired_times(fa, fb, repeats: int) -> tuple[ts.Timing, ts.Timing]:
    """fa and fb timed alternately, one run a turn (trnsparse.measure_pair), so that a
    change in the machine's load (other processes on shared cores) falls on both."""
    return ts.measure_pair(fa, fb, reps=repeats, chunk=1)


def seconds(t: ts.Timing) -> dict:
    """A row's timing fields: the median in seconds, its spread, whether it settled."""
    return {"median_s": t.median_ms / 1e3, "spread": t.spread, "stable": t.stable}


def forward(layer, x):
    def run():
        with torch.no_grad():
            layer(x)
    return run


def forward_backward(layer, x, dy):
    def run():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).backward(dy)
    return run


def forward_ring(layers, x):
    """forward of each layer in turn, one a call: with enough of them (cold_copies), each
    call finds its weight out of the caches; with one, forward."""
    turn = [0]

    def run():
        with torch.no_grad():
            layers[turn[0] % len(layers)](x)
        turn[0] += 1
    return run


def last_level_cache_bytes() -> int:
    """The size of cpu0's highest-level cache (sysfs), or 32 MiB if none is listed."""
    sizes = []
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        with open(os.path.join(index, "size")) as f:
            text = f.read().strip()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=32 << 20)


def cold_copies(weight_bytes: int) -> int:
    """Copies of a weight whose total is twice the last-level cache: each is evicted
    before its next turn."""
    return max(2, -(-2 * last_level_cache_bytes() // weight_bytes))


def read_bandwidth(repeats: int, huge_pages: bool) -> float:
    """Bytes per second of torch's sum over 512 MiB of fp32 (on torch's threads), in
    torch's memory or on huge pages (the package's pooled buffers)."""
    n = 128 * 1024 * 1024
    buf = empty((n,), torch.float32, "read_bandwidth").fill_(1.0) if huge_pages else torch.ones(n)
    return n * 4 / median_time(lambda: buf.sum(), repeats)


def on_huge_pages(linear: torch.nn.Linear) -> torch.nn.Linear:
    """linear with its weight copied onto huge pages (the package's pooled buffers)."""
    w = empty(linear.weight.shape, linear.weight.dtype, "on_huge_pages")
    w.copy_(linear.weight.detach())
    linear.weight.data = w
    return linear


def settle(layers, x) -> None:
    """Each layer run STREAMS_BEFORE_HUGE_PAGES times on x."""
    with torch.no_grad():
        for layer in layers:
            for _ in range(STREAMS_BEFORE_HUGE_PAGES):
                layer(x)


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def run(args) -> None:
    torch.set_num_threads(args.threads)
    ts.set_num_threads(args.threads)
    base = {"threads": args.threads}
    for shape in args.shapes.split(","):
        n_in, n_out = (int(v) for v in shape.split("x"))
        for dname in filter(None, args.dtypes.split(",")):
            dtype = _DTYPES[dname]
            torch.manual_seed(0)
            dense = torch.nn.Linear(n_in, n_out, dtype=dtype)
            x = torch.randn(args.tokens, n_in, dtype=dtype, requires_grad=True)
            dy = torch.randn(args.tokens, n_out, dtype=dtype)
            common = dict(base, **{"in": n_in, "out": n_out, "tokens": args.tokens, "dtype": dname})
            ops = [("fwd", lambda layer: forward(layer, x))] if args.forward_only else [
                ("fwd", lambda layer: forward(layer, x)), ("fwd_bwd", lambda layer: forward_backward(layer, x, dy))]
            for b in (int(v) for v in args.blocks.split(",")):
                for density in (float(v) for v in args.densities.split(",")):
                    layer = BlockSparseLinear(n_in, n_out, block_size=b, density=density, dtype=dtype)
                    for op, make in ops:
                        td, tl = paired_times(make(dense), make(layer), args.repeats)
                        emit(dict(common, op=op, impl="torch_dense", block=b, density=1.0, **seconds(td),
                                  speedup=1.0))
                        emit(dict(common, op=op, impl="trnsparse", block=b, density=layer.density, **seconds(tl),
                                  speedup=td.median_ms / tl.median_ms))
    if args.bf16_vs_fp32:
        run_dtype_pairs(args, base)
    if args.decode:
        run_decode(args, base)


def run_dtype_pairs(args, base) -> None:
    """bf16 against fp32 layers of the same layout, forward + backward timed alternately:
    one "op": "fwd_bwd_dtypes" row each, its "speedup" the fp32 time over the bf16 time."""
    for shape in args.shapes.split(","):
        n_in, n_out = (int(v) for v in shape.split("x"))
        for b in (int(v) for v in args.blocks.split(",")):
            for density in (float(v) for v in args.bf16_vs_fp32.split(",")):
                runs = []
                for dtype in (torch.float32, torch.bfloat16):
                    torch.manual_seed(0)
                    layer = BlockSparseLinear(n_in, n_out, block_size=b, density=density, dtype=dtype)
                    x = torch.randn(args.tokens, n_in, dtype=dtype, requires_grad=True)
                    runs.append(forward_backward(layer, x, torch.randn(args.tokens, n_out, dtype=dtype)))
                t32, t16 = paired_times(*runs, args.repeats)
                emit(dict(base, op="fwd_bwd_dtypes", impl="trnsparse", **{"in": n_in, "out": n_out},
                          tokens=args.tokens, block=b, density=layer.density, float32_s=t32.median_ms / 1e3,
                          bfloat16_s=t16.median_ms / 1e3, spread=max(t32.spread, t16.spread),
                          stable=t32.stable and t16.stable, speedup=t32.median_ms / t16.median_ms))


def run_decode(args, base) -> None:
    for pages in ("4K", "2M"):
        emit(dict(base, op="read_bandwidth", pages=pages, bytes_per_s=read_bandwidth(args.repeats, pages == "2M")))
    dtype = torch.bfloat16

    def ring(layer, weight_bytes):
        """The layer, and with --decode-cold enough copies of it for forward_ring."""
        layers = [layer] + [copy.deepcopy(layer) for _ in range(cold_copies(weight_bytes) - 1)] \
            if args.decode_cold else [layer]
        return [on_huge_pages(d) for d in layers] if args.dense_huge_pages and isinstance(layer, torch.nn.Linear) \
            else layers

    for shape in args.shapes.split(","):
        n_in, n_out = (int(v) for v in shape.split("x"))
        torch.manual_seed(0)
        dense = ring(torch.nn.Linear(n_in, n_out, dtype=dtype), n_in * n_out * 2)
        sparse = {}  # (b, density) -> ring, built once for every token count
        for b in (int(v) for v in args.blocks.split(",")):
            for density in (float(v) for v in args.densities.split(",")):
                layer = BlockSparseLinear(n_in, n_out, block_size=b, density=density, dtype=dtype)
                sparse[b, density] = ring(layer, layer.weight.numel() * 2)
                settle(sparse[b, density], torch.randn(1, n_in, dtype=dtype))
        for tokens in (int(v) for v in args.decode.split(",")):
            x = torch.randn(tokens, n_in, dtype=dtype)
            common = dict(base, op="decode", **{"in": n_in, "out": n_out, "tokens": tokens, "dtype": "bfloat16"})
            for (b, _), layers in sparse.items():
                td, tl = paired_times(forward_ring(dense, x), forward_ring(layers, x), args.decode_repeats)
                emit(dict(common, impl="torch_dense", block=b, density=1.0, **seconds(td), speedup=1.0,
                          bytes_per_s=n_in * n_out * 2 / (td.median_ms / 1e3), cold=args.decode_cold,
                          huge_pages=args.dense_huge_pages))
                emit(dict(common, impl="trnsparse", block=b, density=layers[0].density, **seconds(tl),
                          speedup=td.median_ms / tl.median_ms,
                          bytes_per_s=layers[0].weight.numel() * 2 / (tl.median_ms / 1e3), cold=args.decode_cold))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default="4096x4096,4096x11008,11008x4096", help="in x out, comma-separated")
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--densities", default="1.0,0.5,0.25,0.1")
    p.add_argument("--blocks", default="32,64,128")
    p.add_argument("--dtypes", default="float32,bfloat16", help="empty: decode rows only")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--forward-only", action="store_true", help="skip the forward + backward rows")
    p.add_argument("--bf16-vs-fp32", default="", metavar="DENSITIES",
                   help="densities at which bf16 and fp32 layers are timed against each other; empty: none")
    p.add_argument("--decode", default="1,4,16", help="decode token counts (bf16); empty: none")
    p.add_argument("--decode-repeats", type=int, default=50)
    p.add_argument("--decode-cold", action="store_true",
                   help="decode with each call on the next of enough copies of the layer to fill twice the "
                        "last-level cache, so that both sides read their weights from memory")
    p.add_argument("--dense-huge-pages", action="store_true",
                   help="copy the dense decode layers' weights onto huge pages (the sparse ones move there "
                        "themselves)")
    run(p.parse_args())


if __name__ == "__main__":
    main()
