"""Block pruning for trnsparse.nn.BlockSparseLinear.

    layout = trnsparse.prune.block_magnitude(linear.weight, density=0.25, block_size=32)
    pruner = trnsparse.prune.GradualPruner(model, final_density=0.25, start_step=100, end_step=1000,
                                           every=50, optimizer=opt)
    for step in range(...):
        ...; opt.step(); pruner.step()

Layouts are bool tensors (⌈out/b⌉ × ⌈in/b⌉). Every choice here is a deterministic
function of the weights (ties go to the lower block index), so processes holding the same
weights (data-parallel replicas) choose the same layouts.
"""
from __future__ import annotations

import math

import torch

_CRITERIA = ("l2", "l1", "linf")


def check_density(density, who: str) -> float:
    if isinstance(density, bool) or not isinstance(density, (int, float)) or not 0.0 < float(density) <= 1.0:
        raise ValueError(f"{who}: density = {density!r} must be a number in (0, 1]")
    return float(density)


def check_block_size(block_size, who: str) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"{who}: block_size = {block_size!r} must be an int >= 1")
    return block_size


def block_norms(weight: torch.Tensor, block_size: int, criterion: str = "l2", who: str = "block_norms") -> torch.Tensor:
    """The norm of every b × b block of a 2-D weight (⌈out/b⌉ × ⌈in/b⌉), fp64; edge
    blocks count their logical entries only."""
    if criterion not in _CRITERIA:
        raise ValueError(f"{who}: criterion must be one of {', '.join(_CRITERIA)}, got {criterion!r}")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise ValueError(f"{who}: weight must be a 2-D tensor, got "
                         f"{tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__}")
    b = block_size
    out, inp = weight.shape
    R, C = -(-out // b), -(-inp // b)
    padded = torch.zeros(R * b, C * b, dtype=torch.float64)
    padded[:out, :inp] = weight.detach().to(torch.float64).cpu()
    tiles = padded.view(R, b, C, b).permute(0, 2, 1, 3).reshape(R, C, b * b)
    if criterion == "l2":
        return tiles.square().sum(-1).sqrt()
    if criterion == "l1":
        return tiles.abs().sum(-1)
    return tiles.abs().amax(-1)


def keep_largest(scores: torch.Tensor, count: int) -> torch.Tensor:
    """A bool tensor of scores' shape marking its `count` largest entries (ties: lower index)."""
    order = torch.sort(-scores.flatten(), stable=True).indices[:count]
    keep = torch.zeros(scores.numel(), dtype=torch.bool)
    keep[order] = True
    return keep.view(scores.shape)


def blocks_for(density: float, grid_blocks: int) -> int:
    """Blocks a layout of `density` keeps of `grid_blocks`: the nearest count, at least one."""
    return min(grid_blocks, max(1, round(density * grid_blocks)))


def block_magnitude(weight: torch.Tensor, density: float, block_size: int, criterion: str = "l2") -> torch.Tensor:
    """The layout keeping the blocks of largest norm (`criterion`: "l2", "l1" or "linf")
    of a dense (out × in) weight: round(density · blocks) of them, at least one."""
    who = "block_magnitude"
    density = check_density(density, who)
    block_size = check_block_size(block_size, who)
    norms = block_norms(weight, block_size, criterion, who)
    return keep_largest(norms, blocks_for(density, norms.numel()))


def cubic_density(step: int, initial: float, final: float, start_step: int, end_step: int) -> float:
    """Zhu & Gupta (2017), "To prune, or not to prune": the sparsity s_t = s_f + (s_i − s_f)
    (1 − (t − t0) / (t1 − t0))³ between start_step t0 and end_step t1, as a density."""
    if step <= start_step:
        return initial
    if step >= end_step:
        return final
    progress = (step - start_step) / (end_step - start_step)
    return final + (initial - final) * (1.0 - progress) ** 3


class GradualPruner:
    """Prunes every trnsparse.nn.BlockSparseLinear of `model` from its density at
    construction to `final_density` on the cubic schedule (cubic_density), at steps
    start_step, start_step + every, ... up to end_step: each layer keeps its stored blocks
    of largest norm (`criterion`) through `relayout`, which carries `optimizer`'s state of
    the kept blocks. Call `step()` once per training step, after the optimizer's."""

    def __init__(self, model: torch.nn.Module, final_density: float, start_step: int, end_step: int, every: int,
                 *, optimizer: torch.optim.Optimizer | None = None, criterion: str = "l2"):
        from .nn import BlockSparseLinear

        who = "GradualPruner"
        self.final_density = check_density(final_density, who)
        for name, v in (("start_step", start_step), ("end_step", end_step), ("every", every)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{who}: {name} = {v!r} must be an int >= 0")
        if end_step <= start_step:
            raise ValueError(f"{who}: end_step = {end_step} must be greater than start_step = {start_step}")
        if every < 1:
            raise ValueError(f"{who}: every = {every} must be >= 1")
        if criterion not in _CRITERIA:
            raise ValueError(f"{who}: criterion must be one of {', '.join(_CRITERIA)}, got {criterion!r}")
        self.layers = [m for m in model.modules() if isinstance(m, BlockSparseLinear)]
        if not self.layers:
            raise ValueError(f"{who}: the model holds no trnsparse.nn.BlockSparseLinear (see trnsparse.nn.sparsify)")
        self.initial = [layer.density for layer in self.layers]
        self.start_step, self.end_step, self.every = start_step, end_step, every
        self.optimizer, self.criterion = optimizer, criterion
        self.step_count = 0

    def density_at(self, step: int) -> list[float]:
        """Each layer's target density at `step`."""
        return [cubic_density(step, d0, min(d0, self.final_density), self.start_step, self.end_step)
                for d0 in self.initial]

    def step(self) -> None:
        """Advances one step; prunes when the schedule says so."""
        t = self.step_count
        self.step_count += 1
        scheduled = (t - self.start_step) % self.every == 0 or t == self.end_step
        if not (self.start_step <= t <= self.end_step and scheduled):
            return
        for layer, density in zip(self.layers, self.density_at(t)):
            norms = block_norms(layer.dense_weight(), layer.block_size, self.criterion)
            norms[~layer.mask()] = -math.inf  # never regrow a pruned block
            keep = blocks_for(density, norms.numel())
            if keep < layer.n_blocks:
                layer.relayout(keep_largest(norms, keep), self.optimizer)


__all__ = ["GradualPruner", "block_magnitude", "block_norms", "cubic_density"]
