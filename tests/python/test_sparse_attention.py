"""trnsparse.sparse_attention, trnsparse.score, the batched masks (kv_len, stack,
create_block_mask) and trnsparse.nn.MultiheadSparseAttention against a dense float64
attention written here with torch (matmul + masked softmax):

    s = q kᵀ · scale;  s += slope[h] · (kv_idx - q_idx)  (ALiBi);  s = c · tanh(s / c)  (soft-cap)
    O = softmax(s over the allowed keys) v;  a row with no allowed key gives O = 0, zero gradients.

The allowed pairs of every mask are derived here from the mask's rule (not from the
mask), and checked against `mask.to_dense()` too.

Tolerances:
- float64 runs the core's portable fp64 reference kernel: 1e-10 relative to the largest
  reference magnitude (the expected error is a few 1e-16).
- float32: an elementwise first-order rounding-error bound, `rounding_bounds` below,
  built from the fp32 unit roundoff u = 2^-24 ≈ 6e-8 times the lengths of the sums each
  quantity goes through (E for a score, Lkv for P·V and dQ, group·Lq for dK and dV) and
  times the magnitudes of the summed terms (|P|·|V| and the like, computed in float64).
- bfloat16: the same bound plus the bf16 roundings the kernels perform (u = 2^-8 each):
  P rounded to bf16 before P·V (relative u on every term of P·V) and O rounded once at
  the end (relative u); compared with the float64 reference of the bf16-rounded inputs.
"""
import io
import math
import re

import pytest
import torch

import trnsparse as ts
from attention_reference import (
    U32,
    UBF16,
    ALL_DTYPES,
    ALL_IDS,
    SAFETY,
    modified_scores,
    reference,
    rounding_bounds,
    assert_within,
    assert_f64_close,
    pairs,
    floor_div,
    predicate,
    predicate_allowed,
    make_mask,
    KINDS,
    check_mask,
    LAYOUTS,
    lay,
    canon,
    MODS,
    SLOPES,
    CAP,
    score_mod,
    random_case,
    run_case,
    reference_of,
    check_empty_rows,
    float64_cases,
)


# ---- float64: the full product -------------------------------------------------------------

@pytest.mark.parametrize("kind,layout,gqa,mod", float64_cases())
def test_float64_outputs_and_gradients_match_the_dense_reference(kind, layout, gqa, mod):
    r = run_case(kind, layout, gqa, mod, torch.float64, seed=KINDS.index(kind))
    O, lse, dq, dk, dv = reference_of(r)
    assert_f64_close(r["O"], O, "O")
    assert_f64_close(r["lse"], lse, "lse")
    for name, ref in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert_f64_close(r[name], ref, name)
    empty = check_empty_rows(r)
    assert bool(empty.any()) == (kind == "local_kv_empty_rows")
    for name in ("O", "dq", "dk", "dv"):
        assert torch.isfinite(r[name]).all()


# ---- float32 and bfloat16 against rounding bounds ------------------------------------------

@pytest.mark.parametrize("mod", MODS)
@pytest.mark.parametrize("kind", KINDS)
def test_float32_within_rounding_bounds(kind, mod):
    r = run_case(kind, "BLHE_view", True, mod, torch.float32, seed=100 + KINDS.index(kind))
    O, lse, dq, dk, dv = reference_of(r)
    bounds = rounding_bounds(*(r[n].double() for n in ("q", "k", "v", "dO")), r["allowed"], r["scale"], r["slopes"],
                             r["cap"])
    for name, ref, bound in zip(("O", "dq", "dk", "dv"), (O, dq, dk, dv), bounds):
        assert_within(r[name], ref, bound, name)
    assert float((r["lse"].double() - lse).abs().max()) <= bounds[4]
    check_empty_rows(r)


@pytest.mark.parametrize("mod", ["none", "alibi+softcap"])
@pytest.mark.parametrize("kind", KINDS)
def test_bfloat16_output_within_rounding_bounds(kind, mod):
    # Reference: float64 attention of the bf16 inputs (exactly representable in float64).
    r = run_case(kind, "BHLE", True, mod, torch.bfloat16, seed=200 + KINDS.index(kind))
    O = reference_of(r)[0]
    bound = rounding_bounds(*(r[n].double() for n in ("q", "k", "v", "dO")), r["allowed"], r["scale"], r["slopes"],
                            r["cap"], bf16=True)[0]
    assert_within(r["O"], O, bound, "O")
    # the bound is informative: within a few bf16 ulps of the output scale
    assert float(bound.max()) < 16 * UBF16 * float(r["v"].double().abs().max())
    check_empty_rows(r)


