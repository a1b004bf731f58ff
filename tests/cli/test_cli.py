#!/usr/bin/python3
"""Tests of the `trnsparse` command-line tool: exit statuses (0 success, 1 bad usage or
input, never a signal), messages naming the file and line, JSON output (one object per
line) and output files that are complete or absent, for usage, info, convert, demo and
solve (bench and advise: test_cli_bench.py). Standard library only.

    /usr/bin/python3 tests/cli/test_cli.py --trnsparse build/bin/trnsparse --data tests/data
"""
import os
import re
import resource
import subprocess
import tempfile

import cli_support as support
from cli_support import CliTestCase, data, json_lines, run, stderr_on_a_terminal


class Usage(CliTestCase):
    def test_help_exits_0(self):
        for args in (["--help"], ["info", "--help"], ["convert", "--help"], ["demo", "--help"], ["advise", "--help"]):
            with self.subTest(args=args):
                self.assertStatus(run(*args), 0)
        self.assertRegex(run("--help").stdout, r"(?s)info.*convert.*demo")

    def test_version(self):
        result = run("--version")
        self.assertStatus(result, 0)
        self.assertRegex(result.stdout.strip(), r"^trnsparse \d+\.\d+\.\d+$")

    def test_bad_usage_exits_1(self):
        for args in ([], ["frobnicate"], ["info"], ["info", "--nope", data("ani1.mtx")], ["convert", data("ani1.mtx")],
                     ["convert", data("ani1.mtx"), self.path("out.mtx"), "--format", "sparse"],
                     ["convert", data("ani1.mtx"), self.path("out.mtx"), "--precision", "0"],
                     ["demo", "--formats", "--n", "0"], ["demo", "--n", "abc"], ["demo", "--block-size", "-4"],
                     ["demo", "--threads", "0"]):
            with self.subTest(args=args):
                result = run(*args)
                self.assertStatus(result, 1)
                self.assertNotEqual(result.stderr, "")
        self.assertFalse(os.path.exists(self.path("out.mtx")))


