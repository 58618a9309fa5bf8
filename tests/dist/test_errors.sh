#!/usr/bin/env bash
# test_errors.sh - errors.lua on 2 and 3 ranks, in lazy, compiled, interpreted and
# eager mode (what it checks: the head of errors.lua).
#   bash test_errors.sh LAZYLUA MPIEXEC
set -u
source "$(dirname "$0")/lib.sh"
run_everywhere errors.lua errors
finish
