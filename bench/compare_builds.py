#!/usr/bin/python3
"""Times two builds of `trnsparse` on the same benchmarks, alternating them round by
round (so that both see the same drift of the host), and prints each benchmark's median
time per build and their ratio. Used for "no regression" checks (docs/benchmarks.md,
"Threads and busy machines").

    python3 bench/compare_builds.py OLD/trnsparse NEW/trnsparse [--rounds 3] [--busy]

--busy runs a spinning child process on one core for the whole comparison.
"""
import argparse
import collections
import json
import statistics
import subprocess
import sys

# (section arguments, key of a row, the times a row carries)
BENCHMARKS = {
    "bsr": (["--size", "4096,8192", "--widths", "1,256", "--densities", "0.05,0.25,1"],
            lambda r: ("bsr", r["n"], r["width"], r["block_density"]), lambda r: {"ms": r["trnsparse_ms"]}),
    "spmv": (["--poisson", "100"], lambda r: ("spmv", r["matrix"]),
             lambda r: {"ms": r["trnsparse_ms"], "sym_ms": r.get("sym_ms")}),
    "attn": (["--size", "4096", "--head-dims", "64"], lambda r: ("attn", r["seq"], r["mask"], r["dtype"]),
             lambda r: {"fwd_ms": r["fwd_ms"], "fwd_bwd_ms": r["fwd_bwd_ms"]}),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", action="store_true", help="a spinning process on one core throughout")
    args = parser.parse_args()
    builds = {"old": args.old, "new": args.new}
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    try:
        for rnd in range(args.rounds):
            for section, (extra, key, values) in BENCHMARKS.items():
                for tag in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                    out = subprocess.run([builds[tag], "bench", "--section", section, "--json", *extra],
                                         capture_output=True, text=True, check=True).stdout
                    for line in out.splitlines():
                        row = json.loads(line)
                        if row.get("section") != section:
                            continue
                        for name, v in values(row).items():
                            if v is not None:
                                times[(key(row), name)][tag].append(v)
    finally:
        if busy:
            busy.kill()
    for (k, name), by in sorted(times.items(), key=lambda item: str(item[0])):
        old, new = statistics.median(by["old"]), statistics.median(by["new"])
        print(json.dumps({"benchmark": list(k), "time": name, "old_ms": old, "new_ms": new, "new_over_old": new / old}))


if __name__ == "__main__":
    main()
