"""Block-sparse attention on the core's tiled kernels, with autograd.

`sparse_attention(query, key, value, block_mask)` computes
O = softmax(mod(Q Kᵀ · scale) + mask) V for every (batch, head) of (B, H, L, E) tensors,
visiting only the (query block, key block) tiles the mask stores, with an online
softmax (fp32 scores, statistics and accumulation for float32 and bfloat16; fp64
throughout for float64). The mask is an AttentionMask from `trnsparse.mask` (the
builders, or `create_block_mask` from a predicate), one per (batch, head) or shared,
or a BSRMatrix whose block pattern alone is used. float64 runs the core's portable
reference kernel on every instruction set: it is for verification (e.g.
`torch.autograd.gradcheck` with nondet_tol=0), not speed.

`block_sparse_attention_tiled(Q, K, V, mask)` is trnsparse 0.6's single-head entry
point, with its contract unchanged.

The backward is the core's `attention_backward` from the forward's saved O and per-row
log-sum-exp: bitwise identical for any thread count.
"""
from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from . import _backend, _core
from . import score as _score
from ._formats import BSRMatrix
from ._interop import ShapeError, as_tensor, check, dense_operand, dtype_name, empty, from_array, index_tensor

_ATTENTION_DTYPES = (torch.float32, torch.bfloat16, torch.float64)


