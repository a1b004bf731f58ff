"""trnsparse.measure / measure_pair: the library's timing harness (trnsparse/timing.hpp)
on Python callables. No timing thresholds: the fields, the calls made and the errors."""
import pytest

import trnsparse as ts


def test_measure_times_the_asked_runs_after_a_warm_up():
    calls = []
    t = ts.measure(lambda: calls.append(1), reps=7, retries=0, warmup_ms=0.0, max_warmup=3)
    assert isinstance(t, ts.Timing)
    assert t.runs == 7 and t.attempts == 1
    assert len(calls) >= 7 + 1  # at least one warm-up run
    assert 0.0 <= t.min_ms <= t.median_ms
    assert t.spread >= 0.0 and t.stalled_teams >= 0
    assert t.stable == (t.spread <= 0.10 and t.stalled_teams == 0)


def test_measure_pair_alternates_both_sides():
    order = []
    tf, tg = ts.measure_pair(lambda: order.append("f"), lambda: order.append("g"), reps=6, chunk=2, retries=0,
                             warmup_ms=0.0, max_warmup=1)
    assert tf.runs == 6 and tg.runs == 6
    timed = "".join(order)
    # g's chunk first, each chunk after one untimed run: ggg fff, three times (after warm-ups).
    assert timed.endswith("gggfff" * 3)


def test_a_product_through_the_harness():
    A = ts.poisson3d(8)
    x = A.to_dense()[:, 0].clone()
    t = ts.measure(lambda: ts.spmv(A, x), reps=5)
    assert t.runs == 5 and t.median_ms > 0.0


def test_errors_name_the_argument():
    with pytest.raises(TypeError, match="fn must be callable"):
        ts.measure(3)
    with pytest.raises(TypeError, match="g must be callable"):
        ts.measure_pair(lambda: None, None)
    with pytest.raises(ValueError, match="reps must be an integer >= 1"):
        ts.measure(lambda: None, reps=0)
    with pytest.raises(ValueError, match="chunk must be an integer >= 1"):
        ts.measure_pair(lambda: None, lambda: None, chunk=0)
    with pytest.raises(ValueError, match="max_spread must be a number >= 0"):
        ts.measure(lambda: None, max_spread=-1.0)


def test_an_exception_in_the_callable_reaches_the_caller():
    def boom():
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        ts.measure(boom)
