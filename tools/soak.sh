#!/usr/bin/env bash
# Soak of the CPU path: builds tests/soak/soak_cpu (as tools/run-tests.sh builds everything) and
# runs 100,000 random operations on 4 ranks, every result checked, RSS sampled every 10,000.
# Exit status is non-zero on a wrong result, a hang (timeout), or a rank whose RSS grew more than
# 5 % after the warm-up sample. Figures: docs/reliability.md.
#   tools/soak.sh                     the default soak
#   tools/soak.sh --ops 20000 --seed 7 --max-growth 0.05    arguments go to soak_cpu
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

gc_install_missing_packages
gc_configure_and_build

build_dir="$(gc_build_dir)"
gc_log "soak: 4 ranks, $* (defaults: 100000 ops, seed 1)"
if timeout 1800 mpirun --oversubscribe --allow-run-as-root --bind-to none -np 4 \
     "$build_dir/tests/soak/soak_cpu" "$@"; then
  gc_log "soak passed"
else
  gc_log "SOAK FAILED"
  exit 1
fi
