"""Attention masks for `sparse_attention` and `block_sparse_attention_tiled`.

The builders (the core's `trnsparse::mask`) return a single-slice AttentionMask, shared
by every batch element and head, over `seq` queries and keys on blocks of `block_size`,
built in O(stored blocks) (plus block_size² per partially allowed block), never O(seq²):

    m = trnsparse.mask.causal(1000, 64)
    O = trnsparse.sparse_attention(q, k, v, m)

`causal` and `local_window` also take a key length (`kv_len`) for queries decoding
against a longer key cache, aligned bottom-right. `stack` makes one mask per head (or per
batch element and head) from builders' masks, and `create_block_mask` evaluates a
FlexAttention-style predicate band by band into the same full / partial / empty blocks.
"""
from __future__ import annotations

import torch

from . import _core
from ._attention import AttentionMask
from ._block_mask import classify_blocks
from ._interop import index_tensor


def local_window(seq: int, block_size: int, window: int, kv_len: int | None = None) -> AttentionMask:
    """Block (i, j) stored and full when |i - j| <= window. With `kv_len` keys (default
    seq), query i stands at position p = i + kv_len - seq (bottom-right alignment) and key
    j is allowed when |j // block_size - p // block_size| <= window."""
    keys = int(seq) if kv_len is None else int(kv_len)
    return AttentionMask(_core.mask_local_window(int(seq), keys, int(block_size), int(window)))


def dilated(seq: int, block_size: int, stride: int) -> AttentionMask:
    """Block (i, j) stored and full when (i - j) mod stride == 0 (stride >= 1)."""
    return AttentionMask(_core.mask_dilated(int(seq), int(block_size), int(stride)))


def global_tokens(seq: int, block_size: int, window: int, n_global: int) -> AttentionMask:
    """The first n_global block rows and block columns full, local_window elsewhere."""
    return AttentionMask(_core.mask_global_tokens(int(seq), int(block_size), int(window), int(n_global)))


def causal(seq: int, block_size: int, kv_len: int | None = None) -> AttentionMask:
    """Key j allowed for query i when j <= i: the lower block triangle, diagonal blocks
    partial. With `kv_len` keys (default seq), aligned bottom-right as FlashAttention >= 2.1
    aligns them: key j allowed when j <= i + kv_len - seq (the last query sees every key)."""
    keys = int(seq) if kv_len is None else int(kv_len)
    return AttentionMask(_core.mask_causal(int(seq), keys, int(block_size)))


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
    an AssertionError, otherwise); slice counts equal or 1 (a single slice broadcasts)."""
    a, b = _two_masks(a, b, "mask.unite")
    return AttentionMask(_core.mask_unite(a._core, b._core))


def intersect(a: AttentionMask, b: AttentionMask) -> AttentionMask:
    """The pairs allowed by both a and b (blocks left with no allowed pair are dropped).
    Same shape and block size required (ShapeError, an AssertionError, otherwise); slice
    counts equal or 1 (a single slice broadcasts)."""
    a, b = _two_masks(a, b, "mask.intersect")
    return AttentionMask(_core.mask_intersect(a._core, b._core))


def stack(masks) -> AttentionMask:
    """One mask per head, or per batch element and head: `masks` is a list of H
    single-slice masks (shared by the batch: batch 1, heads H) or a list of B lists of H
    (batch B, heads H), all of one shape and block size."""
    who = "mask.stack"
    if not isinstance(masks, (list, tuple)) or not masks:
        raise TypeError(f"{who}: masks must be a non-empty list of AttentionMasks or a list of lists of them")
    nested = isinstance(masks[0], (list, tuple))
    rows = [list(r) for r in masks] if nested else [list(masks)]
    heads = len(rows[0])
    flat = []
    for z, row in enumerate(rows):
        if len(row) != heads:
            raise ValueError(f"{who}: masks[{z}] has {len(row)} masks but masks[0] has {heads}")
        for h, m in enumerate(row):
            if not isinstance(m, AttentionMask):
                raise TypeError(f"{who}: masks{f'[{z}]' if nested else ''}[{h}] must be an AttentionMask, "
                                f"got {type(m).__name__}")
            flat.append(m._core)
    return AttentionMask(_core.mask_stack(flat, len(rows), heads))


def create_block_mask(mask_mod, B, H, Q_LEN: int, KV_LEN: int, BLOCK_SIZE: int = 128) -> AttentionMask:
    """The AttentionMask of a predicate, with FlexAttention's meaning:
    `mask_mod(b, h, q_idx, kv_idx) -> bool tensor`, True where query q_idx of batch element
    b and head h may attend to key kv_idx. It is called with int64 index tensors that
    broadcast against each other (plain indices 0 .. Q_LEN - 1 and 0 .. KV_LEN - 1), so a
    predicate of elementwise torch operations and of indexing small per-batch or per-head
    tensors (`doc_id[b]`, `window[h]`) works. B or H of None (or 1) gives a mask shared by
    every batch element or head.

    The predicate is evaluated one band of BLOCK_SIZE queries at a time (never a
    Q_LEN x KV_LEN tensor); blocks are sorted into empty (not stored), full and partial
    (which keep their element mask)."""
    c = classify_blocks(mask_mod, B, H, Q_LEN, KV_LEN, BLOCK_SIZE)
    return AttentionMask._from_blocks(c["batch"], c["heads"], int(Q_LEN), int(KV_LEN), int(BLOCK_SIZE),
                                      c["block_row_ptrs"], c["block_col_indices"], c["partial_index"],
                                      c["element_masks"])


__all__ = ["AttentionMask", "local_window", "dilated", "global_tokens", "causal", "document", "unite", "intersect",
           "stack", "create_block_mask"]
