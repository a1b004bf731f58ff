"""Block pruning and model conversion: trnsparse.prune.block_magnitude, nn.sparsify on a
small transformer, BlockSparseLinear.relayout carrying SGD and Adam state, and
GradualPruner's cubic schedule."""
import pytest
import torch

import trnsparse as ts
from trnsparse.nn import BlockSparseLinear
from trnsparse.prune import GradualPruner, block_magnitude, cubic_density


def test_block_magnitude_keeps_the_blocks_of_largest_norm():
    w = torch.zeros(10, 7)
    w[0:4, 0:4] = 1.0          # l2 4, l1 16, linf 1
    w[4:8, 4:7] = 3.0          # l2 sqrt(108), l1 36, linf 3
    w[8:10, 0:1] = 5.0         # l2 sqrt(50), l1 10, linf 5
    l2 = block_magnitude(w, 0.2, 4, "l2")
    assert l2.shape == (3, 2) and l2.dtype == torch.bool
    assert l2.nonzero().tolist() == [[1, 1]]
    assert block_magnitude(w, 0.5, 4, "l2").nonzero().tolist() == [[0, 0], [1, 1], [2, 0]]
    assert block_magnitude(w, 0.2, 4, "linf").nonzero().tolist() == [[2, 0]]
    assert block_magnitude(w, 0.2, 4, "l1").nonzero().tolist() == [[1, 1]]
    assert int(block_magnitude(torch.zeros(8, 8), 0.01, 4).sum()) == 1   # at least one block
    for bad in (0, 1.01, float("nan")):
        with pytest.raises(ValueError, match="density"):
            block_magnitude(w, bad, 4)
    with pytest.raises(ValueError, match="block_size"):
        block_magnitude(w, 0.5, 0)
    with pytest.raises(ValueError, match="criterion"):
        block_magnitude(w, 0.5, 4, "l3")


class _Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d, 2, batch_first=True)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def _transformer(d=32, layers=2):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[_Block(d) for _ in range(layers)], torch.nn.Linear(d, 10))


def test_sparsify_replaces_the_selected_linears_of_a_transformer():
    model = _transformer()
    x = torch.randn(2, 5, 32)
    dense_out = model(x)
    report = ts.nn.sparsify(model, density=1.0, block_size=16, include=["*.fc1", "*.fc2"])
    assert report.layers == ["0.fc1", "0.fc2", "1.fc1", "1.fc2"]
    assert report.params_before == report.params_after
    assert isinstance(model[0].fc1, BlockSparseLinear) and type(model[2]) is torch.nn.Linear
    torch.testing.assert_close(model(x), dense_out, rtol=1e-5, atol=1e-5)   # density 1: the same model

    model = _transformer()
    report = ts.nn.sparsify(model, density=0.25, block_size=16)
    # Every nn.Linear but the attention's own out_proj (a NonDynamicallyQuantizableLinear) and the model root.
    assert "2" in report.layers and "0.fc1" in report.layers
    replaced = 4 * (32 * 128) + 32 * 10
    kept = sum(m.weight.numel() for m in model.modules() if isinstance(m, BlockSparseLinear))
    assert report.params_before - report.params_after == replaced - kept
    loss = model(x).square().mean()
    loss.backward()
    assert all(m.weight.grad is not None for m in model.modules() if isinstance(m, BlockSparseLinear))
    with pytest.raises(TypeError, match="include"):
        ts.nn.sparsify(_transformer(), 0.5, include=3)


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    lambda p: torch.optim.Adam(p, lr=1e-2),
], ids=["sgd", "adam"])
def test_relayout_keeps_the_values_and_optimizer_state_of_staying_blocks(make_opt):
    torch.manual_seed(1)
    layer = BlockSparseLinear(24, 16, block_size=8, layout=torch.tensor([[1, 1, 0], [0, 1, 1]], dtype=torch.bool))
    opt = make_opt(layer.parameters())
    for _ in range(2):
        opt.zero_grad()
        layer(torch.randn(4, 24)).square().sum().backward()
        opt.step()
    state = {k: v.clone() for k, v in opt.state[layer.weight].items() if torch.is_tensor(v) and v.dim() == 3}
    assert state
    before = layer.weight.detach().clone()
    weight = layer.weight
    new = torch.tensor([[1, 0, 1], [0, 1, 1]], dtype=torch.bool)   # (0,0), (1,1), (1,2) stay; (0,2) new
    layer.relayout(new, opt)
    assert layer.weight is not weight and torch.equal(layer.mask(), new) and layer.n_blocks == 4
    assert any(p is layer.weight for p in opt.param_groups[0]["params"]) and weight not in opt.state
    # Old order: (0,0) (0,1) (1,1) (1,2); new order: (0,0) (0,2) (1,1) (1,2).
    stay_old, stay_new = [0, 2, 3], [0, 2, 3]
    assert torch.equal(layer.weight[stay_new].detach(), before[stay_old])
    assert torch.equal(layer.weight[1].detach(), torch.zeros(8, 8))
    for k, v in state.items():
        moved = opt.state[layer.weight][k]
        assert torch.equal(moved[stay_new], v[stay_old]) and torch.equal(moved[1], torch.zeros(8, 8))
    opt.zero_grad()
    loss = layer(torch.randn(4, 24)).sum()   # kept alive across the relayout below, as training loops do
    loss.backward()
    opt.step()   # the optimizer trains the new parameter
    layer.relayout(torch.tensor([[1, 0, 0], [0, 0, 1]], dtype=torch.bool), opt)
    layer(torch.randn(4, 24)).sum().backward()
    assert layer.weight.grad.shape == (2, 8, 8)
    with pytest.raises(ValueError, match="optimizer does not hold"):
        layer.relayout(new, make_opt([torch.nn.Parameter(torch.zeros(2))]))
    with pytest.raises(ts.ShapeError, match="layout has shape"):
        layer.relayout(torch.ones(3, 3, dtype=torch.bool))


def test_cubic_schedule_and_gradual_pruning():
    assert cubic_density(0, 1.0, 0.25, 10, 110) == 1.0
    assert cubic_density(60, 1.0, 0.25, 10, 110) == pytest.approx(0.25 + 0.75 * 0.5 ** 3)
    assert cubic_density(500, 1.0, 0.25, 10, 110) == 0.25
    torch.manual_seed(2)
    model = torch.nn.Sequential(BlockSparseLinear(64, 64, block_size=8), torch.nn.ReLU(),
                                BlockSparseLinear(64, 32, block_size=8))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    pruner = GradualPruner(model, final_density=0.25, start_step=2, end_step=12, every=3, optimizer=opt)
    densities = []
    for _ in range(15):
        opt.zero_grad()
        loss = model(torch.randn(8, 64)).square().mean()
        loss.backward()
        opt.step()
        before = [m.mask() for m in pruner.layers]
        pruner.step()
        for old, m in zip(before, pruner.layers):
            assert not bool((m.mask() & ~old).any()), "a pruned block came back"
        densities.append(model[0].density)
    assert densities[0] == 1.0 and densities[-1] == pytest.approx(0.25, abs=1 / 64)
    assert densities == sorted(densities, reverse=True)
    with pytest.raises(ValueError, match="end_step"):
        GradualPruner(model, 0.5, start_step=5, end_step=5, every=1)
    with pytest.raises(ValueError, match="no trnsparse.nn.BlockSparseLinear"):
        GradualPruner(torch.nn.Linear(2, 2), 0.5, 0, 10, 1)
