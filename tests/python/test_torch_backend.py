"""set_backend("pytorch"): the torch implementations of `_torch_backend` against the C++
kernels (the default backend) on random inputs, outputs and gradients (each backend's own
autograd), and the backend switch itself.

Tolerances:
- float64: both backends accumulate in float64 and differ only in the order of the sums:
  1e-12 relative to the largest magnitude (conftest's TOL; a few 1e-16 expected).
- float32 products: a sum of at most L terms x·y accumulated in float32 is within
  (L + 3) u Σ|x||y| of the exact value (u = 2^-24; the extra terms cover alpha, beta and
  the addend), so two backends differ by at most twice that, elementwise. The magnitudes
  Σ|x||y| of the output and of every gradient are the same bilinear computation on |inputs|
  and |cotangent| in float64 (`product_bounds`).
- bfloat16 products: both backends accumulate in float32 and round once (u_bf16 = 2^-8
  relative), so each is within u_bf16 |exact| + the float32 bound.
- float32 and bfloat16 attention: each backend is within the first-order rounding bounds
  of test_sparse_attention.rounding_bounds (derived there for the C++ kernels; the torch
  backend performs the same sums in float32 and rounds bfloat16 once, at the end), so
  they differ by at most twice those bounds.
"""
import math

import pytest
import torch

import trnsparse as ts
from conftest import assert_close, random_dense, random_dense_operand
from attention_reference import rounding_bounds
from trnsparse import _torch_backend

U32 = 2.0 ** -24  # float32 unit roundoff
UBF16 = 2.0 ** -8  # bfloat16 unit roundoff
REAL = [torch.float64, torch.float32]
REAL_IDS = ["float64", "float32"]


@pytest.fixture(autouse=True)
def auto_backend_around_each_test():
    """Every test starts and ends on the default backend, whatever it switched to (and
    whether it passed or not)."""
    ts.set_backend("auto")
    yield
    ts.set_backend("auto")


def cotangent(shape, seed):
    return random_dense_operand(int(torch.Size(shape).numel()), 1, seed).view(shape)


def run(backend, f, inputs, G):
    """f(*inputs) on `backend` and the gradients of <f, G> with respect to every input (None
    where f does not depend on it), from fresh leaves."""
    ts.set_backend(backend)
    try:
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        out = f(*leaves)
        grads = torch.autograd.grad(out, leaves, G.to(out.dtype), allow_unused=True)
    finally:
        ts.set_backend("auto")
    return [out.detach()] + list(grads)


def product_bounds(f, inputs, G, terms):
    """Elementwise bounds on |pytorch − C++| for the output and gradients of the bilinear
    float32 product f (positive alpha and beta): twice (terms + 3) u times the magnitudes,
    which are f and its gradients on |inputs|, |G| in float64."""
    magnitudes = run("pytorch", f, [t.detach().double().abs() for t in inputs], G.double().abs())
    return [None if m is None else 2 * (terms + 3) * U32 * m for m in magnitudes]


def assert_agree(f, inputs, terms, seed=0):
    """f (a product of `inputs`) and its gradients agree on both backends: tightly in
    float64, within product_bounds in float32."""
    dtype = inputs[0].dtype
    with torch.no_grad():
        shape = f(*inputs).shape
    G = cotangent(shape, seed).to(dtype)
    got, want = run("pytorch", f, inputs, G), run("auto", f, inputs, G)
    bounds = product_bounds(f, inputs, G, terms) if dtype == torch.float32 else [None] * len(got)
    for what, g, w, bound in zip(["output"] + [f"gradient {i}" for i in range(len(inputs))], got, want, bounds):
        assert (g is None) == (w is None), what
        if g is None:
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, what
        if bound is None:
            assert_close(g, w.double(), torch.float64)
        else:
            err = (g.double() - w.double()).abs()
            assert bool((err <= bound).all()), f"{what}: error {float(err.max()):.3e} above its bound"


# ---- products ----------------------------------------------------------------------------

M, N, K, BLOCK = 23, 19, 5, 4  # shapes that are not whole blocks: BSR edge blocks are padded


