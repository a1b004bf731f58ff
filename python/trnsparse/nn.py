"""Modules on trnsparse's kernels.

    attn = trnsparse.nn.MultiheadSparseAttention(256, num_heads=4, num_kv_heads=2,
                                                 block_mask=lambda lq, lkv: trnsparse.mask.causal(lq, 128, kv_len=lkv))
    y = attn(x)                    # x (B, L, 256) -> (B, L, 256)
"""
from __future__ import annotations

import math

import torch

from . import score as _score
from ._attention import AttentionMask, _checked_scale, sparse_attention


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


__all__ = ["MultiheadSparseAttention"]
