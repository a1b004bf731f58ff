"""Trains train_lm.py's byte-level transformer three times, changing only its MLPs.

The model, corpus, optimiser (AdamW), batches and seed are train_lm.py's, with
trnsparse's causal block-sparse attention in every run; only the two Linear layers of
each block's MLP differ:

- dense: torch.nn.Linear, the reference;
- sparse25: trnsparse.nn.BlockSparseLinear at 25% block density from step 0
  (nn.sparsify of the freshly initialised model: each layer keeps its blocks of largest
  norm, block size --block);
- gradual: BlockSparseLinear at density 1 from step 0, pruned by trnsparse.prune.GradualPruner
  to 25% on Zhu & Gupta's cubic schedule between 10% and 60% of the steps (every
  --prune-every steps; relayout carries AdamW's moments of the kept blocks).

Then the trained dense model is sparsified to 25% (nn.sparsify, no fine-tuning) and the
MLP stack's decode speed (one token at a time: every block's MLP on a (1, 1, width)
input, bf16 under autocast, no autograd) is timed dense against sparse.

It prints each step's loss and tokens/s, a summary (final loss, mean tokens/s), writes the
curves to --out-json and a PNG (loss vs step, loss vs wall-clock seconds) to --out-png.
torch and trnsparse run on 2 threads (torch.set_num_threads(2): torch defaults to 1 on
these VMs), with OMP_WAIT_POLICY=PASSIVE and OPENBLAS_THREAD_TIMEOUT=4 unless set.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/sparse_mlp.py --steps 60
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

# torch's OpenMP threads spin after each parallel region by default, and its OpenBLAS
# threads call sched_yield for 2^28 cycles after each product: both would take the cores
# trnsparse's next call needs (2-core VMs). Passive waiting and OpenBLAS's shortest spin
# (2^4 cycles), set before torch loads either library; the dense run gets them too.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
import torch  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import train_lm  # noqa: E402

import trnsparse as ts  # noqa: E402

THREADS = 2
DENSITY = 0.25
RUNS = ("dense", "sparse25", "gradual")
STYLES = {"dense": ("C0", "-"), "sparse25": ("C1", "--"), "gradual": ("C2", ":")}


def build(kind: str, args: argparse.Namespace):
    """The model of a run: train_lm's, with its MLPs converted for sparse25 and gradual."""
    torch.manual_seed(args.seed)
    model = train_lm.ByteLM(args.layers, args.width, args.heads, args.context, "causal", args.window)
    mlps = [f"blocks.{i}.mlp.*" for i in range(args.layers)]
    if kind == "sparse25":
        ts.nn.sparsify(model, DENSITY, block_size=args.block, include=mlps)
    elif kind == "gradual":
        ts.nn.sparsify(model, 1.0, block_size=args.block, include=mlps)
    return model


