"""Recovers a diffusion coefficient field by gradient descent through a sparse solve.

The forward model is −∇·(κ∇u) = f on the unit square, u = 0 on the walls, discretised
by finite volumes on an m x m grid of cells with one κ per cell: the matrix A(κ) is
SPD and block sparse (BSR, blocks of 16), assembled from κ differentiably straight into
A.blocks. Several sources f (columns of F) give the observations U_obs = A(κ_true)⁻¹ F.
Adam fits log κ to minimise ||U(κ) − U_obs||² / ||U_obs||², where U(κ) = trnsparse.solve
(A(κ), F): each step is one CG solve forward and one adjoint CG solve backward, and the
gradient reaches κ through A.blocks without a dense n x n matrix.

    PYTHONPATH=build/python python3 examples/python/inverse_diffusion.py
"""
from __future__ import annotations

import math

import torch

import trnsparse as ts

GRID = 32  # cells per side: n = 1024 unknowns
BLOCK = 16


def faces(m: int):
    """The cell pairs (p, q) sharing a face of the m x m grid (row-major cells), and the
    cells on a wall face, once per wall face (corner cells twice)."""
    cell = torch.arange(m * m).view(m, m)
    p = torch.cat([cell[:, :-1].reshape(-1), cell[:-1, :].reshape(-1)])
    q = torch.cat([cell[:, 1:].reshape(-1), cell[1:, :].reshape(-1)])
    wall = torch.cat([cell[:, 0], cell[:, -1], cell[0, :], cell[-1, :]])
    return p, q, wall


class Diffusion:
    """A(κ) of −∇·(κ∇u) with u = 0 on the walls: a face between cells p and q
    conducts t = harmonic mean of κ_p and κ_q / h², a wall face t = 2 κ_p / h² (the wall
    is h/2 away); each face adds t to its cells' diagonal entries and −t to the entries
    coupling its two cells. The block pattern is fixed; `matrix(kappa)` scatters the
    entries into A.blocks with one index_put, differentiable in kappa."""

    def __init__(self, m: int = GRID, block_size: int = BLOCK, dtype: torch.dtype = torch.float64):
        self.h, self.dtype = 1.0 / m, dtype
        self.p, self.q, self.wall = faces(m)
        n = m * m
        rows = torch.cat([self.p, self.q, self.p, self.q, self.wall])
        cols = torch.cat([self.p, self.q, self.q, self.p, self.wall])
        block_cols = -(-n // block_size)
        keys, self.block_of = torch.unique((rows // block_size) * block_cols + cols // block_size, return_inverse=True)
        self.within = (rows % block_size, cols % block_size)
        counts = torch.bincount(keys // block_cols, minlength=block_cols)
        self.structure = (keys % block_cols, torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]), (n, n),
                          block_size)
        self.n_blocks, self.block_size = keys.numel(), block_size

    def matrix(self, kappa: torch.Tensor) -> ts.BSRMatrix:
        """A(κ) for κ of shape (m, m) (positive)."""
        k = kappa.reshape(-1)
        inner = 2 * k[self.p] * k[self.q] / (k[self.p] + k[self.q]) / self.h ** 2
        outer = 2 * k[self.wall] / self.h ** 2
        values = torch.cat([inner, inner, -inner, -inner, outer])
        b = self.block_size
        blocks = torch.zeros(self.n_blocks, b, b, dtype=self.dtype).index_put(
            (self.block_of, *self.within), values, accumulate=True)
        return ts.BSRMatrix(blocks, *self.structure)


def true_kappa(m: int = GRID) -> torch.Tensor:
    """A smooth background with a conducting disc and a resistive bar."""
    c = (torch.arange(m, dtype=torch.float64) + 0.5) / m
    y, x = torch.meshgrid(c, c, indexing="ij")
    kappa = torch.exp(0.4 * torch.sin(2 * math.pi * x) * torch.cos(math.pi * y))
    kappa = torch.where((x - 0.3) ** 2 + (y - 0.6) ** 2 < 0.15 ** 2, 3.0 * kappa, kappa)
    return torch.where((abs(x - 0.7) < 0.06) & (abs(y - 0.35) < 0.2), 0.3 * kappa, kappa)


def sources(m: int = GRID, count: int = 3) -> torch.Tensor:
    """(m², count²) right-hand sides: Gaussian bumps on a count x count lattice of centres."""
    c = (torch.arange(m, dtype=torch.float64) + 0.5) / m
    y, x = torch.meshgrid(c, c, indexing="ij")
    centres = (torch.arange(count, dtype=torch.float64) + 0.5) / count
    bumps = [torch.exp(-((x - cx) ** 2 + (y - cy) ** 2) / 0.02) for cy in centres for cx in centres]
    return torch.stack([b.reshape(-1) for b in bumps], dim=1)


def main(steps: int = 60, lr: float = 0.1, log_every: int = 10) -> tuple[list[float], float]:
    """Fits κ from the observations: (the loss at each step, the final relative error
    ||κ − κ_true|| / ||κ_true||). Prints the loss every `log_every` steps (0: never)."""
    model = Diffusion()
    kappa_true = true_kappa()
    F = sources()
    U_obs = ts.solve(model.matrix(kappa_true), F)
    scale = float((U_obs ** 2).sum())

    log_kappa = torch.zeros(GRID, GRID, dtype=torch.float64, requires_grad=True)  # start from κ = 1
    optimiser = torch.optim.Adam([log_kappa], lr=lr)
    losses = []
    for step in range(steps):
        optimiser.zero_grad()
        U = ts.solve(model.matrix(log_kappa.exp()), F)
        loss = ((U - U_obs) ** 2).sum() / scale
        loss.backward()
        optimiser.step()
        losses.append(float(loss))
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"step {step:3d}  loss {float(loss):.3e}")
    kappa = log_kappa.detach().exp()
    error = float((kappa - kappa_true).norm() / kappa_true.norm())
    if log_every:
        print(f"relative error of κ: {error:.3f} (κ = 1 start: "
              f"{float((1 - kappa_true).norm() / kappa_true.norm()):.3f})")
    return losses, error


if __name__ == "__main__":
    main()