def sparse(fmt, dtype, seed=1):
    """A random M x N matrix in `fmt` with a row and a column of zeros (an empty row)."""
    D = random_dense(M, N, 0.3, seed, dtype)
    D[5] = 0
    D[:, 7] = 0
    A = ts.BSRMatrix.from_dense(D, block_size=BLOCK) if fmt == "bsr" else ts.from_dense(D)
    return A.to_coo() if fmt == "coo" else A


def rebuild(A, stored):
    """A with `stored` as its values (CSR, COO) or blocks (BSR)."""
    if isinstance(A, ts.BSRMatrix):
        return ts.BSRMatrix(stored, A.block_col_indices, A.block_row_ptrs, A.shape, A.block_size)
    if isinstance(A, ts.COOMatrix):
        return ts.COOMatrix(stored, A.row_indices, A.col_indices, A.shape)
    return ts.CSRMatrix(stored, A.col_indices, A.row_ptrs, A.shape)


def stored_of(A):
    return A.blocks if isinstance(A, ts.BSRMatrix) else A.values


@pytest.mark.parametrize("dtype", REAL, ids=REAL_IDS)
@pytest.mark.parametrize("fmt", ["csr", "coo", "bsr"])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (0.75, 1.5), (2.0, None)])
def test_spmm_and_spmv(dtype, fmt, alpha, beta):
    # beta None: no addend. COO converts to CSR through the core, so neither backend gives
    # its values a gradient; CSR and BSR values get theirs at the stored positions.
    A = sparse(fmt, dtype)
    B, C = random_dense_operand(N, K, 2, dtype), random_dense_operand(M, K, 3, dtype)
    x, y = B[:, 0].clone(), C[:, 0].clone()
    if beta is None:
        assert_agree(lambda s, B: ts.spmm(rebuild(A, s), B, alpha), [stored_of(A), B], terms=N)
        assert_agree(lambda s, x: ts.spmv(rebuild(A, s), x, alpha), [stored_of(A), x], terms=N)
    else:
        assert_agree(lambda s, B, C: ts.spmm(rebuild(A, s), B, alpha, C, beta), [stored_of(A), B, C], terms=N)
        assert_agree(lambda s, x, y: ts.spmv(rebuild(A, s), x, alpha, y, beta), [stored_of(A), x, y], terms=N)


def test_negative_scalars_and_an_ignored_addend():
    A, B = sparse("csr", torch.float64), random_dense_operand(N, K, 4)
    C = random_dense_operand(M, K, 5)
    assert_agree(lambda s, B, C: ts.spmm(rebuild(A, s), B, -1.25, C, -0.5), [A.values, B, C], terms=N)
    nan = torch.full((M, K), math.nan, dtype=torch.float64)
    ts.set_backend("pytorch")
    assert torch.isfinite(ts.spmm(A, B, 2.0, nan, 0.0)).all()  # beta = 0: C is not read


@pytest.mark.parametrize("dtype", REAL, ids=REAL_IDS)
def test_bsr_spmm(dtype):
    A = sparse("bsr", dtype)
    assert_agree(lambda s, B: ts.bsr_spmm(rebuild(A, s), B), [A.blocks, random_dense_operand(N, K, 6, dtype)],
                 terms=N)


def test_bsr_spmm_converts_b_and_differentiates_through_the_conversion():
    A = sparse("bsr", torch.float64)
    B = random_dense_operand(N, K, 7, torch.float32)
    got, want = (run(name, lambda B: ts.bsr_spmm(A, B), [B], cotangent((M, K), 8)) for name in ("pytorch", "auto"))
    assert got[0].dtype == torch.float64 and got[1].dtype == torch.float32
    assert_close(got[0], want[0], torch.float64)
    assert_close(got[1], want[1].double(), torch.float32)  # the gradient rounded to float32 once


def test_padding_of_edge_blocks_is_ignored_and_gets_no_gradient():
    # M = 23 and N = 19 on blocks of 4: the last row of the last block row and the last
    # column of the last block column are padding. Filled with garbage here.
    A = sparse("bsr", torch.float64)
    in_last_row = torch.arange(A.n_blocks) >= A.block_row_ptrs[-2]
    in_last_col = A.block_col_indices == A.block_grid[1] - 1
    blocks = A.blocks.clone()
    blocks[in_last_row, BLOCK - 1, :] = 5.0
    blocks[in_last_col, :, BLOCK - 1] = 5.0
    B = random_dense_operand(N, K, 9)
    got, want = (run(name, lambda s, B: ts.bsr_spmm(rebuild(A, s), B), [blocks, B], cotangent((M, K), 10))
                 for name in ("pytorch", "auto"))
    assert_close(got[0], A.to_dense() @ B, torch.float64)
    for g, w in zip(got, want):
        assert_close(g, w, torch.float64)
    dblocks = got[1]
    assert not dblocks[in_last_row, BLOCK - 1, :].any() and not dblocks[in_last_col, :, BLOCK - 1].any()


