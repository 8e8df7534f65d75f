#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds into build/, runs ctest. Exit status is non-zero on any failure.
#   tools/run-tests.sh                 everything
#   GROUPCOORD_PRESET=asan tools/run-tests.sh    the same under ASan+UBSan (build-asan/)
#   tools/run-tests.sh -R store        extra arguments go to ctest (and skip the steps below)
# After ctest and pytest (numpy arrays, then torch CPU tensors): tools/two-hosts-test.sh,
# tools/valgrind-check.sh and a short tools/run-fuzz.sh. The asan and tsan presets: GROUPCOORD_PRESET=asan|tsan tools/run-tests.sh.
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
  # Again with torch CPU tensors (the binding's torch fast path on the CPU) where torch imports.
  if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    "$GROUPCOORD_ROOT/tools/run-pytest.sh" -b "$build_dir" -a torch-cpu || status=1
  fi
fi

# Beyond the default build: two hosts in network namespaces (skips without root), valgrind on
# representative tests, and a short run of every fuzz target (its own clang build, build-fuzz/).
# Not when ctest arguments select tests.
if [ $# -eq 0 ] && [ "$GROUPCOORD_PRESET" = default ]; then
  "$GROUPCOORD_ROOT/tools/two-hosts-test.sh" "$build_dir" || status=1
  "$GROUPCOORD_ROOT/tools/valgrind-check.sh" || status=1
  "$GROUPCOORD_ROOT/tools/run-fuzz.sh" 20 || status=1
  # The fuzz build is clang with ASan+UBSan: the store, ring, futex-wait, queue-control, fault and
  # core (tensor, allocator, copies) tests run on it too.
  ASAN_TESTS="test_store test_shm_ring test_wake_word test_queue_control test_faults test_core"
  gc_log "ASan+UBSan (clang, build-fuzz/): $ASAN_TESTS"
  # shellcheck disable=SC2086  # a list of targets
  cmake --build "$GROUPCOORD_ROOT/build-fuzz" -j "$(nproc)" --target $ASAN_TESTS >/dev/null ||
    status=1
  (cd "$GROUPCOORD_ROOT/build-fuzz" &&
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -j "$(nproc)" -R "^(${ASAN_TESTS// /|})\$") ||
    status=1
fi

if [ $status -eq 0 ]; then gc_log "all tests passed"; else gc_log "TESTS FAILED"; fi
exit $status
