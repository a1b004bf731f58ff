"""Timing products the library's one way (trnsparse/timing.hpp): warm-up until the
threads are awake and the times settle, a median with its spread, paired runs in
alternating chunks, and a retry (then `stable=False`) when the spread stays wide or the
thread pool met a worker taken off its core."""
from __future__ import annotations

from typing import Callable, NamedTuple

from . import _core


class Timing(NamedTuple):
    """One measurement, in milliseconds."""

    median_ms: float
    min_ms: float
    spread: float  # (third quartile - first quartile) / median
    runs: int  # timed runs behind the median (of the last attempt)
    attempts: int  # measurements taken (1 + retries used)
    stalled_teams: int  # thread-pool teams that met a worker taken off its core
    stable: bool  # spread <= max_spread and no stalled team


def _options(who: str, reps: int, chunk: int, max_spread: float, retries: int, warmup_ms: float,
             max_warmup: int) -> tuple:
    for name, v in (("reps", reps), ("chunk", chunk)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{who}: {name} must be an integer >= 1, got {v!r}")
    for name, v in (("retries", retries), ("max_warmup", max_warmup)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{who}: {name} must be an integer >= 0, got {v!r}")
    for name, v in (("max_spread", max_spread), ("warmup_ms", warmup_ms)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
            raise ValueError(f"{who}: {name} must be a number >= 0, got {v!r}")
    return reps, chunk, float(max_spread), retries, float(warmup_ms), max_warmup


def _callable(who: str, name: str, f) -> None:
    if not callable(f):
        raise TypeError(f"{who}: {name} must be callable, got {type(f).__name__}")


def measure(fn: Callable[[], object], *, reps: int = 11, max_spread: float = 0.10, retries: int = 2,
            warmup_ms: float = 20.0, max_warmup: int = 200) -> Timing:
    """Times fn(): warm-up, then `reps` timed runs, retried while the spread is above
    `max_spread`."""
    _callable("measure", "fn", fn)
    return Timing(**_core.measure(fn, *_options("measure", reps, 1, max_spread, retries, warmup_ms, max_warmup)))


def measure_pair(f: Callable[[], object], g: Callable[[], object], *, reps: int = 11, chunk: int = 5,
                 max_spread: float = 0.10, retries: int = 2, warmup_ms: float = 20.0,
                 max_warmup: int = 200) -> tuple[Timing, Timing]:
    """Times f() and g() in alternating chunks of `chunk` runs each (g's first), so that a
    drift of the host's load falls on both: quote the ratio of the medians."""
    _callable("measure_pair", "f", f)
    _callable("measure_pair", "g", g)
    tf, tg = _core.measure_pair(f, g, *_options("measure_pair", reps, chunk, max_spread, retries, warmup_ms,
                                                max_warmup))
    return Timing(**tf), Timing(**tg)
