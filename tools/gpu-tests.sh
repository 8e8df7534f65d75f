#!/usr/bin/env bash
# Builds the CUDA layer and runs its GPU tests on a GPU host (docs/testing.md). Exit status is
# non-zero when any step fails; logs go to $OUT when set (else build-gpu/logs), one file per step
# plus summary.txt.
#
#   tools/gpu-tests.sh
#
# What it does:
#   1. Gloo, GTest and DLPack from /opt/deps/usr (unpacking .deps/*.deb there first when that
#      folder is missing and the .deb files are in the checkout), CUDA 13 from /usr/local/cuda.
#   2. Configures build-gpu/ (CUDA on, Python and examples off) and builds the two CUDA test
#      binaries.
#   3. test_cuda_units (one process), test_cuda_communicator with 1 rank, then with 2 ranks on
#      however many GPUs there are: when the ranks share one GPU, NCCL needs a distinct
#      NCCL_HOSTID per process and sockets on the loopback interface. Its CUDA graph tests
#      again at 4 ranks (graph-np4).
#   4. NCCL symmetric memory: test_cuda_symmetric at 1 and 2 ranks with each kind of window (and
#      its race-prone tests repeated), and the communicator and coordinator suites at 2 ranks with
#      every routed call on the symmetric path.
#   5. compute-sanitizer memcheck on test_cuda_units, the 1-rank communicator and symmetric tests.
#   6. bench-host-np1 / bench-host-np2: benchmarks/bench_host_overhead (host time per call against
#      raw NCCL, and at 1 rank CUDA graph replays against raw NCCL's graph; JSON next to the logs).
#   A step still running 40 s before its time limit gets its processes' stacks written to
#   NAME.stacks (cuda-gdb), so that a hang says where it is.
#   GC_ONLY="step1 step2" runs only the named test steps (the build always runs); GC_TARGETS="t1 t2"
#   builds only those targets.
#
# NCCL: torch's 2.28.9 is used when present (the system 2.28.3 has broken symmetric kernels);
# GROUPCOORD_NCCL_LIBRARY set by the caller wins. NVLink multicast stays off.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-gpu"
DEPS=/opt/deps
LOGS="${OUT:-$BUILD/logs}"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
: >"$SUMMARY"
STATUS=0

log() { printf '[gpu-tests] %s\n' "$*" | tee -a "$SUMMARY"; }

# dump_stacks BINARY: every thread's stack of each running process of BINARY (cuda-gdb attaches;
# the machines have no gdb).
dump_stacks() {
  command -v cuda-gdb >/dev/null || { echo "no cuda-gdb: no stacks"; return 0; }
  local pid
  for pid in $(pgrep -f "^$1( |$)"); do
    echo "=== pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
    timeout 60 cuda-gdb -p "$pid" -batch -ex "thread apply all bt 25" 2>&1 |
      grep -vE '^\[(New Thread|Thread debugging)|^Reading symbols|^Downloading'
  done
}

