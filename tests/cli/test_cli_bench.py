#!/usr/bin/python3
"""Tests of `trnsparse bench` and `trnsparse advise`: the rows every section prints (keys,
counts, no timing thresholds), the advisor's JSON, cache and measurements, and its
progress on a terminal only. Standard library only.

    /usr/bin/python3 tests/cli/test_cli_bench.py --trnsparse build/bin/trnsparse --data tests/data
"""
import json
import os
import tempfile

import cli_support as support
from cli_support import CliTestCase, data, json_lines, run, stderr_on_a_terminal


class Bench(CliTestCase):
    """A tiny run of each `trnsparse bench` section: one JSON object per measurement, with
    the keys docs/benchmarks.md documents and a correct result. Timings are not checked."""

    BSR_KEYS = {"section", "n", "width", "block_density", "dtype", "threads", "isa", "trnsparse_ms", "dense_ms",
                "eigen_ms", "rel_err", "gflops", "peak_gflops", "plan_ms_first", "plan_ms_repeat"}
    SPMV_KEYS = {"section", "matrix", "n", "trnsparse_ms", "eigen_ms", "rel_err", "gbps", "stream_gbps"}

    def setUp(self):
        super().setUp()
        if "--section" not in run("bench", "--help").stdout:  # without `bench`, --help is the tool's own
            self.skipTest("built without the benchmark (needs OpenBLAS and Eigen)")

    def bench(self, *args):
        result = run("bench", "--json", "--reps", "1", "--threads", "2", *args)
        self.assertStatus(result, 0)
        return json_lines(result.stdout)

    def test_load_section_rows(self):
        """`--section load`: every small product idle and beside a busy process, with the
        default threads and one thread, and the pool's counts; no time is checked."""
        rows = self.bench("--section", "load", "--poisson", "8")
        ops = ["spmv_csr_fp64", "spmv_bsr32_fp32", "spmm_bsr3_fp64_w8", "attention_fwd_fp32", "cg_iteration_fp64"]
        self.assertEqual([(r["op"], r["busy_process"]) for r in rows], [(op, busy) for busy in (False, True) for op in ops])
        for r in rows:
            self.assertEqual((r["section"], r["threads"]), ("load", 2))
            self.assertGreater(r["ms"], 0)
            self.assertGreater(r["one_thread_ms"], 0)
            self.assertAlmostEqual(r["ratio_vs_one_thread"], r["ms"] / r["one_thread_ms"], delta=1e-9 * r["ratio_vs_one_thread"])
            self.assertGreaterEqual(r["teams"], r["teams_alone"])
            self.assertIsInstance(r["unstable"], bool)
            self.assertGreaterEqual(r["spread"], 0)

    def test_bsr_rows_for_every_width_and_density(self):
        for dtype, tolerance in (("fp32", 1e-5), ("bf16", 1e-2)):
            rows = self.bench("--section", "bsr", "--dtype", dtype, "--size", "256", "--widths", "1,40",
                              "--densities", "0.25,1", "--block-size", "64")
            self.assertEqual([(r["width"], r["block_density"]) for r in rows], [(1, 0.25), (1, 1), (40, 0.25), (40, 1)])
            for row in rows:
                self.assertLessEqual(self.BSR_KEYS, row.keys())
                self.assertEqual((row["section"], row["dtype"], row["threads"]), ("bsr", dtype, 2))
                self.assertLess(row["rel_err"], tolerance)
                self.assertGreater(row["trnsparse_ms"], 0)

    def test_csr_rows(self):
        (row,) = self.bench("--section", "csr", "--size", "300", "--widths", "8", "--densities", "0.05")
        self.assertLessEqual({"section", "n", "width", "density", "nnz", "trnsparse_ms", "eigen_ms", "gflops"},
                             row.keys())
        self.assertEqual((row["n"], row["width"], row["density"]), (300, 8, 0.05))
        self.assertLess(row["rel_err"], 1e-5)

    def test_spmv_rows_with_the_symmetric_product(self):
        rows = self.bench("--section", "spmv", "--dtype", "fp64", "--poisson", "12", "--matrix",
                          data("1138_bus.mtx"), "--matrix", data("ani1.mtx"))
        self.assertEqual([r["matrix"] for r in rows], ["poisson3d_12", "1138_bus.mtx", "ani1.mtx"])
        for row in rows:
            self.assertLessEqual(self.SPMV_KEYS, row.keys())
            self.assertLess(row["rel_err"], 1e-13)
            self.assertLess(row.get("sym_rel_err", 0), 1e-13)
        self.assertIn("sym_ms", rows[0])  # symmetric: the half-storage product is timed
        self.assertIn("sym_ms", rows[1])
        self.assertNotIn("sym_ms", rows[2])  # ani1 is not exactly symmetric

    def test_bsr_problem_mode_times_every_candidate_and_the_half_storage(self):
        """`--problem`: a row per candidate the advisor weighs, an advise row per width and,
        for a symmetric matrix at width 1, a half-storage row per small block size. The
        calibration goes to a fresh cache directory."""
        env = dict(os.environ, XDG_CACHE_HOME=self.path("cache"))
        result = run("bench", "--json", "--reps", "1", "--threads", "2", "--section", "bsr", "--dtype", "fp64",
                     "--problem", "elasticity3d:5", "--widths", "1,8", env=env)
        self.assertStatus(result, 0)
        rows = json_lines(result.stdout)
        for width in (1, 8):
            candidates = [r for r in rows if r["section"] == "bsr" and r["width"] == width]
            (advice,) = [r for r in rows if r["section"] == "advise" and r["width"] == width]
            self.assertIn(3, [r["block_size"] for r in candidates])  # the natural block
            self.assertEqual(sum(r["advisor_choice"] for r in candidates), 1)
            for r in candidates:
                self.assertLessEqual({"problem", "format", "block_size", "fill", "trnsparse_ms", "csr_ms", "eigen_ms",
                                      "petsc_baij_ms", "predicted_ms", "rel_err", "gbps", "stream_read_gbps"}, r.keys())
                self.assertGreater(r["gbps"], 0)
                self.assertGreater(r["stream_read_gbps"], 0)
                self.assertEqual(r["problem"], "elasticity3d:5")
                self.assertLess(r["rel_err"], 1e-6)
                self.assertGreaterEqual(r["fill"], 1.0)
            self.assertIn(advice["choice_block_size"], [r["block_size"] for r in candidates])
            self.assertIn(advice["best_block_size"], [r["block_size"] for r in candidates])
        symmetric = [r for r in rows if r["section"] == "bsr-symmetric"]
        self.assertIn(3, [r["block_size"] for r in symmetric])
        for r in symmetric:
            self.assertEqual(r["width"], 1)
            self.assertLessEqual({"trnsparse_ms", "bsr_full_ms", "csr_symmetric_ms", "petsc_sbaij_ms", "stored_blocks"},
                                 r.keys())
            self.assertLess(r["rel_err"], 1e-6)
        self.assertTrue(os.listdir(os.path.join(self.path("cache"), "trnsparse")))  # the calibration was saved
        self.assertTrue(all(r["fp32_ms"] is None for r in rows if r["section"] == "bsr"))  # bf16 rows only

    def test_bsr_problem_mode_bf16_rows_time_fp32_alongside(self):
        """bf16 rows carry the same product in fp32 and the bf16 one timed beside it, and
        their ratio."""
        env = dict(os.environ, XDG_CACHE_HOME=self.path("cache"))
        result = run("bench", "--json", "--reps", "1", "--threads", "2", "--section", "bsr", "--dtype", "bf16",
                     "--problem", "elasticity3d:4", "--widths", "8", env=env)
        self.assertStatus(result, 0)
        candidates = [r for r in json_lines(result.stdout) if r["section"] == "bsr"]
        self.assertIn("csr", [r["format"] for r in candidates])
        for r in candidates:
            self.assertGreater(r["fp32_ms"], 0)
            self.assertGreater(r["bf16_ms"], 0)
            self.assertAlmostEqual(r["speedup_vs_fp32"], r["fp32_ms"] / r["bf16_ms"], places=6)

    SOLVE_KEYS = {"section", "problem", "storage", "n", "nnz", "iterations", "trnsparse_iter_ms", "trnsparse_total_ms",
                  "eigen_iter_ms", "eigen_iterations", "petsc_iter_ms", "bound_iter_ms", "stream_gbps", "rel_residual"}
    SCREEN_KEYS = {"section", "n", "width", "threshold", "kept_fraction", "kept_tile_fraction", "fused_ms",
                   "unfused_ms", "dense_ms", "rel_err"}

    def test_solve_rows_full_upper_and_multi_rhs(self):
        full, upper, multi = self.bench("--section", "solve", "--poisson", "8")
        self.assertEqual((full["storage"], upper["storage"]), ("full", "upper"))
        for row in (full, upper):
            self.assertLessEqual(self.SOLVE_KEYS, row.keys())
            self.assertEqual((row["section"], row["problem"], row["n"], row["dtype"]),
                             ("solve", "poisson3d_8", 512, "fp64"))
            self.assertEqual((row["status"], row["eigen_status"]), ("converged", "converged"))
            self.assertLess(row["rel_residual"], 1e-7)  # recomputed from x; the solve's tolerance is 1e-8
            self.assertLess(row["eigen_rel_residual"], 1e-7)
            self.assertLessEqual(abs(row["iterations"] - row["eigen_iterations"]), 1)
            # PETSc is measured only when trnsparse-mpi-bench is built (make bench-deps).
            if row["petsc_iter_ms"] is None:
                self.assertIsNone(row["petsc_iterations"])
            else:
                self.assertGreater(row["petsc_iter_ms"], 0)
                self.assertLessEqual(abs(row["petsc_iterations"] - row["iterations"]), 1)
            self.assertAlmostEqual(row["speedup_vs_best"], min(
                row["eigen_iter_ms"], row["petsc_iter_ms"] or row["eigen_iter_ms"]) / row["trnsparse_iter_ms"], places=6)
            self.assertGreater(row["bound_iter_ms"], 0)
        self.assertEqual(full["nnz"], 7 * 512 - 6 * 64)  # 7-point stencil, Dirichlet boundary
        self.assertEqual(upper["nnz"], (full["nnz"] + 512) // 2)
        self.assertLess(upper["bytes_per_iter"], full["bytes_per_iter"])
        self.assertLessEqual(abs(full["iterations"] - upper["iterations"]), 1)
        self.assertLessEqual({"multi_rhs_ms", "single_solves_ms", "k"}, multi.keys())
        self.assertGreater(multi["bound_speedup_vs_single"], 1)
        self.assertEqual((multi["problem"], multi["k"], multi["converged_columns"]), ("poisson3d_8", 16, 16))
        self.assertEqual(multi["iterations"], multi["single_iterations"])
        self.assertLess(multi["rel_residual"], 1e-7)
        self.assertLess(multi["max_abs_diff_vs_single"], 1e-12)

    def test_screen_rows_for_each_threshold(self):
        for dtype, tolerance in (("fp32", 1e-5), ("fp64", 1e-12)):
            rows = self.bench("--section", "screen", "--dtype", dtype, "--size", "256", "--widths", "16",
                              "--block-size", "32")
            self.assertEqual(len(rows), 3)
            for row, keep in zip(rows, (1.0, 0.5, 0.1)):
                self.assertLessEqual(self.SCREEN_KEYS, row.keys())
                self.assertEqual((row["section"], row["dtype"], row["n"], row["width"]), ("screen", dtype, 256, 16))
                self.assertGreaterEqual(row["kept_fraction"], keep)
                self.assertLess(row["kept_fraction"], keep + 0.02)
                self.assertLessEqual(row["kept_fraction"], row["kept_tile_fraction"])
                for key in ("rel_err", "unfused_rel_err", "dense_rel_err"):
                    self.assertLess(row[key], tolerance, key)
            self.assertEqual((rows[0]["kept_fraction"], rows[0]["kept_tile_fraction"]), (1, 1))
            self.assertLess(rows[2]["kept_tile_fraction"], 0.5)  # decaying bounds: most tiles skipped whole

    ATTN_KEYS = {"section", "seq", "head_dim", "mask", "block_density", "dtype", "threads", "fwd_ms", "fwd_bwd_ms",
                 "dense_fwd_ms", "dense_fwd_bwd_ms", "fwd_rel_err", "bwd_rel_err", "fwd_gflops", "sgemm_gflops"}

    def test_attn_rows_for_each_mask(self):
        for dtype, tolerance in (("fp32", 1e-5), ("bf16", 2e-2)):
            rows = self.bench("--section", "attn", "--dtype", dtype, "--size", "300", "--head-dims", "20",
                              "--block-size", "32")
            self.assertEqual([r["mask"] for r in rows], ["local", "dilated", "global", "full"])
            for row in rows:
                self.assertLessEqual(self.ATTN_KEYS, row.keys())
                self.assertEqual((row["section"], row["dtype"], row["seq"], row["head_dim"]), ("attn", dtype, 300, 20))
                self.assertLess(row["fwd_rel_err"], tolerance)
                self.assertLess(row["bwd_rel_err"], tolerance)
            self.assertEqual(rows[3]["block_density"], 1)


class Advise(CliTestCase):
    """`trnsparse advise`: its JSON and table, the calibration cache it reads or measures
    and writes. Predictions are checked against each other, never against a time. The
    class shares one calibration file (measured once, about a second); only the tests
    of a bad or unwritable cache measure again."""

    KEYS = {"matrix", "rows", "cols", "nnz", "dtype", "width", "candidates", "choice", "predicted_speedup_vs_csr",
            "calibration"}

    @classmethod
    def setUpClass(cls):
        cls.cal_dir = tempfile.TemporaryDirectory(prefix="trnsparse_cli_advise_")
        cls.calibration = os.path.join(cls.cal_dir.name, "cache", "calibration.txt")
        cls.first = cls.advise_json("--problem", "elasticity3d:3")  # measures: no cache file yet

    @classmethod
    def tearDownClass(cls):
        cls.cal_dir.cleanup()

    @classmethod
    def advise(cls, *args, calibration=None, **kwargs):
        return run("advise", *args, "--calibration", calibration or cls.calibration, **kwargs)

    @classmethod
    def advise_json(cls, *args, calibration=None):
        """The one JSON object of a run, which must succeed."""
        result = cls.advise(*args, "--json", calibration=calibration)
        if result.returncode != 0:
            raise AssertionError(f"advise {args} exited {result.returncode}: {result.stderr}")
        (line,) = json_lines(result.stdout)
        return line

    def assertConsistentAdvice(self, advice):
        """Every documented key; CSR first, then BSR by growing block size; the choice
        the candidate predicted fastest, and the speedup CSR's prediction over its."""
        measured = "measured_ms" in advice["candidates"][0]
        self.assertEqual(set(advice), self.KEYS | ({"measured_choice_vs_best"} if measured else set()))
        candidates = advice["candidates"]
        for c in candidates:
            self.assertLessEqual({"format", "block_size", "fill", "predicted_ms"}, set(c))
            self.assertGreaterEqual(c["fill"], 1.0)
            self.assertGreaterEqual(c["predicted_ms"], 0.0)
        self.assertEqual((candidates[0]["format"], candidates[0]["block_size"], candidates[0]["fill"]), ("csr", 1, 1.0))
        self.assertTrue(all(c["format"] == "bsr" for c in candidates[1:]))
        sizes = [c["block_size"] for c in candidates[1:]]
        self.assertEqual(sizes, sorted(set(sizes)))
        best = min(candidates, key=lambda c: c["predicted_ms"])
        self.assertEqual(advice["choice"], {"format": best["format"], "block_size": best["block_size"]})
        # JSON numbers are printed shortest-round-trip: the division is the tool's own.
        self.assertEqual(advice["predicted_speedup_vs_csr"], candidates[0]["predicted_ms"] / best["predicted_ms"])

    def test_json_of_a_named_problem(self):
        a = self.first
        self.assertConsistentAdvice(a)
        self.assertEqual((a["matrix"], a["rows"], a["cols"], a["dtype"], a["width"]),
                         ("elasticity3d:3", 144, 144, "fp32", 1))  # 3 unknowns x 3 x 4 x 4 free nodes
        self.assertEqual(a["nnz"] % 9, 0)
        bsr3 = [c for c in a["candidates"] if c["block_size"] == 3]
        self.assertEqual(bsr3[0]["fill"], 1.0)  # full 3 x 3 node blocks
        self.assertTrue(a["calibration"].startswith("measured: no cache file"), a["calibration"])
        with open(self.calibration) as f:
            self.assertRegex(f.readline(), r"^trnsparse-calibration \d+\n$")
        self.assertEqual(os.listdir(os.path.dirname(self.calibration)), ["calibration.txt"])  # no temporary left

    def test_second_run_is_cached_and_advises_alike(self):
        again = self.advise_json("--problem", "elasticity3d:3")
        self.assertEqual(again["calibration"], "cached")
        # The cache holds the measured speeds exactly: the same predictions to the bit.
        self.assertEqual({**again, "calibration": None}, {**self.first, "calibration": None})

    def test_measure_adds_measured_times(self):
        a = self.advise_json("--problem", "block_stencil3d:3", "--measure")
        self.assertConsistentAdvice(a)
        self.assertEqual(a["calibration"], "cached")
        for c in a["candidates"]:
            self.assertGreater(c["measured_ms"], 0)  # a time, not checked against the prediction
            self.assertGreaterEqual(c["measured_spread"], 0)
            self.assertIsInstance(c["unstable"], bool)
        chosen = [c for c in a["candidates"] if (c["format"], c["block_size"]) == (a["choice"]["format"], a["choice"]["block_size"])]
        self.assertEqual(a["measured_choice_vs_best"], chosen[0]["measured_ms"] / min(c["measured_ms"] for c in a["candidates"]))
        self.assertNotIn("measured_ms", self.first["candidates"][0])

    def test_measure_is_stable_on_small_matrices(self):
        """`advise --measure` ten times on small matrices (1138_bus and an ani4-sized
        Poisson matrix, 2 threads): the same choice every time, and the choice's measured
        time over the fastest's within 10% of its median over the runs, unless a run is
        flagged. Each candidate is timed in alternating chunks against CSR after a warm-up
        that wakes the threads, so a run that a busy machine disturbs says so (`unstable`)
        instead of reporting a wrong ratio (the tests run side by side). Whether the
        choice is the fastest depends on the calibration, which a busy machine skews:
        docs/benchmarks.md records the idle machine's runs against that target.
        A sanitized build (TRNSPARSE_TEST_SANITIZED) times its instrumentation, so there
        only the choice is checked, on three runs."""
        timed = os.environ.get("TRNSPARSE_TEST_SANITIZED") != "1"
        for args in ((data("1138_bus.mtx"),), ("--problem", "poisson3d:15")):
            for width in ("1", "8"):
                runs = []
                for _ in range(10 if timed else 3):
                    result = self.advise(*args, "--width", width, "--measure", "--json",
                                         env={**os.environ, "TRNSPARSE_NUM_THREADS": "2"})
                    self.assertStatus(result, 0)
                    runs.append(json.loads(result.stdout))
                with self.subTest(matrix=args[-1], width=width):
                    self.assertEqual(len({json.dumps(r["choice"]) for r in runs}), 1)
                    if not timed:
                        continue
                    ratios = sorted(r["measured_choice_vs_best"] for r in runs)
                    median = (ratios[4] + ratios[5]) / 2
                    for r in runs:
                        flagged = any(c["unstable"] for c in r["candidates"])
                        self.assertTrue(abs(r["measured_choice_vs_best"] - median) <= 0.10 * median or flagged,
                                        (median, r))

    def test_matrix_market_file(self):
        a = self.advise_json(data("1138_bus.mtx"))
        self.assertConsistentAdvice(a)
        self.assertEqual((a["matrix"], a["rows"], a["cols"], a["nnz"]), (data("1138_bus.mtx"), 1138, 1138, 4054))
        self.assertEqual(a["calibration"], "cached")

    def test_table(self):
        result = self.advise("--problem", "elasticity3d:3")
        self.assertStatus(result, 0)
        self.assertRegex(result.stdout, r"^elasticity3d:3: 144 x 144, \d+ non-zeros; fp32 products of width 1\n")
        self.assertRegex(result.stdout, r"(?m)^csr\s+1\.00\s+[\d.]+ ms")
        self.assertRegex(result.stdout, r"(?m)^bsr-3\s+1\.00\s+[\d.]+ ms")
        self.assertEqual(result.stdout.count("<- choice"), 1)
        choice = self.first["choice"]
        expected = "csr" if choice["format"] == "csr" else f"bsr block size {choice['block_size']}"
        self.assertRegex(result.stdout, rf"(?m)^choice: {expected}, predicted [\d.]+x CSR \(calibration cached\)$")

    def test_bad_usage_exits_1(self):
        for args, fragment in (([], "--problem"), (["--problem", "heat:3"], "heat:3"),
                               (["--problem", "poisson3d:3", "--width", "0"], "--width"),
                               (["--problem", "poisson3d:3", "--dtype", "fp16"], "--dtype"),
                               ([data("1138_bus.mtx"), "--problem", "poisson3d:3"], "--problem"),
                               ([self.path("missing.mtx")], "missing.mtx"),
                               ([data("malformed", "bad_banner.mtx")], "bad_banner.mtx")):
            with self.subTest(args=args):
                result = self.advise(*args)
                self.assertStatus(result, 1)
                self.assertIn(fragment, result.stderr)
                self.assertEqual(result.stdout, "")

    def test_garbage_cache_is_measured_again(self):
        path = self.path("calibration.txt")
        with open(path, "w") as f:
            f.write("not a calibration\n")
        a = self.advise_json("--problem", "poisson3d:4", calibration=path)
        self.assertConsistentAdvice(a)
        self.assertTrue(a["calibration"].startswith("measured: not a calibration file"), a["calibration"])
        with open(path) as f:
            self.assertRegex(f.readline(), r"^trnsparse-calibration \d+\n$")  # replaced by the measurement
        self.assertEqual(self.advise_json("--problem", "poisson3d:4", calibration=path)["calibration"], "cached")

    def test_unwritable_cache_is_measured_and_used_once(self):
        path = "/proc/nonexistent/calibration.txt"
        a = self.advise_json("--problem", "poisson3d:4", calibration=path)
        self.assertConsistentAdvice(a)
        self.assertTrue(a["calibration"].startswith(f"measured: no cache file {path}"), a["calibration"])
        self.assertFalse(os.path.exists(path))



class AdviseProgress(CliTestCase):
    """`advise` reports its calibration's progress on a terminal only (issue 19)."""

    def test_calibration_progress_on_a_terminal_only(self):
        with tempfile.TemporaryDirectory(prefix="trnsparse_cli_advise_progress_") as tmp:
            calibration = os.path.join(tmp, "calibration.txt")
            proc, text = stderr_on_a_terminal("advise", "--problem", "elasticity3d:3", "--calibration", calibration)
            self.assertStatus(proc, 0)
            self.assertRegex(text, r"^\r\x1b\[Kadvise: calibrating fp32 width 1 \(\d+/11 formats\), [\d.]+ s elapsed")
            self.assertTrue(text.endswith("\r\x1b[K"), repr(text[-40:]))  # erased before the table
            self.assertIn("choice:", proc.stdout)
            self.assertNotIn("\r", proc.stdout)
            # Piped, or with --json, stderr stays empty (--recalibrate measures again).
            for extra in ([], ["--json"]):
                with self.subTest(extra=extra):
                    result = run("advise", "--problem", "elasticity3d:3", "--calibration", calibration,
                                 "--recalibrate", *extra)
                    self.assertStatus(result, 0)
                    self.assertEqual(result.stderr, "")


if __name__ == "__main__":
    support.main(__doc__)
