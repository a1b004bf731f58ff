"""Trains a small byte-level causal language model three times, changing only attention.

The model is a pre-LayerNorm transformer over bytes (vocabulary 256): learned positional
embeddings, blocks of attention + GELU MLP, a final LayerNorm and an output layer tied to
the input embedding, no dropout. It is trained with AdamW on random windows of a text
corpus, three times from the same seed on the same batches:

- dense: causal attention in plain torch (q kᵀ · scale, masked_fill with a causal bool
  mask, softmax, @ v), the reference;
- causal: trnsparse.sparse_attention with mask.causal on blocks of 128. Same pairs as
  dense, so its loss curve must follow dense's within fp32 rounding: this checks the
  kernels' forward and backward inside a real training loop;
- local+global: trnsparse with unite(local_window, global_tokens) (window --window
  blocks, first block global), intersected with mask.causal, since both builders are
  symmetric and would otherwise let a position see the bytes it predicts. It visits
  fewer blocks than causal as the context grows, at the price of a shorter reach.

One Attention class holds the q / k / v / out projections for all three and switches
on `kind`; the seed is re-set before each model is built, so the three start from
identical weights, and each run draws its batches from a torch.Generator with the same
seed. The attention implementation is the only difference between runs.

The default corpus is the Python standard library's sources, which Debian's python3
ships: the *.py files directly in sysconfig's stdlib directory (/usr/lib/python3.11 on
Debian 12; its subpackages are left out, so the encodings' codec tables do not dominate),
in sorted order of their names, concatenated up to 4 MiB (the last file cut). --data PATH
overrides it: a file, or a directory whose *.py files are used the same way.

It prints each step's loss and tokens/s, then a summary (final loss, mean tokens/s,
max |loss - loss_dense| over the steps), and writes the curves to --out-json and a PNG
(loss vs step, loss vs wall-clock seconds) to --out-png.

Threads: torch sees a single thread by default on these 2-core VMs, so the script calls
torch.set_num_threads(2) and trnsparse.set_num_threads(2) (trnsparse's kernels give
bitwise identical results for any thread count).

The defaults (4 layers, width 256, 4 heads, context 1024, batch 2, 40 steps) measured
about 1.2 s per step dense (up to 2 s under load), 0.7 s causal and 0.6 s local+global
on this 2-core VM: under a minute for dense, half a minute or less for each of the
others, about two minutes in all. At context 1024 local+global keeps 26 of causal's 36
blocks, so the two run alike. --context 4096 (batch 2) measured about 11 s per step
dense (25 s under load), 2.5 s causal and 1.6 s local+global (122 of 528 blocks): 40
steps are 8 or more minutes of dense, whose (B, heads, L, L) scores, mask and
probabilities take the process to 4.7 GB, against 1.2 GB for the trnsparse runs.
Timings on shared cores vary by up to 2x between runs.

    PYTHONPATH=build/python python3 examples/python/train_lm.py
    PYTHONPATH=build/python python3 examples/python/train_lm.py --context 4096 --steps 20 --runs causal,local
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import sysconfig
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import trnsparse as ts  # noqa: E402

BLOCK = 128  # trnsparse mask block size
CORPUS_BYTES = 4 << 20
THREADS = 2
RUNS = {"dense": "dense", "causal": "causal", "local": "local+global"}
STYLES = {"dense": ("C0", "-"), "causal": ("C1", "--"), "local": ("C2", ":")}  # colour, line of the mean
SMOOTH = 10  # steps of the plotted running mean


def load_corpus(path: pathlib.Path | None) -> tuple[torch.Tensor, str]:
    """The corpus as a uint8 tensor and a line saying what it holds. Exits with a message
    when the path is missing or holds no text."""
    root = pathlib.Path(sysconfig.get_path("stdlib")) if path is None else path
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(p for p in root.glob("*.py") if p.is_file())
    else:
        sys.exit(f"train_lm: data path {root} does not exist")
    chunks, size, used = [], 0, []
    for f in files:
        if size >= CORPUS_BYTES:
            break
        data = f.read_bytes()[:CORPUS_BYTES - size]
        if data:
            chunks.append(data)
            used.append(f)
            size += len(data)
    if size == 0:
        what = "is empty" if root.is_file() else "has no non-empty *.py files"
        sys.exit(f"train_lm: data path {root} {what}: no text to train on")
    source = (f"{root}" if root.is_file() else
              f"{len(used)} *.py files of {root} ({used[0].name} ... {used[-1].name})")
    summary = f"{size} bytes of {source}" + (" (cut at the byte limit)" if size == CORPUS_BYTES else "")
    return torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.uint8), summary


def attention_mask(kind: str, seq: int, window: int) -> ts.AttentionMask | None:
    """The trnsparse mask of a run (None for dense, which builds its own bool mask)."""
    if kind == "dense":
        return None
    causal = ts.mask.causal(seq, BLOCK)
    if kind == "causal":
        return causal
    sparse = ts.mask.unite(ts.mask.local_window(seq, BLOCK, window), ts.mask.global_tokens(seq, BLOCK, window, 1))
    return ts.mask.intersect(sparse, causal)


class Attention(torch.nn.Module):
    """Causal multi-head self-attention whose inner product is dense torch or trnsparse's
    sparse_attention, per `kind`; the parameters do not depend on it."""

    def __init__(self, width: int, heads: int, context: int, kind: str, window: int):
        super().__init__()
        self.heads, self.kind = heads, kind
        self.q, self.k, self.v, self.out = (torch.nn.Linear(width, width) for _ in range(4))
        self.mask = attention_mask(kind, context, window)
        self.allowed = torch.ones(context, context, dtype=torch.bool).tril() if kind == "dense" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        H, E = self.heads, D // self.heads
        q, k, v = (proj(x).view(B, L, H, E).transpose(1, 2) for proj in (self.q, self.k, self.v))
        scale = 1.0 / math.sqrt(E)
        if self.kind == "dense":
            scores = (q @ k.transpose(-2, -1)) * scale
            o = torch.softmax(scores.masked_fill(~self.allowed[:L, :L], float("-inf")), dim=-1) @ v
        else:
            o = ts.sparse_attention(q, k, v, self.mask, scale=scale)
        return self.out(o.transpose(1, 2).reshape(B, L, D))


class Block(torch.nn.Module):
    def __init__(self, width: int, heads: int, context: int, kind: str, window: int):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.attn = Attention(width, heads, context, kind, window)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                       torch.nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ByteLM(torch.nn.Module):
    """Byte embeddings + learned positions, pre-LayerNorm blocks, tied output layer.
    Weights N(0, 0.02), biases 0 (GPT-2's initialisation)."""

    def __init__(self, layers: int, width: int, heads: int, context: int, kind: str, window: int):
        super().__init__()
        self.embed = torch.nn.Embedding(256, width)
        self.pos = torch.nn.Parameter(torch.zeros(context, width))
        self.blocks = torch.nn.ModuleList(Block(width, heads, context, kind, window) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(width)
        for m in self.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.zeros_(m.bias)
        torch.nn.init.normal_(self.pos, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.embed.weight.t()


def next_byte_loss(model: torch.nn.Module, chunk: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the model's predictions of chunk's bytes 1.. from bytes ..-1."""
    return F.cross_entropy(model(chunk[:, :-1]).reshape(-1, 256), chunk[:, 1:].reshape(-1))


def train(kind: str, data: torch.Tensor, args: argparse.Namespace) -> dict:
    """One run: per-step losses, cumulative seconds and tokens/s."""
    torch.manual_seed(args.seed)
    model = ByteLM(args.layers, args.width, args.heads, args.context, kind, args.window)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    batches = torch.Generator().manual_seed(args.seed)
    offsets = torch.arange(args.context + 1)
    losses, seconds, rates = [], [], []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        starts = torch.randint(0, data.numel() - args.context, (args.batch, 1), generator=batches)
        chunk = data[starts + offsets].long()
        loss = next_byte_loss(model, chunk)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        now = time.perf_counter()
        losses.append(float(loss))
        seconds.append(now - start)
        rates.append(args.batch * args.context / (now - t0))
        print(f"{RUNS[kind]:>12}  step {step:4d}/{args.steps}  loss {losses[-1]:.4f}  {rates[-1]:8.0f} tok/s",
              flush=True)
    return {"loss": losses, "seconds": seconds, "tokens_per_s": rates,
            "mean_tokens_per_s": args.batch * args.context * args.steps / seconds[-1]}


def running_mean(values: list[float], n: int) -> list[float]:
    """The mean of each value and the n - 1 before it (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - n] if i >= n else 0.0)
        out.append(total / min(i + 1, n))
    return out


def plot(results: dict, path: pathlib.Path, labels: dict = RUNS, styles: dict = STYLES) -> None:
    """Loss vs step and vs wall-clock seconds: each step's loss faint, with its running
    mean over SMOOTH steps drawn over it, in each run's (colour, line) of `styles` (here
    dense solid, causal dashed, since the two coincide; local+global dotted)."""
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for kind, r in results.items():
        steps = range(1, len(r["loss"]) + 1)
        mean = running_mean(r["loss"], SMOOTH)
        colour, style = styles[kind]
        for ax, x in ((by_step, steps), (by_time, r["seconds"])):
            ax.plot(x, r["loss"], color=colour, alpha=0.25, linewidth=0.8)
            ax.plot(x, mean, style, color=colour, linewidth=1.8, label=f"{labels[kind]} ({SMOOTH}-step mean)")
    by_step.set_xlabel("step")
    by_time.set_xlabel("wall-clock seconds")
    for ax in (by_step, by_time):
        ax.set_ylabel("training loss (nats/byte)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--window", type=int, default=2, help="local+global: local window in blocks of 128")
    p.add_argument("--runs", default="dense,causal,local", help="comma-separated subset of dense,causal,local")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=pathlib.Path, default=None,
                   help="a text file, or a directory whose *.py files are used (default: the stdlib's)")
    p.add_argument("--out-json", type=pathlib.Path, default=pathlib.Path("train_lm.json"))
    p.add_argument("--out-png", type=pathlib.Path, default=pathlib.Path("train_lm.png"))
    args = p.parse_args(argv)
    args.runs = list(dict.fromkeys(r.strip() for r in args.runs.split(",") if r.strip()))
    unknown = [r for r in args.runs if r not in RUNS]
    if unknown or not args.runs:
        p.error(f"--runs: expected a comma-separated subset of {','.join(RUNS)}, got {unknown or 'nothing'}")
    for name in ("steps", "context", "layers", "width", "heads", "batch"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.window < 0:
        p.error("--window must be at least 0")
    if args.width % args.heads:
        p.error(f"--width {args.width} is not a multiple of --heads {args.heads}")
    return args


def main(argv: list[str] | None = None) -> dict:
    """Runs the selected trainings; returns what it writes to --out-json."""
    args = parse_args(argv)
    torch.set_num_threads(THREADS)
    ts.set_num_threads(THREADS)
    data, summary = load_corpus(args.data)
    print(f"data: {summary}")
    if data.numel() <= args.context:
        sys.exit(f"train_lm: the corpus has {data.numel()} bytes; a context of {args.context} needs more")
    results = {kind: train(kind, data, args) for kind in args.runs}

    reference = results.get("dense")
    print(f"\n{'run':>12}  {'final loss':>10}  {'mean tok/s':>10}  {'seconds':>8}  {'max |loss - dense|':>18}")
    for kind, r in results.items():
        if reference is not None and kind != "dense":
            r["max_abs_diff_vs_dense"] = max(abs(a - b) for a, b in zip(r["loss"], reference["loss"]))
        diff = f"{r['max_abs_diff_vs_dense']:.2e}" if "max_abs_diff_vs_dense" in r else "-"
        print(f"{RUNS[kind]:>12}  {r['loss'][-1]:10.4f}  {r['mean_tokens_per_s']:10.0f}  {r['seconds'][-1]:8.1f}  "
              f"{diff:>18}")
    config = {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()}
    report = {"config": config, "data": summary, "threads": THREADS, "block_size": BLOCK,
              "runs": {RUNS[kind]: r for kind, r in results.items()}}
    args.out_json.write_text(json.dumps(report, indent=1))
    plot(results, args.out_png)
    print(f"wrote {args.out_json} and {args.out_png}")
    return report


if __name__ == "__main__":
    main()
