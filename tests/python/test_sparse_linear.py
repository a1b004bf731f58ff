"""trnsparse.nn.BlockSparseLinear: gradcheck in float64 against the masked dense layer,
every dtype against a float64 reference, bf16 against fp32, autocast, determinism across
thread counts, conversion to and from nn.Linear, state_dict / torch.save round trips,
and the errors that name their argument."""
import io

import pytest
import torch

import trnsparse as ts
from trnsparse.nn import BlockSparseLinear


def _layer(in_f, out_f, b, density, seed, dtype=torch.float64, bias=True):
    torch.manual_seed(seed)
    return BlockSparseLinear(in_f, out_f, bias=bias, block_size=b, density=density, dtype=dtype)


def _masked_dense(layer):
    """The float64 dense reference: the layer's weight with absent blocks zero."""
    return layer.dense_weight().double(), None if layer.bias is None else layer.bias.detach().double()


@pytest.mark.parametrize("in_f,out_f,b,density,lead", [
    (7, 5, 2, 0.5, (3,)),        # ragged edges, tiny blocks
    (20, 12, 8, 0.4, (2, 3)),    # leading dims flattened
    (16, 33, 16, 1.0, (4,)),     # a ragged output edge
    (9, 10, 32, 1.0, (2,)),      # one block larger than the layer
])
def test_gradcheck_against_the_masked_dense_layer(in_f, out_f, b, density, lead):
    layer = _layer(in_f, out_f, b, density, seed=in_f)
    x = torch.randn(*lead, in_f, dtype=torch.float64, requires_grad=True)
    W, bias = _masked_dense(layer)
    torch.testing.assert_close(layer(x), x @ W.T + bias, rtol=1e-12, atol=1e-12)
    # gradcheck perturbs its inputs in place: the layer's own parameters among them.
    assert torch.autograd.gradcheck(lambda x, w, bb: layer(x), (x, layer.weight, layer.bias), nondet_tol=0)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_every_gradient_against_float64(dtype, tol):
    layer64 = _layer(70, 50, 16, 0.5, seed=3)
    layer = _layer(70, 50, 16, 0.5, seed=3, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(layer64.weight)
        layer.bias.copy_(layer64.bias)
        layer64.weight.copy_(layer.weight.double())
        layer64.bias.copy_(layer.bias.double())
    x = torch.randn(37, 70, dtype=torch.float64).to(dtype)
    x64 = x.double().requires_grad_()
    x = x.clone().requires_grad_()
    dy = torch.randn(37, 50, dtype=torch.float64).to(dtype)
    y, y64 = layer(x), layer64(x64)
    y.backward(dy)
    y64.backward(dy.double())
    for got, want in ((y, y64), (x.grad, x64.grad), (layer.weight.grad, layer64.weight.grad),
                      (layer.bias.grad, layer64.bias.grad)):
        assert got.dtype == dtype
        scale = max(1.0, float(want.abs().max()))
        assert float((got.double() - want).abs().max()) <= tol * scale


def test_bf16_autocast_matches_fp32_within_bf16_rounding():
    layer = _layer(64, 96, 32, 0.5, seed=5, dtype=torch.float32)
    x = torch.randn(8, 64, requires_grad=True)
    y32 = layer(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y16 = layer(x)
    assert y16.dtype == torch.bfloat16
    y16.float().sum().backward()
    assert layer.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert float((y16.float() - y32).abs().max()) <= 2e-2 * max(1.0, float(y32.abs().max()))


def test_results_are_bitwise_identical_for_any_thread_count():
    layer = _layer(256, 320, 32, 0.5, seed=6, dtype=torch.float32)
    x = torch.randn(300, 256)
    dy = torch.randn(300, 320)
    before = ts.get_num_threads()
    outs = []
    try:
        for threads in (1, 2, 3):
            ts.set_num_threads(threads)
            xg = x.clone().requires_grad_()
            layer.zero_grad()
            y = layer(xg)
            y.backward(dy)
            outs.append((y, xg.grad, layer.weight.grad.clone(), layer.bias.grad.clone()))
    finally:
        ts.set_num_threads(before)
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_outputs_on_pooled_memory_have_the_same_bits(monkeypatch, dtype):
    """Y, dX and dW of 4 MiB and more come from the core's buffer pool: the same bits as
    on torch's memory (the pool turned off), also when every kept buffer of their size
    holds NaN. Ragged edges make dW's padding matter."""
    import trnsparse._interop as interop

    scale = 4 // torch.empty(0, dtype=dtype).element_size()
    layer = _layer(1100 * scale, 1100, 32, 1.0, seed=11, dtype=dtype)
    x = torch.randn(1000, 1100 * scale).to(dtype)
    dy = torch.randn(1000, 1100).to(dtype)

    def run():
        layer.zero_grad(set_to_none=True)
        # Y, dX and dW round up to one mapped size: take every kept buffer of it, and more.
        dirty = [interop.empty(layer.weight.shape, dtype, "test").fill_(float("nan")) for _ in range(8)]
        del dirty
        xg = x.clone().requires_grad_()
        y = layer(xg)
        y.backward(dy)
        return y.detach().clone(), xg.grad.clone(), layer.weight.grad.clone()

    assert layer.weight.numel() * layer.weight.element_size() >= interop.POOLED_BYTES
    assert x.numel() * x.element_size() >= interop.POOLED_BYTES
    pooled = run()
    monkeypatch.setattr(interop, "POOLED_BYTES", 1 << 62)
    plain = run()
    for a, b in zip(pooled, plain):
        assert a.dtype == b.dtype == dtype and torch.equal(a, b)


def test_non_contiguous_inputs_are_read_as_they_are():
    layer = _layer(24, 16, 8, 0.5, seed=7, dtype=torch.float32)
    base = torch.randn(10, 40)
    strided = base[:, 3:27]                      # rows contiguous, row stride 40: read in place
    transposed = torch.randn(24, 10).T           # columns contiguous: copied once
    W, bias = layer.dense_weight(), layer.bias.detach()
    for x in (strided, transposed):
        torch.testing.assert_close(layer(x), x @ W.T + bias, rtol=1e-5, atol=1e-5)


def test_empty_layout_gives_the_bias_and_zero_gradients():
    layer = BlockSparseLinear(20, 12, block_size=8, layout=torch.zeros(2, 3, dtype=torch.bool))
    assert layer.n_blocks == 0 and layer.density == 0.0
    x = torch.randn(5, 20, requires_grad=True)
    y = layer(x)
    torch.testing.assert_close(y, layer.bias.detach().expand(5, 12))
    y.sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x)) and layer.weight.grad.shape == (0, 8, 8)
    assert torch.equal(layer.bias.grad, torch.full((12,), 5.0))