class Info(CliTestCase):
    def test_text(self):
        result = run("info", data("1138_bus.mtx"))
        self.assertStatus(result, 0)
        self.assertRegex(result.stdout, r"shape\s+1138 x 1138")
        self.assertRegex(result.stdout, r"nnz\s+4054")
        self.assertRegex(result.stdout, r"banner\s+coordinate real symmetric")

    def test_json_1138_bus(self):
        s = self.info_json(data("1138_bus.mtx"))
        self.assertEqual((s["rows"], s["cols"], s["nnz"], s["stored_entries"]), (1138, 1138, 4054, 2596))
        self.assertEqual((s["format"], s["field"], s["symmetry"]), ("coordinate", "real", "symmetric"))
        self.assertTrue(s["symmetric"])
        self.assertAlmostEqual(s["density"], 4054 / 1138**2)
        per_row = s["nnz_per_row"]
        self.assertLessEqual(per_row["min"], per_row["mean"])
        self.assertLessEqual(per_row["mean"], per_row["max"])
        self.assertAlmostEqual(per_row["mean"], 4054 / 1138)
        self.assertEqual(sum(per_row["histogram"].values()), 1138)
        self.assertEqual(sorted(s["block_density"], key=int), ["16", "32", "64", "128"])
        for b, density in s["block_density"].items():
            blocks = ((1138 + int(b) - 1) // int(b)) ** 2
            self.assertAlmostEqual(density, s["stored_blocks"][b] / blocks)
            self.assertTrue(0 < density <= 1)

    def test_json_general_file(self):
        s = self.info_json(data("ani1.mtx"))
        self.assertEqual((s["rows"], s["cols"], s["nnz"], s["symmetry"]), (36, 36, 208, "general"))
        self.assertFalse(s["symmetric"])  # symmetric only up to the last digit
        self.assertEqual(s["block_density"]["128"], 1.0)  # one block holds the whole matrix

    def test_malformed_file_names_file_and_line(self):
        path = data("malformed", "index_out_of_range.mtx")
        self.assertOneErrorLine(run("info", path), f"{path}:5:", "expected a row index in [1, 3], found '4'")
        self.assertOneErrorLine(run("info", path, "--json"), f"{path}:5:")

    def test_unsupported_file(self):
        path = data("malformed", "complex.mtx")
        self.assertOneErrorLine(run("info", path), f"{path}:1:", "complex matrices are not supported")

    def test_missing_file(self):
        path = self.path("missing.mtx")
        self.assertOneErrorLine(run("info", path), path)

    def test_closed_stdout_is_an_error_not_a_signal(self):
        read_end, write_end = os.pipe()
        os.close(read_end)  # no reader: writing raises SIGPIPE / EPIPE
        try:
            result = subprocess.run([support.TRNSPARSE, "info", data("ani1.mtx")], stdout=write_end, stderr=subprocess.PIPE,
                                    text=True, timeout=60)
        finally:
            os.close(write_end)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("standard output", result.stderr)


class Convert(CliTestCase):
    def test_round_trip_keeps_the_matrix(self):
        general = self.path("general.mtx")
        self.assertStatus(run("convert", data("1138_bus.mtx"), general, "--symmetry", "general"), 0)
        s = self.info_json(general)
        self.assertEqual((s["symmetry"], s["stored_entries"], s["nnz"]), ("general", 4054, 4054))
        self.assertTrue(s["symmetric"])

        back = self.path("back.mtx")
        self.assertStatus(run("convert", general, back, "--symmetry", "symmetric"), 0)
        s = self.info_json(back)
        self.assertEqual((s["symmetry"], s["stored_entries"], s["nnz"]), ("symmetric", 2596, 4054))

    def test_defaults_follow_the_input_banner(self):
        out = self.path("same.mtx")
        self.assertStatus(run("convert", data("1138_bus.mtx"), out), 0)
        s = self.info_json(out)
        self.assertEqual((s["format"], s["field"], s["symmetry"], s["nnz"]), ("coordinate", "real", "symmetric", 4054))

    def test_array_pattern_and_transpose(self):
        array = self.path("array.mtx")
        self.assertStatus(run("convert", data("ani1.mtx"), array, "--format", "ARRAY"), 0)
        s = self.info_json(array)
        self.assertEqual((s["format"], s["stored_entries"]), ("array", 36 * 36))

        pattern = self.path("pattern.mtx")
        self.assertStatus(run("convert", data("ani1.mtx"), pattern, "--field", "pattern", "--transpose"), 0)
        s = self.info_json(pattern)
        self.assertEqual((s["field"], s["nnz"]), ("pattern", 208))

    def test_json(self):
        out = self.path("out.mtx")
        result = run("convert", data("ani1.mtx"), out, "--json", "--transpose")
        self.assertStatus(result, 0)
        (line,) = json_lines(result.stdout)
        self.assertEqual((line["output"], line["rows"], line["cols"], line["transpose"]), (out, 36, 36, True))

    def test_malformed_input_leaves_no_output(self):
        path = data("malformed", "too_few_entries.mtx")
        out = self.path("out.mtx")
        self.assertOneErrorLine(run("convert", path, out), f"{path}:6:", "expected entry 3 of 3")
        self.assertEqual(os.listdir(self.dir), [])

    def test_refused_conversion_keeps_the_old_output(self):
        out = self.path("out.mtx")
        with open(out, "w") as f:
            f.write("old contents\n")
        # ani1 is symmetric only up to rounding: the writer refuses it.
        self.assertOneErrorLine(run("convert", data("ani1.mtx"), out, "--symmetry", "symmetric"), "not symmetric")
        with open(out) as f:
            self.assertEqual(f.read(), "old contents\n")
        self.assertEqual(os.listdir(self.dir), ["out.mtx"])

    def test_output_in_a_missing_directory(self):
        out = self.path(os.path.join("missing", "out.mtx"))
        self.assertOneErrorLine(run("convert", data("ani1.mtx"), out), out)
        self.assertEqual(os.listdir(self.dir), [])


class Demo(CliTestCase):
    """`demo --formats` (the Poisson matrix in CSR and BSR) and the tour (`demo`), whose
    lines are the benchmark's rows at small sizes; timings are not checked."""

    def test_formats_json_lines(self):
        result = run("demo", "--formats", "--n", "8", "--json")
        self.assertStatus(result, 0)
        lines = json_lines(result.stdout)
        kinds = [line["kind"] for line in lines]
        self.assertEqual(kinds, ["problem"] + ["tiling"] * 4 + ["spmv"] * 4)
        self.assertEqual((lines[0]["rows"], lines[0]["nnz"]), (512, 512 * 7 - 6 * 64))
        self.assertEqual([line["block_size"] for line in lines[1:5]], [16, 32, 64, 128])
        spmv = {(line["format"], line["dtype"]): line for line in lines[5:]}
        self.assertEqual(spmv["csr", "float64"]["max_rel_error"], 0)
        self.assertLess(spmv["csr", "float32"]["max_rel_error"], 1e-6)
        self.assertLess(spmv["bsr", "float32"]["max_rel_error"], 1e-6)
        self.assertLess(spmv["bsr", "bf16"]["max_rel_error"], 2e-2)
        self.assertEqual(spmv["bsr", "bf16"]["block_size"], 32)
        for line in lines[5:]:
            self.assertGreaterEqual(line["time_ms"], 0)

    def test_formats_text_with_an_extra_block_size(self):
        result = run("demo", "--formats", "--n", "6", "--block-size", "24", "--repeats", "1")
        self.assertStatus(result, 0)
        self.assertRegex(result.stdout, r"poisson3d\(6\): 216 x 216")
        self.assertRegex(result.stdout, r"(?m)^\s+24\s+\d+")  # the chosen size joins the tiling table
        self.assertRegex(result.stdout, r"(?m)^bsr\s+bf16\s+24\s")

    def test_tour(self):
        if "--section" not in run("bench", "--help").stdout:
            self.skipTest("built without the benchmark (needs OpenBLAS and Eigen)")
        result = subprocess.run([support.TRNSPARSE, "demo", "--threads", "2"], capture_output=True, text=True, timeout=600)
        self.assertStatus(result, 0)
        for heading in (r"1\. Block-sparse operator times dense", r"2\. Block-sparse attention",
                        r"3\. Conjugate gradients", r"4\. Screened product"):
            self.assertRegex(result.stdout, heading)
        self.assertRegex(result.stdout, r"(?m)^   fp32 .* dense SGEMM .* faster .* rel\. error \d\.\de-0[5-9]$")
        self.assertRegex(result.stdout, r"(?m)^   bf16 .* faster")
        self.assertRegex(result.stdout, r"(?m)^   forward\+backward .* faster .* rel\. error \d\.\de-0[5-9]$")
        self.assertRegex(result.stdout, r"(?m)^   full  storage .* the bound")
        self.assertRegex(result.stdout, r"(?m)^   fused .* faster")
        # Only the harness's warnings, when another test kept the machine busy.
        for line in result.stderr.splitlines():
            self.assertRegex(line, r"^bench \w+: warning: timings \d+% apart")


class Solve(CliTestCase):
    def test_json_poisson(self):
        result = run("solve", "--poisson", "10", "--tol", "1e-9", "--json")
        self.assertStatus(result, 0)
        [line] = json_lines(result.stdout)
        self.assertEqual((line["n"], line["precond"], line["status"]), (1000, "jacobi", "converged"))
        self.assertTrue(line["converged"])
        self.assertLessEqual(line["rel_residual"], 1e-9)
        self.assertGreater(line["iterations"], 0)
        self.assertGreaterEqual(line["seconds"], 0)

    def test_file_with_jacobi_and_without(self):
        counts = {}
        for precond in ("jacobi", "none"):
            result = run("solve", data("1138_bus.mtx"), "--precond", precond, "--rhs", "random", "--maxiter", "20000",
                         "--json")
            self.assertStatus(result, 0)
            [line] = json_lines(result.stdout)
            self.assertTrue(line["converged"], line)
            counts[precond] = line["iterations"]
        self.assertLess(counts["jacobi"], counts["none"])  # 1138_bus is badly scaled: Jacobi helps a lot

    def test_non_convergence_is_reported(self):
        result = run("solve", "--poisson", "12", "--maxiter", "3", "--json")
        self.assertStatus(result, 0)
        [line] = json_lines(result.stdout)
        self.assertEqual((line["converged"], line["status"], line["iterations"]), (False, "max_iterations", 3))

    def test_text_summary_without_a_progress_line_on_a_pipe(self):
        result = run("solve", "--poisson", "6")
        self.assertStatus(result, 0)
        self.assertRegex(result.stdout, r"poisson3d\(6\): 216 x 216")
        self.assertRegex(result.stdout, r"cg: converged after \d+ iterations")
        self.assertNotIn("\r", result.stdout)

    def test_embedded_problems(self):
        result = run("solve", "--problem", "elasticity3d:4", "--tol", "1e-9", "--json")
        self.assertStatus(result, 0)
        [line] = json_lines(result.stdout)
        self.assertEqual((line["problem"], line["n"], line["status"]), ("elasticity3d:4", 3 * 4 * 25, "converged"))
        self.assertLessEqual(line["rel_residual"], 1e-9)
        self.assertEqual(json_lines(run("solve", "--problem", "poisson3d:5", "--json").stdout)[0]["n"], 125)
        for bad in ("elasticity3d", "elasticity3d:0", "elasticity3d:x", "heat:4", "poisson3d:5x"):
            with self.subTest(problem=bad):
                result = run("solve", "--problem", bad)
                self.assertStatus(result, 1)
                self.assertIn("--problem", result.stderr)

    def test_methods_and_preconditioners(self):
        # Every method with every preconditioner it takes: the JSON fields of a solve, and
        # a converged true residual; a factorisation beats none on the nonsymmetric problem.
        iterations = {}
        for method, problem, preconds in (("cg", "poisson3d:8", ("none", "jacobi", "bjacobi", "ic0", "ilu0", "amg")),
                                          ("gmres", "convdiff3d:8:2", ("none", "jacobi", "ilu0")),
                                          ("bicgstab", "convdiff3d:8:2", ("none", "bjacobi", "ilu0"))):
            for precond in preconds:
                with self.subTest(method=method, precond=precond):
                    result = run("solve", "--problem", problem, "--method", method, "--precond", precond,
                                 "--restart", "10", "--tol", "1e-9", "--json")
                    self.assertStatus(result, 0)
                    [line] = json_lines(result.stdout)
                    self.assertEqual((line["method"], line["precond"], line["status"]), (method, precond, "converged"))
                    self.assertLessEqual(line["rel_residual"], 1e-9)
                    self.assertGreaterEqual(line["setup_seconds"], 0)
                    self.assertGreaterEqual(line["seconds"], 0)
                    iterations[method, precond] = line["iterations"]
        self.assertLess(iterations["gmres", "ilu0"], iterations["gmres", "none"])
        # bjacobi on elasticity3d takes its 3 x 3 node blocks by default, amg its rigid-body modes.
        for precond in ("bjacobi", "amg"):
            result = run("solve", "--problem", "elasticity3d:12", "--precond", precond, "--json")
            self.assertStatus(result, 0)
            self.assertTrue(json_lines(result.stdout)[0]["converged"])
        self.assertLess(iterations["cg", "amg"], iterations["cg", "jacobi"])
        # amg's tuning reaches the hierarchy: a higher Chebyshev degree takes fewer iterations.
        tuned = {}
        for degree in ("1", "3"):
            result = run("solve", "--problem", "poisson3d:16", "--precond", "amg", "--amg-degree", degree,
                         "--amg-omega", "1.5", "--amg-threshold", "0", "--amg-max-coarse", "200", "--json")
            self.assertStatus(result, 0)
            [line] = json_lines(result.stdout)
            self.assertTrue(line["converged"])
            tuned[degree] = line["iterations"]
        self.assertLess(tuned["3"], tuned["1"])
        # --amg-fp64: the cycle reads double values (a coarse level is smoothed: its values
        # are not exact in fp32, poisson3d's 6 and -1 are), so CG ends on another residual.
        residual = {}
        for flags in ([], ["--amg-fp64"]):
            result = run("solve", "--problem", "poisson3d:16", "--precond", "amg", "--amg-max-coarse", "20", *flags,
                         "--json")
            self.assertStatus(result, 0)
            [line] = json_lines(result.stdout)
            self.assertTrue(line["converged"])
            residual[bool(flags)] = line["rel_residual"]
        self.assertNotEqual(residual[True], residual[False])
        for bad in (["--amg-degree", "0"], ["--amg-omega", "-1"], ["--amg-threshold", "2"],
                    ["--amg-max-coarse", "0"]):
            with self.subTest(bad=bad):
                result = run("solve", "--problem", "poisson3d:4", "--precond", "amg", *bad)
                self.assertStatus(result, 1)
                self.assertIn(bad[0], result.stderr)
        result = run("solve", "--problem", "convdiff3d:12:2", "--method", "gmres", "--precond", "ilu0", "--blocks", "3",
                     "--json")
        self.assertStatus(result, 0)
        self.assertTrue(json_lines(result.stdout)[0]["converged"])
        for bad in (["--method", "minres"], ["--precond", "ssor"], ["--restart", "0"], ["--blocks", "0"],
                    ["--precond", "bjacobi", "--block-size", "7"]):
            with self.subTest(bad=bad):
                result = run("solve", "--problem", "poisson3d:4", *bad)
                self.assertStatus(result, 1)
        self.assertIn("--block-size 7", run("solve", "--problem", "poisson3d:4", "--precond", "bjacobi",
                                            "--block-size", "7").stderr)

    def test_binary_input_is_escaped_in_the_message(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "garbage.mtx")
            with open(path, "wb") as f:
                f.write(b"%%MatrixMarket matrix coordinate real general\n\x9f\xff\x1b[2J 2 3\n")
            result = run("info", path)
            self.assertStatus(result, 1)
            self.assertIn("'\\x9f\\xff\\x1b[2J'", result.stderr)
            self.assertTrue(all(c == "\n" or " " <= c <= "~" for c in result.stderr), result.stderr)

    def test_out_of_memory_is_exit_1(self):
        """A problem larger than the memory the process may have (RLIMIT_AS lowered to
        1.5 GiB; poisson3d(256) needs about 2 GiB for its CSR arrays) fails with exit 1 and
        one line naming the cause, not a crash."""
        if "libasan" in subprocess.run(["ldd", support.TRNSPARSE], capture_output=True, text=True).stdout:
            self.skipTest("AddressSanitizer reserves terabytes of shadow address space: no RLIMIT_AS under it")
        limit = 3 << 29

        def lower_limit():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        result = subprocess.run([support.TRNSPARSE, "solve", "--poisson", "256"], capture_output=True, text=True,
                                timeout=120, preexec_fn=lower_limit)
        self.assertStatus(result, 1)
        self.assertRegex(result.stderr, r"^trnsparse: .*(out of memory|do not fit in memory)")
        self.assertEqual(result.stderr.count("\n"), 1, result.stderr)

    def test_progress_on_a_terminal_only(self):
        """With stderr on a pseudo-terminal, a progress line (iteration, residual, elapsed
        time, time left) is rewritten there; piped, or with --json, stderr stays empty."""
        proc, text = stderr_on_a_terminal("solve", "--poisson", "40", "--tol", "1e-10")
        self.assertStatus(proc, 0)
        self.assertRegex(text, r"^\r\x1b\[Kcg: iteration \d+, residual \d\.\d+e[-+]\d+, rate (nan|[\d.]+), [\d.]+ s elapsed")
        for update in text.split("\r\x1b[K")[2:-1]:  # later updates also estimate the time left
            # ... until the residual reaches the tolerance: the iteration that converges has
            # nothing left, and the 100 ms throttle can let its update through.
            if float(re.search(r"residual (\S+),", update).group(1)) <= 1e-10:
                continue
            # A slow start on a loaded machine can put the estimate past a minute: "1 min 19 s".
            self.assertRegex(update, r", about ([\d.]+ s|\d+ min \d\d s) left$")
        self.assertTrue(text.endswith("\r\x1b[K"), repr(text[-40:]))  # the line is erased at the end
        self.assertNotIn("\r", proc.stdout)
        for args in (["solve", "--poisson", "20"], ["solve", "--poisson", "20", "--json"]):
            self.assertEqual(run(*args).stderr, "")

    def test_bad_input(self):
        for args in (["solve", data("malformed", "bad_banner.mtx")], ["solve", "--precond", "ilu"], ["solve", "--tol", "-1"],
                     ["solve", "--poisson", "4", "--rhs", data("1138_bus.mtx")]):
            with self.subTest(args=args):
                result = run(*args)
                self.assertStatus(result, 1)
                self.assertNotEqual(result.stderr, "")


if __name__ == "__main__":
    support.main(__doc__)
