#!/usr/bin/env bash
# test_ordering.sh - ordering.lua on 2 and 3 ranks, in lazy, compiled, interpreted and
# eager mode (what it checks: the head of ordering.lua).
#   bash test_ordering.sh LAZYLUA MPIEXEC
set -u
source "$(dirname "$0")/lib.sh"
run_everywhere ordering.lua ordering
finish
