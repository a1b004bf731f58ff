"""Score modifiers for `trnsparse.sparse_attention`, applied inside the attention kernels
(forward and backward) to each scaled score s = q · k · scale of query i and key j:

    O = sparse_attention(q, k, v, mask, score_mod=trnsparse.score.alibi(slopes))
    O = sparse_attention(q, k, v, mask, score_mod=trnsparse.score.softcap(50.0))
    O = sparse_attention(q, k, v, mask, score_mod=[score.alibi(slopes), score.softcap(30.0)])

- `alibi(slopes)`: s + slopes[h] · (j − i), one slope per query head h, with plain
  indices i and j as FlexAttention's ALiBi example writes it. When queries are offset
  from keys (decoding), every score of a row moves by the same amount, so outputs do not
  depend on the alignment (only the returned log-sum-exp does).
- `softcap(c)`: c · tanh(s / c), the logit soft-capping of Gemma 2.

Both are a closed set the kernels know, not per-element Python callbacks: a list applies
ALiBi first, then soft-capping (the kernels' order). Neither has learnable parameters;
slopes receive no gradient.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ScoreMod:
    """ALiBi slopes (a tuple of one float per query head, or None) and a soft-cap (a
    positive float, or None). Build it with `alibi` and `softcap`."""

    alibi_slopes: tuple[float, ...] | None = None
    softcap: float | None = None


def alibi(slopes) -> ScoreMod:
    """s + slopes[h] · (kv_idx − q_idx) for query head h. `slopes`: a 1-D tensor or
    sequence of finite floats, one per query head (see `alibi_slopes`)."""
    t = torch.as_tensor(slopes, dtype=torch.float64).detach().cpu()
    if t.dim() != 1 or t.numel() == 0:
        raise ValueError(f"score.alibi: slopes must be a non-empty 1-D sequence, got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError("score.alibi: slopes must be finite")
    return ScoreMod(alibi_slopes=tuple(float(x) for x in t.tolist()))


def softcap(cap: float) -> ScoreMod:
    """cap · tanh(s / cap), cap > 0 and finite."""
    if isinstance(cap, bool) or not isinstance(cap, (int, float)):
        raise TypeError(f"score.softcap: cap must be a number, got {type(cap).__name__}")
    if not (math.isfinite(cap) and cap > 0):
        raise ValueError(f"score.softcap: cap = {cap} must be positive and finite")
    return ScoreMod(softcap=float(cap))


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The ALiBi paper's slopes for `num_heads` heads: 2^(-8 h / n) for h = 1 .. n when
    n is a power of two, else those of the next lower power of two followed by every
    other slope of twice that many (Press et al., 2022)."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"score.alibi_slopes: num_heads = {num_heads!r} must be a positive int")

    def powers(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    p = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = powers(p) + powers(2 * p)[0::2][: num_heads - p]
    return torch.tensor(slopes, dtype=torch.float32)


def _resolve(score_mod, heads: int, who: str) -> tuple[list[float], float]:
    """(ALiBi slopes, one per head or empty; soft-cap, 0 for none) of `score_mod`: None, a
    ScoreMod, or a list of them in kernel order (ALiBi before soft-capping)."""
    if score_mod is None:
        return [], 0.0
    mods = list(score_mod) if isinstance(score_mod, (list, tuple)) else [score_mod]
    slopes: list[float] = []
    cap = 0.0
    for m in mods:
        if not isinstance(m, ScoreMod):
            raise TypeError(f"{who}: score_mod must be a trnsparse.score modifier (score.alibi, score.softcap) or a "
                            f"list of them, got {type(m).__name__}; arbitrary callables are not supported")
        if m.alibi_slopes is not None:
            if slopes:
                raise ValueError(f"{who}: score_mod has ALiBi twice")
            if cap:
                raise ValueError(f"{who}: score_mod applies ALiBi after soft-capping; the kernels apply ALiBi first")
            slopes = list(m.alibi_slopes)
        if m.softcap is not None:
            if cap:
                raise ValueError(f"{who}: score_mod has soft-capping twice")
            cap = m.softcap
    if slopes and len(slopes) != heads:
        raise ValueError(f"{who}: score.alibi has {len(slopes)} slopes but query has {heads} heads")
    return slopes, cap


__all__ = ["ScoreMod", "alibi", "alibi_slopes", "softcap"]
