"""The float64 dense attention reference, the masks and the pairs they allow, the operand
layouts and the rounding bounds that the sparse-attention tests (test_sparse_attention.py,
test_torch_backend.py) share; its tolerances are explained in test_sparse_attention.py."""
import math

import pytest
import torch

import trnsparse as ts

U32 = 2.0 ** -24  # fp32 unit roundoff (round to nearest), ≈ 6e-8
UBF16 = 2.0 ** -8  # bf16 unit roundoff: 8 significant bits
F64_TOL = 1e-10
ALL_DTYPES, ALL_IDS = [torch.float32, torch.bfloat16, torch.float64], ["float32", "bfloat16", "float64"]
SAFETY = 2.0  # first-order bounds: room for second-order terms and exp2/tanh approximation constants


# ---- the dense float64 reference ---------------------------------------------------------

def modified_scores(q, k, scale, slopes=None, cap=None):
    """(B, H, Lq, Lkv) scores of (B, H, L, E) operands (k already expanded to H heads)."""
    s = q @ k.transpose(-1, -2) * scale
    Lq, Lkv = s.shape[-2:]
    if slopes is not None:
        rel = (torch.arange(Lkv).view(1, -1) - torch.arange(Lq).view(-1, 1)).to(s.dtype)
        s = s + slopes.to(s.dtype).view(1, -1, 1, 1) * rel
    if cap is not None:
        s = cap * torch.tanh(s / cap)
    return s


def expand_heads(t, H):
    return t.repeat_interleave(H // t.shape[1], dim=1)


def reference(q, k, v, allowed, scale, slopes=None, cap=None):
    """float64 attention of (B, H, Lq, E) q and (B, Hkv, Lkv, E) k, v (grouped heads by
    repetition), `allowed` broadcasting to (B, H, Lq, Lkv); differentiable in q, k, v.
    Returns (O, lse) with lse (not differentiable) 0 on empty rows."""
    H = q.shape[1]
    k, v = expand_heads(k, H), expand_heads(v, H)
    s = modified_scores(q, k, scale, slopes, cap)
    allowed = allowed.expand(s.shape)
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.detach().amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros(()))  # empty row: exp(-inf) = 0, no NaN
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    O = (p @ v) / torch.where(l > 0, l, torch.ones(()))
    with torch.no_grad():
        lse = torch.where(l > 0, m + torch.log(l.clamp_min(1e-300)), torch.zeros(()))[..., 0]
    return O, lse


