"""block_sparse_attention_tiled and trnsparse.mask against a float64 dense masked softmax.

Gradients: `torch.autograd.gradcheck` in float64 (the core's portable fp64 kernel) with
nondet_tol=0 over every mask family, padded sequences and block rows with no stored
block; float32 gradients against the float64 reference's autograd gradients and against
central finite differences of the float32 kernel itself.
"""
import pytest
import torch

import trnsparse as ts
from trnsparse import _core
from conftest import assert_close, random_dense_operand

ATTN_DTYPES = [torch.float32, torch.bfloat16]
ALL_ATTN_DTYPES = [torch.float32, torch.bfloat16, torch.float64]
ALL_IDS = ["float32", "bfloat16", "float64"]


def reference(Q, K, V, allowed, scale=None):
    """float64 softmax(Q Kᵀ · scale, masked) V; rows with no allowed key give zeros."""
    Q, K, V = Q.double(), K.double(), V.double()
    scale = Q.shape[1] ** -0.5 if scale is None else scale
    S = (Q @ K.T * scale).masked_fill(~allowed, float("-inf"))
    empty = ~allowed.any(dim=1, keepdim=True)
    P = torch.softmax(S.masked_fill(empty, 0.0), dim=1).masked_fill(empty, 0.0)
    return P @ V


def block_pattern_mask(seq_q, seq_k, b, grid):
    """A BSRMatrix (float32, values all 7) storing the blocks where `grid` is true."""
    dense = torch.zeros(seq_q, seq_k)
    for i, j in grid.nonzero().tolist():
        dense[i * b:(i + 1) * b, j * b:(j + 1) * b] = 7.0
    return ts.BSRMatrix.from_dense(dense, block_size=b)


def allowed_of_grid(seq_q, seq_k, b, grid):
    return grid.repeat_interleave(b, 0).repeat_interleave(b, 1)[:seq_q, :seq_k]


def operands(seq_q, seq_k, d, dtype, seed=0):
    return (random_dense_operand(seq_q, d, seed, dtype) * 2, random_dense_operand(seq_k, d, seed + 1, dtype) * 2,
            random_dense_operand(seq_k, d, seed + 2, dtype))


# seq not a multiple of the block, rectangular, and block rows with no stored block.
GRIDS = [
    (13, 13, 4, [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 0], [0, 0, 1, 1]]),
    (10, 7, 3, [[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1]]),
    (5, 5, 8, [[1]]),
]


@pytest.mark.parametrize("dtype", ALL_ATTN_DTYPES, ids=ALL_IDS)
@pytest.mark.parametrize("seq_q,seq_k,b,grid", GRIDS)
def test_bsr_mask_forward_matches_reference(dtype, seq_q, seq_k, b, grid):
    grid = torch.tensor(grid, dtype=torch.bool)
    mask = block_pattern_mask(seq_q, seq_k, b, grid)
    Q, K, V = operands(seq_q, seq_k, 6, dtype)
    O = ts.block_sparse_attention_tiled(Q, K, V, mask)
    assert O.dtype == dtype and O.shape == (seq_q, 6)
    expected = reference(Q, K, V, allowed_of_grid(seq_q, seq_k, b, grid))
    assert_close(O, expected, dtype)
    empty_rows = ~allowed_of_grid(seq_q, seq_k, b, grid).any(dim=1)
    assert torch.equal(O[empty_rows], torch.zeros_like(O[empty_rows]))


def test_explicit_scale_and_values_of_the_mask_are_ignored():
    grid = torch.tensor(GRIDS[0][3], dtype=torch.bool)
    mask = block_pattern_mask(13, 13, 4, grid)
    Q, K, V = operands(13, 13, 5, torch.float32, seed=4)
    O = ts.block_sparse_attention_tiled(Q, K, V, mask, scale=0.3)
    assert_close(O, reference(Q, K, V, allowed_of_grid(13, 13, 4, grid), scale=0.3), torch.float32)
    zero_valued = ts.BSRMatrix(torch.zeros_like(mask.blocks), mask.block_col_indices, mask.block_row_ptrs,
                               mask.shape, 4)
    assert torch.equal(ts.block_sparse_attention_tiled(Q, K, V, zero_valued, scale=0.3), O)


