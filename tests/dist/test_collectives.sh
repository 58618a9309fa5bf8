#!/usr/bin/env bash
# test_collectives.sh - every collective against values computed by formula
# (collectives.lua), on 2 and 3 ranks, in lazy, compiled, interpreted and
# eager mode.
#   bash test_collectives.sh LAZYLUA MPIEXEC
set -u
source "$(dirname "$0")/lib.sh"
run_everywhere collectives.lua collectives
finish