BF16_OPS = {  # name: (format, call(A, B, C)) with positive alpha and beta
    "spmm_csr": ("csr", lambda A, B, C: ts.spmm(A, B, 0.5, C, 2.0)),
    "spmm_bsr": ("bsr", lambda A, B, C: ts.spmm(A, B, 0.5, C, 2.0)),
    "spmv": ("csr", lambda A, B, C: ts.spmv(A, B[:, 0], 0.5, C[:, 0], 2.0)),
    "bsr_spmm": ("bsr", lambda A, B, C: ts.bsr_spmm(A, B)),
}


@pytest.mark.parametrize("op", list(BF16_OPS))
def test_bfloat16_products(op):
    fmt, call = BF16_OPS[op]
    A = sparse(fmt, torch.bfloat16)
    B, C = random_dense_operand(N, K, 11, torch.bfloat16), random_dense_operand(M, K, 12, torch.bfloat16)
    out = {}
    for name in ("pytorch", "auto"):
        ts.set_backend(name)
        out[name] = call(A, B, C)
    # The exact result and the magnitudes: the same product in float64 (bf16 values are
    # exact there) on the operands and on their absolute values.
    ts.set_backend("pytorch")
    exact = call(rebuild(A, stored_of(A).double()), B.double(), C.double())
    magnitude = call(rebuild(A, stored_of(A).double().abs()), B.double().abs(), C.double().abs())
    assert out["pytorch"].dtype == torch.bfloat16
    bound = 2 * (UBF16 * exact.abs() + (N + 3) * U32 * magnitude)
    assert bool(((out["pytorch"].double() - out["auto"].double()).abs() <= bound).all())


def test_empty_shapes():
    ts.set_backend("pytorch")
    for rows, cols, k in [(0, 4, 3), (4, 0, 3), (4, 5, 0)]:
        D = torch.zeros(rows, cols, dtype=torch.float64)
        for A in (ts.from_dense(D), ts.BSRMatrix.from_dense(D, block_size=2)):
            C = ts.spmm(A, torch.ones(cols, k, dtype=torch.float64))
            assert torch.equal(C, torch.zeros(rows, k, dtype=torch.float64))
        assert ts.spmv(ts.from_dense(D), torch.ones(cols, dtype=torch.float64)).shape == (rows,)