def _allowed_pairs(seq, b, rule):
    """seq x seq bool from a rule on (query block, key block, query, key)."""
    i = torch.arange(seq).unsqueeze(1)
    j = torch.arange(seq).unsqueeze(0)
    return rule(i // b, j // b, i, j)


BUILDERS = [
    ("local_window", lambda seq, b: ts.mask.local_window(seq, b, 1),
     lambda bi, bj, i, j: (bi - bj).abs() <= 1),
    ("dilated", lambda seq, b: ts.mask.dilated(seq, b, 2),
     lambda bi, bj, i, j: (bi - bj) % 2 == 0),
    ("global_tokens", lambda seq, b: ts.mask.global_tokens(seq, b, 0, 1),
     lambda bi, bj, i, j: (bi == 0) | (bj == 0) | (bi == bj)),
    ("causal", lambda seq, b: ts.mask.causal(seq, b),
     lambda bi, bj, i, j: j <= i),
]


@pytest.mark.parametrize("name,build,rule", BUILDERS, ids=[b[0] for b in BUILDERS])
@pytest.mark.parametrize("seq,b", [(19, 4), (16, 4), (3, 8)])
def test_mask_builders_allow_their_pairs_and_drive_attention(name, build, rule, seq, b):
    mask = build(seq, b)
    allowed = _allowed_pairs(seq, b, rule)
    assert isinstance(mask, ts.AttentionMask)
    assert mask.shape == (seq, seq) and mask.block_size == b
    assert torch.equal(mask.to_dense(), allowed)
    assert mask.block_row_ptrs.numel() == -(-seq // b) + 1
    assert mask.block_col_indices.numel() == mask.n_blocks == int(mask.block_row_ptrs[-1])
    assert (mask.n_partial > 0) == (name == "causal" and seq > 1)
    Q, K, V = operands(seq, seq, 8, torch.float32, seed=seq)
    assert_close(ts.block_sparse_attention_tiled(Q, K, V, mask), reference(Q, K, V, allowed), torch.float32)


def test_attention_mask_from_bsr_uses_the_block_pattern():
    grid = torch.tensor(GRIDS[1][3], dtype=torch.bool)
    mask = ts.AttentionMask.from_bsr(block_pattern_mask(10, 7, 3, grid))
    assert mask.shape == (10, 7) and mask.n_partial == 0
    assert torch.equal(mask.to_dense(), allowed_of_grid(10, 7, 3, grid))
    assert "AttentionMask(shape=(10, 7), block_size=3" in repr(mask)


def _grad_case(mask_kind):
    """(Q, K, V, mask, allowed) in float32 with a fully masked block row (BSR) or a
    causal mask with a partial diagonal."""
    if mask_kind == "bsr":
        seq_q, seq_k, b, grid = GRIDS[0]
        grid = torch.tensor(grid, dtype=torch.bool)
        mask, allowed = block_pattern_mask(seq_q, seq_k, b, grid), allowed_of_grid(seq_q, seq_k, b, grid)
    else:
        seq_q = seq_k = 11
        mask, allowed = ts.mask.causal(11, 4), _allowed_pairs(11, 4, lambda bi, bj, i, j: j <= i)
    Q, K, V = operands(seq_q, seq_k, 5, torch.float32, seed=9)
    return Q, K, V, mask, allowed


@pytest.mark.parametrize("mask_kind", ["bsr", "causal"])
def test_gradients_match_the_float64_reference(mask_kind):
    Q, K, V, mask, allowed = _grad_case(mask_kind)
    dO = random_dense_operand(Q.shape[0], V.shape[1], 21, torch.float32)
    leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    ts.block_sparse_attention_tiled(*leaves, mask).backward(dO)
    ref_leaves = [t.double().requires_grad_() for t in (Q, K, V)]
    reference(*ref_leaves, allowed).backward(dO.double())
    for got, ref in zip(leaves, ref_leaves):
        assert got.grad.dtype == torch.float32
        assert_close(got.grad, ref.grad, torch.float32)
    empty_rows = ~allowed.any(dim=1)
    assert torch.equal(leaves[0].grad[empty_rows], torch.zeros_like(leaves[0].grad[empty_rows]))


@pytest.mark.parametrize("mask_kind", ["bsr", "causal"])
def test_gradients_match_central_differences_in_float32(mask_kind):
    # <dL/dX, U> against (L(X + hU) - L(X - hU)) / 2h of the float32 kernel, L = <O, W>:
    # truncation O(h²) and float32 rounding O(eps / h) stay well below the tolerance.
    Q, K, V, mask, _ = _grad_case(mask_kind)
    W = random_dense_operand(Q.shape[0], V.shape[1], 31, torch.float32)
    leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    (ts.block_sparse_attention_tiled(*leaves, mask) * W).sum().backward()
    h = 1e-2
    for k, leaf in enumerate(leaves):
        U = random_dense_operand(*leaf.shape, 40 + k, torch.float32)

        def loss(step):
            args = [t.detach().clone() for t in leaves]
            args[k] = args[k] + step * U
            return float((ts.block_sparse_attention_tiled(*args, mask).double() * W.double()).sum())

        numeric = (loss(h) - loss(-h)) / (2 * h)
        analytic = float((leaf.grad.double() * U.double()).sum())
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (k, numeric, analytic)


@pytest.mark.parametrize("dtype", ALL_ATTN_DTYPES, ids=ALL_IDS)
def test_forward_and_backward_are_bitwise_identical_for_any_thread_count(dtype):
    mask = ts.mask.global_tokens(70, 8, 1, 1)
    Q, K, V = operands(70, 70, 16, dtype, seed=3)
    dO = random_dense_operand(70, 16, 5, dtype)
    results = []
    before = ts.get_num_threads()
    try:
        for n in (1, 2, 3):
            ts.set_num_threads(n)
            leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
            O = ts.block_sparse_attention_tiled(*leaves, mask)
            O.backward(dO)
            results.append([O.detach()] + [t.grad for t in leaves])
    finally:
        ts.set_num_threads(before)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert a.dtype == dtype and torch.equal(a.view(torch.int16) if dtype == torch.bfloat16 else a,
                                                    b.view(torch.int16) if dtype == torch.bfloat16 else b)


def test_bfloat16_gradients_keep_the_dtype_and_approximate_the_reference():
    mask = ts.mask.causal(12, 4)
    Q, K, V = operands(12, 12, 8, torch.bfloat16, seed=6)
    leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    ts.block_sparse_attention_tiled(*leaves, mask).sum().backward()
    ref_leaves = [t.double().requires_grad_() for t in (Q, K, V)]
    reference(*ref_leaves, mask.to_dense()).sum().backward()
    for got, ref in zip(leaves, ref_leaves):
        assert got.grad.dtype == torch.bfloat16
        assert_close(got.grad, ref.grad, torch.bfloat16)


class _DropGradient(torch.autograd.Function):
    """Passes x through in forward; gives x no gradient (an undefined output gradient)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return None


def test_undefined_output_gradient_runs_no_kernel(monkeypatch):
    calls = []
    monkeypatch.setattr(_core, "attention_backward", lambda *a: calls.append(a))
    Q, K, V = (t.requires_grad_() for t in operands(9, 9, 4, torch.float32))
    O = ts.block_sparse_attention_tiled(Q, K, V, ts.mask.causal(9, 4))
    (_DropGradient.apply(O).sum() + Q.sum()).backward()
    assert calls == []
    assert torch.equal(Q.grad, torch.ones_like(Q)) and K.grad is None and V.grad is None


def test_no_graph_without_requires_grad():
    Q, K, V = operands(9, 9, 4, torch.float32)
    assert ts.block_sparse_attention_tiled(Q, K, V, ts.mask.causal(9, 4)).grad_fn is None


def test_errors():
    f = ts.block_sparse_attention_tiled
    Q, K, V = operands(8, 8, 4, torch.float32)
    mask = ts.mask.local_window(8, 4, 0)
    with pytest.raises(TypeError, match="float32, bfloat16 or float64"):
        f(Q.half(), K.half(), V.half(), mask)
    with pytest.raises(TypeError, match="dtype"):
        f(Q, K.bfloat16(), V, mask)
    with pytest.raises(AssertionError, match="mask is 8 x 8"):
        f(Q[:7], K, V, mask)
    with pytest.raises(ts.ShapeError, match="V has shape"):
        f(Q, K, V[:, :3], mask)
    with pytest.raises(AssertionError, match="columns"):
        f(Q[:, :3], K, V, mask)
    with pytest.raises(ValueError, match="scale"):
        f(Q, K, V, mask, scale=0.0)
    with pytest.raises(ValueError, match="scale"):
        f(Q, K, V, mask, scale=float("nan"))
    with pytest.raises(TypeError, match="BSRMatrix or an AttentionMask"):
        f(Q, K, V, torch.ones(8, 8))
    wide = torch.zeros(8, 513)
    with pytest.raises(ValueError):
        f(wide, wide, wide, mask)
    with pytest.raises(ValueError):
        ts.mask.dilated(8, 4, 0)
    with pytest.raises(ValueError):
        ts.mask.causal(8, 0)


def test_row_strided_views_are_read_in_place_and_differentiate():
    X = random_dense_operand(9, 16, 8, torch.float32).requires_grad_()
    mask = ts.mask.causal(9, 4)
    Q, K, V = X[:, :5], X[:, 5:10], X[:, 10:15]
    O = ts.block_sparse_attention_tiled(Q, K, V, mask)
    assert torch.equal(O, ts.block_sparse_attention_tiled(Q.contiguous(), K.contiguous(), V.contiguous(), mask))
    O.sum().backward()
    leaves = [t.detach().clone().requires_grad_() for t in (Q, K, V)]
    ts.block_sparse_attention_tiled(*leaves, mask).sum().backward()
    assert torch.equal(X.grad[:, :15], torch.cat([t.grad for t in leaves], dim=1))
    assert torch.equal(X.grad[:, 15], torch.zeros(9))


# ---- float64: gradcheck with nondet_tol=0 ------------------------------------------------

# (name, mask builder) on a sequence that is not a multiple of the block; the BSR grids
# include block rows with no stored block (their rows output zeros, no gradient).
GRADCHECK_MASKS = [
    ("local_window", lambda: ts.mask.local_window(11, 4, 1)),
    ("dilated", lambda: ts.mask.dilated(11, 4, 2)),
    ("global_tokens", lambda: ts.mask.global_tokens(11, 4, 0, 1)),
    ("causal", lambda: ts.mask.causal(11, 4)),
    ("bsr_empty_block_row", lambda: block_pattern_mask(13, 13, 4, torch.tensor(GRIDS[0][3], dtype=torch.bool))),
    ("bsr_rectangular_empty_row", lambda: block_pattern_mask(10, 7, 3, torch.tensor(GRIDS[1][3], dtype=torch.bool))),
]


@pytest.mark.parametrize("name,build", GRADCHECK_MASKS, ids=[m[0] for m in GRADCHECK_MASKS])
def test_gradcheck_float64(name, build):
    mask = build()
    seq_q, seq_k = mask.shape
    Q, K, V = (t.requires_grad_() for t in operands(seq_q, seq_k, 3, torch.float64, seed=len(name)))
    f = lambda q, k, v: ts.block_sparse_attention_tiled(q, k, v, mask)  # noqa: E731
    assert torch.autograd.gradcheck(f, (Q, K, V), nondet_tol=0)
    assert torch.autograd.gradcheck(lambda q, k, v: ts.block_sparse_attention_tiled(q, k, v, mask, scale=0.45),
                                    (Q, K, V), nondet_tol=0)
    allowed = mask.to_dense() if isinstance(mask, ts.AttentionMask) else ts.AttentionMask.from_bsr(mask).to_dense()
    empty_rows = ~allowed.any(dim=1)
    assert empty_rows.any() == name.startswith("bsr")
    O = f(Q, K, V)
    assert O.dtype == torch.float64 and torch.equal(O[empty_rows], torch.zeros_like(O[empty_rows]))
    O.sum().backward()
    assert torch.equal(Q.grad[empty_rows], torch.zeros_like(Q.grad[empty_rows]))


def test_float64_matches_the_reference_forward_and_backward_tightly():
    mask = ts.mask.causal(37, 8)
    Q, K, V = operands(37, 37, 16, torch.float64, seed=12)
    dO = random_dense_operand(37, 16, 13, torch.float64)
    leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    O = ts.block_sparse_attention_tiled(*leaves, mask)
    O.backward(dO)
    ref_leaves = [t.clone().requires_grad_() for t in (Q, K, V)]
    expected = reference(*ref_leaves, mask.to_dense())
    expected.backward(dO)
    assert_close(O.detach(), expected.detach(), torch.float64)
    for got, ref in zip(leaves, ref_leaves):
        assert got.grad.dtype == torch.float64
        assert_close(got.grad, ref.grad, torch.float64)


# ---- document masks, unions and intersections --------------------------------------------

@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("b", [1, 4, 8])
def test_document_mask_keeps_tokens_in_their_document(causal, b):
    lengths = [5, 0, 9, 3, 6]
    doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    seq = int(doc.numel())
    mask = ts.mask.document(lengths, b, causal=causal)
    allowed = doc.unsqueeze(1) == doc.unsqueeze(0)
    if causal:
        allowed &= torch.arange(seq).unsqueeze(0) <= torch.arange(seq).unsqueeze(1)
    assert mask.shape == (seq, seq) and mask.block_size == b
    assert torch.equal(mask.to_dense(), allowed)
    assert (mask.n_partial > 0) == (b > 1)
    assert torch.equal(ts.mask.document(torch.tensor(lengths, dtype=torch.int32), b, causal).to_dense(), allowed)
    Q, K, V = operands(seq, seq, 6, torch.float64, seed=b)
    assert_close(ts.block_sparse_attention_tiled(Q, K, V, mask), reference(Q, K, V, allowed), torch.float64)


def test_unite_and_intersect_combine_the_allowed_pairs():
    seq, b = 21, 4
    causal, window = ts.mask.causal(seq, b), ts.mask.local_window(seq, b, 1)
    globals_ = ts.mask.global_tokens(seq, b, 0, 1)
    union = ts.mask.unite(causal, globals_)
    inter = ts.mask.intersect(causal, window)
    assert torch.equal(union.to_dense(), causal.to_dense() | globals_.to_dense())
    assert torch.equal(inter.to_dense(), causal.to_dense() & window.to_dense())
    assert inter.n_blocks < causal.n_blocks and union.n_blocks > causal.n_blocks
    Q, K, V = operands(seq, seq, 5, torch.float32, seed=2)
    for m in (union, inter):
        assert_close(ts.block_sparse_attention_tiled(Q, K, V, m), reference(Q, K, V, m.to_dense()), torch.float32)
    assert ts.mask.document([], 4).n_blocks == 0


def test_mask_combination_errors():
    with pytest.raises(AssertionError, match="queries"):
        ts.mask.unite(ts.mask.causal(8, 4), ts.mask.causal(9, 4))
    with pytest.raises(AssertionError, match="block size"):
        ts.mask.intersect(ts.mask.causal(8, 4), ts.mask.causal(8, 2))
    with pytest.raises(TypeError, match="b must be an AttentionMask"):
        ts.mask.unite(ts.mask.causal(8, 4), torch.ones(8, 8))
    with pytest.raises(ValueError):
        ts.mask.document([3, -1], 4)
    with pytest.raises(TypeError, match="integers"):
        ts.mask.document([1.5, 2.0], 4)
    with pytest.raises(ValueError, match="1-D"):
        ts.mask.document(torch.ones(2, 2, dtype=torch.int64), 4)
