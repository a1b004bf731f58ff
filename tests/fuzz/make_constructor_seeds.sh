#!/usr/bin/env bash
# Writes the seed corpus of fuzz_constructors into corpus/constructors/ (the files are
# committed; rerun after changing the input layout described in fuzz_constructors.cpp).
set -euo pipefail
out="$(dirname "${BASH_SOURCE[0]}")/corpus/constructors"
mkdir -p "$out"

byte() { printf "\\x$(printf %02x $(($1 & 0xff)))"; }
u16() { byte "$1"; byte $(($1 >> 8)); }
int() { u16 "$1"; }                    # an i16
long_int() { u16 -32768; for s in 0 8 16 24 32 40 48 56; do byte $(($1 >> s)); done; }
array() { u16 $#; for v in "$@"; do int "$v"; done; }
values() { u16 $#; for v in "$@"; do byte "$v"; done; }   # v / 4; -128 = NaN, 127 = +inf
# selector: target (0 CSR, 1 COO, 2 BsrStructure, 3 BsrMatrix) + 4 * type (0 float, 1 double, 2 bf16)
header() { byte $(($1 + 4 * $2)); int "$3"; int "$4"; int "$5"; }   # target type rows cols block_size

{ header 0 0 2 3 2; array 0 2 3; array 0 2 2; values 4 8 12; } >"$out/csr_float"
{ header 0 2 2 3 2; array 0 3 3; array 2 0 2; values 4 8 12; } >"$out/csr_unsorted_duplicates_bf16"
{ header 0 1 -1 3 2; array 0; array; values; } >"$out/csr_negative_rows"
{ header 1 1 3 3 2; array 0 2 0; array 1 2 1; values 4 8 -128; } >"$out/coo_duplicates_nan_double"
{ header 1 0 3 3 2; array 0 3; array 1 1; values 4 8; } >"$out/coo_row_out_of_range"
{ header 2 1 3 3 2; array 0 1 2; array 0 1; values 1 2 3 4 5 6 7 8; } >"$out/bsr_structure_double"
{ byte 2; int 4; int 4; long_int $((1 << 32)); array 0 1; array 0; values; } >"$out/bsr_structure_block_overflow"
{ header 3 0 5 3 2; array 0 1 3 4; array 1 0 1 1; values 1 2 3 4 5 6 7 8 9 10 11 12 -128 127 -4 0; } >"$out/bsr_ragged_float"
{ header 3 2 4 4 2; array 0 2 2; array 1 0; values 1 2 3 4 5 6 7 8; } >"$out/bsr_unsorted_bf16"