# ---- screened_spmm -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", REAL, ids=REAL_IDS)
@pytest.mark.parametrize("threshold", [0.0, 1e-3, 1.0, math.inf])
@pytest.mark.parametrize("dense", [False, True], ids=["bsr", "dense"])
def test_screened_spmm(dtype, threshold, dense):
    # Bounds q = √diag = 2^1 .. 2^-5 and 0, decreasing along the diagonal (full, partial and
    # skipped blocks): their products are exact, so q_i q_j = √threshold = 1 happens, and is
    # screened out (strict), as is every pair with a zero bound at threshold 0.
    n = 21
    D = random_dense(n, n, 0.5, seed=13, dtype=dtype)
    diag = 4.0 ** -(torch.arange(n, dtype=torch.float64) // 3 - 1)
    diag[[4, n - 1]] = 0.0
    diag = diag.to(dtype)
    B = random_dense_operand(n, K, 14, dtype)
    if dense:
        assert_agree(lambda D, B: ts.screened_spmm(D, diag, B, threshold), [D, B], terms=n)
    else:
        A = ts.BSRMatrix.from_dense(D, block_size=BLOCK)
        assert_agree(lambda s, B: ts.screened_spmm(rebuild(A, s), diag, B, threshold), [A.blocks, B], terms=n)


def test_screened_spmm_gives_no_gradient_to_the_bounds_and_drops_non_finite_masked_values():
    # Bounds 1 (indices 0..3) and 1e-6 (4..8) at √threshold = 1e-3: only the first block
    # row and column keep entries; the last stored block (block row 2) is screened out.
    n = 9
    A = ts.BSRMatrix.from_dense(random_dense(n, n, 0.6, seed=15), block_size=BLOCK)
    diag = torch.tensor([1.0] * 4 + [1e-12] * 5, dtype=torch.float64, requires_grad=True)
    blocks = A.blocks.clone()
    blocks[-1] = math.nan
    B = random_dense_operand(n, 2, 16)
    results = {}
    for name in ("pytorch", "auto"):
        ts.set_backend(name)
        leaf = blocks.clone().requires_grad_()
        C = ts.screened_spmm(rebuild(A, leaf), diag, B, 1e-6)
        C.sum().backward()
        results[name] = C.detach(), leaf.grad
    assert diag.grad is None
    for got, want in zip(results["pytorch"], results["auto"]):
        assert torch.isfinite(got).all()
        assert_close(got, want, torch.float64)


# ---- attention ---------------------------------------------------------------------------

BATCH, HEADS, KV_HEADS, LQ, LKV, E = 2, 4, 2, 21, 29, 8
SLOPES = torch.tensor([0.5, 0.25, -0.125, 0.0625], dtype=torch.float64)


def attention_mask(kind):
    """(mask, allowed (Bm, Hm, LQ, LKV)) for a mask kind, `allowed` from mask.to_dense()."""
    if kind == "causal_kv_len":
        mask = ts.mask.causal(LQ, 8, kv_len=LKV)
    elif kind == "per_head_predicate":  # partial blocks, one slice per (batch, head), empty rows
        def rule(b, h, q_idx, kv_idx):
            return (kv_idx < q_idx + 8 * b) & ((q_idx - kv_idx) % (h + 2) != 1)
        mask = ts.mask.create_block_mask(rule, BATCH, HEADS, LQ, LKV, BLOCK_SIZE=8)
    else:  # a BSR block pattern with an empty block row
        grid = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [0, 1, 1, 1]], dtype=torch.float64)
        pattern = grid.repeat_interleave(8, 0).repeat_interleave(8, 1)[:LQ, :LKV]
        mask = ts.AttentionMask.from_bsr(ts.BSRMatrix.from_dense(pattern, block_size=8))
    allowed = mask.to_dense()
    return mask, allowed[None, None] if allowed.dim() == 2 else allowed