class AttentionMask:
    """Which (query, key) pairs attention may use, on a block grid of `block_size`:
    stored block (I, J) lets queries of block row I attend to keys of block column J,
    fully or through an element mask. A mask holds one pattern per (batch, head) slice,
    `batch x heads` of them, where a count of 1 is shared by every batch element or head.
    Immutable; build it with `trnsparse.mask`'s functions (`create_block_mask` among
    them) or `AttentionMask.from_bsr`."""

    def __init__(self, handle: _core.AttentionMask):
        self._core = handle

    def __deepcopy__(self, memo) -> "AttentionMask":
        # Immutable, so a copy (of a module holding a mask, e.g. an EMA copy) may share it.
        return self

    @classmethod
    def from_bsr(cls, A: BSRMatrix) -> "AttentionMask":
        """The block pattern of A (values ignored), every stored block full."""
        who = "AttentionMask.from_bsr"
        if not isinstance(A, BSRMatrix):
            raise TypeError(f"{who}: expected a BSRMatrix, got {type(A).__name__}")
        rp = index_tensor(A.block_row_ptrs, who, "block_row_ptrs")
        ci = index_tensor(A.block_col_indices, who, "block_col_indices")
        return cls(_core.mask_from_pattern(A.shape[0], A.shape[1], A.block_size, rp.data_ptr(), rp.numel(),
                                           ci.data_ptr(), ci.numel()))

    @classmethod
    def _from_blocks(cls, batch: int, heads: int, queries: int, keys: int, block_size: int,
                     block_row_ptrs: torch.Tensor, block_col_indices: torch.Tensor, partial_index: torch.Tensor,
                     element_masks: torch.Tensor) -> "AttentionMask":
        """From classified blocks (the core's AttentionMask::from_blocks, which validates
        them): row pointers over the slices' block rows, block columns within the slice,
        per block -1 (full) or its partial mask's position, and the partial masks' bytes."""
        who = "AttentionMask"
        rp = index_tensor(block_row_ptrs, who, "block_row_ptrs")
        ci = index_tensor(block_col_indices, who, "block_col_indices")
        pi = index_tensor(partial_index, who, "partial_index")
        em = as_tensor(element_masks, who, "element_masks").to(torch.uint8).contiguous()
        check(pi.numel() == ci.numel(), f"{who}: partial_index has {pi.numel()} entries, block_col_indices "
                                        f"{ci.numel()}")
        return cls(_core.mask_from_blocks(batch, heads, queries, keys, block_size, rp.data_ptr(), rp.numel(),
                                          ci.data_ptr(), ci.numel(), pi.data_ptr(), em.data_ptr(), em.numel()))

    @property
    def shape(self) -> tuple[int, int]:
        """(queries, keys) of every slice."""
        return (self._core.queries, self._core.keys)

    @property
    def batch(self) -> int:
        """Batch slices: 1 (shared by every batch element) or the batch size."""
        return self._core.batch

    @property
    def heads(self) -> int:
        """Head slices: 1 (shared by every head) or the number of query heads."""
        return self._core.heads

    @property
    def block_size(self) -> int:
        return self._core.block_size

    @property
    def n_blocks(self) -> int:
        """Stored blocks of all slices."""
        return self._core.n_blocks

    @property
    def n_partial(self) -> int:
        """Stored blocks that allow only some of their pairs."""
        return self._core.n_partial

    @property
    def density(self) -> float:
        """Stored blocks over the blocks of every slice's grid."""
        b = self.block_size
        grid = self.batch * self.heads * (-(-self.shape[0] // b)) * (-(-self.shape[1] // b))
        return self.n_blocks / grid if grid else 0.0

    @property
    def block_row_ptrs(self) -> torch.Tensor:
        """Row pointers over the block rows of every slice, in slice order."""
        return from_array(self._core.block_arrays()[0])

    @property
    def block_col_indices(self) -> torch.Tensor:
        """Block columns of the stacked structure (slice s's block column J at s · block_cols + J)."""
        return from_array(self._core.block_arrays()[1])

    def to_dense(self) -> torch.Tensor:
        """The bool matrix of allowed pairs: (queries, keys) for a single-slice mask, else
        (batch, heads, queries, keys). O(queries · keys) per slice, for inspection."""
        allowed = from_array(self._core.allowed()).bool()
        return allowed[0, 0] if self.batch == self.heads == 1 else allowed

    def __reduce__(self):
        """Pickles as its classified blocks (block columns within their slice), so a module
        holding a mask can be saved whole with torch.save."""
        ptr, cols, partial, masks = (from_array(a) for a in self._core.block_arrays())
        block_cols = -(-self.shape[1] // self.block_size)
        rows_per_slice = -(-self.shape[0] // self.block_size)
        slice_of_block = torch.repeat_interleave(torch.arange(ptr.numel() - 1) // max(rows_per_slice, 1),
                                                 ptr.diff())
        local = cols - slice_of_block * block_cols
        return (AttentionMask._from_blocks, (self.batch, self.heads, self.shape[0], self.shape[1], self.block_size,
                                             ptr.clone(), local, partial.clone(), masks.clone()))

    def __repr__(self) -> str:
        slices = "" if self.batch == self.heads == 1 else f", batch={self.batch}, heads={self.heads}"
        return (f"AttentionMask(shape={self.shape}, block_size={self.block_size}, n_blocks={self.n_blocks}, "
                f"n_partial={self.n_partial}{slices})")


def _mask_of(mask, who: str, name: str) -> AttentionMask:
    if isinstance(mask, AttentionMask):
        return mask
    if isinstance(mask, BSRMatrix):
        return AttentionMask.from_bsr(mask)
    raise TypeError(f"{who}: {name} must be a BSRMatrix or an AttentionMask, got {type(mask).__name__}")


def _heads_arg(t: torch.Tensor) -> tuple[int, ...]:
    """(address, B, H, L, E, batch stride, head stride, seq stride) of a 4-D tensor whose
    last dimension is contiguous."""
    B, H, L, E = t.shape
    return (t.data_ptr(), B, H, L, E, t.stride(0), t.stride(1), t.stride(2))


def _readable(t: torch.Tensor) -> torch.Tensor:
    """t as the kernels read it: last dimension contiguous (else one copy)."""
    return t if t.shape[-1] <= 1 or t.stride(-1) == 1 else t.contiguous()


def _dense_strides(t: torch.Tensor):
    """t's strides when its elements fill its memory without gaps or overlap and its last
    dimension is contiguous (a (B, L, H, E) projection viewed as (B, H, L, E)), else
    None."""
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        return None
    expected = 1
    for d in sorted(range(t.dim()), key=lambda d: (t.stride(d), -d)):
        if t.shape[d] != 1:
            if t.stride(d) != expected:
                return None
            expected *= t.shape[d]
    return t.stride()


def _output_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor of t's shape and dtype with t's memory layout when that
    layout is dense with a contiguous last dimension, else contiguous; a large one on
    pooled memory."""
    return empty(t.shape, t.dtype, "sparse_attention", _dense_strides(t))


class _Attention(torch.autograd.Function):
    """O (and lse) of the core's attention_forward over (B, H, L, E) operands; dQ, dK, dV
    from its attention_backward with the saved O and row log-sum-exp. An undefined dO
    gives no gradients; lse is not differentiable."""

    @staticmethod
    def forward(ctx, q, k, v, mask: AttentionMask, scale: float, slopes: list, cap: float):
        ctx.set_materialize_grads(False)
        O, lse = _forward(q, k, v, mask, scale, slopes, cap)
        ctx.mask, ctx.scale, ctx.slopes, ctx.cap = mask, scale, slopes, cap
        ctx.save_for_backward(q, k, v, O, lse)
        ctx.mark_non_differentiable(lse)
        return O, lse

    @staticmethod
    @once_differentiable
    def backward(ctx, dO, _dlse):
        if dO is None:
            return (None,) * 7
        q, k, v, O, lse = ctx.saved_tensors
        dO = _readable(dO.to(q.dtype))
        dq, dk, dv = _output_like(q), _output_like(k), _output_like(v)
        _core.attention_backward(ctx.mask._core, dtype_name(q.dtype, "sparse_attention"), _heads_arg(q), _heads_arg(k),
                                 _heads_arg(v), _heads_arg(O), _heads_arg(dO), lse.data_ptr(), lse.numel(),
                                 _heads_arg(dq), _heads_arg(dk), _heads_arg(dv), ctx.scale, ctx.slopes, ctx.cap)
        need = ctx.needs_input_grad
        return (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None) + (None,) * 4


def _forward(q, k, v, mask: AttentionMask, scale: float, slopes: list, cap: float):
    B, H, L, _ = q.shape
    O = _output_like(q)
    # Row statistics in the core's accumulation type: float64 for float64, else float32.
    lse = torch.empty((B, H, L), dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    _core.attention_forward(mask._core, dtype_name(q.dtype, "sparse_attention"), _heads_arg(q), _heads_arg(k),
                            _heads_arg(v), _heads_arg(O), lse.data_ptr(), lse.numel(), scale, slopes, cap)
    return O, lse


def _checked_scale(scale, who: str) -> float | None:
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"{who}: scale must be a number or None, got {type(scale).__name__}")
    if not (math.isfinite(float(scale)) and float(scale) > 0.0):
        raise ValueError(f"{who}: scale = {scale} must be positive and finite (None for 1/sqrt(E))")
    return float(scale)


def _run(q, k, v, mask: AttentionMask, scale: float, slopes: list, cap: float):
    """The attention of 4-D operands on the selected backend; (O, lse)."""
    if _backend.get_backend() == "pytorch":
        from . import _torch_backend

        group = q.shape[1] // k.shape[1]
        allowed = mask.to_dense()
        allowed = allowed[None, None] if allowed.dim() == 2 else allowed
        alibi = torch.tensor(slopes, dtype=torch.float64) if slopes else None
        return _torch_backend.attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                                        allowed.to(q.device), scale, alibi_slopes=alibi,
                                        softcap=cap if cap else None, return_lse=True)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _Attention.apply(q, k, v, mask, scale, slopes, cap)
    return _forward(q, k, v, mask, scale, slopes, cap)


def sparse_attention(query, key, value, block_mask, *, scale: float | None = None, enable_gqa: bool = False,
                     score_mod=None, return_lse: bool = False):
    """softmax(mod(query keyᵀ · scale) + mask) value over the stored blocks of `block_mask`,
    in the layout of torch's scaled_dot_product_attention and FlexAttention:

    - query (B, H, Lq, E), key and value (B, Hkv, Lkv, E); also (H, L, E) and (L, E).
      Any strides: the `transpose(1, 2)` view of a (B, L, H, E) projection is read in
      place; a tensor whose last dimension is not contiguous is copied once. The output
      has query's memory layout (so `O.transpose(1, 2).reshape(B, Lq, H * E)` is free when
      query was such a view).
    - Lq may differ from Lkv (decoding against a key cache); the mask says which keys
      each query sees (`mask.causal(Lq, b, kv_len=Lkv)` aligns bottom-right).
    - enable_gqa: key and value may have Hkv heads, Hkv dividing H; query head h reads
      key/value head h // (H // Hkv), without copying them.
    - block_mask: an AttentionMask of shape (Lq, Lkv) with batch 1 or B and heads 1 or H
      slices (trnsparse.mask builders, create_block_mask), or a BSRMatrix whose block
      pattern (not its values) gives full blocks.
    - scale: default 1/sqrt(E); positive and finite.
    - score_mod: trnsparse.score.alibi(slopes), trnsparse.score.softcap(c), or a list of
      both (ALiBi first), applied inside the kernels, forward and backward.
    - dtypes float32, bfloat16 (fp32 statistics and accumulation) and float64 (the
      reference kernel, for gradcheck). Differentiable in query, key and value.

    A query row that may attend to no key outputs zeros and gets zero gradients. With
    return_lse, also returns the (B, H, Lq) log-sum-exp of each row's modified allowed
    scores (float32; float64 for float64 inputs; 0 for an empty row), not differentiable.
    """
    who = "sparse_attention"
    q = _attention_tensor(query, who, "query")
    k = _attention_tensor(key, who, "key")
    v = _attention_tensor(value, who, "value")
    dims = q.dim()
    for name, t in (("key", k), ("value", v)):
        if t.dim() != dims:
            raise ShapeError(f"{who}: {name} is {t.dim()}-D but query is {dims}-D")
        if t.dtype != q.dtype:
            raise TypeError(f"{who}: {name} has dtype {t.dtype} but query has dtype {q.dtype}")
        if t.device != q.device:
            raise ValueError(f"{who}: {name} is on {t.device} but query is on {q.device}")
    # (L, E) and (H, L, E) as (1, 1, L, E) and (1, H, L, E) views.
    q4, k4, v4 = (t[None, None] if dims == 2 else t[None] if dims == 3 else t for t in (q, k, v))
    B, H, Lq, E = q4.shape
    check(k4.shape == v4.shape, f"{who}: key has shape {tuple(k.shape)} but value has shape {tuple(v.shape)}")
    check(k4.shape[0] == B, f"{who}: key has batch {k4.shape[0]} but query has batch {B}")
    check(k4.shape[3] == E, f"{who}: key has head dim {k4.shape[3]} but query has {E}")
    Hkv, Lkv = k4.shape[1], k4.shape[2]
    if Hkv != H:
        # Sequences in the heads' place make unequal "heads" when Lq != Lkv (decoding).
        hint = (_layout_hint(q, k, block_mask.shape) if isinstance(block_mask, (AttentionMask, BSRMatrix))
                else "")
        if not enable_gqa:
            raise ShapeError(f"{who}: key has {Hkv} heads but query has {H}; pass enable_gqa=True for "
                             f"grouped-query attention{hint}")
        if Hkv == 0 or H % Hkv != 0:
            raise ShapeError(f"{who}: query's {H} heads are not a multiple of key's {Hkv} heads{hint}")
    mask = _mask_of(block_mask, who, "block_mask")
    if mask.shape != (Lq, Lkv):
        raise ShapeError(f"{who}: block_mask is {mask.shape[0]} x {mask.shape[1]} but query has {Lq} rows and key "
                         f"{Lkv}{_layout_hint(q, k, mask.shape)}")
    check(mask.batch in (1, B), f"{who}: block_mask has batch {mask.batch}; expected 1 or query's {B}")
    check(mask.heads in (1, H), f"{who}: block_mask has {mask.heads} heads; expected 1 or query's {H}")
    sc = _checked_scale(scale, who)
    slopes, cap = _score._resolve(score_mod, H, who)
    sc = 1.0 / math.sqrt(E) if sc is None else sc
    if q.device.type != "cpu" and _backend.get_backend() != "pytorch":
        raise ValueError(f"{who}: query is on {q.device}; the C++ kernels run on CPU tensors "
                         f"(trnsparse.set_backend('pytorch') runs on any device torch supports)")
    O, lse = _run(*(_readable(t) for t in (q4, k4, v4)), mask, sc, slopes, cap)
    if dims != 4:  # back to the caller's dimensions
        O, lse = (O[0, 0], lse[0, 0]) if dims == 2 else (O[0], lse[0])
    return (O, lse) if return_lse else O


def _layout_hint(q: torch.Tensor, k: torch.Tensor, mask_shape: tuple[int, int]) -> str:
    """The end of a shape error when query or key (and with it value, of key's shape) looks
    like (B, L, H, E) or (L, H, E): its sequence length is not where the mask's length is
    expected (dims[-2]) but is one dimension earlier (dims[-3]). Empty otherwise."""
    def swapped(t: torch.Tensor, length: int) -> bool:
        return t.dim() >= 3 and t.shape[-2] != length and t.shape[-3] == length

    names = (["query"] if swapped(q, mask_shape[0]) else []) + (["key", "value"] if swapped(k, mask_shape[1]) else [])
    if not names:
        return ""
    got, want, dims = ("(B, L, H, E)", "(B, H, L, E)", "1, 2") if q.dim() == 4 else ("(L, H, E)", "(H, L, E)", "0, 1")

    def listed(words: list[str]) -> str:
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]

    verb = "looks" if len(names) == 1 else "look"
    return (f"; {listed(names)} {verb} like {got}: pass {listed([f'{n}.transpose({dims})' for n in names])} "
            f"({want} is expected)")


def _attention_tensor(x, who: str, name: str) -> torch.Tensor:
    """x as a float32, bfloat16 or float64 tensor of 2 to 4 dimensions (TypeError or
    ShapeError otherwise)."""
    if not isinstance(x, torch.Tensor):
        x = as_tensor(x, who, name)
    if x.dtype not in _ATTENTION_DTYPES:
        raise TypeError(f"{who}: {name} has dtype {x.dtype}; expected float32, bfloat16 or float64")
    if x.dim() not in (2, 3, 4):
        raise ShapeError(f"{who}: {name} must be (B, H, L, E), (H, L, E) or (L, E), got shape {tuple(x.shape)}")
    return x


def block_sparse_attention_tiled(Q, K, V, mask_bsr, scale: float | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ · scale + mask) V for Q (seq_q, d), K and V (seq_k, d), float32,
    bfloat16 or float64 (one dtype; float64 on the portable kernel, for verification), d <= 512. `mask_bsr`: a BSRMatrix of shape (seq_q, seq_k) whose
    block pattern (not its values) says which tiles are computed, or an AttentionMask.
    `scale` defaults to 1/√d and must be positive. A query row that may attend to no key
    (e.g. a block row without stored blocks) outputs zeros. Differentiable in Q, K, V."""
    who = "block_sparse_attention_tiled"
    Q = as_tensor(Q, who, "Q")
    if Q.dtype not in _ATTENTION_DTYPES:
        raise TypeError(f"{who}: dtype {Q.dtype} is not supported (float32, bfloat16 or float64)")
    Q = dense_operand(Q, Q.dtype, 2, who, "Q")
    K = dense_operand(K, Q.dtype, 2, who, "K")
    V = dense_operand(V, Q.dtype, 2, who, "V")
    mask = _mask_of(mask_bsr, who, "mask_bsr")
    check(mask.batch == mask.heads == 1, f"{who}: the mask has {mask.batch} x {mask.heads} slices; one head takes "
                                         f"a single-slice mask")
    check(K.shape == V.shape, f"{who}: K has shape {tuple(K.shape)} but V has shape {tuple(V.shape)}")
    check(Q.shape[1] == K.shape[1], f"{who}: Q has {Q.shape[1]} columns but K has {K.shape[1]}")
    check(mask.shape == (Q.shape[0], K.shape[0]),
          f"{who}: the mask is {mask.shape[0]} x {mask.shape[1]} but Q has {Q.shape[0]} rows and K {K.shape[0]}")
    if scale is not None and not (float(scale) > 0.0 and math.isfinite(float(scale))):
        raise ValueError(f"{who}: scale = {scale} must be positive and finite (None for 1/sqrt(d))")
    scale = 1.0 / math.sqrt(Q.shape[1]) if scale is None else float(scale)
    q4, k4, v4 = (_readable(t[None, None]) for t in (Q, K, V))
    return _run(q4, k4, v4, mask, scale, [], 0.0)[0][0, 0]


__all__ = ["AttentionMask", "block_sparse_attention_tiled", "sparse_attention"]