def test_from_dense_keeps_the_largest_blocks_and_to_dense_is_equivalent():
    torch.manual_seed(8)
    linear = torch.nn.Linear(64, 48)
    with torch.no_grad():
        linear.weight[16:32, 32:48] *= 100.0   # block (1, 2) has the largest norm
    layer = BlockSparseLinear.from_dense(linear, density=0.25, block_size=16)
    assert layer.mask().shape == (3, 4) and int(layer.layout.sum()) == 3 and bool(layer.mask()[1, 2])
    dense = layer.to_dense()
    x = torch.randn(6, 64)
    torch.testing.assert_close(dense(x), layer(x), rtol=1e-5, atol=1e-5)
    full = BlockSparseLinear.from_dense(linear, density=1.0, block_size=16)
    torch.testing.assert_close(full(x), linear(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(full.to_dense().weight, linear.weight)


def test_density_draws_from_torchs_generator():
    torch.manual_seed(9)
    a = BlockSparseLinear(100, 70, block_size=16, density=0.3)
    torch.manual_seed(9)
    b = BlockSparseLinear(100, 70, block_size=16, density=0.3)
    assert torch.equal(a.layout, b.layout) and torch.equal(a.weight, b.weight)
    assert a.n_blocks == round(0.3 * 5 * 7)
    assert "density=0.2857" in repr(a) and "block_size=16" in repr(a)
    # Padding of the ragged edge blocks is zero.
    assert torch.equal(a.dense_weight().abs().sum(), a.weight.detach().abs().sum())


def test_state_dict_and_torch_save_round_trip():
    torch.manual_seed(10)
    layer = BlockSparseLinear(40, 30, block_size=8, density=0.4)
    other = BlockSparseLinear(40, 30, block_size=8, density=0.8)   # another layout, other block count
    other.load_state_dict(layer.state_dict())
    assert torch.equal(other.layout, layer.layout) and torch.equal(other.weight, layer.weight)
    x = torch.randn(3, 40)
    assert torch.equal(other(x), layer(x))
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert torch.equal(loaded(x), layer(x))
    assert set(layer.state_dict()) == {"weight", "bias", "layout"} and layer.layout.dtype == torch.uint8


def test_errors_name_their_argument():
    layer = BlockSparseLinear(16, 8, block_size=4, density=0.5)
    with pytest.raises(ts.ShapeError, match="in_features = 16"):
        layer(torch.randn(2, 15))
    with pytest.raises(TypeError, match="input has dtype torch.float64"):
        layer(torch.randn(2, 16, dtype=torch.float64))
    with pytest.raises(ts.ShapeError, match="layout has shape"):
        BlockSparseLinear(16, 8, block_size=4, layout=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="layout must have dtype torch.bool"):
        BlockSparseLinear(16, 8, block_size=4, layout=torch.ones(2, 4))
    for bad in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="density"):
            BlockSparseLinear(16, 8, block_size=4, density=bad)
    with pytest.raises(ValueError, match="block_size"):
        BlockSparseLinear(16, 8, block_size=0)
    with pytest.raises(ValueError, match="in_features"):
        BlockSparseLinear(0, 8)