def train(kind: str, data: torch.Tensor, args: argparse.Namespace) -> tuple[dict, torch.nn.Module]:
    model = build(kind, args)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    pruner = None
    if kind == "gradual":
        pruner = ts.prune.GradualPruner(model, DENSITY, start_step=args.steps // 10, end_step=args.steps * 6 // 10,
                                        every=args.prune_every, optimizer=optimiser)
    batches = torch.Generator().manual_seed(args.seed)
    offsets = torch.arange(args.context + 1)
    losses, seconds, rates = [], [], []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        starts = torch.randint(0, data.numel() - args.context, (args.batch, 1), generator=batches)
        chunk = data[starts + offsets].long()
        loss = train_lm.next_byte_loss(model, chunk)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        if pruner is not None:
            pruner.step()
        now = time.perf_counter()
        losses.append(float(loss))
        seconds.append(now - start)
        rates.append(args.batch * args.context / (now - t0))
        print(f"{kind:>9}  step {step:4d}/{args.steps}  loss {losses[-1]:.4f}  {rates[-1]:8.0f} tok/s", flush=True)
    n = len(rates)
    return {"loss": losses, "seconds": seconds, "tokens_per_s": rates,
            "mean_tokens_per_s": args.batch * args.context * args.steps / seconds[-1],
            # The second half: after gradual pruning has ended and every run is at its final density.
            "late_tokens_per_s": statistics.median(rates[n // 2:])}, model


def mlp_share(model: torch.nn.Module, data: torch.Tensor, args: argparse.Namespace, repeats: int = 5) -> dict:
    """Seconds of a training step's forward and backward and of the MLPs' alone (every
    block's, on activations of the step's shape), timed alternately: the share of a step
    that sparse MLPs can speed up. At density d the step is then at most
    1 / (1 - share + share d) times faster (Amdahl), before the optimizer's smaller step."""
    chunk = data[: args.context + 1].long().expand(args.batch, -1)
    h = torch.randn(args.batch, args.context, args.width, requires_grad=True)
    mlps = [block.mlp for block in model.blocks]

    def step():
        model.zero_grad(set_to_none=True)
        train_lm.next_byte_loss(model, chunk).backward()

    def mlps_only():
        model.zero_grad(set_to_none=True)
        h.grad = None
        for mlp in mlps:
            mlp(h).sum().backward()

    step()
    mlps_only()
    times = {step: [], mlps_only: []}
    for _ in range(repeats):
        for fn, t in times.items():
            start = time.perf_counter()
            fn()
            t.append(time.perf_counter() - start)
    step_s, mlp_s = statistics.median(times[step]), statistics.median(times[mlps_only])
    share = mlp_s / step_s
    return {"step_s": step_s, "mlp_s": mlp_s, "share": share, "bound": 1 / (1 - share + share * DENSITY)}


def mlp_decode_tokens_per_s(model: torch.nn.Module, width: int, repeats: int) -> float:
    """Tokens per second through every block's MLP, one token at a time, bf16 autocast."""
    x = torch.randn(1, 1, width)
    mlps = [block.mlp for block in model.blocks]

    def step():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            h = x
            for mlp in mlps:
                h = mlp(h)

    step()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return repeats / (time.perf_counter() - start)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--window", type=int, default=2)
    p.add_argument("--block", type=int, default=32, help="block size of the sparse MLPs")
    p.add_argument("--prune-every", type=int, default=5)
    p.add_argument("--runs", default=",".join(RUNS))
    p.add_argument("--decode-repeats", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=pathlib.Path, default=None)
    p.add_argument("--out-json", type=pathlib.Path, default=pathlib.Path("sparse_mlp.json"))
    p.add_argument("--out-png", type=pathlib.Path, default=pathlib.Path("sparse_mlp.png"))
    args = p.parse_args(argv)
    args.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not args.runs or any(r not in RUNS for r in args.runs):
        p.error(f"--runs: expected a comma-separated subset of {','.join(RUNS)}")
    if args.steps < 10:
        p.error("--steps must be at least 10 (the pruning schedule spans 10% to 60% of them)")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(THREADS)
    ts.set_num_threads(THREADS)
    data, summary = train_lm.load_corpus(args.data)
    print(f"data: {summary}")
    results, models = {}, {}
    for kind in args.runs:
        results[kind], models[kind] = train(kind, data, args)
    print(f"\n{'run':>9}  {'final loss':>10}  {'mean tok/s':>10}  {'late tok/s':>10}  {'seconds':>8}")
    for kind, r in results.items():
        print(f"{kind:>9}  {r['loss'][-1]:10.4f}  {r['mean_tokens_per_s']:10.0f}  {r['late_tokens_per_s']:10.0f}  "
              f"{r['seconds'][-1]:8.1f}")
    report = {"config": {k: str(v) if isinstance(v, pathlib.Path) else v for k, v in vars(args).items()},
              "data": summary, "threads": THREADS, "runs": results}
    if "dense" in models:
        dense = models["dense"]
        share = report["mlp_share"] = mlp_share(dense, data, args)
        print(f"dense step (forward + backward) {share['step_s']:.3f} s, its MLPs {share['mlp_s']:.3f} s "
              f"({100 * share['share']:.0f}%): MLPs at {DENSITY:.0%} density make it at most "
              f"{share['bound']:.2f}x faster")
        decode = {"dense": mlp_decode_tokens_per_s(dense, args.width, args.decode_repeats)}
        ts.nn.sparsify(dense, DENSITY, block_size=args.block,
                       include=[f"blocks.{i}.mlp.*" for i in range(args.layers)])
        decode["sparsified25"] = mlp_decode_tokens_per_s(dense, args.width, args.decode_repeats)
        report["mlp_decode_tokens_per_s"] = decode
        print(f"MLP decode, one token, bf16: dense {decode['dense']:.0f} tok/s, "
              f"sparsified to 25% {decode['sparsified25']:.0f} tok/s")
    args.out_json.write_text(json.dumps(report, indent=1))
    train_lm.plot(results, args.out_png, {kind: kind for kind in RUNS}, STYLES)
    print(f"wrote {args.out_json} and {args.out_png}")
    return report


if __name__ == "__main__":
    main()
