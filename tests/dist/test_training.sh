#!/usr/bin/env bash
# test_training.sh - training.lua on 2 and 3 ranks, in lazy, compiled, interpreted and
# eager mode (what it checks: the head of training.lua).
#   bash test_training.sh LAZYLUA MPIEXEC
set -u
source "$(dirname "$0")/lib.sh"
run_everywhere training.lua training
finish
