"""Attention mask builders (the core's `trnsparse::mask`), for block_sparse_attention_tiled.

Each returns an AttentionMask over `seq` queries and keys on blocks of `block_size`, built
in O(stored blocks) (plus block_size² per partially allowed block), never O(seq²):

    m = trnsparse.mask.causal(1000, 64)
    O = trnsparse.block_sparse_attention_tiled(Q, K, V, m)
"""
from __future__ import annotations

from . import _core
from ._attention import AttentionMask


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


__all__ = ["AttentionMask", "local_window", "dilated", "global_tokens", "causal"]
