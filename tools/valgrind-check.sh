#!/usr/bin/env bash
# valgrind memcheck on representative tests (issue 14, item 6): the store (single process) and
# the CPU communicator with 2 ranks under mpirun (Gloo, shared memory, every collective). Fails on
# any error or definite leak; Gloo's own uninitialised address padding is suppressed
# (tools/valgrind.supp says why). Needs a build in build/ (tools/run-tests.sh makes it).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
GROUPCOORD_DEBIAN_PACKAGES+=(valgrind)
gc_install_missing_packages
build="$(gc_build_dir)"
VALGRIND=(valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite
          --suppressions="$GROUPCOORD_ROOT/tools/valgrind.supp")
status=0
gc_log "valgrind: test_store"
"${VALGRIND[@]}" "$build/tests/store/test_store" --gtest_brief=1 || status=1
gc_log "valgrind: test_cpu_communicator, 2 ranks"
mpirun --allow-run-as-root --oversubscribe -np 2 "${VALGRIND[@]}" \
  "$build/tests/communicator/test_cpu_communicator" --gtest_brief=1 || status=1
[ $status -eq 0 ] && gc_log "valgrind: clean" || gc_log "valgrind: ERRORS"
exit $status
