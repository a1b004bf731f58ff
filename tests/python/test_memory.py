"""An allocation that fails inside the C++ core reaches Python as MemoryError (not a crash
or a silent wrong result), and the process stays usable afterwards. Run in a child with
its address space limited (RLIMIT_AS), so the test never touches the machine's memory."""
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import resource, sys
    import trnsparse as ts
    limit = 3 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        # 3 blocks per block row of 2^26 rows: about 200M stored blocks, some 3 GB of
        # indices, more than the 3 GiB address space left after the libraries.
        ts.mask.local_window(1 << 26, 1, 1)
    except MemoryError:
        print("MemoryError")
    # Still usable: a small mask builds and reports its blocks.
    print(ts.mask.local_window(1000, 100, 1).n_blocks)
""")


def test_failed_allocation_is_memory_error():
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["MemoryError", "28"], result.stdout + result.stderr


KEPT_CHILD = textwrap.dedent("""
    import numpy as np, scipy.sparse as sp
    import trnsparse as ts
    A = ts.CSRMatrix.from_scipy(sp.random(3000, 3000, 0.01, format="csr", random_state=1))
    try:
        A @ A  # C's arrays are over 64 KiB: the first large result reads TRNSPARSE_KEPT_MB
        print("no error")
    except ValueError as e:
        print("ValueError", "TRNSPARSE_KEPT_MB" in str(e))
""")


def test_kept_memory_setting_is_checked():
    """TRNSPARSE_KEPT_MB takes 0 to 1024 MiB; anything else is a ValueError naming it, and a
    valid value (0 included) leaves products as they were."""
    for value, want in [("abc", "ValueError True"), ("2000", "ValueError True"), ("-1", "ValueError True"),
                        ("0", "no error"), ("64", "no error")]:
        env = dict(os.environ, TRNSPARSE_KEPT_MB=value)
        result = subprocess.run([sys.executable, "-c", KEPT_CHILD], capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == want, (value, result.stdout + result.stderr)