def attention_inputs(dtype, seed, q_scale=1.0):
    """q, k, v, dO; q times q_scale (300: scores of several hundred, where exp overflows
    float32 and float64 without the row shift)."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(BATCH, HEADS, LQ, E), (BATCH, KV_HEADS, LKV, E), (BATCH, KV_HEADS, LKV, E), (BATCH, HEADS, LQ, E)]
    q, k, v, dO = (torch.randn(s, generator=g, dtype=torch.float64) for s in shapes)
    return [t.to(dtype) for t in (q * q_scale, k, v, dO)]


Q_SCALES = pytest.mark.parametrize("q_scale", [1.0, 300.0], ids=["unit_scores", "large_scores"])


MODS = {"none": (None, None), "alibi+softcap": (SLOPES, 2.0)}


def score_mod(mod):
    slopes, cap = MODS[mod]
    return None if slopes is None else [ts.score.alibi(slopes), ts.score.softcap(cap)]


def attention_on(backend, q, k, v, dO, mask, mod="none"):
    """{"O", "lse", "dQ", "dK", "dV"} of sparse_attention on `backend`."""
    ts.set_backend(backend)
    try:
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        O, lse = ts.sparse_attention(*leaves, mask, enable_gqa=True, score_mod=score_mod(mod), return_lse=True)
        O.backward(dO)
    finally:
        ts.set_backend("auto")
    return dict(zip(["O", "lse", "dQ", "dK", "dV"], [O.detach(), lse] + [t.grad for t in leaves]))


def attention_bounds(q, k, v, dO, allowed, scale, mod="none"):
    """Bounds on |pytorch − C++| in float32 and bfloat16, by name: twice the rounding bounds
    of test_sparse_attention, since each backend is within them of the exact result."""
    slopes, cap = MODS[mod]
    bounds = rounding_bounds(*(t.double() for t in (q, k, v, dO)), allowed, scale, slopes, cap,
                             bf16=q.dtype == torch.bfloat16)
    return {name: 2 * b for name, b in zip(["O", "dQ", "dK", "dV", "lse"], bounds)}


def assert_attention_agree(got, want, bounds):
    """The results of both backends (dicts by name) agree: tightly in float64 (bounds
    None), within `bounds` otherwise."""
    for name, g in got.items():
        w = want[name]
        assert g.dtype == w.dtype and g.shape == w.shape and g.device == w.device, name
        if bounds is None:
            assert_close(g, w, torch.float64)
        else:
            err = (g.double() - w.double()).abs()
            assert bool((err <= bounds[name]).all()), f"{name}: error {float(err.max()):.3e} above its bound"


@Q_SCALES
@pytest.mark.parametrize("mod", list(MODS))
@pytest.mark.parametrize("kind", ["causal_kv_len", "per_head_predicate", "bsr_empty_block_row"])
def test_attention_float64(kind, mod, q_scale):
    mask, _ = attention_mask(kind)
    q, k, v, dO = attention_inputs(torch.float64, seed=17, q_scale=q_scale)
    got = attention_on("pytorch", q, k, v, dO, mask, mod)
    assert got["O"].dtype == got["lse"].dtype == torch.float64
    assert_attention_agree(got, attention_on("auto", q, k, v, dO, mask, mod), None)


@Q_SCALES
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("mod", list(MODS))
@pytest.mark.parametrize("kind", ["causal_kv_len", "per_head_predicate"])
def test_attention_within_rounding_bounds(kind, mod, dtype, q_scale):
    mask, allowed = attention_mask(kind)
    q, k, v, dO = attention_inputs(dtype, seed=18, q_scale=q_scale)
    got = attention_on("pytorch", q, k, v, dO, mask, mod)
    assert got["O"].dtype == got["dQ"].dtype == dtype and got["lse"].dtype == torch.float32
    assert_attention_agree(got, attention_on("auto", q, k, v, dO, mask, mod),
                           attention_bounds(q, k, v, dO, allowed, 1 / math.sqrt(E), mod))


def test_attention_function_directly_with_broadcast_mask_and_empty_rows():
    # `allowed` (1, 1, LQ, LKV) broadcasts over batch and heads; key and value repeated
    # for the query heads by the caller.
    mask, allowed = attention_mask("bsr_empty_block_row")
    q, k, v, dO = attention_inputs(torch.float64, seed=19)
    k4, v4 = (t.repeat_interleave(HEADS // KV_HEADS, dim=1) for t in (k, v))
    leaves = [t.clone().requires_grad_() for t in (q, k4, v4)]
    O, lse = _torch_backend.attention(*leaves, allowed, 1 / math.sqrt(E), alibi_slopes=SLOPES, softcap=2.0,
                                      return_lse=True)
    O.backward(dO)
    want = attention_on("auto", q, k, v, dO, mask, "alibi+softcap")
    assert_close(O, want["O"], torch.float64)
    assert_close(lse, want["lse"], torch.float64)
    assert lse.dtype == torch.float64 and not lse.requires_grad
    empty = ~allowed.expand(BATCH, HEADS, LQ, LKV).any(-1)
    assert empty.any()
    for t in (O, lse, leaves[0].grad):
        assert torch.isfinite(t).all() and torch.equal(t[empty], torch.zeros_like(t[empty]))
    assert_close(leaves[0].grad, want["dQ"], torch.float64)


@pytest.mark.parametrize("dtype", REAL, ids=REAL_IDS)
def test_block_sparse_attention_tiled(dtype):
    mask, allowed = attention_mask("bsr_empty_block_row")
    q, k, v, dO = (t[:1, :1] for t in attention_inputs(dtype, seed=20))
    results = {}
    for name in ("pytorch", "auto"):
        ts.set_backend(name)
        leaves = [t[0, 0].clone().requires_grad_() for t in (q, k, v)]
        O = ts.block_sparse_attention_tiled(*leaves, mask, scale=0.4)
        O.backward(dO[0, 0])
        results[name] = dict(zip(["O", "dQ", "dK", "dV"], [O.detach()] + [t.grad for t in leaves]))
        ts.set_backend("auto")
    bounds = None if dtype == torch.float64 else attention_bounds(q, k, v, dO, allowed, 0.4)
    assert_attention_agree(results["pytorch"], results["auto"], bounds)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_attention_on_cuda_under_the_pytorch_backend():
    mask, allowed = attention_mask("per_head_predicate")
    q, k, v, dO = attention_inputs(torch.float32, seed=21)
    want = attention_on("auto", q, k, v, dO, mask, "alibi+softcap")
    got = attention_on("pytorch", *(t.cuda() for t in (q, k, v, dO)), mask, "alibi+softcap")
    assert got["O"].device.type == "cuda"
    assert_attention_agree({name: t.cpu() for name, t in got.items()}, want,
                           attention_bounds(q, k, v, dO, allowed, 1 / math.sqrt(E), "alibi+softcap"))


# ---- the switch ----------------------------------------------------------------------------

def test_set_backend_routes_every_call_and_auto_restores_the_cpp_kernels():
    A = sparse("csr", torch.float64)
    B = random_dense_operand(N, K, 22).requires_grad_()
    mask, _ = attention_mask("causal_kv_len")
    q, k, v, _ = (t.requires_grad_() for t in attention_inputs(torch.float64, seed=23))
    before = ts.spmm(A, B)
    assert type(before.grad_fn).__name__ == "_SparseDenseProductBackward"
    assert type(ts.sparse_attention(q, k, v, mask, enable_gqa=True).grad_fn).__name__ == "_AttentionBackward"
    ts.set_backend("pytorch")
    assert ts.get_backend() == "pytorch"
    assert type(ts.spmm(A, B).grad_fn).__name__ != "_SparseDenseProductBackward"
    assert type(ts.sparse_attention(q, k, v, mask, enable_gqa=True).grad_fn).__name__ != "_AttentionBackward"
    ts.set_backend("auto")
    after = ts.spmm(A, B)
    assert type(after.grad_fn).__name__ == "_SparseDenseProductBackward" and torch.equal(after, before)


@pytest.mark.parametrize("start", ["auto", "pytorch"])
def test_bad_names_and_nki_raise_and_keep_the_backend(start):
    ts.set_backend(start)
    for name in ("gpu", "torch", "PyTorch", ""):
        with pytest.raises(ValueError, match="unknown backend"):
            ts.set_backend(name)
        assert ts.get_backend() == start
    with pytest.raises(RuntimeError, match="'nki' is not available.*HAS_NKI"):
        ts.set_backend("nki")
    assert ts.get_backend() == start


@pytest.mark.parametrize("backend", ["pytorch", "auto"])
def test_errors_are_the_same_on_both_backends(backend):
    ts.set_backend(backend)
    A = sparse("csr", torch.float64)
    Ab = sparse("bsr", torch.float64)
    B = torch.ones(N, K, dtype=torch.float64)
    with pytest.raises(ts.ShapeError, match="B has 18 rows"):
        ts.spmm(A, B[:-1])
    with pytest.raises(ts.ShapeError, match="C has shape"):
        ts.spmm(A, B, 1.0, torch.ones(M, K + 1, dtype=torch.float64), 1.0)
    with pytest.raises(ts.ShapeError, match="x has 18 entries"):
        ts.spmv(A, B[:-1, 0])
    with pytest.raises(ts.ShapeError, match="B has 18 rows"):
        ts.bsr_spmm(Ab, B[:-1])
    with pytest.raises(TypeError, match="B has dtype torch.float32"):
        ts.spmm(A, B.float())
    with pytest.raises(IndexError):  # a column out of range: the core's validation
        ts.spmm(ts.CSRMatrix(A.values, A.col_indices + N, A.row_ptrs, A.shape), B)
    n = 8
    D, d, Bs = torch.eye(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64), B[:n]
    with pytest.raises(ValueError, match="threshold"):
        ts.screened_spmm(D, d, Bs, -1.0)
    with pytest.raises(ValueError, match="threshold"):
        ts.screened_spmm(D, d, Bs, math.nan)
    with pytest.raises(ValueError, match="diag_integrals has a non-finite entry"):
        ts.screened_spmm(D, torch.tensor([math.inf] + [1.0] * (n - 1), dtype=torch.float64), Bs, 0.1)
    with pytest.raises(ts.ShapeError, match="diag_integrals"):
        ts.screened_spmm(D, d[:-1], Bs, 0.1)
