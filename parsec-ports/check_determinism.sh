#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# check_determinism.sh WORKLOAD -- smoke test: runs the workload on its small
# input with 1, 2 and 3 threads and fails unless it exits 0 every time and the
# checksum line (always the last line of output) is the same.
set -u
exe=$1
reference=
for threads in 1 2 3; do
    out=$("$exe" -s small -t "$threads" -q) || { echo "$exe -t $threads failed"; exit 1; }
    sum=$(printf '%s\n' "$out" | tail -n 1)
    case $sum in
        checksum=*) ;;
        *) echo "$exe -t $threads: last line is not a checksum: $sum"; exit 1 ;;
    esac
    echo "threads=$threads $sum"
    if [ -z "$reference" ]; then
        reference=$sum
    elif [ "$sum" != "$reference" ]; then
        echo "$exe: checksum differs between 1 and $threads threads"
        exit 1
    fi
done