# run_step NAME TIMEOUT_S COMMAND...: runs COMMAND with its output in $LOGS/NAME.log.
run_step() {
  local name="$1" limit="$2"
  shift 2
  if [ -n "${GC_ONLY:-}" ] && [ "$name" != configure ] && [ "$name" != build ] &&
     [[ " $GC_ONLY " != *" $name "* ]]; then
    return 0
  fi
  log "$name: $*"
  local start=$SECONDS
  # A step about to be killed for time leaves its processes' stacks in $LOGS/NAME.stacks.
  local binary="" arg
  for arg in "$@"; do [[ "$arg" == "$BUILD"/* ]] && binary="$arg" && break; done
  local watcher=""
  if [ -n "$binary" ] && [ "$limit" -gt 60 ]; then
    (sleep $((limit - 40)) && dump_stacks "$binary" >"$LOGS/$name.stacks" 2>&1) &
    watcher=$!
  fi
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  local verdict="passed"
  [ $rc -ne 0 ] && verdict="FAILED (exit $rc)" && STATUS=1
  log "$name: $verdict in $((SECONDS - start)) s"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) \]|tests? ran|ERROR SUMMARY|^\[symmetric\]' "$LOGS/$name.log" \
    | sed 's/\x1b\[[0-9;]*m//g' | head -40 >>"$SUMMARY"
  return $rc
}

# ---- dependencies ------------------------------------------------------------------------------
if [ ! -d "$DEPS/usr" ] && ls "$ROOT"/.deps/*.deb >/dev/null 2>&1; then
  log "unpacking $ROOT/.deps/*.deb into $DEPS"
  mkdir -p "$DEPS"
  for deb in "$ROOT"/.deps/*.deb; do dpkg -x "$deb" "$DEPS"; done
fi
export LD_LIBRARY_PATH="$DEPS/usr/lib:$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
TORCH_NCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2
if [ -z "${GROUPCOORD_NCCL_LIBRARY:-}" ] && [ -f "$TORCH_NCCL" ]; then
  export GROUPCOORD_NCCL_LIBRARY="$TORCH_NCCL"
fi
export NCCL_NVLS_ENABLE=0
export GROUPCOORD_LOG_LEVEL="${GROUPCOORD_LOG_LEVEL:-info}"  # shows the NCCL version loaded
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
log "NCCL library: ${GROUPCOORD_NCCL_LIBRARY:-libnccl.so.2 from the loader path}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

# ---- build -------------------------------------------------------------------------------------
CONFIGURE=(cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DGROUPCOORD_WITH_CUDA=ON -DGROUPCOORD_BUILD_PYTHON=OFF -DGROUPCOORD_BUILD_EXAMPLES=OFF
  -DGLOO_ROOT="$DEPS/usr" -DDLPACK_ROOT="$DEPS/usr" -DCMAKE_PREFIX_PATH="$DEPS/usr"
  -DCMAKE_CUDA_ARCHITECTURES=90)
# GC_TARGETS="..." builds only those (e.g. bench_host_overhead for a quick measurement).
read -r -a TARGETS <<<"${GC_TARGETS:-test_cuda_units test_cuda_communicator test_cuda_coordinator test_cuda_symmetric bench_host_overhead}"
BUILD_CMD=(cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}")
if ! run_step configure 600 "${CONFIGURE[@]}" || ! run_step build 1500 "${BUILD_CMD[@]}"; then
  tail -40 "$LOGS"/configure.log "$LOGS"/build.log 2>/dev/null
  log "the build failed; see $LOGS/configure.log and $LOGS/build.log"
  exit 1
fi

UNITS="$BUILD/tests/cuda/test_cuda_units"
COMM="$BUILD/tests/cuda/test_cuda_communicator"
COORD="$BUILD/tests/cuda/test_cuda_coordinator"
SYMM="$BUILD/tests/cuda/test_cuda_symmetric"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
MPI_ENV=(-x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GROUPCOORD_LOG_LEVEL -x NCCL_SOCKET_IFNAME=lo)
[ -n "${GROUPCOORD_NCCL_LIBRARY:-}" ] && MPI_ENV+=(-x GROUPCOORD_NCCL_LIBRARY)

# ---- tests -------------------------------------------------------------------------------------
run_step units 300 "$UNITS"
run_step np1 300 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "$COMM"
# Each rank claims its own host so that two ranks may share one GPU ($0 is the binary).
run_step np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0"' "$COMM"

# CUDA graphs at 4 ranks on however many GPUs (issue 20: "4 where they fit on one GPU").
run_step graph-np4 300 "${MPIRUN[@]}" -np 4 "${MPI_ENV[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" --gtest_filter="CudaGraph*"' "$COMM"

run_step coord-np1 300 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "$COORD"
run_step coord-np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0"' "$COORD"

# NCCL symmetric memory. First as configured (NCCL_WIN_COLL_SYMMETRIC windows): where the NCCL
# cannot register those on this GPU the path is refused, the tests that need it skip and
# RefusedRequestLeavesTheRegularPath prints why. Then with plain windows
# (GROUPCOORD_SYMM_WINDOW_FLAGS=default), which any cuMem-capable NCCL registers: the suite, and
# the communicator and coordinator suites with every routed call (all_reduce too) on the window.
run_step symm-np1 300 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "$SYMM"
PLAIN=(-x GROUPCOORD_SYMM_WINDOW_FLAGS=default)
ROUTED=(-x GROUPCOORD_USE_NCCL_SYMM_MEM=1 -x GROUPCOORD_SYMM_ALL_REDUCE=always "${PLAIN[@]}")
run_step symm-plain-np1 300 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "${PLAIN[@]}" "$SYMM"
run_step symm-np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0"' "$SYMM"
run_step symm-plain-np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" "${PLAIN[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0"' "$SYMM"
# Races show only now and then: the bookkeeping, NCCL-on-every-buffer and regular-path tests five
# times over, with each kind of window.
STRESS=(--gtest_filter='*Nccl*:*Thousand*:*MatchesTheRegular*' --gtest_repeat=5)
run_step symm-stress-np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$SYMM" "${STRESS[@]}"
run_step symm-plain-stress-np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" "${PLAIN[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$SYMM" "${STRESS[@]}"
run_step np2-symm-routed 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" "${ROUTED[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0"' "$COMM"
run_step coord-np2-symm-routed 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" "${ROUTED[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0"' "$COORD"

# On a host with one GPU per rank NCCL can pick its symmetric kernels: the same suite with
# NCCL's tuning log, and the kernel names it chose, into the summary (issue: multi-GPU run).
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [ "$GPUS" -ge 2 ]; then
  run_step symm-tuning-np2 300 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" -x NCCL_DEBUG=INFO \
    -x NCCL_DEBUG_SUBSYS=TUNING "$SYMM"
  grep -hoE '(AllGather|ReduceScatter|AllReduce)[^\n]{0,80}(Symmetric|\[Sym[^]]*\])[^\n]{0,60}' \
    "$LOGS/symm-tuning-np2.log" | sort | uniq -c | head -20 >>"$SUMMARY"
fi

# ---- host overhead against raw NCCL (benchmarks/bench_host_overhead.cc) ----------------------------
BENCH="$BUILD/benchmarks/bench_host_overhead"
run_step bench-host-np1 150 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "$BENCH" --json "$LOGS/host-np1.json"
# Two ranks time-slice one GPU: each collective then takes milliseconds of GPU time (every call
# waits for the other process's time slice), so fewer calls per round than at one rank.
run_step bench-host-np2 240 "${MPIRUN[@]}" -np 2 "${MPI_ENV[@]}" "${PLAIN[@]}" \
  bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$BENCH" --symm --trace \
  --rounds 5 --calls 50 --json "$LOGS/host-np2.json"

# ---- compute-sanitizer ---------------------------------------------------------------------------
if command -v compute-sanitizer >/dev/null; then
  # Memory errors only: NCCL probes kernel images for other architectures at init and handles the
  # resulting cudaErrorNoKernelImageForDevice itself; those API errors are not ours.
  SANITIZER=(compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3)
  run_step memcheck-units 600 "${SANITIZER[@]}" "$UNITS"
  run_step memcheck-np1 600 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "${SANITIZER[@]}" "$COMM"
  run_step memcheck-symm-np1 600 "${MPIRUN[@]}" -np 1 "${MPI_ENV[@]}" "${PLAIN[@]}" \
    "${SANITIZER[@]}" "$SYMM"
else
  log "memcheck: compute-sanitizer not found; skipped"
fi

if [ $STATUS -eq 0 ]; then log "all GPU tests passed"; else log "GPU TESTS FAILED"; fi
exit $STATUS
