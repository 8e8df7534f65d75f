#!/usr/bin/env bash
# The main job: builds everything, then runs the demo as 4 processes under mpirun and prints
# the group layout, a timing table and PASS or FAIL (exit status 0 only on PASS).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

gc_install_missing_packages
gc_configure_and_build

ranks="${GROUPCOORD_DEMO_RANKS:-4}"
gc_log "running the demo on $ranks processes"
mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$ranks" \
  "$(gc_build_dir)/examples/groupcoord_demo"