def rounding_bounds(q, k, v, dO, allowed, scale, slopes=None, cap=None, bf16=False):
    """Elementwise bounds on |kernel - exact| for O, dQ, dK, dV (canonical 4-D shapes) of
    the fp32 kernels (bf16=False) or the bf16 ones, first order in the roundoffs (u = 2^-24;
    magnitudes are the exact float64 ones):

    - each score s = q·k·scale is a sum of E products: |Δs| <= (E + 4) u Σ|q||k| scale;
      ALiBi, soft-capping, the max subtraction and exp2 add a few u times |s|, |alibi|, so
      every softmax weight p carries a relative error δ (below); |ΔO| <= (2δ + (2 Lkv +
      8) u) · (P |V|) (the P·V and Σp sums of Lkv terms and the online rescalings);
    - backward: p recomputed from the fp32 lse (δ' = δ + u (2|lse| + Lkv + 4)); dP = dO·v
      (E terms, error <= (E + 1) u A with A = |dO||V|ᵀ), D = Σ dO∘O (E terms, and O's
      own error), dS = P∘(dP − D)·c (c = 1 − tanh² under soft-capping, computed to a few u);
      dQ = scale dS K (Lkv terms), dK = scale dSᵀ Q and dV = Pᵀ dO (group·Lq terms);
    - bf16 adds u_bf16 for P rounded before P·V and Pᵀ·dO, for dS rounded before dS·K and
      dSᵀ·Q, 2 u_bf16 (P|V|) in O and so in D, and u_bf16 for each output's single rounding;
    - lse = (m + log2 l) ln 2 in fp32: the row max carries the score error δ, log l the
      relative error δ + Lkv u of l, and the final multiply-add a few u |lse|.
    Returns [O, dQ, dK, dV] bounds (elementwise, times SAFETY) and the lse bound (a number)."""
    u, ub = U32, (UBF16 if bf16 else 0.0)
    with torch.no_grad():
        B, H, Lq, E = q.shape
        Hkv, Lkv = k.shape[1], k.shape[2]
        G = H // Hkv
        ke, ve = expand_heads(k, H), expand_heads(v, H)
        O, lse = reference(q, k, v, allowed, scale, slopes, cap)
        s = modified_scores(q, ke, scale, slopes, cap)
        al = allowed.expand(s.shape)
        if not al.any():
            return [torch.zeros(()) for _ in range(4)] + [0.0]
        P = torch.softmax(s.masked_fill(~al, float("-inf")), -1).nan_to_num(0.0).masked_fill(~al, 0.0)
        sabs = (q.abs() @ ke.abs().transpose(-1, -2)) * scale
        alibi = modified_scores(torch.zeros_like(q), ke, scale, slopes, None).abs()
        delta = u * ((E + 4) * float(sabs[al].max()) + 3 * float(alibi[al].max()) + 5 * float(s[al].abs().max()) + 16)
        F_O = 2 * delta + (2 * Lkv + 8) * u
        PV = P @ ve.abs()
        O_err = (F_O + 2 * ub) * PV
        delta_b = delta + u * (2 * float(lse.abs().max()) + Lkv + 4)
        # backward magnitudes
        A = dO.abs() @ ve.abs().transpose(-1, -2)
        dPD = (dO @ ve.transpose(-1, -2) - (dO * O).sum(-1, keepdim=True)).abs()
        c = 1 - torch.tanh(modified_scores(q, ke, scale, slopes, None) / cap) ** 2 if cap else torch.ones(())
        dS = P * dPD * c
        dD = (dO.abs() * O_err).sum(-1, keepdim=True) + (E + 1) * u * (dO * O).abs().sum(-1, keepdim=True)
        dS_err = c * P * (delta_b * dPD + (E + 1) * u * A + dD) + 8 * u * P * dPD + ub * dS

        def fold(t):  # sum over the query heads of each key head's group
            return t.view(B, Hkv, G, *t.shape[2:]).sum(2)

        dQ_bound = scale * (dS_err @ ke.abs() + ((Lkv + 2) * u + ub) * (dS @ ke.abs()))
        dK_bound = scale * fold((dS_err.transpose(-1, -2) + ((G * Lq + 2) * u + ub) * dS.transpose(-1, -2))
                                @ q.abs())
        dV_bound = (delta_b + (G * Lq + 2) * u + 2 * ub) * fold(P.transpose(-1, -2) @ dO.abs())
        lse_bound = 2 * delta + (Lkv + 8) * u + 4 * u * (float(lse.abs().max()) + float(s[al].abs().max()))
        return [SAFETY * b + 1e-30 for b in (O_err, dQ_bound, dK_bound, dV_bound)] + [SAFETY * lse_bound]


def assert_within(got, expected, bound, what):
    err = (got.double() - expected).abs()
    assert not torch.isnan(got).any(), f"{what}: NaN"
    bad = err > bound
    if bad.any():
        ratio = (err / bound).max()
        idx = tuple(int(x) for x in (err / bound == ratio).nonzero()[0])
        raise AssertionError(f"{what}: error {float(err[idx]):.3e} > bound {float(bound[idx]):.3e} at {idx} "
                             f"(worst ratio {float(ratio):.2f})")


def assert_f64_close(got, expected, what):
    assert got.dtype == torch.float64, what
    err = float((got - expected).abs().max()) if expected.numel() else 0.0
    assert err <= F64_TOL * max(1.0, float(expected.abs().max())), f"{what}: max error {err:.3e}"


# ---- masks and the pairs they allow -----------------------------------------------------

LENGTHS = [10, 0, 17, 18]  # 45 tokens, one empty document


