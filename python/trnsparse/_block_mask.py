"""Block classification of a FlexAttention-style mask predicate, the back end of
`trnsparse.mask.create_block_mask`.

`classify_blocks` evaluates `mask_mod(b, h, q_idx, kv_idx)` chunk by chunk (whole block
rows of queries against a range of key blocks, for a range of (b, h) slices) and sorts
every BLOCK_SIZE x BLOCK_SIZE block into empty (not stored), full and partial (which keeps
its element mask). A chunk holds at most about `_CHUNK_ELEMENTS` elements, so memory stays
bounded however long the sequences are: a Q_LEN x KV_LEN tensor is never built.

The module imports only torch so that it can be tested on its own, by path.
"""
from __future__ import annotations

import operator

import torch

# Elements (padded to whole blocks) of one evaluated chunk. The predicate's int64
# intermediates take 8 bytes each, so a chunk costs a few hundred MB at most.
_CHUNK_ELEMENTS = 1 << 24

_WHO = "create_block_mask"


def _int_arg(value, name: str, minimum: int, allow_none: bool = False):
    """`value` as an int >= minimum (None passes through when allowed); TypeError for a
    non-integer (bools included), ValueError for one out of range."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{_WHO}: {name} must be an int, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        kind = "an int or None" if allow_none else "an int"
        raise TypeError(f"{_WHO}: {name} must be {kind}, got {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{_WHO}: {name} must be >= {minimum}, got {value}")
    return value


def _chunk_shape(batch: int, heads: int, block_rows: int, block_cols: int, bs: int) -> tuple[int, int, int, int]:
    """(batch elements, heads, block rows, block columns) of one chunk: a whole block row
    for every slice when that fits the budget, then several block rows at once; otherwise
    fewer slices, and for very wide bands single slices over ranges of key blocks."""
    row_elements = max(1, block_cols) * bs * bs
    if row_elements > _CHUNK_ELEMENTS:
        return 1, 1, 1, max(1, _CHUNK_ELEMENTS // (bs * bs))
    slices_fit = _CHUNK_ELEMENTS // row_elements
    if slices_fit >= batch * heads:
        return batch, heads, max(1, min(block_rows, slices_fit // (batch * heads))), block_cols
    if slices_fit >= heads:
        return slices_fit // heads, heads, 1, block_cols
    return 1, slices_fit, 1, block_cols


def _row_ranges(q_len: int, bs: int, rows_per_chunk: int) -> list[tuple[int, int]]:
    """Block-row ranges [I0, I1) of the chunks. A ragged last block row (fewer than bs
    queries) is a chunk of its own, so that every chunk splits into equal block rows."""
    whole = q_len // bs
    ranges = [(i, min(i + rows_per_chunk, whole)) for i in range(0, whole, rows_per_chunk)]
    if q_len % bs:
        ranges.append((whole, whole + 1))
    return ranges


def _evaluate(mask_mod, b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    """mask_mod on the index grid b (nb,1,1,1), h (1,nh,1,1), q (1,1,rows,1), kv (1,1,1,nk),
    checked to be a bool tensor that broadcasts to (nb, nh, rows, nk). It is returned 4-D
    with nk keys; its batch, head and query dimensions stay 1 where the predicate does not
    depend on them, which saves folding identical slices or rows."""
    expected = (b.shape[0], h.shape[1], q.shape[2], kv.shape[3])
    r = mask_mod(b, h, q, kv)
    if not isinstance(r, torch.Tensor):
        raise TypeError(f"{_WHO}: mask_mod must return a torch.bool tensor, got {type(r).__name__}")
    if r.dtype != torch.bool:
        raise TypeError(f"{_WHO}: mask_mod must return a torch.bool tensor, got dtype {r.dtype}")
    shape = tuple(r.shape)
    if len(shape) > 4 or any(s not in (1, e) for s, e in zip(reversed(shape), reversed(expected))):
        raise ValueError(f"{_WHO}: mask_mod returned shape {shape}, which does not broadcast to the "
                         f"evaluated (batch, heads, queries, keys) = {expected}")
    return r[(None,) * (4 - len(shape))].expand(-1, -1, -1, expected[3])


def _block_any_all(r: torch.Tensor, rp: int, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per block of r (rb, rh, ni * rp, nk), blocks of rp rows and bs keys (a last block of
    fewer keys when bs does not divide nk): whether any element and whether every element
    is True, each (rb, rh, ni, ceil(nk / bs)); ni is 1 when r's query dimension is 1.

    Rows are folded first, halving the rows of each block with elementwise | and & (several
    times faster than torch.any over the strided row dimension, and log2(rp) operations
    however large the blocks), which shrinks the data bs times before the reduction over
    keys."""
    rb, rh, rows, nk = r.shape
    ni = rows // rp if rows > 1 else 1
    row_any = row_all = r.view(rb, rh, ni, -1, nk)
    while row_any.shape[3] > 1:
        n = row_any.shape[3]
        half = n // 2
        folded_any = row_any[:, :, :, :half] | row_any[:, :, :, half:2 * half]
        folded_all = row_all[:, :, :, :half] & row_all[:, :, :, half:2 * half]
        if n % 2:
            folded_any[:, :, :, :1] |= row_any[:, :, :, -1:]
            folded_all[:, :, :, :1] &= row_all[:, :, :, -1:]
        row_any, row_all = folded_any, folded_all
    row_any, row_all = row_any[:, :, :, 0], row_all[:, :, :, 0]
    main = (nk // bs) * bs
    any_parts = [row_any[..., :main].reshape(rb, rh, ni, main // bs, bs).any(-1)]
    all_parts = [row_all[..., :main].reshape(rb, rh, ni, main // bs, bs).all(-1)]
    if main < nk:
        any_parts.append(row_any[..., main:].any(-1, keepdim=True))
        all_parts.append(row_all[..., main:].all(-1, keepdim=True))
    return torch.cat(any_parts, -1), torch.cat(all_parts, -1)


def _gather_partial(r: torch.Tensor, rows: int, rp: int, bs: int, bi, hi, ii, jj) -> torch.Tensor:
    """The element masks (n, bs, bs) uint8 of the blocks (bi, hi, ii, jj) of r (rb, rh,
    rows or 1, nk), in chunk-local block coordinates with rp rows per block row,
    zero-padded outside the block's logical rows and keys. Indices of dimensions that r
    broadcasts (size 1) are taken as 0.

    Blocks are cut out of a (.., block row, row, block column, key) view of r, which copies
    whole key runs; a ragged last block column (fewer than bs keys) is cut separately."""
    rb, rh, _, nk = r.shape
    r = r.expand(rb, rh, rows, nk)
    bi, hi = bi.clamp(max=rb - 1), hi.clamp(max=rh - 1)
    whole = nk // bs
    masks = torch.zeros(bi.numel(), bs, bs, dtype=torch.bool, device=r.device)
    main, tail = jj < whole, jj == whole
    blocks = r[..., :whole * bs].reshape(rb, rh, rows // rp, rp, whole, bs)
    masks[main, :rp, :] = blocks[bi[main], hi[main], ii[main], :, jj[main], :]
    edge = r[..., whole * bs:].reshape(rb, rh, rows // rp, rp, nk - whole * bs)
    masks[tail, :rp, :nk - whole * bs] = edge[bi[tail], hi[tail], ii[tail]]
    return masks.view(torch.uint8)


def classify_blocks(mask_mod, B, H, Q_LEN: int, KV_LEN: int, BLOCK_SIZE: int = 128, device="cpu") -> dict:
    """The blocks of the predicate `mask_mod(b, h, q_idx, kv_idx) -> bool tensor` (True
    where query q_idx of batch element b and head h may attend to key kv_idx), evaluated on
    `device` with int64 index tensors b (nb,1,1,1), h (1,nh,1,1), q_idx (1,1,rows,1) and
    kv_idx (1,1,1,nk) over plain indices 0 .. Q_LEN - 1 and 0 .. KV_LEN - 1. B or H of
    None (or 1) makes the mask shared by every batch element or head: that dimension has
    size 1 and is evaluated at index 0.

    Returns a dict of CPU tensors, with br = ceil(Q_LEN / BLOCK_SIZE) block rows and
    bc = ceil(KV_LEN / BLOCK_SIZE) block columns per slice s = b * heads + h:
      batch, heads       the mask's slice counts (ints);
      block_row_ptrs     int64 (batch * heads * br + 1): stored blocks of the block rows
                         stacked slice by slice, CSR-style from 0;
      block_col_indices  int64 per stored block: its block column in [0, bc), ascending
                         within a block row;
      partial_index      int64 per stored block: -1 when every element of the block inside
                         (Q_LEN, KV_LEN) is allowed (full), else its position p among the
                         partial blocks;
      element_masks      uint8 (n_partial * BLOCK_SIZE**2): partial block p's row-major
                         (query, key) mask at [p * BLOCK_SIZE**2, (p + 1) * BLOCK_SIZE**2),
                         1 where allowed and 0 outside (Q_LEN, KV_LEN).
    Blocks with no allowed element are not stored. The result is validated: mask_mod must
    return a bool tensor that broadcasts to the evaluated shape (TypeError, ValueError)."""
    if not callable(mask_mod):
        raise TypeError(f"{_WHO}: mask_mod must be callable, got {type(mask_mod).__name__}")
    batch = _int_arg(B, "B", 1, allow_none=True) or 1
    heads = _int_arg(H, "H", 1, allow_none=True) or 1
    q_len = _int_arg(Q_LEN, "Q_LEN", 0)
    kv_len = _int_arg(KV_LEN, "KV_LEN", 0)
    bs = _int_arg(BLOCK_SIZE, "BLOCK_SIZE", 1)
    device = torch.device(device)
    br, bc = -(-q_len // bs), -(-kv_len // bs)

    stored = torch.zeros(batch, heads, br, bc, dtype=torch.bool)
    partial = torch.zeros(batch, heads, br, bc, dtype=torch.bool)
    chunk_masks = []  # (flat block indices into (batch, heads, br, bc), their element masks)
    nb, nh, ni, nj = _chunk_shape(batch, heads, br, bc, bs)
    row_ranges = _row_ranges(q_len, bs, ni) if bc else []
    for b0 in range(0, batch, nb):
        b = torch.arange(b0, min(b0 + nb, batch), device=device).view(-1, 1, 1, 1)
        for h0 in range(0, heads, nh):
            h = torch.arange(h0, min(h0 + nh, heads), device=device).view(1, -1, 1, 1)
            for i0, i1 in row_ranges:
                q0, q1 = i0 * bs, min(i1 * bs, q_len)
                q = torch.arange(q0, q1, device=device).view(1, 1, -1, 1)
                rp = min(bs, q1 - q0)
                for j0 in range(0, bc, nj):
                    j1 = min(j0 + nj, bc)
                    kv = torch.arange(j0 * bs, min(j1 * bs, kv_len), device=device).view(1, 1, 1, -1)
                    r = _evaluate(mask_mod, b, h, q, kv)
                    any_, all_ = _block_any_all(r, rp, bs)
                    shape = (b.shape[0], h.shape[1], i1 - i0, j1 - j0)
                    any_, part = any_.expand(shape), (any_ & ~all_).expand(shape)
                    window = (slice(b0, b0 + shape[0]), slice(h0, h0 + shape[1]), slice(i0, i1), slice(j0, j1))
                    stored[window] = any_.cpu()
                    partial[window] = part.cpu()
                    bi, hi, ii, jj = part.nonzero().unbind(1)
                    if bi.numel():
                        flat = (((bi + b0) * heads + hi + h0) * br + ii + i0) * bc + jj + j0
                        chunk_masks.append((flat.cpu(), _gather_partial(r, q1 - q0, rp, bs, bi, hi, ii, jj).cpu()))

    block_rows = batch * heads * br
    rows, cols = stored.view(block_rows, bc).nonzero().unbind(1)
    row_ptrs = torch.cat([torch.zeros(1, dtype=torch.int64), stored.view(block_rows, bc).sum(1).cumsum(0)])
    is_partial = partial.view(block_rows, bc)[rows, cols]
    partial_index = torch.where(is_partial, is_partial.cumsum(0) - 1, torch.full_like(cols, -1))
    # Chunks run block row by block row across slices; each partial mask goes to its rank
    # in (slice, block row, block column) order.
    partial_flat = partial.view(-1).nonzero().squeeze(1)
    element_masks = torch.empty(partial_flat.numel(), bs, bs, dtype=torch.uint8)
    for flat, masks in chunk_masks:
        element_masks[torch.searchsorted(partial_flat, flat)] = masks
    return {"batch": batch, "heads": heads, "block_row_ptrs": row_ptrs, "block_col_indices": cols,
            "partial_index": partial_index, "element_masks": element_masks.view(-1)}
