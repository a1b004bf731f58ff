#!/usr/bin/python3
"""Tests of `trnsparse hf`: the energy of water against Crawford's reference, Ångström
and bohr input, the JSON keys, the bench mode, and bad input exiting 1 with one message
line (never a crash). Standard library only.

    /usr/bin/python3 tests/hf/test_hf_cli.py --trnsparse build/bin/trnsparse --molecules examples/hartree_fock/molecules
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

TRNSPARSE = ""  # from --trnsparse
MOLECULES = ""  # from --molecules
CRAWFORD = -74.942079928192  # RHF/STO-3G water, T. D. Crawford's programming project 3
CRAWFORD_BOHR = """3
water, Crawford programming project 3 (bohr)
O  0.000000000000 -0.143225816552  0.000000000000
H  1.638036840407  1.136548822547 -0.000000000000
H -1.638036840407  1.136548822547 -0.000000000000
"""
KEYS = {"energy", "nbf", "iterations", "converged", "kept_block_fraction", "seconds", "kept_quartet_fraction",
        "integrals_s", "jk_ms_per_iteration"}
BENCH_KEYS = {"jk_screened_ms", "jk_unscreened_ms", "speedup", "energy_unscreened", "energy_difference"}


def molecule(name):
    return os.path.join(MOLECULES, f"{name}.xyz")


def run(*args):
    return subprocess.run([TRNSPARSE, "hf", *args], capture_output=True, text=True, timeout=240)


class HfTestCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="trnsparse_hf_")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def json_run(self, *args):
        result = run(*args, "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        (line,) = [json.loads(text) for text in result.stdout.splitlines()]
        return line

    def assertBadInput(self, result, *fragments):
        """Exit 1 with a single line on stderr holding every fragment."""
        self.assertEqual(result.returncode, 1, f"\nstdout: {result.stdout}\nstderr: {result.stderr}")
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])


class Energies(HfTestCase):
    def test_water_angstrom_file(self):
        line = self.json_run(molecule("water"), "--basis", "sto-3g", "--threshold", "1e-10")
        self.assertLessEqual(KEYS, line.keys())
        self.assertAlmostEqual(line["energy"], CRAWFORD, delta=1e-8)
        self.assertEqual((line["nbf"], line["converged"], line["kept_block_fraction"]), (7, True, 1))

    def test_water_bohr(self):
        line = self.json_run(self.write("water_bohr.xyz", CRAWFORD_BOHR), "--bohr")
        self.assertAlmostEqual(line["energy"], CRAWFORD, delta=1e-8)
        # The same file read as Ångström is another molecule.
        self.assertGreater(abs(self.json_run(self.write("w.xyz", CRAWFORD_BOHR))["energy"] - CRAWFORD), 1e-3)

    def test_text_report(self):
        result = run(molecule("water"))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("E(RHF) = -74.942079928", result.stdout)
        self.assertRegex(result.stdout, r"7 functions in 5 shells")
        self.assertRegex(result.stdout, r"(?m)^\s+1\s+-\d+\.\d+")  # the iteration table
        self.assertIn("kept fraction", result.stdout)

    def test_alkane_is_screened(self):
        line = self.json_run(molecule("decane"), "--basis", "sto-3g")
        self.assertTrue(line["converged"])
        self.assertLess(line["kept_block_fraction"], 1)
        self.assertLess(line["kept_quartet_fraction"], 0.5)

    def test_bench_keys(self):
        line = self.json_run(molecule("methane"), "--basis", "6-31g", "--bench")
        self.assertLessEqual(KEYS | BENCH_KEYS, line.keys())
        self.assertAlmostEqual(line["energy"], line["energy_unscreened"], delta=1e-8)
        self.assertGreater(line["jk_unscreened_ms"], 0)

    def test_charge(self):
        line = self.json_run(molecule("water"), "--charge", "2")  # 8 electrons
        self.assertTrue(line["converged"])
        self.assertGreater(line["energy"], CRAWFORD)


class BadInput(HfTestCase):
    def test_bad_xyz_names_file_and_line(self):
        path = self.write("bad.xyz", "2\ncomment\nO 0 0 0\nH 0 0 x\n")
        self.assertBadInput(run(path), f"{path}:4:", "coordinate")

    def test_unknown_element(self):
        path = self.write("xx.xyz", "1\ncomment\nXx 0 0 0\n")
        self.assertBadInput(run(path), f"{path}:3:", "unknown element 'Xx'")

    def test_unknown_basis(self):
        self.assertBadInput(run(molecule("water"), "--basis", "no-such-basis"), "unknown basis set 'no-such-basis'")

    def test_missing_basis_file(self):
        path = os.path.join(self.dir, "missing.gbs")
        self.assertBadInput(run(molecule("water"), "--basis", path), path)

    def test_malformed_basis_file(self):
        path = self.write("bad.gbs", "spherical\n****\nO 0\nS 2 1.00\n 1.0 1.0\n")
        self.assertBadInput(run(molecule("water"), "--basis", path), f"{path}:6:")

    def test_element_missing_from_basis(self):
        path = self.write("h.gbs", "spherical\n****\nH 0\nS 1 1.00\n 1.0 1.0\n****\n")
        self.assertBadInput(run(molecule("water"), "--basis", path), "element O")

    def test_odd_electrons(self):
        self.assertBadInput(run(molecule("water"), "--charge", "1"), "electrons")

    def test_usage_errors(self):
        for args in ([], [molecule("water"), "--threshold", "-1"], [molecule("water"), "--block-size", "24"],
                     [os.path.join(self.dir, "missing.xyz")]):
            with self.subTest(args=args):
                result = run(*args)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertNotEqual(result.stderr, "")


def main():
    global TRNSPARSE, MOLECULES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trnsparse", required=True, help="the trnsparse binary")
    parser.add_argument("--molecules", required=True, help="examples/hartree_fock/molecules")
    args, rest = parser.parse_known_args()
    TRNSPARSE, MOLECULES = os.path.abspath(args.trnsparse), os.path.abspath(args.molecules)
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
