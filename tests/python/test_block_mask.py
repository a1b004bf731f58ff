"""classify_blocks (create_block_mask's block classification) against a brute-force
classification of the dense (batch, heads, Q_LEN, KV_LEN) mask, on ragged sizes, every
chunking path, broadcast slices and the error cases."""
import pytest
import torch

import trnsparse._block_mask as block_mask
from trnsparse._block_mask import classify_blocks

KEYS = ["block_row_ptrs", "block_col_indices", "partial_index", "element_masks"]


def brute_force(mask_mod, B, H, Q_LEN, KV_LEN, bs):
    """The classification from the whole dense mask, block by block in Python loops."""
    batch, heads = B or 1, H or 1
    b = torch.arange(batch).view(-1, 1, 1, 1)
    h = torch.arange(heads).view(1, -1, 1, 1)
    q = torch.arange(Q_LEN).view(1, 1, -1, 1)
    kv = torch.arange(KV_LEN).view(1, 1, 1, -1)
    dense = mask_mod(b, h, q, kv).expand(batch, heads, Q_LEN, KV_LEN) if Q_LEN and KV_LEN else \
        torch.zeros(batch, heads, Q_LEN, KV_LEN, dtype=torch.bool)
    br, bc = -(-Q_LEN // bs), -(-KV_LEN // bs)
    row_ptrs, cols, partial_index, masks = [0], [], [], []
    for s in range(batch * heads):
        for i in range(br):
            for j in range(bc):
                block = dense[s // heads, s % heads, i * bs:(i + 1) * bs, j * bs:(j + 1) * bs]
                if not block.any():
                    continue
                cols.append(j)
                if block.all():
                    partial_index.append(-1)
                else:
                    partial_index.append(len(masks))
                    padded = torch.zeros(bs, bs, dtype=torch.uint8)
                    padded[:block.shape[0], :block.shape[1]] = block
                    masks.append(padded.view(-1))
            row_ptrs.append(len(cols))
    return {"batch": batch, "heads": heads, "block_row_ptrs": torch.tensor(row_ptrs, dtype=torch.int64),
            "block_col_indices": torch.tensor(cols, dtype=torch.int64),
            "partial_index": torch.tensor(partial_index, dtype=torch.int64),
            "element_masks": torch.cat(masks) if masks else torch.zeros(0, dtype=torch.uint8)}


def assert_same(got, want):
    assert (got["batch"], got["heads"]) == (want["batch"], want["heads"])
    for key in KEYS:
        assert got[key].dtype == want[key].dtype, key
        assert torch.equal(got[key], want[key]), key


def check(mask_mod, B, H, Q_LEN, KV_LEN, bs):
    got = classify_blocks(mask_mod, B, H, Q_LEN, KV_LEN, bs)
    assert_same(got, brute_force(mask_mod, B, H, Q_LEN, KV_LEN, bs))
    return got


def causal(b, h, q, kv):
    return q >= kv


def sliding_window(b, h, q, kv):
    return (q - kv).abs() <= 5


# (Q_LEN, KV_LEN, BLOCK_SIZE): ragged edges on either side, blocks larger than the sequence.
SIZES = [(37, 53, 16), (53, 37, 3), (10, 7, 1), (130, 70, 64), (64, 128, 64), (5, 5, 8), (29, 29, 3)]


@pytest.mark.parametrize("Q_LEN,KV_LEN,bs", SIZES)
@pytest.mark.parametrize("mask_mod", [causal, sliding_window], ids=["causal", "sliding_window"])
def test_shared_masks(mask_mod, Q_LEN, KV_LEN, bs):
    check(mask_mod, None, None, Q_LEN, KV_LEN, bs)
    check(mask_mod, 1, 1, Q_LEN, KV_LEN, bs)
    check(mask_mod, 2, 3, Q_LEN, KV_LEN, bs)  # a predicate of neither b nor h, stored per slice


@pytest.mark.parametrize("Q_LEN,KV_LEN,bs", SIZES)
def test_documents_indexed_by_batch(Q_LEN, KV_LEN, bs):
    g = torch.Generator().manual_seed(Q_LEN * 100 + KV_LEN)
    n = max(Q_LEN, KV_LEN)
    doc_id = torch.cumsum(torch.rand(3, n, generator=g) < 0.15, 1)  # per batch element

    def document(b, h, q, kv):
        return (doc_id[b, q] == doc_id[b, kv]) & (q >= kv)

    check(document, 3, None, Q_LEN, KV_LEN, bs)
    check(document, 3, 2, Q_LEN, KV_LEN, bs)

    doc_end = torch.tensor([Q_LEN // 3, Q_LEN, 0])  # padding: keys and queries past the end

    def padded(b, h, q, kv):
        return (q < doc_end[b]) & (kv < doc_end[b])

    check(padded, 3, 2, Q_LEN, KV_LEN, bs)


@pytest.mark.parametrize("Q_LEN,KV_LEN,bs", SIZES)
def test_windows_indexed_by_head(Q_LEN, KV_LEN, bs):
    window = torch.tensor([0, 3, 17, 1000])

    def per_head(b, h, q, kv):
        return (q >= kv) & (q - kv <= window[h])

    check(per_head, None, 4, Q_LEN, KV_LEN, bs)
    check(per_head, 2, 4, Q_LEN, KV_LEN, bs)

    offset = torch.tensor([[0, 5, -7, 2], [3, 0, 1, -1]])  # per (b, h)

    def per_slice(b, h, q, kv):
        return (q + offset[b, h] - kv).abs() <= window[h] // 2

    check(per_slice, 2, 4, Q_LEN, KV_LEN, bs)


@pytest.mark.parametrize("mask_mod,kind", [
    (lambda b, h, q, kv: q < 0, "empty"),  # shape (1, 1, rows, 1)
    (lambda b, h, q, kv: kv >= 0, "full"),  # shape (1, 1, 1, keys)
    (lambda b, h, q, kv: torch.tensor(True), "full"),  # 0-d
    (lambda b, h, q, kv: torch.ones(kv.shape[-1], dtype=torch.bool), "full"),  # 1-d over keys
    (lambda b, h, q, kv: (q % 2 == 0).view(-1, 1), "partial"),  # 2-d over queries
])
def test_constant_and_low_rank_results(mask_mod, kind):
    for Q_LEN, KV_LEN, bs in SIZES:
        got = check(mask_mod, 2, None, Q_LEN, KV_LEN, bs)
        if kind == "empty":
            assert got["block_col_indices"].numel() == 0 and got["block_row_ptrs"].eq(0).all()
        elif kind == "full":
            assert got["block_col_indices"].numel() == 2 * (-(-Q_LEN // bs)) * (-(-KV_LEN // bs))
            assert got["partial_index"].eq(-1).all() and got["element_masks"].numel() == 0


@pytest.mark.parametrize("Q_LEN,KV_LEN", [(0, 0), (0, 5), (5, 0)])
def test_empty_sequences(Q_LEN, KV_LEN):
    calls = []

    def mask_mod(b, h, q, kv):
        calls.append(1)
        return q >= kv

    got = check(mask_mod, 2, 3, Q_LEN, KV_LEN, 4)
    assert got["block_row_ptrs"].tolist() == [0] * (2 * 3 * -(-Q_LEN // 4) + 1)
    assert not calls


# For the first size (block row of 11 blocks of 16 elements, 3 x 3 slices): single blocks,
# ranges of 4 key blocks, one head, two heads, two batch elements, all slices with one
# block row, all slices with four block rows.
@pytest.mark.parametrize("budget", [1, 64, 200, 400, 1232, 2000, 7000])
def test_every_chunking(monkeypatch, budget):
    """Budgets that split key ranges, heads and batch elements, or group several block
    rows into one chunk: all give the same blocks, and no chunk exceeds the budget (or one
    block when a block alone exceeds it)."""
    monkeypatch.setattr(block_mask, "_CHUNK_ELEMENTS", budget)
    window = torch.tensor([2, 9, 30])
    doc_end = torch.tensor([40, 23, 31])
    evaluated = []

    def mask_mod(b, h, q, kv):
        evaluated.append(torch.broadcast_shapes(b.shape, h.shape, q.shape, kv.shape).numel())
        return (q - kv).abs() <= window[h] + (kv < doc_end[b])

    for Q_LEN, KV_LEN, bs in [(45, 41, 4), (40, 44, 8), (17, 40, 1)]:
        evaluated.clear()
        got = classify_blocks(mask_mod, 3, 3, Q_LEN, KV_LEN, bs)
        assert max(evaluated) <= max(budget, bs * bs)
        assert_same(got, brute_force(mask_mod, 3, 3, Q_LEN, KV_LEN, bs))


def test_long_causal_structure():
    """Q_LEN = KV_LEN = 32768 (a dense mask would take 1 GiB): the lower block triangle,
    the diagonal blocks partial with the lower element triangle."""
    calls = []

    def mask_mod(b, h, q, kv):
        calls.append(torch.broadcast_shapes(q.shape, kv.shape).numel())
        return q >= kv

    n, bs = 32768, 128
    got = classify_blocks(mask_mod, None, None, n, n, bs)
    blocks = n // bs
    assert max(calls) <= block_mask._CHUNK_ELEMENTS
    assert torch.equal(got["block_row_ptrs"], torch.arange(blocks + 1).cumsum(0))
    rows = torch.repeat_interleave(torch.arange(blocks), torch.arange(1, blocks + 1))
    assert torch.equal(got["block_col_indices"], torch.arange(rows.numel()) - got["block_row_ptrs"][rows])
    diagonal = got["block_col_indices"] == rows
    assert torch.equal(got["partial_index"][diagonal], torch.arange(blocks))
    assert got["partial_index"][~diagonal].eq(-1).all()
    triangle = torch.ones(bs, bs).tril().to(torch.uint8).view(-1)
    assert torch.equal(got["element_masks"], triangle.repeat(blocks))


@pytest.mark.parametrize("mask_mod,error,match", [
    (lambda b, h, q, kv: q - kv, TypeError, r"mask_mod must return a torch\.bool tensor.*int64"),
    (lambda b, h, q, kv: (q >= kv).float(), TypeError, r"mask_mod must return a torch\.bool tensor.*float32"),
    (lambda b, h, q, kv: True, TypeError, r"mask_mod must return a torch\.bool tensor, got bool"),
    (lambda b, h, q, kv: 1, TypeError, r"mask_mod must return a torch\.bool tensor, got int"),
    (lambda b, h, q, kv: torch.ones(3, dtype=torch.bool), ValueError, r"mask_mod returned shape \(3,\)"),
    (lambda b, h, q, kv: (q >= kv).expand(4, 2, -1, -1), ValueError, r"mask_mod returned shape \(4, 2, 16, 20\)"),
    (lambda b, h, q, kv: (q >= kv)[None], ValueError, r"mask_mod returned shape \(1, 1, 1, 16, 20\)"),
])
def test_bad_predicates(mask_mod, error, match):
    with pytest.raises(error, match=match):
        classify_blocks(mask_mod, None, 2, 16, 20, 16)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"mask_mod": None}, TypeError, "mask_mod must be callable"),
    ({"B": 0}, ValueError, "B must be >= 1"),
    ({"B": 1.5}, TypeError, "B must be an int or None"),
    ({"B": True}, TypeError, "B must be an int"),
    ({"H": -2}, ValueError, "H must be >= 1"),
    ({"H": "4"}, TypeError, "H must be an int or None"),
    ({"Q_LEN": -1}, ValueError, "Q_LEN must be >= 0"),
    ({"Q_LEN": None}, TypeError, "Q_LEN must be an int"),
    ({"KV_LEN": -3}, ValueError, "KV_LEN must be >= 0"),
    ({"KV_LEN": 2.0}, TypeError, "KV_LEN must be an int"),
    ({"BLOCK_SIZE": 0}, ValueError, "BLOCK_SIZE must be >= 1"),
    ({"BLOCK_SIZE": 16.0}, TypeError, "BLOCK_SIZE must be an int"),
])
def test_bad_arguments(kwargs, error, match):
    args = {"mask_mod": causal, "B": 2, "H": 2, "Q_LEN": 16, "KV_LEN": 16, "BLOCK_SIZE": 8, **kwargs}
    with pytest.raises(error, match=match):
        classify_blocks(**args)


def test_integer_like_arguments():
    """numpy-style integers (anything with __index__) pass, as do B = H = 1."""
    got = classify_blocks(causal, torch.tensor(2), 1, torch.tensor(9), 9, torch.tensor(4))
    assert (got["batch"], got["heads"]) == (2, 1)
    want = brute_force(causal, 2, 1, 9, 9, 4)
    for key in KEYS:
        assert torch.equal(got[key], want[key]), key
