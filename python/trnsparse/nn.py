"""Modules on trnsparse's kernels.

    attn = trnsparse.nn.MultiheadSparseAttention(256, num_heads=4, num_kv_heads=2,
                                                 block_mask=lambda lq, lkv: trnsparse.mask.causal(lq, 128, kv_len=lkv))
    y = attn(x)                    # x (B, L, 256) -> (B, L, 256)

    fc = trnsparse.nn.BlockSparseLinear(4096, 4096, block_size=32, density=0.25)
    report = trnsparse.nn.sparsify(model, density=0.25, block_size=32)   # nn.Linear -> BlockSparseLinear
"""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

import torch

from . import score as _score
from ._attention import AttentionMask, _checked_scale, sparse_attention
from ._linear import LayoutHandle, block_sparse_linear, check_layout
from .prune import block_magnitude, blocks_for, check_block_size, check_density


class MultiheadSparseAttention(torch.nn.Module):
    """Multi-head block-sparse attention with query, key, value and output projections,
    inputs batch first, (B, L, embed_dim).

    - num_kv_heads (default num_heads) dividing num_heads: grouped-query attention (the
      key and value projections have num_kv_heads · head_dim outputs; the kernels read
      each key/value head for its group of query heads, no copies).
    - block_mask: an AttentionMask of shape (Lq, Lkv) (batch 1 or B, heads 1 or
      num_heads slices), or a callable (Lq, Lkv) -> AttentionMask, called once per pair
      of lengths and cached; a mask passed to forward overrides it for that call.
    - score_mod: trnsparse.score modifiers (ALiBi, soft-capping), applied in the kernels.

    The projections keep their outputs in (B, L, heads, head_dim) memory and the kernels
    read them through strides; the attention output comes back in the same layout, so the
    output projection reads it without a copy. It runs under
    torch.autocast("cpu", dtype=torch.bfloat16) (bf16 attention with fp32 statistics) and
    its state_dict holds the four projections (masks are not state).
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int | None = None, bias: bool = True,
                 block_mask=None, *, score_mod=None, scale: float | None = None, device=None, dtype=None):
        super().__init__()
        who = "MultiheadSparseAttention"
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        for name, v in (("embed_dim", embed_dim), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{who}: {name} = {v!r} must be a positive int")
        if embed_dim % num_heads != 0:
            raise ValueError(f"{who}: embed_dim = {embed_dim} is not a multiple of num_heads = {num_heads}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"{who}: num_heads = {num_heads} is not a multiple of num_kv_heads = {num_kv_heads}")
        if block_mask is not None and not (isinstance(block_mask, AttentionMask) or callable(block_mask)):
            raise TypeError(f"{who}: block_mask must be an AttentionMask, a callable (Lq, Lkv) -> AttentionMask, "
                            f"or None, got {type(block_mask).__name__}")
        # Checked here, not at the first forward: the same TypeError / ValueError sparse_attention raises.
        _checked_scale(scale, who)
        _score._resolve(score_mod, num_heads, who)
        self.embed_dim, self.num_heads, self.num_kv_heads = embed_dim, num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.block_mask, self.score_mod, self.scale = block_mask, score_mod, scale
        self._masks: dict[tuple[int, int], AttentionMask] = {}
        self._masks_of = block_mask  # the callable whose masks _masks holds
        kv_dim = num_kv_heads * self.head_dim
        f = {"device": device, "dtype": dtype}
        self.q_proj = torch.nn.Linear(embed_dim, embed_dim, bias=bias, **f)
        self.k_proj = torch.nn.Linear(embed_dim, kv_dim, bias=bias, **f)
        self.v_proj = torch.nn.Linear(embed_dim, kv_dim, bias=bias, **f)
        self.out_proj = torch.nn.Linear(embed_dim, embed_dim, bias=bias, **f)

    def _mask_for(self, lq: int, lkv: int, override) -> AttentionMask:
        mask = self.block_mask if override is None else override
        if mask is None:
            raise ValueError("MultiheadSparseAttention: no block_mask (give one to the constructor or to forward)")
        if isinstance(mask, AttentionMask):
            return mask
        if override is not None:
            return mask(lq, lkv)
        if self._masks_of is not mask:  # block_mask was reassigned: the cached masks are another callable's
            self._masks, self._masks_of = {}, mask
        if (lq, lkv) not in self._masks:
            self._masks[(lq, lkv)] = mask(lq, lkv)
        return self._masks[(lq, lkv)]

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None,
                block_mask=None) -> torch.Tensor:
        """Attention of `query` (B, Lq, embed_dim) over `key` and `value` (B, Lkv,
        embed_dim; default: query, self-attention); returns (B, Lq, embed_dim)."""
        key = query if key is None else key
        value = key if value is None else value
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.embed_dim:
                raise ValueError(f"MultiheadSparseAttention: {name} must be (B, L, {self.embed_dim}), got shape "
                                 f"{tuple(t.shape)}")
        B, lq, _ = query.shape
        lkv = key.shape[1]
        H, G, E = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(query).view(B, lq, H, E).transpose(1, 2)
        k = self.k_proj(key).view(B, lkv, G, E).transpose(1, 2)
        v = self.v_proj(value).view(B, lkv, G, E).transpose(1, 2)
        # Under autocast every projection has the autocast dtype; outside it, the parameters'.
        k, v = k.to(q.dtype), v.to(q.dtype)
        o = sparse_attention(q, k, v, self._mask_for(lq, lkv, block_mask), scale=self.scale,
                             enable_gqa=G != H, score_mod=self.score_mod)
        return self.out_proj(o.transpose(1, 2).reshape(B, lq, self.embed_dim))

    def extra_repr(self) -> str:
        scale = self.scale if self.scale is not None else 1 / math.sqrt(self.head_dim)
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
                f"scale={scale:.4g}")




class BlockSparseLinear(torch.nn.Module):
    """y = x Wᵀ + bias with a block-sparse W (out_features × in_features): a drop-in for
    torch.nn.Linear whose weight stores only the b × b blocks its `layout` marks.

    - weight: one nn.Parameter (n_blocks, b, b), the stored blocks in row-major order of
      the layout; the padding of edge blocks (shapes not multiples of b) stays zero.
    - layout: given as a bool tensor (⌈out/b⌉, ⌈in/b⌉); `density` instead draws
      round(density · blocks) blocks at random from torch's default generator (seed it for
      the same layout on every process). Neither: every block (density 1). The module
      keeps it as a uint8 buffer `layout` of 0/1 (gloo, DistributedDataParallel's
      backend on CPU, cannot broadcast bool tensors); `mask()` gives it as bool.
    - forward reads x (..., in_features) in place (rows with any stride; otherwise one
      copy), runs under torch.autocast("cpu", dtype=torch.bfloat16) (bf16 operands, fp32
      bias and accumulation) and differentiates in x, weight and bias. Results are bitwise
      identical for any thread count.
    - state_dict holds weight, bias and layout; load_state_dict takes another layout's
      weight too (the parameter is resized).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, block_size: int = 32,
                 density: float | None = None, layout: torch.Tensor | None = None, dtype: torch.dtype | None = None):
        super().__init__()
        who = "BlockSparseLinear"
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{who}: {name} = {v!r} must be a positive int")
        block_size = check_block_size(block_size, who)
        if density is not None and layout is not None:
            raise ValueError(f"{who}: give density or layout, not both")
        self.in_features, self.out_features, self.block_size = in_features, out_features, block_size
        grid = (-(-out_features // block_size), -(-in_features // block_size))
        if layout is not None:
            layout = check_layout(layout, out_features, in_features, block_size, who)
        elif density is not None:
            count = blocks_for(check_density(density, who), grid[0] * grid[1])
            layout = torch.zeros(grid[0] * grid[1], dtype=torch.bool)
            layout[torch.randperm(grid[0] * grid[1])[:count]] = True
            layout = layout.view(grid)
        else:
            layout = torch.ones(grid, dtype=torch.bool)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        self.register_buffer("layout", layout.to(torch.uint8))
        n = int(layout.sum())
        self.weight = torch.nn.Parameter(torch.empty((n, block_size, block_size), dtype=dtype))
        self.bias = torch.nn.Parameter(torch.empty(out_features, dtype=dtype)) if bias else None
        self._handle = None
        self._handle_key = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch.nn.Linear's initialisation: weight and bias uniform in ±1/sqrt(in_features)."""
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            self.weight.mul_(self._padding_mask())
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    # ---- layout ---------------------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return self.weight.shape[0]

    def mask(self) -> torch.Tensor:
        """The layout as a bool tensor (⌈out/b⌉, ⌈in/b⌉)."""
        return self.layout.bool()

    @property
    def density(self) -> float:
        """Stored blocks over the blocks of the grid."""
        return self.n_blocks / self.layout.numel()

    def _padding_mask(self) -> torch.Tensor:
        """(n_blocks, b, b): 1 on the logical entries of each stored block, 0 on padding."""
        b = self.block_size
        rows, cols = self.mask().nonzero(as_tuple=True)
        r = (rows[:, None] * b + torch.arange(b)) < self.out_features
        c = (cols[:, None] * b + torch.arange(b)) < self.in_features
        return (r[:, :, None] & c[:, None, :]).to(self.weight.dtype)

    def _layout_handle(self) -> LayoutHandle:
        """The core's structure of the current layout, rebuilt when the layout changes
        (relayout, load_state_dict: the buffer's version moves)."""
        key = (self.layout.data_ptr(), self.layout._version, tuple(self.layout.shape))
        if self._handle is None or self._handle_key != key:
            self._handle = LayoutHandle(self.mask(), self.out_features, self.in_features, self.block_size)
            self._handle_key = key
        return self._handle

    def dense_weight(self) -> torch.Tensor:
        """The weight as a dense (out_features × in_features) tensor (a copy; absent blocks zero)."""
        b = self.block_size
        R, C = self.layout.shape
        padded = torch.zeros(R, C, b, b, dtype=self.weight.dtype)
        padded[self.mask()] = self.weight.detach()
        return padded.permute(0, 2, 1, 3).reshape(R * b, C * b)[:self.out_features, :self.in_features].clone()

    def relayout(self, layout: torch.Tensor, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Moves the weight to `layout`: blocks stored in both keep their values (and their
        gradient); new blocks start at zero. The weight becomes a new nn.Parameter (autograd
        keeps the shape of a leaf it has seen, so the old one cannot change shape): pass the
        `optimizer` that trains it, and the new parameter takes the old one's place in its
        param group, with the old one's state moved along (SGD momentum, Adam's moments:
        every per-element state of the weight's shape; new blocks' state zero)."""
        who = "BlockSparseLinear.relayout"
        layout = check_layout(layout, self.out_features, self.in_features, self.block_size, who)
        old = self.weight
        if optimizer is not None and not any(p is old for g in optimizer.param_groups for p in g["params"]):
            raise ValueError(f"{who}: optimizer does not hold this layer's weight")
        old_index = torch.full(self.layout.shape, -1, dtype=torch.int64)
        old_index[self.mask()] = torch.arange(self.n_blocks)
        from_old = old_index[layout]  # for each new block, its old position or -1
        stay = from_old >= 0

        def moved(t: torch.Tensor) -> torch.Tensor:
            out = t.new_zeros((int(layout.sum()),) + tuple(t.shape[1:]))
            out[stay] = t[from_old[stay]]
            return out

        with torch.no_grad():
            weight = torch.nn.Parameter(moved(old.detach()), requires_grad=old.requires_grad)
            if old.grad is not None:
                weight.grad = moved(old.grad)
        if optimizer is not None:
            for group in optimizer.param_groups:
                group["params"] = [weight if p is old else p for p in group["params"]]
            state = optimizer.state.pop(old, None)
            if state is not None:
                optimizer.state[weight] = {k: moved(v) if torch.is_tensor(v) and v.shape == old.shape else v
                                           for k, v in state.items()}
        self.weight = weight
        self.layout = layout.to(torch.uint8)
        self._handle = None

    # ---- conversion ------------------------------------------------------------------------
    @classmethod
    def from_dense(cls, linear: torch.nn.Linear, density: float = 1.0, block_size: int = 32,
                   criterion: str = "l2", layout: torch.Tensor | None = None) -> "BlockSparseLinear":
        """The layer keeping the blocks of `linear`'s weight of largest norm
        (prune.block_magnitude), or those of `layout`, with their values and the bias."""
        who = "BlockSparseLinear.from_dense"
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"{who}: linear must be a torch.nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach()
        if layout is None:
            layout = block_magnitude(w, density, block_size, criterion)
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, block_size=block_size,
                    layout=layout, dtype=w.dtype)
        b = block_size
        R, C = layer.layout.shape
        padded = torch.zeros(R * b, C * b, dtype=w.dtype)
        padded[:linear.out_features, :linear.in_features] = w
        with torch.no_grad():
            layer.weight.copy_(padded.view(R, b, C, b).permute(0, 2, 1, 3)[layer.mask()])
            if linear.bias is not None:
                layer.bias.copy_(linear.bias.detach())
        return layer

    def to_dense(self) -> torch.nn.Linear:
        """An equivalent torch.nn.Linear (absent blocks zero)."""
        linear = torch.nn.Linear(self.in_features, self.out_features, self.bias is not None, dtype=self.weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(self.dense_weight())
            if self.bias is not None:
                linear.bias.copy_(self.bias.detach())
        return linear

    # ---- torch.nn.Module -------------------------------------------------------------------
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return block_sparse_linear(input, self.weight, self.bias, self._layout_handle(), self.in_features,
                                   self.out_features, "BlockSparseLinear")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        layout = state_dict.get(prefix + "layout")
        if layout is not None:
            layout = check_layout(layout.bool() if layout.dtype == torch.uint8 else layout, self.out_features,
                                  self.in_features, self.block_size, "load_state_dict")
            n = int(layout.sum())
            if n != self.n_blocks:  # another layout's weight: resize, then copy as usual
                self.weight.data = self.weight.data.new_zeros((n, self.block_size, self.block_size))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        self._handle = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_handle"], state["_handle_key"] = None, None  # the core's handle is rebuilt on use
        return state

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"block_size={self.block_size}, density={self.density:.4g} ({self.n_blocks} of "
                f"{self.layout.numel()} blocks)")


@dataclass
class SparsifyReport:
    """What sparsify replaced: the layers' qualified names, and the model's parameter
    counts before and after."""
    layers: list[str] = field(default_factory=list)
    params_before: int = 0
    params_after: int = 0


def sparsify(model: torch.nn.Module, density: float, block_size: int = 32, include=None,
             criterion: str = "l2") -> SparsifyReport:
    """Replaces, in place, every torch.nn.Linear of `model` that `include` selects by a
    BlockSparseLinear keeping its blocks of largest norm (BlockSparseLinear.from_dense);
    the model itself, when it is a Linear, is not replaced.
    include: None (every Linear), a callable (qualified name, module) -> bool, or a list
    of fnmatch patterns of qualified names ("blocks.*.mlp.*")."""
    who = "sparsify"
    density = check_density(density, who)
    block_size = check_block_size(block_size, who)
    if include is None:
        selected = lambda name, m: True  # noqa: E731
    elif callable(include):
        selected = include
    elif isinstance(include, (list, tuple)) and all(isinstance(p, str) for p in include):
        patterns = list(include)
        selected = lambda name, m: any(fnmatch.fnmatchcase(name, p) for p in patterns)  # noqa: E731
    else:
        raise TypeError(f"{who}: include must be None, a callable (name, module) -> bool or a list of patterns, "
                        f"got {type(include).__name__}")
    report = SparsifyReport(params_before=sum(p.numel() for p in model.parameters()))
    targets = [(name, m) for name, m in model.named_modules()
               if name and type(m) is torch.nn.Linear and selected(name, m)]
    for name, linear in targets:
        parent = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
        layer = BlockSparseLinear.from_dense(linear, density=density, block_size=block_size, criterion=criterion)
        setattr(parent, name.rpartition(".")[2], layer)
        report.layers.append(name)
    report.params_after = sum(p.numel() for p in model.parameters())
    return report


__all__ = ["BlockSparseLinear", "MultiheadSparseAttention", "SparsifyReport", "sparsify"]
