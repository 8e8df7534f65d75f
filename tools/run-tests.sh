#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds into build/, runs ctest. Exit status is non-zero on any failure.
#   tools/run-tests.sh                 everything
#   GROUPCOORD_PRESET=asan tools/run-tests.sh    the same under ASan+UBSan (build-asan/)
#   tools/run-tests.sh -R store        extra arguments go to ctest
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

gc_install_missing_packages
gc_configure_and_build

build_dir="$(gc_build_dir)"
status=0
gc_log "running ctest"
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600 "$@") || status=1

# The Python suite (builds with the binding; not when ctest arguments select tests).
if [ $# -eq 0 ] && [ -f "$build_dir/python/groupcoord/__init__.py" ]; then
  "$GROUPCOORD_ROOT/tools/run-pytest.sh" -b "$build_dir" || status=1
fi

if [ $status -eq 0 ]; then gc_log "all tests passed"; else gc_log "TESTS FAILED"; fi
exit $status
