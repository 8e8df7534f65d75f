#!/usr/bin/env bash
# The main job: builds the library and the demo (nothing else), then runs the demo as 4 processes
# under mpirun. It prints the group layout, the time per op with its payload, and PASS or FAIL
# (exit status 0 only on PASS). GROUPCOORD_DEMO_RANKS=N runs N processes; arguments go to the demo
# (tools/run-demo.sh --help lists them).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

gc_log "1/3 Debian packages"
gc_install_missing_packages
gc_log "2/3 configure and build (the library and examples/groupcoord_demo)"
start=$SECONDS
gc_configure_and_build groupcoord_demo
gc_log "built in $((SECONDS - start)) s"

demo="$(gc_build_dir)/examples/groupcoord_demo"
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  exec "$demo" --help
fi
ranks="${GROUPCOORD_DEMO_RANKS:-4}"
gc_log "3/3 the demo on $ranks processes ($(nproc) cores here)"
mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$ranks" "$demo" "$@"