@pytest.mark.parametrize("kind", ["causal", "stack_heads", "local_kv_empty_rows"])
def test_bfloat16_gradients_within_rounding_bounds(kind):
    r = run_case(kind, "BLHE_view", True, "alibi+softcap", torch.bfloat16, seed=300)
    _, _, dq, dk, dv = reference_of(r)
    bounds = rounding_bounds(*(r[n].double() for n in ("q", "k", "v", "dO")), r["allowed"], r["scale"], r["slopes"],
                             r["cap"], bf16=True)
    for name, ref, bound in zip(("dq", "dk", "dv"), (dq, dk, dv), bounds[1:]):
        assert_within(r[name], ref, bound, name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("kind", ["stack_batch_heads", "local_kv_empty_rows", "create_block_mask"])
def test_portable_reference_kernels_within_the_same_bounds(kind, dtype):
    # set_backend("reference"): the core's scalar kernels (the SIMD ones are tested against them)
    before = ts.get_backend()
    ts.set_backend("reference")
    try:
        r = run_case(kind, "BLHE_view", True, "alibi+softcap", dtype, seed=400)
    finally:
        ts.set_backend(before)
    O, _, dq, dk, dv = reference_of(r)
    bounds = rounding_bounds(*(r[n].double() for n in ("q", "k", "v", "dO")), r["allowed"], r["scale"], r["slopes"],
                             r["cap"], bf16=dtype == torch.bfloat16)
    for name, ref, bound in zip(("O", "dq", "dk", "dv"), (O, dq, dk, dv), bounds):
        assert_within(r[name], ref, bound, name)
    check_empty_rows(r)


def test_explicit_scale_and_a_bsr_block_pattern():
    r = run_case("stack_heads", "BHLE", True, "alibi+softcap", torch.float64, seed=7, scale=0.37)
    O, _, dq, dk, dv = reference_of(r)
    for name, ref in (("O", O), ("dq", dq), ("dk", dk), ("dv", dv)):
        assert_f64_close(r[name], ref, name)
    # a BSRMatrix mask: its block pattern (values ignored), one block row without blocks
    grid = torch.tensor([[1, 0, 1], [0, 0, 0], [1, 1, 0]], dtype=torch.bool)
    dense = grid.repeat_interleave(8, 0).repeat_interleave(8, 1)[:20, :21]
    bsr = ts.BSRMatrix.from_dense(dense.double() * 3.0, block_size=8)
    q, k, v, _ = random_case(2, 4, 2, 20, 21, 6, seed=8)
    got = ts.sparse_attention(q, k, v, bsr, enable_gqa=True)
    assert_f64_close(got, reference(q, k, v, dense, 1 / math.sqrt(6))[0], "O")
    assert torch.equal(got[:, :, 8:16], torch.zeros(2, 4, 8, 6))


# ---- gradcheck -----------------------------------------------------------------------------

GRADCHECK = [
    # (name, B, H, Hkv, Lq, Lkv, mask builder (B, H), score mod)
    ("gqa_alibi_softcap_per_head", 1, 4, 2, 10, 13,
     lambda B, H: ts.mask.stack([ts.mask.causal(10, 4, kv_len=13), ts.mask.local_window(10, 4, 0, kv_len=13),
                                 ts.mask.causal(10, 4, kv_len=13),
                                 ts.mask.intersect(ts.mask.causal(10, 4, kv_len=13),
                                                   ts.mask.local_window(10, 4, 1, kv_len=13))]),
     "alibi+softcap"),
    ("per_batch_head_empty_rows", 2, 2, 1, 12, 7,
     lambda B, H: ts.mask.stack([[ts.mask.local_window(12, 4, 0, kv_len=7), ts.mask.causal(12, 4, kv_len=7)],
                                 [ts.mask.causal(12, 4, kv_len=7), ts.mask.local_window(12, 4, 1, kv_len=7)]]),
     "softcap"),
    ("document_alibi", 1, 2, 2, 11, 11, lambda B, H: ts.mask.document([4, 0, 7], 4, causal=True), "alibi"),
]


@pytest.mark.parametrize("name,B,H,Hkv,Lq,Lkv,build,mod", GRADCHECK, ids=[c[0] for c in GRADCHECK])
def test_gradcheck_float64(name, B, H, Hkv, Lq, Lkv, build, mod):
    mask = build(B, H)
    q, k, v, _ = random_case(B, H, Hkv, Lq, Lkv, 3, seed=len(name))
    q = q.transpose(1, 2).contiguous().transpose(1, 2)  # the (B, L, H, E) view
    leaves = [t.requires_grad_() for t in (q, k, v)]
    mod_arg, _, _ = score_mod(mod, H)
    f = lambda a, b, c: ts.sparse_attention(a, b, c, mask, enable_gqa=True, score_mod=mod_arg)  # noqa: E731
    assert torch.autograd.gradcheck(f, leaves, nondet_tol=0)
    assert torch.autograd.gradcheck(lambda a, b, c: ts.sparse_attention(a, b, c, mask, scale=0.7, enable_gqa=True,
                                                                        score_mod=mod_arg), leaves, nondet_tol=0)


# ---- return_lse ----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["BHLE", "HLE", "LE"])
@pytest.mark.parametrize("kind", ["stack_heads", "local_kv_empty_rows", "create_block_mask"])
def test_return_lse_is_the_logsumexp_of_the_allowed_modified_scores(kind, layout):
    B, H, _ = LAYOUTS[layout]
    mask, allowed, Lq, Lkv, E = make_mask(kind, B, H)
    q, k, v, _ = random_case(B, H, H, Lq, Lkv, E, seed=11)
    mod_arg, slopes, cap = score_mod("alibi+softcap", H)
    s = modified_scores(q, k, 1 / math.sqrt(E), slopes, cap).masked_fill(~allowed, float("-inf"))
    expected = torch.logsumexp(s, -1)
    empty = ~allowed.expand(s.shape).any(-1)
    assert torch.isinf(expected[empty]).all()
    expected = expected.masked_fill(empty, 0.0)
    for dtype in (torch.float64, torch.float32):
        xs = [lay(t.to(dtype), layout).requires_grad_() for t in (q, k, v)]
        O, lse = ts.sparse_attention(*xs, mask, score_mod=mod_arg, return_lse=True)
        assert lse.shape == xs[0].shape[:-1] and not lse.requires_grad
        lse = canon(lse, layout)
        if dtype == torch.float64:
            assert_f64_close(lse, expected, "lse")
        else:
            bound = rounding_bounds(q, k, v, torch.zeros_like(q), allowed, 1 / math.sqrt(E), slopes, cap)[4]
            assert float((lse.double() - expected).abs().max()) <= bound
        assert torch.equal(lse[empty], torch.zeros_like(lse[empty]))
        O.sum().backward()  # return_lse does not disturb the gradients
        assert all(torch.isfinite(x.grad).all() for x in xs)
        assert torch.equal(ts.sparse_attention(*[x.detach() for x in xs], mask, score_mod=mod_arg), O.detach())


# ---- determinism ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ALL_IDS)
def test_bitwise_identical_for_any_thread_count(dtype):
    B, H, Hkv, L, E, b = 2, 4, 2, 256, 16, 32
    mask = ts.mask.stack([ts.mask.causal(L, b), ts.mask.local_window(L, b, 1),
                          ts.mask.document([100, 0, 156], b, causal=True), ts.mask.dilated(L, b, 2)])
    q, k, v, dO = (t.to(dtype) for t in random_case(B, H, Hkv, L, L, E, seed=5))
    q = q.transpose(1, 2).contiguous().transpose(1, 2)
    mod = [ts.score.alibi(ts.score.alibi_slopes(H)), ts.score.softcap(5.0)]
    results = []
    before = ts.get_num_threads()
    try:
        for n in (1, 2, 3):
            ts.set_num_threads(n)
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            O, lse = ts.sparse_attention(*leaves, mask, enable_gqa=True, score_mod=mod, return_lse=True)
            O.backward(dO)
            results.append([O.detach(), lse] + [t.grad for t in leaves])
    finally:
        ts.set_num_threads(before)

    def bits(t):
        return t.view(torch.int16) if t.dtype == torch.bfloat16 else t

    for other in results[1:]:
        for a, c in zip(results[0], other):
            assert torch.equal(bits(a), bits(c))


# ---- fully masked rows ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ALL_IDS)
@pytest.mark.parametrize("how", ["local_window_kv_len", "create_block_mask", "bsr_empty_block_row"])
def test_fully_masked_rows_give_zeros_and_zero_gradients(how, dtype):
    B, H, Hkv, E = 2, 4, 2, 8
    if how == "local_window_kv_len":  # Lq > Lkv bottom-right: queries 0 .. 22 see no key
        Lq, Lkv = 40, 17
        mask = ts.mask.local_window(Lq, 8, 0, kv_len=Lkv)
        i, j = pairs(Lq, Lkv)
        allowed = ((j // 8 - floor_div(i - 23, 8)).abs() == 0)[None, None]
    elif how == "create_block_mask":  # strictly causal: query 0 sees nothing
        Lq = Lkv = 20

        def strict(b, h, q_idx, kv_idx):  # head h also ignores keys before h - 1: more empty rows
            return (kv_idx < q_idx) & (kv_idx >= h - 1 + 0 * b)

        mask = ts.mask.create_block_mask(strict, None, H, Lq, Lkv, BLOCK_SIZE=8)
        i, j = pairs(Lq, Lkv)
        allowed = torch.stack([(j < i) & (j >= h - 1) for h in range(H)])[None]
    else:
        Lq, Lkv = 20, 21
        grid = torch.tensor([[1, 0, 1], [0, 0, 0], [0, 1, 1]], dtype=torch.bool)
        allowed = grid.repeat_interleave(8, 0).repeat_interleave(8, 1)[:Lq, :Lkv][None, None]
        mask = ts.AttentionMask.from_bsr(ts.BSRMatrix.from_dense(allowed[0, 0].float(), block_size=8))
    check_mask(mask, allowed)
    q, k, v, dO = (t.to(dtype) for t in random_case(B, H, Hkv, Lq, Lkv, E, seed=13))
    leaves = [t.requires_grad_() for t in (q, k, v)]
    mod = [ts.score.alibi(SLOPES), ts.score.softcap(CAP)]
    O, lse = ts.sparse_attention(*leaves, mask, enable_gqa=True, score_mod=mod, return_lse=True)
    O.backward(dO)
    empty = ~allowed.expand(B, H, Lq, Lkv).any(-1)
    assert empty.any() and (~empty).any()
    for t in (O, lse, leaves[0].grad):
        assert torch.isfinite(t).all() and torch.equal(t[empty], torch.zeros_like(t[empty]))
    for t in leaves[1:]:
        assert torch.isfinite(t.grad).all()
    # keys no query may see get zero gradients
    unseen = ~allowed.expand(B, H, Lq, Lkv).any(-2).view(B, Hkv, H // Hkv, Lkv).any(2)  # (B, Hkv, Lkv) seen
    if how == "create_block_mask":  # the last key is after every query
        assert unseen.any()
    for t in leaves[1:]:
        assert torch.equal(t.grad[unseen], torch.zeros_like(t.grad[unseen]))
    ref = reference(*(t.detach().double() for t in (q, k, v)), allowed, 1 / math.sqrt(E), SLOPES, CAP)[0]
    tol = {torch.float64: 1e-10, torch.float32: 1e-5, torch.bfloat16: 4 * UBF16 * float(v.double().abs().max())}
    assert float((O.detach().double() - ref).abs().max()) <= tol[dtype]


# ---- errors --------------------------------------------------------------------------------

def test_shape_error_is_an_assertion_error_and_a_value_error():
    assert issubclass(ts.ShapeError, AssertionError) and issubclass(ts.ShapeError, ValueError)


def _ok():
    q, k, v, _ = random_case(2, 4, 4, 16, 16, 8, seed=1)
    return q.float(), k.float(), v.float(), ts.mask.causal(16, 8)


@pytest.mark.parametrize("change,error,match", [
    (lambda q, k, v, m: (q, k[:1], v[:1], m), ts.ShapeError, "key has batch 1"),
    (lambda q, k, v, m: (q, k[:, :2], v[:, :2], m), ts.ShapeError, "key has 2 heads.*enable_gqa"),
    (lambda q, k, v, m: (q, k[..., :4], v[..., :4], m), ts.ShapeError, "key has head dim 4"),
    (lambda q, k, v, m: (q, k, v[:, :, :15], m), ts.ShapeError, "value has shape"),
    (lambda q, k, v, m: (q[:, :, :15], k, v, m), ts.ShapeError, "block_mask is 16 x 16 but query has 15"),
    (lambda q, k, v, m: (q, k[:, :, :15], v[:, :, :15], m), ts.ShapeError, "block_mask is 16 x 16.*key 15"),
    (lambda q, k, v, m: (q, k, v, ts.mask.causal(16, 8, kv_len=17)), ts.ShapeError, "block_mask is 16 x 17"),
    (lambda q, k, v, m: (q, k, v, ts.mask.stack([[m] * 4] * 3)), ts.ShapeError, "block_mask has batch 3"),
    (lambda q, k, v, m: (q, k, v, ts.mask.stack([m] * 3)), ts.ShapeError, "block_mask has 3 heads"),
    (lambda q, k, v, m: (q, k, v, torch.ones(16, 16, dtype=torch.bool)), TypeError, "block_mask"),
    (lambda q, k, v, m: (q.int(), k.int(), v.int(), m), TypeError, "query has dtype torch.int32"),
    (lambda q, k, v, m: (q, k.long(), v, m), TypeError, "key has dtype torch.int64"),
    (lambda q, k, v, m: (q.half(), k.half(), v.half(), m), TypeError, "float32, bfloat16 or float64"),
    (lambda q, k, v, m: (q, k.double(), v, m), TypeError, "key has dtype torch.float64 but query"),
    (lambda q, k, v, m: (q, k, v.bfloat16(), m), TypeError, "value has dtype torch.bfloat16"),
    (lambda q, k, v, m: (q[None], k[None], v[None], m), ts.ShapeError, "query must be"),
    (lambda q, k, v, m: (q, k[0], v[0], m), ts.ShapeError, "key is 3-D but query is 4-D"),
    (lambda q, k, v, m: (q[0, 0, 0], k[0, 0, 0], v[0, 0, 0], m), ts.ShapeError, "query must be"),
])
def test_argument_errors_name_the_argument(change, error, match):
    q, k, v, m = change(*_ok())
    with pytest.raises(error, match=match):
        ts.sparse_attention(q, k, v, m)



def test_errors_hint_at_a_sequence_and_heads_swap():
    """A (B, L, H, E) tensor passed where (B, H, L, E) is expected has its length one
    dimension early; the shape error says so and names the transpose that fixes it."""
    B, H, L, E = 2, 4, 64, 8
    m = ts.mask.causal(L, 16)
    x = torch.randn(B, L, H, E)
    fix = "((B, H, L, E) is expected)"
    with pytest.raises(ts.ShapeError, match=re.escape(
            "block_mask is 64 x 64 but query has 4 rows and key 4; query, key and value look like (B, L, H, E): "
            "pass query.transpose(1, 2), key.transpose(1, 2) and value.transpose(1, 2) " + fix)):
        ts.sparse_attention(x, x, x, m)
    ok = x.transpose(1, 2)
    assert torch.equal(ts.sparse_attention(ok, ok, ok, m), ts.sparse_attention(ok.contiguous(), ok, ok, m))
    # Only the swapped tensors are named; unequal "heads" (Lq != H) trip the heads check first.
    with pytest.raises(ts.ShapeError, match=re.escape(
            "key has 4 heads but query has 64; pass enable_gqa=True for grouped-query attention; query looks like "
            "(B, L, H, E): pass query.transpose(1, 2) " + fix)):
        ts.sparse_attention(x, ok, ok, m)
    with pytest.raises(ts.ShapeError, match=re.escape(
            "key and value look like (B, L, H, E): pass key.transpose(1, 2) and value.transpose(1, 2) " + fix)):
        ts.sparse_attention(ok, x, x, m, enable_gqa=True)
    # Decoding: one query against L keys.
    with pytest.raises(ts.ShapeError, match=re.escape("key has 64 heads but query has 1; pass enable_gqa=True "
                                                      "for grouped-query attention; query, key and value look")):
        ts.sparse_attention(x[:, -1:], x, x, ts.mask.causal(1, 16, kv_len=L))
    # (L, H, E) for (H, L, E).
    with pytest.raises(ts.ShapeError, match=re.escape(
            "query, key and value look like (L, H, E): pass query.transpose(0, 1), key.transpose(0, 1) and "
            "value.transpose(0, 1) ((H, L, E) is expected)")):
        ts.sparse_attention(x[0], x[0], x[0], m)
    # No hint when the length matches neither dimension, or for 2-D operands.
    for q in (torch.randn(B, H, 3, E), torch.randn(3, E)):
        with pytest.raises(ts.ShapeError) as info:
            ts.sparse_attention(q, q, q, m)
        assert str(info.value).endswith("but query has 3 rows and key 3")

def test_grouped_heads_errors():
    q, k, v, m = _ok()
    with pytest.raises(ts.ShapeError, match="4 heads are not a multiple of key's 3"):
        ts.sparse_attention(q, k[:, :3], v[:, :3], m, enable_gqa=True)
    with pytest.raises(ts.ShapeError, match="key has 2 heads"):
        ts.sparse_attention(q, k[:, :2], v[:, :2], m)  # without enable_gqa
    with pytest.raises(ValueError, match="key has 4 heads but query has 1"):  # more key heads than query heads
        ts.sparse_attention(q[:, :1], k, v, m)
    with pytest.raises(ValueError, match="not a multiple"):
        ts.sparse_attention(q[:, :1], k[:, :2], v[:, :2], m, enable_gqa=True)


@pytest.mark.parametrize("scale,error", [(0.0, ValueError), (-0.5, ValueError), (float("nan"), ValueError),
                                         (float("inf"), ValueError), (-float("inf"), ValueError),
                                         ("0.5", TypeError), (True, TypeError)])
def test_bad_scale(scale, error):
    q, k, v, m = _ok()
    with pytest.raises(error, match="scale"):
        ts.sparse_attention(q, k, v, m, scale=scale)


def test_bad_score_mods():
    q, k, v, m = _ok()
    with pytest.raises(TypeError, match="score_mod"):
        ts.sparse_attention(q, k, v, m, score_mod=lambda s, b, h, i, j: s)
    with pytest.raises(TypeError, match="score_mod"):
        ts.sparse_attention(q, k, v, m, score_mod=[ts.score.softcap(2.0), "alibi"])
    with pytest.raises(ValueError, match="slopes"):
        ts.sparse_attention(q, k, v, m, score_mod=ts.score.alibi([0.5, 0.25, 0.125]))  # 3 slopes, 4 heads
    with pytest.raises(ValueError, match="ALiBi first"):
        ts.sparse_attention(q, k, v, m, score_mod=[ts.score.softcap(2.0), ts.score.alibi(SLOPES)])
    with pytest.raises(ValueError, match="twice"):
        ts.sparse_attention(q, k, v, m, score_mod=[ts.score.softcap(2.0), ts.score.softcap(3.0)])
    for bad in ([], [[0.1, 0.2]], [0.1, float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match="slopes"):
            ts.score.alibi(bad)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cap"):
            ts.score.softcap(bad)
    for bad in ("2", True, None):
        with pytest.raises(TypeError, match="cap"):
            ts.score.softcap(bad)
    with pytest.raises(ValueError, match="num_heads"):
        ts.score.alibi_slopes(0)


def test_head_dim_limit():
    q = torch.zeros(1, 1, 8, 513)
    with pytest.raises(ValueError):
        ts.sparse_attention(q, q, q, ts.mask.causal(8, 8))


def test_alibi_slopes_follow_the_paper():
    assert torch.equal(ts.score.alibi_slopes(8), torch.tensor([2.0 ** -(h + 1) for h in range(8)]))
    s12 = ts.score.alibi_slopes(12)  # 8 powers, then every other slope of 16 heads
    assert torch.equal(s12[:8], ts.score.alibi_slopes(8))
    assert torch.equal(s12[8:], ts.score.alibi_slopes(16)[0::2][:4])
    assert ts.score.alibi(s12).alibi_slopes == tuple(float(x) for x in s12)


# ---- create_block_mask --------------------------------------------------------------------

@pytest.mark.parametrize("B,H,Lq,Lkv,b", [(2, 4, 45, 45, 16), (None, 4, 30, 45, 8), (2, None, 45, 37, 8),
                                          (1, 1, 7, 9, 16)])
def test_create_block_mask_evaluates_the_predicate(B, H, Lq, Lkv, b):
    mask = ts.mask.create_block_mask(predicate, B, H, Lq, Lkv, BLOCK_SIZE=b)
    Bm, Hm = B or 1, H or 1
    assert (mask.batch, mask.heads, mask.shape, mask.block_size) == (Bm, Hm, (Lq, Lkv), b)
    allowed = predicate_allowed(Bm, Hm, Lq, Lkv)
    check_mask(mask, allowed)
    blocks = -(-Lq // b) * -(-Lkv // b)
    grid = torch.nn.functional.pad(allowed, (0, -Lkv % b, 0, -Lq % b))
    grid = grid.view(Bm, Hm, -(-Lq // b), b, -(-Lkv // b), b).any(-1).any(-2)  # blocks with an allowed pair
    assert mask.n_blocks == int(grid.sum()) <= Bm * Hm * blocks  # empty blocks are not stored


def test_create_block_mask_rejects_bad_predicates():
    with pytest.raises((ValueError, TypeError), match="mask_mod"):  # a shape that broadcasts to no band
        ts.mask.create_block_mask(lambda b, h, q, kv: torch.ones(5, 7, dtype=torch.bool), None, None, 16, 16, 8)
    with pytest.raises((ValueError, TypeError), match="mask_mod"):  # float, not bool
        ts.mask.create_block_mask(lambda b, h, q, kv: (kv <= q).float(), None, None, 16, 16, 8)


# ---- MultiheadSparseAttention --------------------------------------------------------------

def module_reference(mod, x, kv, allowed):
    """The module's computation written out in float64 with its own weights."""
    W = {n: (p.detach().double()) for n, p in mod.named_parameters()}
    B, Lq, D = x.shape
    Lkv = kv.shape[1]
    H, G, E = mod.num_heads, mod.num_kv_heads, mod.head_dim

    def proj(name, t, heads):
        y = t.double() @ W[f"{name}.weight"].T + W.get(f"{name}.bias", 0.0)
        return y.view(B, -1, heads, E).transpose(1, 2)

    q, k, v = proj("q_proj", x, H), proj("k_proj", kv, G), proj("v_proj", kv, G)
    slopes, cap = None, None
    if mod.score_mod is not None:
        for m in (mod.score_mod if isinstance(mod.score_mod, list) else [mod.score_mod]):
            slopes = torch.tensor(m.alibi_slopes, dtype=torch.float64) if m.alibi_slopes else slopes
            cap = m.softcap or cap
    scale = mod.scale if mod.scale is not None else 1 / math.sqrt(E)
    o, _ = reference(q, k, v, allowed, scale, slopes, cap)
    return o.transpose(1, 2).reshape(B, Lq, D) @ W["out_proj.weight"].T + W.get("out_proj.bias", 0.0)


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_module_matches_a_hand_written_float64_computation(num_kv_heads):
    torch.manual_seed(0)
    mod = ts.nn.MultiheadSparseAttention(32, 4, num_kv_heads, dtype=torch.float64,
                                         block_mask=lambda lq, lkv: ts.mask.causal(lq, 8, kv_len=lkv),
                                         score_mod=[ts.score.alibi(ts.score.alibi_slopes(4)), ts.score.softcap(3.0)])
    x = torch.randn(2, 21, 32, dtype=torch.float64)
    mem = torch.randn(2, 30, 32, dtype=torch.float64)
    i, j = pairs(21, 21)
    assert_f64_close(mod(x).detach(), module_reference(mod, x, x, (j <= i)[None, None]), "self-attention")
    i, j = pairs(21, 30)
    assert_f64_close(mod(x, mem).detach(), module_reference(mod, x, mem, (j <= i + 9)[None, None]), "cross")
    # gradients reach every parameter and the input
    x.requires_grad_()
    mod(x).sum().backward()
    assert x.grad is not None and all(p.grad is not None and torch.isfinite(p.grad).all() for p in mod.parameters())
    assert mod.k_proj.out_features == num_kv_heads * 8
    assert "num_kv_heads=%d" % num_kv_heads in repr(mod)


def test_module_without_bias_and_with_explicit_scale_and_shared_mask():
    torch.manual_seed(1)
    mask = ts.mask.local_window(19, 8, 1)
    mod = ts.nn.MultiheadSparseAttention(24, 3, bias=False, block_mask=mask, scale=0.2, dtype=torch.float64)
    assert all(p.dim() == 2 for p in mod.parameters())
    x = torch.randn(3, 19, 24, dtype=torch.float64)
    i, j = pairs(19, 19)
    assert_f64_close(mod(x).detach(), module_reference(mod, x, x, ((i // 8 - j // 8).abs() <= 1)[None, None]), "y")


def test_module_under_bfloat16_autocast():
    torch.manual_seed(2)
    mod = ts.nn.MultiheadSparseAttention(32, 4, 2, block_mask=lambda lq, lkv: ts.mask.causal(lq, 8, kv_len=lkv),
                                         score_mod=ts.score.softcap(4.0))
    x = torch.randn(2, 27, 32)
    y32 = mod(x).detach()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = mod(x)
        # the bf16 projections autocast gives the module (the same ops, so the same bits)
        q = mod.q_proj(x).view(2, 27, 4, 8).transpose(1, 2)
        k = mod.k_proj(x).view(2, 27, 2, 8).transpose(1, 2)
        v = mod.v_proj(x).view(2, 27, 2, 8).transpose(1, 2)
    assert y.dtype == torch.bfloat16 and q.dtype == k.dtype == v.dtype == torch.bfloat16
    i, j = pairs(27, 27)
    allowed = (j <= i)[None, None]
    scale = 1 / math.sqrt(8)
    Wo = mod.out_proj.weight.detach().bfloat16().double()
    bo = mod.out_proj.bias.detach().bfloat16().double()
    o_ref, _ = reference(q.double(), k.double(), v.double(), allowed, scale, None, 4.0)
    y_ref = o_ref.transpose(1, 2).reshape(2, 27, 32) @ Wo.T + bo
    # (1) The attention of the bf16 projections is within its bf16 rounding bound
    # (rounding_bounds, bf16=True); the output projection, on the bf16 o with bf16 weights,
    # carries that error through |Wo| plus its fp32 accumulation (32 terms) and one final
    # bf16 rounding of y (u |y|).
    o_bound = rounding_bounds(q.double(), k.double(), v.double(), torch.zeros_like(q.double()), allowed, scale, None,
                              4.0, bf16=True)[0]
    y_bound = (o_bound.transpose(1, 2).reshape(2, 27, 32) @ Wo.abs().T
               + SAFETY * (UBF16 + 34 * U32) * (o_ref.abs().transpose(1, 2).reshape(2, 27, 32) @ Wo.abs().T
                                               + bo.abs()))
    assert_within(y.detach(), y_ref, y_bound, "autocast output vs float64 of its bf16 projections")
    # (2) Against the fp32 module: (1)'s bound plus the exactly measured float64 effect of
    # rounding x, the weights and the projections to bf16, plus the fp32 run's own rounding
    # (1e-5 of its scale, by the float32 bounds above).
    y64 = module_reference(mod, x, x, allowed)
    tol = y_bound + (y_ref - y64).abs() + 1e-5 * float(y64.abs().max())
    assert_within(y.detach(), y32.double(), tol, "autocast output vs float32 module")
    assert float((y.double() - y32.double()).abs().max()) < 0.1 * float(y32.abs().max())
    # and it trains: fp32 parameter gradients through the bf16 attention
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = mod(x.requires_grad_()).float().pow(2).mean()
    loss.backward()
    assert all(p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all() for p in mod.parameters())


def test_module_state_dict_round_trip():
    torch.manual_seed(3)
    make = lambda: ts.nn.MultiheadSparseAttention(  # noqa: E731
        32, 4, 2, block_mask=lambda lq, lkv: ts.mask.causal(lq, 8, kv_len=lkv),
        score_mod=ts.score.alibi(ts.score.alibi_slopes(4)))
    a = make()
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    assert set(a.state_dict()) == {f"{p}.{w}" for p in ("q_proj", "k_proj", "v_proj", "out_proj")
                                   for w in ("weight", "bias")}
    b = make()
    x = torch.randn(2, 17, 32)
    assert not torch.equal(a(x), b(x))
    buf.seek(0)
    b.load_state_dict(torch.load(buf))
    assert torch.equal(a(x), b(x))


def test_module_mask_override_and_callable_cache():
    torch.manual_seed(4)
    calls = []

    def build(lq, lkv):
        calls.append((lq, lkv))
        return ts.mask.causal(lq, 8, kv_len=lkv)

    mod = ts.nn.MultiheadSparseAttention(16, 2, block_mask=build, dtype=torch.float64)
    x, mem = torch.randn(1, 13, 16, dtype=torch.float64), torch.randn(1, 20, 16, dtype=torch.float64)
    y1 = mod(x)
    y2 = mod(x)
    assert calls == [(13, 13)] and torch.equal(y1, y2)
    mod(x, mem)
    mod(x, mem)
    assert calls == [(13, 13), (13, 20)]
    # a per-call override, an AttentionMask: used for that call only
    window = ts.mask.local_window(13, 8, 0)
    i, j = pairs(13, 13)
    got = mod(x, block_mask=window)
    assert_f64_close(got.detach(), module_reference(mod, x, x, (i // 8 == j // 8)[None, None]), "override")
    assert torch.equal(mod(x), y1) and calls == [(13, 13), (13, 20)]
    # a per-call callable override is called, not cached
    seen = []
    mod(x, block_mask=lambda lq, lkv: seen.append((lq, lkv)) or ts.mask.local_window(lq, 8, 0, kv_len=lkv))
    mod(x, block_mask=lambda lq, lkv: seen.append((lq, lkv)) or ts.mask.local_window(lq, 8, 0, kv_len=lkv))
    assert seen == [(13, 13), (13, 13)] and calls == [(13, 13), (13, 20)]
    # per-head masks through the module
    heads = ts.mask.stack([ts.mask.causal(13, 8), ts.mask.local_window(13, 8, 0)])
    allowed = torch.stack([j <= i, i // 8 == j // 8])[None]
    assert_f64_close(mod(x, block_mask=heads).detach(), module_reference(mod, x, x, allowed), "per-head")


def test_module_reassigned_mask_and_deepcopy():
    import copy

    torch.manual_seed(5)
    mod = ts.nn.MultiheadSparseAttention(16, 2, block_mask=lambda lq, lkv: ts.mask.causal(lq, 8, kv_len=lkv),
                                         dtype=torch.float64)
    x = torch.randn(2, 13, 16, dtype=torch.float64)
    i, j = pairs(13, 13)
    mod(x)  # fills the cache for (13, 13)
    # a reassigned callable is used, not the previous callable's cached mask
    mod.block_mask = lambda lq, lkv: ts.mask.local_window(lq, 8, 0, kv_len=lkv)
    assert_f64_close(mod(x).detach(), module_reference(mod, x, x, (i // 8 == j // 8)[None, None]), "reassigned")
    mod.block_mask = ts.mask.causal(13, 8)
    assert_f64_close(mod(x).detach(), module_reference(mod, x, x, (j <= i)[None, None]), "reassigned mask")
    # copy.deepcopy (EMA copies, cloned layers) with a mask held and a filled cache
    twin = copy.deepcopy(mod)
    assert torch.equal(twin(x), mod(x))
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(twin.parameters(), mod.parameters()))
    mod.block_mask = lambda lq, lkv: ts.mask.causal(lq, 8, kv_len=lkv)
    mod(x)
    assert torch.equal(copy.deepcopy(mod)(x), mod(x))


def test_module_errors():
    M = ts.nn.MultiheadSparseAttention
    causal = ts.mask.causal(8, 8)
    for args, kw in [((0, 2), {}), ((16, 0), {}), ((16, 3), {}), ((16, 4, 3), {}), ((16, 4, 0), {}),
                     ((True, 1), {}), ((16.0, 2), {}), ((16, 2, 8), {}),
                     ((16, 2), {"scale": -1.0}), ((16, 2), {"scale": float("nan")})]:
        with pytest.raises(ValueError):
            M(*args, **kw)
    for kw in [{"block_mask": "causal"}, {"block_mask": torch.ones(8, 8)}, {"score_mod": lambda s: s},
               {"scale": "0.5"}]:
        with pytest.raises(TypeError):
            M(16, 2, **kw)
    with pytest.raises(ValueError, match="score.alibi has 3 slopes"):
        M(16, 2, score_mod=ts.score.alibi([0.1, 0.2, 0.3]))
    mod = M(16, 2)
    x = torch.randn(1, 8, 16)
    with pytest.raises(ValueError, match="no block_mask"):
        mod(x)
    assert mod(x, block_mask=causal).shape == (1, 8, 16)
    with pytest.raises(ValueError, match="query must be"):
        mod(torch.randn(1, 8, 15), block_mask=causal)
    with pytest.raises(ValueError, match="key must be"):
        mod(x, torch.randn(8, 16), block_mask=causal)
    with pytest.raises(ts.ShapeError, match="block_mask is 8 x 8"):
        mod(torch.randn(1, 9, 16), block_mask=causal)


# ---- pooled outputs -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ALL_IDS)
def test_large_outputs_on_pooled_memory_have_the_same_bits_and_layout(monkeypatch, dtype):
    """Outputs and gradients of 4 MiB and more come from the core's buffer pool: the same
    bits, strides and dtype as on torch's memory (the pool turned off), for a (B, L, H, E)
    projection viewed as (B, H, L, E)."""
    import trnsparse._interop as interop

    heads, L, E = 16 // torch.empty(0, dtype=dtype).element_size(), 2048, 128  # 4 MiB a tensor
    gen = torch.Generator().manual_seed(5)
    q, k, v, dO = (torch.randn(1, L, heads, E, generator=gen).to(dtype).transpose(1, 2) for _ in range(4))
    mask = ts.mask.local_window(L, 128, 1)

    def run():
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        O = ts.sparse_attention(*leaves, mask)
        return [O] + list(torch.autograd.grad(O, leaves, dO))

    pooled = run()
    monkeypatch.setattr(interop, "POOLED_BYTES", 1 << 62)
    plain = run()
    assert q.numel() * q.element_size() >= 4 << 20
    for a, b, like in zip(pooled, plain, (q, q, k, v)):
        assert (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()) == (dtype, like.shape, like.stride())
        assert torch.equal(a, b)


def test_a_freed_pooled_output_serves_the_next_one():
    """The pool keeps a freed output's memory (already faulted in) for the next output of
    its size, the buffer freed last first (other tests leave buffers of this size too)."""
    q = torch.randn(1, 5, 2048, 128)  # 5 MiB
    mask = ts.mask.local_window(2048, 128, 1)
    O = ts.sparse_attention(q, q, q, mask)
    address = O.data_ptr()
    del O
    assert ts.sparse_attention(q, q, q, mask).data_ptr() == address


def test_pooled_empty_rejects_bad_arguments():
    from trnsparse import _core

    with pytest.raises(ValueError, match="2 sizes but 1 strides"):
        _core.pooled_empty([2, 3], [3], "float32")
    with pytest.raises(ValueError, match="must not be negative"):
        _core.pooled_empty([2, -3], [3, 1], "float32")
    with pytest.raises(ValueError, match="dtype int8 is not one of"):
        _core.pooled_empty([2, 3], [3, 1], "int8")
    empty = torch.utils.dlpack.from_dlpack(_core.pooled_empty([0, 3], [3, 1], "bfloat16"))
    assert (empty.shape, empty.dtype) == ((0, 3), torch.bfloat16)


# ---- trnsparse 0.6's entry point -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=ALL_IDS)
def test_block_sparse_attention_tiled_equals_sparse_attention_on_2d(dtype):
    mask = ts.mask.unite(ts.mask.causal(37, 8), ts.mask.global_tokens(37, 8, 0, 1))
    q, k, v, dO = (t[0, 0].to(dtype) for t in random_case(1, 1, 1, 37, 37, 12, seed=21))
    for scale in (None, 0.3):
        a = [t.clone().requires_grad_() for t in (q, k, v)]
        b = [t.clone().requires_grad_() for t in (q, k, v)]
        Oa = ts.block_sparse_attention_tiled(*a, mask, scale=scale)
        Ob = ts.sparse_attention(*b, mask, scale=scale)
        assert Oa.shape == (37, 12) and Oa.dtype == dtype
        assert torch.equal(Oa, Ob)
        Oa.backward(dO)
        Ob.backward(dO)
        for x, y in zip(a, b):
            assert torch.equal(x.grad, y.grad)
    with pytest.raises(ts.ShapeError, match="single-slice"):
        ts.block_sparse_attention_tiled(q, k, v, ts.mask.stack([mask, mask]))


def test_masks_and_modules_holding_them_pickle():
    """A mask pickles as its classified blocks (per-slice, partial element masks kept), so
    torch.save of a whole module that holds one round-trips."""
    import io
    import pickle

    m = ts.mask.stack([[ts.mask.causal(50, 16), ts.mask.local_window(50, 16, 1, kv_len=50)],
                       [ts.mask.document([20, 30], 16, causal=True), ts.mask.global_tokens(50, 16, 0, 1)]])
    again = pickle.loads(pickle.dumps(m))
    assert (again.batch, again.heads, again.shape, again.n_blocks, again.n_partial) == \
        (m.batch, m.heads, m.shape, m.n_blocks, m.n_partial)
    assert torch.equal(again.to_dense(), m.to_dense())
    mod = ts.nn.MultiheadSparseAttention(32, 2, block_mask=ts.mask.causal(50, 16))
    buf = io.BytesIO()
    torch.save(mod, buf)
    buf.seek(0)
    x = torch.randn(2, 50, 32)
    assert torch.equal(torch.load(buf)(x), mod(x))
