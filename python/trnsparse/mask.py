"""Attention mask builders (the core's `trnsparse::mask`), for block_sparse_attention_tiled.

Each returns an AttentionMask over `seq` queries and keys on blocks of `block_size`, built
in O(stored blocks) (plus block_size² per partially allowed block), never O(seq²):

    m = trnsparse.mask.causal(1000, 64)
    O = trnsparse.block_sparse_attention_tiled(Q, K, V, m)
"""
from __future__ import annotations

import torch

from . import _core
from ._attention import AttentionMask
from ._interop import index_tensor


def local_window(seq: int, block_size: int, window: int) -> AttentionMask:
    """Block (i, j) stored and full when |i - j| <= window."""
    return AttentionMask(_core.mask_local_window(int(seq), int(block_size), int(window)))


def dilated(seq: int, block_size: int, stride: int) -> AttentionMask:
    """Block (i, j) stored and full when (i - j) mod stride == 0 (stride >= 1)."""
    return AttentionMask(_core.mask_dilated(int(seq), int(block_size), int(stride)))


def global_tokens(seq: int, block_size: int, window: int, n_global: int) -> AttentionMask:
    """The first n_global block rows and block columns full, local_window elsewhere."""
    return AttentionMask(_core.mask_global_tokens(int(seq), int(block_size), int(window), int(n_global)))


def causal(seq: int, block_size: int) -> AttentionMask:
    """Key j allowed for query i when j <= i: the lower block triangle, diagonal blocks partial."""
    return AttentionMask(_core.mask_causal(int(seq), int(block_size)))


def document(lengths, block_size: int, causal: bool = False) -> AttentionMask:
    """Packed variable-length sequences: `lengths` (ints >= 0, a list or an integer tensor)
    of consecutive documents, seq = sum(lengths). A token attends only to keys of its own
    document and, with `causal`, only to keys at or before it. Blocks that straddle
    documents (or the diagonal, when causal) are partial."""
    if isinstance(lengths, (list, tuple)) and len(lengths) == 0:
        lengths = torch.zeros(0, dtype=torch.int64)  # torch.as_tensor([]) would be float32
    lengths = index_tensor(lengths, "mask.document", "lengths")
    if lengths.dim() != 1:
        raise ValueError(f"mask.document: lengths must be 1-D, got shape {tuple(lengths.shape)}")
    return AttentionMask(_core.mask_document(lengths.data_ptr(), lengths.numel(), int(block_size), bool(causal)))


def _two_masks(a, b, who: str) -> tuple[AttentionMask, AttentionMask]:
    for name, m in (("a", a), ("b", b)):
        if not isinstance(m, AttentionMask):
            raise TypeError(f"{who}: {name} must be an AttentionMask, got {type(m).__name__}")
    return a, b


def unite(a: AttentionMask, b: AttentionMask) -> AttentionMask:
    """The pairs allowed by a or by b. Same shape and block size required (ShapeError,
    an AssertionError, otherwise)."""
    a, b = _two_masks(a, b, "mask.unite")
    return AttentionMask(_core.mask_unite(a._core, b._core))


def intersect(a: AttentionMask, b: AttentionMask) -> AttentionMask:
    """The pairs allowed by both a and b (blocks left with no allowed pair are dropped).
    Same shape and block size required (ShapeError, an AssertionError, otherwise)."""
    a, b = _two_masks(a, b, "mask.intersect")
    return AttentionMask(_core.mask_intersect(a._core, b._core))


__all__ = ["AttentionMask", "local_window", "dilated", "global_tokens", "causal", "document", "unite", "intersect"]