def doc_ids(lengths):
    return torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))


DOC = doc_ids(LENGTHS)
# create_block_mask's predicate data: per batch element document ids, per head a window.
DOC_ID = torch.stack([doc_ids([20, 25]), doc_ids([7, 0, 38])])
WINDOW = torch.tensor([3, 8, 17, 45])


def pairs(Lq, Lkv):
    return torch.arange(Lq).view(-1, 1), torch.arange(Lkv).view(1, -1)


def floor_div(a, b):
    return torch.div(a, b, rounding_mode="floor")


# Single-slice masks over 45 x 45 on blocks of 8 (what `stack` combines): (builder, rule(i, j)).
ATOMS8 = [
    (lambda: ts.mask.causal(45, 8), lambda i, j: j <= i),
    (lambda: ts.mask.local_window(45, 8, 1), lambda i, j: (i // 8 - j // 8).abs() <= 1),
    (lambda: ts.mask.dilated(45, 8, 3), lambda i, j: (i // 8 - j // 8) % 3 == 0),
    (lambda: ts.mask.document(LENGTHS, 8), lambda i, j: DOC[i] == DOC[j]),
    (lambda: ts.mask.intersect(ts.mask.causal(45, 8), ts.mask.local_window(45, 8, 1)),
     lambda i, j: (j <= i) & ((i // 8 - j // 8).abs() <= 1)),
]


def predicate(b, h, q_idx, kv_idx):
    """FlexAttention-style: same document of batch element b, causal, within head h's window."""
    return (DOC_ID[b, q_idx] == DOC_ID[b, kv_idx]) & (kv_idx <= q_idx) & (q_idx - kv_idx <= WINDOW[h])


def predicate_allowed(B, H, Lq, Lkv):
    i, j = pairs(Lq, Lkv)
    out = torch.zeros(B, H, Lq, Lkv, dtype=torch.bool)
    for z in range(B):
        for h in range(H):
            out[z, h] = (DOC_ID[z][i] == DOC_ID[z][j]) & (j <= i) & (i - j <= WINDOW[h])
    return out


def make_mask(kind, B, H):
    """(mask, allowed (Bm, Hm, Lq, Lkv) from the rule, Lq, Lkv, head dim E) for B x H operands."""
    square = {
        "causal": (lambda: ts.mask.causal(45, 8), lambda i, j: j <= i, 16),
        "local_window": (lambda: ts.mask.local_window(45, 16, 1), lambda i, j: (i // 16 - j // 16).abs() <= 1, 12),
        "dilated": (lambda: ts.mask.dilated(45, 8, 2), lambda i, j: (i // 8 - j // 8) % 2 == 0, 16),
        "global_tokens": (lambda: ts.mask.global_tokens(45, 8, 1, 1),
                          lambda i, j: (i // 8 == 0) | (j // 8 == 0) | ((i // 8 - j // 8).abs() <= 1), 7),
        "document": (lambda: ts.mask.document(LENGTHS, 8, causal=True), lambda i, j: (DOC[i] == DOC[j]) & (j <= i), 16),
        "unite": (lambda: ts.mask.unite(ts.mask.causal(45, 8), ts.mask.global_tokens(45, 8, 0, 1)),
                  lambda i, j: (j <= i) | (i // 8 == 0) | (j // 8 == 0) | (i // 8 == j // 8), 12),
        "intersect": (lambda: ts.mask.intersect(ts.mask.local_window(45, 8, 2), ts.mask.document(LENGTHS, 8)),
                      lambda i, j: ((i // 8 - j // 8).abs() <= 2) & (DOC[i] == DOC[j]), 16),
    }
    rect = {  # Lq != Lkv, aligned bottom-right
        "causal_kv": (21, 70, lambda: ts.mask.causal(21, 16, kv_len=70), lambda i, j: j <= i + 49, 16),
        "local_kv": (21, 70, lambda: ts.mask.local_window(21, 8, 1, kv_len=70),
                     lambda i, j: (j // 8 - floor_div(i + 49, 8)).abs() <= 1, 12),
        # more queries than keys: queries 0 .. 22 stand before the first key and see nothing
        "local_kv_empty_rows": (40, 17, lambda: ts.mask.local_window(40, 8, 0, kv_len=17),
                                lambda i, j: (j // 8 - floor_div(i - 23, 8)).abs() <= 0, 8),
    }
    if kind in square:
        build, rule, E = square[kind]
        i, j = pairs(45, 45)
        return build(), rule(i, j)[None, None], 45, 45, E
    if kind in rect:
        Lq, Lkv, build, rule, E = rect[kind]
        i, j = pairs(Lq, Lkv)
        return build(), rule(i, j)[None, None], Lq, Lkv, E
    i, j = pairs(45, 45)
    if kind == "stack_heads":
        picks = [ATOMS8[h % len(ATOMS8)] for h in range(H)]
        mask = ts.mask.stack([m() for m, _ in picks])
        return mask, torch.stack([r(i, j) for _, r in picks])[None], 45, 45, 16
    if kind == "stack_batch_heads":
        picks = [[ATOMS8[(3 * z + h + 1) % len(ATOMS8)] for h in range(H)] for z in range(B)]
        mask = ts.mask.stack([[m() for m, _ in row] for row in picks])
        allowed = torch.stack([torch.stack([r(i, j) for _, r in row]) for row in picks])
        return mask, allowed, 45, 45, 9
    if kind == "intersect_broadcast":  # a per-head stack intersected with one shared mask
        picks = [ATOMS8[h % len(ATOMS8)] for h in range(H)]
        mask = ts.mask.intersect(ts.mask.stack([m() for m, _ in picks]), ts.mask.causal(45, 8))
        return mask, torch.stack([r(i, j) & (j <= i) for _, r in picks])[None], 45, 45, 16
    if kind == "create_block_mask":
        mask = ts.mask.create_block_mask(predicate, B, H, 45, 45, BLOCK_SIZE=16)
        return mask, predicate_allowed(B, H, 45, 45), 45, 45, 16
    raise AssertionError(kind)


KINDS = ["causal", "local_window", "dilated", "global_tokens", "document", "unite", "intersect", "stack_heads",
         "stack_batch_heads", "intersect_broadcast", "create_block_mask", "causal_kv", "local_kv",
         "local_kv_empty_rows"]


def check_mask(mask, allowed):
    dense = mask.to_dense()
    if mask.batch == mask.heads == 1:
        assert torch.equal(dense, allowed[0, 0])
    else:
        assert (mask.batch, mask.heads) == tuple(allowed.shape[:2])
        assert torch.equal(dense, allowed)


# ---- operand layouts -----------------------------------------------------------------------

# layout: (B, H, Hkv with enable_gqa)
LAYOUTS = {
    "BHLE": (2, 4, 2),  # contiguous (B, H, L, E)
    "BLHE_view": (2, 4, 2),  # the transpose(1, 2) view of a contiguous (B, L, H, E)
    "HLE": (1, 4, 1),  # 3-D (H, L, E); grouped: multi-query (one key head)
    "LE": (1, 1, None),  # 2-D (L, E): one head, no grouping
    "E_strided": (2, 4, 2),  # last dimension of stride 2 (copied once)
}


def lay(t, layout):
    """The canonical contiguous (B, H, L, E) t in `layout`, as a leaf (no autograd history)."""
    if layout == "BHLE":
        return t.clone()
    if layout == "BLHE_view":
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    if layout == "HLE":
        return t[0].clone()
    if layout == "LE":
        return t[0, 0].clone()
    if layout == "E_strided":
        base = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
        base[..., ::2] = t
        out = base[..., ::2]
        assert out.stride(-1) == 2
        return out
    raise AssertionError(layout)


def canon(t, layout):
    """Back to 4-D (B, H, L, E)."""
    return t[None, None] if layout == "LE" else t[None] if layout == "HLE" else t


MODS = ["none", "alibi", "softcap", "alibi+softcap"]
SLOPES = torch.tensor([0.5, 0.25, -0.125, 0.0625], dtype=torch.float64)
CAP = 2.0


def score_mod(mod, H):
    """(score_mod for sparse_attention, slopes, cap) of a MODS name."""
    slopes = SLOPES[:H] if H > 1 else torch.tensor([0.3], dtype=torch.float64)
    if mod == "none":
        return None, None, None
    if mod == "alibi":
        return ts.score.alibi(slopes), slopes, None
    if mod == "softcap":
        return ts.score.softcap(CAP), None, CAP
    return [ts.score.alibi(slopes), ts.score.softcap(CAP)], slopes, CAP


def random_case(B, H, Hkv, Lq, Lkv, E, seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    return r(B, H, Lq, E), r(B, Hkv, Lkv, E), r(B, Hkv, Lkv, E), r(B, H, Lq, E)


def run_case(kind, layout, gqa, mod, dtype, seed=0, scale=None):
    """Runs sparse_attention forward and backward in `layout`; returns the canonical 4-D
    tensors: inputs (in dtype), dO, O, lse, dq, dk, dv, plus allowed, scale, slopes, cap."""
    B, H, Hkv = LAYOUTS[layout]
    Hkv = Hkv if gqa else H
    mask, allowed, Lq, Lkv, E = make_mask(kind, B, H)
    check_mask(mask, allowed)
    q, k, v, dO = (t.to(dtype) for t in random_case(B, H, Hkv, Lq, Lkv, E, seed))
    mod_arg, slopes, cap = score_mod(mod, H)
    xq, xk, xv = (lay(t, layout).requires_grad_() for t in (q, k, v))
    O, lse = ts.sparse_attention(xq, xk, xv, mask, scale=scale, enable_gqa=gqa, score_mod=mod_arg, return_lse=True)
    assert O.dtype == dtype and O.shape == xq.shape
    assert not lse.requires_grad and lse.shape == xq.shape[:-1]
    assert lse.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    if layout == "BLHE_view":  # the output keeps query's (B, L, H, E) memory
        assert O.stride() == xq.stride() and O.transpose(1, 2).is_contiguous()
    if layout == "E_strided":
        assert O.is_contiguous()
    O.backward(lay(dO, layout))
    for x in (xq, xk, xv):
        assert x.grad.shape == x.shape and x.grad.dtype == dtype
    sc = 1 / math.sqrt(E) if scale is None else scale
    return dict(q=q, k=k, v=v, dO=dO, O=canon(O.detach(), layout), lse=canon(lse, layout),
                dq=canon(xq.grad, layout), dk=canon(xk.grad, layout), dv=canon(xv.grad, layout), allowed=allowed,
                scale=sc, slopes=slopes, cap=cap, mask=mask)


def reference_of(r):
    """float64 O, lse, dq, dk, dv of the (dtype-rounded) inputs of a run_case result."""
    leaves = [r[n].double().requires_grad_() for n in ("q", "k", "v")]
    O, lse = reference(*leaves, r["allowed"], r["scale"], r["slopes"], r["cap"])
    grads = torch.autograd.grad(O, leaves, r["dO"].double())
    return (O.detach(), lse) + tuple(grads)


def check_empty_rows(r):
    """Rows with no allowed key: O, lse and dq exactly 0."""
    B, H = r["q"].shape[:2]
    empty = ~r["allowed"].expand(B, H, *r["allowed"].shape[2:]).any(-1)  # (B, H, Lq)
    for name in ("O", "dq", "lse"):
        t = r[name]
        assert torch.equal(t[empty], torch.zeros_like(t[empty])), name
    return empty


def float64_cases():
    out = []
    for kind in KINDS:
        for layout, (_, _, hkv) in LAYOUTS.items():
            for gqa in (False, True):
                if gqa and hkv is None:
                    continue
                for mod in MODS:
                    heads = "gqa" if gqa else "mha"
                    out.append(pytest.param(kind, layout, gqa, mod, id=f"{kind}-{layout}-{heads}-{mod}"))
    return out
