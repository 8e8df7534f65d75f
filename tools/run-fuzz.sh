#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, the fuzz preset: clang, build-fuzz/) and runs each for
# a fixed time: tools/run-tests.sh runs it short; a long run is recorded in docs/reliability.md.
#   tools/run-fuzz.sh            20 s per target
#   tools/run-fuzz.sh 600        10 minutes per target
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
seconds="${1:-20}"

GROUPCOORD_DEBIAN_PACKAGES+=(clang libclang-rt-14-dev)
gc_install_missing_packages
cd "$GROUPCOORD_ROOT"
if [ ! -f build-fuzz/CMakeCache.txt ]; then
  gc_log "configuring the fuzz preset into build-fuzz/"
  cmake --preset fuzz >/dev/null || exit 1
fi
cmake -S . -B build-fuzz -DGROUPCOORD_FUZZ_SECONDS="$seconds" >/dev/null || exit 1
gc_log "building the fuzz targets"
cmake --build --preset fuzz -j "$(nproc)" || exit 1
gc_log "fuzzing each target for $seconds s"
(cd build-fuzz && ctest --output-on-failure -L fuzz -j "$(nproc)")
