"""What the CLI tests (test_cli.py, test_cli_bench.py) share: the binary and data paths
their command line names, running the tool (on a pipe or a pseudo-terminal), and the
test case's assertions. Standard library only."""
import argparse
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import unittest

TRNSPARSE = ""  # path of the binary, from --trnsparse
DATA = ""  # tests/data, from --data


def data(*parts):
    return os.path.join(DATA, *parts)


def run(*args, **kwargs):
    return subprocess.run([TRNSPARSE, *args], capture_output=True, text=True, timeout=120, **kwargs)


def stderr_on_a_terminal(*args, timeout=120):
    """Runs the tool with stderr on a pseudo-terminal: (the completed process, everything
    written to the terminal, decoded)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([TRNSPARSE, *args], stdout=subprocess.PIPE, stderr=slave, timeout=timeout, text=True)
        os.close(slave)
        slave = None
        shown = b""
        while select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the pty closed with the child
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    return proc, shown.decode()


def json_lines(stdout):
    """Every line of stdout parsed as one JSON object."""
    return [json.loads(line) for line in stdout.splitlines()]


class CliTestCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="trnsparse_cli_")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertStatus(self, result, status):
        self.assertEqual(result.returncode, status, f"\nstdout: {result.stdout}\nstderr: {result.stderr}")

    def assertOneErrorLine(self, result, *fragments):
        """Exit 1 with a single line on stderr holding every fragment."""
        self.assertStatus(result, 1)
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        for fragment in fragments:
            self.assertIn(fragment, lines[0])

    def info_json(self, path):
        result = run("info", path, "--json")
        self.assertStatus(result, 0)
        (summary,) = json_lines(result.stdout)
        return summary


def main(doc):
    """Parses --trnsparse and --data, then runs the calling script's tests."""
    global TRNSPARSE, DATA
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--trnsparse", required=True, help="the trnsparse binary")
    parser.add_argument("--data", required=True, help="the tests/data directory")
    args, rest = parser.parse_known_args()
    TRNSPARSE, DATA = os.path.abspath(args.trnsparse), os.path.abspath(args.data)
    unittest.main(module="__main__", argv=[sys.argv[0], "-v", *rest])
