#!/usr/bin/env bash
# The GPU runner (docs/testing.md): on a GPU host, builds groupcoord with CUDA and the Python
# binding into build-gpu/, runs every test of ctest's "cuda" label (the C++ CUDA suites and their
# variants, the Python suites on torch and cupy), then the host-overhead benchmarks against raw
# NCCL, compute-sanitizer and a pip install. Exit status is non-zero when any step fails; logs go
# to $OUT when set (else build-gpu/logs), one file per step plus summary.txt.
#
#   tools/gpu-tests.sh                                      every default step
#   GC_ONLY="test_cuda_* bench-host-np1" tools/gpu-tests.sh  the steps matching these patterns
#   GC_TARGETS="bench_host_overhead" ...                     builds only these targets
#
# Steps, in order (GC_ONLY matches their names as shell patterns; the build always runs):
#   each ctest test of label "cuda"  `ctest -R ^NAME$` (list: `ctest --test-dir build-gpu -N -L
#                       cuda`), e.g. test_cuda_communicator_np2, pytest_torch_cuda_np2. Where
#                       several ranks share one GPU each takes its own NCCL host id.
#   torch-store         ctest's label "torch": TorchTcpStore against the host's torch TCPStore
#                       server, and a 2-rank job rendezvousing through it
#   torchrun-np2        a real `torchrun --nproc-per-node 2` of tests/store/torch_store_job.py,
#                       with torch.distributed's own group beside groupcoord's in each process
#   symm-tuning-np2     (2 or more GPUs) the symmetric suite with NCCL's tuning log; the kernels
#                       NCCL chose go into the summary
#   bench-host-np1/np2  benchmarks/bench_host_overhead: C++ host time per call against raw NCCL
#                       (at 1 rank also CUDA graph replays); JSON beside the logs
#   bench-host-py-np1/np2  benchmarks/bench_host_overhead.py: the same from Python against cupy's
#                       raw NCCL and torch.distributed
#   bench-python-overhead, bench-all-reduce   benchmarks/bench_python_overhead.py and
#                       bench_all_reduce, 2 ranks
#   memcheck-units, memcheck-np1, memcheck-symm-np1   compute-sanitizer memcheck
#   pip, pip-import     pip install ./python (scikit-build-core, CPU only), then an import
#   debug-offloaded, debug-inline   python/gpu/debug_steps.py, calls on the helper thread and inline
# Only when GC_ONLY names them: bench-collectives-* (regular vs symmetric vs torch.distributed:
# CSV files, crossovers and plots; GC_ONLY="bench-collectives*") and python-asan-* (the debug
# steps on an ASan build of the binding).
#
# A step still running 40 s before its time limit gets the stacks of every process of build-gpu/
# written to NAME.stacks (cuda-gdb), so that a hang says where it is.
#
# Dependencies: Gloo, GTest and DLPack from /opt/deps/usr (unpacking .deps/*.deb there first when
# that folder is missing), CUDA from /usr/local/cuda, python3 from PATH (with torch, cupy, numpy
# and pybind11 on the GPU host). The system compiler builds everything: /opt/gcc's g++ links
# libstdc++ statically, and a second, static libstdc++ in a Python process that already has the
# shared one crashes in iostreams. NCCL: torch's 2.28.9 is used when present (the system 2.28.3 has
# broken symmetric kernels); GROUPCOORD_NCCL_LIBRARY set by the caller wins. NVLink multicast
# stays off.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-gpu"
DEPS=/opt/deps
LOGS="${OUT:-$BUILD/logs}"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
: >"$SUMMARY"
STATUS=0
OPT_IN_STEPS="bench-collectives* python-asan*"  # patterns

log() { printf '[gpu-tests] %s\n' "$*" | tee -a "$SUMMARY"; }

# selected NAME: whether step NAME runs (GC_ONLY's patterns; else every step not opt-in).
selected() {
  local pattern
  local -  # set -f below stays local: patterns must not expand against the current directory
  set -f
  if [ -z "${GC_ONLY:-}" ]; then
    for pattern in $OPT_IN_STEPS; do
      # shellcheck disable=SC2053  # a pattern on purpose
      [[ "$1" == $pattern ]] && return 1
    done
    return 0
  fi
  for pattern in $GC_ONLY; do
    # shellcheck disable=SC2053  # a pattern on purpose
    [[ "$1" == $pattern ]] && return 0
  done
  return 1
}

# dump_stacks: every thread's stack of each running process of build-gpu/ (cuda-gdb attaches; the
# machines have no gdb).
dump_stacks() {
  command -v cuda-gdb >/dev/null || { echo "no cuda-gdb: no stacks"; return 0; }
  local pid
  for pid in $(pgrep -f "^$BUILD/"); do
    echo "=== pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
    timeout 60 cuda-gdb -p "$pid" -batch -ex "thread apply all bt 25" 2>&1 |
      grep -vE '^\[(New Thread|Thread debugging)|^Reading symbols|^Downloading'
  done
}

# run_step NAME TIMEOUT COMMAND...: runs COMMAND with its output in $LOGS/NAME.log, when selected
# (configure and build always are).
run_step() {
  local name="$1" limit="$2"
  shift 2
  if [ "$name" != configure ] && [ "$name" != build ] && ! selected "$name"; then
    return 0
  fi
  log "$name: $*"
  local start=$SECONDS
  local watcher=""
  if [ "$limit" -gt 60 ]; then
    (sleep $((limit - 40)) && dump_stacks >"$LOGS/$name.stacks" 2>&1) &
    watcher=$!
  fi
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  local verdict="passed"
  [ $rc -ne 0 ] && verdict="FAILED (exit $rc)" && STATUS=1
  log "$name: $verdict in $((SECONDS - start)) s"
  grep -E '\[  (PASSED|SKIPPED) +\] [0-9]+ tests?|\[  FAILED  \]|tests? ran|ERROR SUMMARY|\[symmetric\]|launch_gpu_suite: skipped|[0-9]+ (passed|failed)|\*\*\*(Skipped|Failed)' \
    "$LOGS/$name.log" | sed 's/\x1b\[[0-9;]*m//g' | head -40 >>"$SUMMARY"
  return $rc
}

# ---- environment ---------------------------------------------------------------------------------
if [ ! -d "$DEPS/usr" ] && ls "$ROOT"/.deps/*.deb >/dev/null 2>&1; then
  log "unpacking $ROOT/.deps/*.deb into $DEPS"
  mkdir -p "$DEPS"
  for deb in "$ROOT"/.deps/*.deb; do dpkg -x "$deb" "$DEPS"; done
fi
export LD_LIBRARY_PATH="$DEPS/usr/lib:$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONUNBUFFERED=1
if [ -x /usr/bin/g++ ]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
PY="${GC_PYTHON:-$(command -v python3)}"  # GC_PYTHON: another interpreter
TORCH_NCCL="$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)"
if [ -z "${GROUPCOORD_NCCL_LIBRARY:-}" ] && [ -f "$TORCH_NCCL" ]; then
  export GROUPCOORD_NCCL_LIBRARY="$TORCH_NCCL"
fi
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo
export GROUPCOORD_LOG_LEVEL="${GROUPCOORD_LOG_LEVEL:-info}"  # shows the NCCL version loaded
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
log "NCCL library: ${GROUPCOORD_NCCL_LIBRARY:-libnccl.so.2 from the loader path}"
log "compiler: $(${CXX:-g++} --version | head -1); python: $PY"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader 2>&1 | tee -a "$SUMMARY"

# ---- build -----------------------------------------------------------------------------------------
CONFIGURE=(cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g
  -DGROUPCOORD_WITH_CUDA=ON -DGROUPCOORD_BUILD_PYTHON=ON -DGROUPCOORD_BUILD_EXAMPLES=OFF
  -DPython_EXECUTABLE="$PY" -DGLOO_ROOT="$DEPS/usr" -DDLPACK_ROOT="$DEPS/usr"
  -DCMAKE_PREFIX_PATH="$DEPS/usr" -DCMAKE_CUDA_ARCHITECTURES=90)
PYBIND11_DIR="$("$PY" -m pybind11 --cmakedir 2>/dev/null)" &&
  CONFIGURE+=(-Dpybind11_DIR="$PYBIND11_DIR")
# (one line per `read`: the default list spans lines, so newlines become spaces first)
read -r -a TARGETS <<<"$(echo ${GC_TARGETS:-test_cuda_units test_cuda_communicator test_cuda_coordinator
  test_cuda_symmetric test_cuda_elastic groupcoord_python bench_host_overhead bench_all_reduce
  test_store})"
if ! run_step configure 600 "${CONFIGURE[@]}" ||
   ! run_step build 1500 cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}"; then
  tail -40 "$LOGS"/configure.log "$LOGS"/build.log 2>/dev/null
  log "the build failed; see $LOGS/configure.log and $LOGS/build.log"
  exit 1
fi
export PYTHONPATH="$BUILD/python"

# ---- the tests of label "cuda" ------------------------------------------------------------------------
# One step per test, so that each has its log, its time and its stacks on a hang (ctest's
# per-test limit is 300 s).
mapfile -t CUDA_TESTS < <(ctest --test-dir "$BUILD" -N -L cuda | sed -n 's/^ *Test *#[0-9]*: //p')
[ ${#CUDA_TESTS[@]} -gt 0 ] || { log "ctest lists no test of label cuda"; STATUS=1; }
for test in "${CUDA_TESTS[@]}"; do
  selected "$test" || continue  # (an unselected test's old log must not count below)
  run_step "$test" 330 ctest --test-dir "$BUILD" -R "^$test\$" -V || continue
  # ctest counts a skipped test as passed; on a GPU host a skip means a missing piece (a library
  # the launcher could not import, no device visible to the process).
  if [ "$GPUS" -gt 0 ] && grep -q '\*\*\*Skipped' "$LOGS/$test.log" 2>/dev/null; then
    log "$test: SKIPPED on a host with $GPUS GPU(s): counted as a failure"
    STATUS=1
  fi
done
rm -rf "$LOGS/python-logs" && cp -r "$BUILD/Testing/python-logs" "$LOGS/" 2>/dev/null

# ---- torch's store: the host's torch (2.x here) serves it --------------------------------------------
run_step torch-store 300 ctest --test-dir "$BUILD" -L torch -V
run_step torchrun-np2 300 "$PY" -m torch.distributed.run --nproc-per-node 2 \
  "$ROOT/tests/store/torch_store_job.py" --with-torch-distributed

# ---- beyond ctest: tuning log, benchmarks, sanitizer, packaging -------------------------------------
UNITS="$BUILD/tests/cuda/test_cuda_units"
COMM="$BUILD/tests/cuda/test_cuda_communicator"
SYMM="$BUILD/tests/cuda/test_cuda_symmetric"
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x PYTHONPATH
     -x NCCL_NVLS_ENABLE -x NCCL_SOCKET_IFNAME -x GROUPCOORD_LOG_LEVEL)
[ -n "${GROUPCOORD_NCCL_LIBRARY:-}" ] && MPI+=(-x GROUPCOORD_NCCL_LIBRARY)
# mpirun_for NP [MPIRUN_ARG...]: sets MPIRUN_NP to the mpirun command line for NP ranks, each with
# its own NCCL host id where they outnumber the GPUs ($0 of the inner shell is the program).
mpirun_for() {
  local np="$1"
  shift
  MPIRUN_NP=("${MPI[@]}" -np "$np" "$@")
  if [ "$np" -gt "$GPUS" ]; then
    MPIRUN_NP+=(bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$0" "$@"')
  fi
}
PLAIN=(-x GROUPCOORD_SYMM_WINDOW_FLAGS=default)

# With one GPU per rank NCCL can pick its symmetric kernels: which ones it chose.
if [ "$GPUS" -ge 2 ]; then
  run_step symm-tuning-np2 300 "${MPI[@]}" -np 2 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=TUNING \
    "$SYMM" &&
    grep -hoE '(AllGather|ReduceScatter|AllReduce)[^\n]{0,80}(Symmetric|\[Sym[^]]*\])[^\n]{0,60}' \
      "$LOGS/symm-tuning-np2.log" | sort | uniq -c | head -20 >>"$SUMMARY"
fi

BENCH="$BUILD/benchmarks/bench_host_overhead"
HOST_BENCH_PY="$ROOT/benchmarks/bench_host_overhead.py"
mpirun_for 1
run_step bench-host-np1 150 "${MPIRUN_NP[@]}" "$BENCH" --json "$LOGS/host-np1.json"
run_step bench-host-py-np1 300 "${MPIRUN_NP[@]}" "$PY" "$HOST_BENCH_PY" \
  --json "$LOGS/host-py-np1.json"
# Two ranks time-slice one GPU: each collective then takes milliseconds of GPU time (every call
# waits for the other process's time slice), so fewer calls per round than at one rank.
mpirun_for 2 "${PLAIN[@]}"
run_step bench-host-np2 240 "${MPIRUN_NP[@]}" "$BENCH" --symm --trace --rounds 5 --calls 50 \
  --json "$LOGS/host-np2.json"
mpirun_for 2
run_step bench-host-py-np2 300 "${MPIRUN_NP[@]}" "$PY" "$HOST_BENCH_PY" --rounds 5 --calls 50 \
  --json "$LOGS/host-py-np2.json"
run_step bench-python-overhead 120 "${MPIRUN_NP[@]}" "$PY" \
  "$ROOT/benchmarks/bench_python_overhead.py" --rounds 9
run_step bench-all-reduce 60 "${MPIRUN_NP[@]}" "$BUILD/benchmarks/bench_all_reduce" 2000 7

if selected bench-collectives-unset; then
  # One rank per GPU with every size and an NCCL_SYM_CTAS sweep; on a one-GPU host two ranks
  # share it over sockets, up to 16 MiB, which checks the harness only.
  SCRIPT="$ROOT/benchmarks/bench_collectives_torch.py"
  if [ "$GPUS" -ge 2 ]; then
    NP="$GPUS" SIZES=()
    SWEEP="${GC_SYM_CTAS:-unset 1 2 4 8 16 32}"
  else
    NP=2 SIZES=(--max-bytes $((16 << 20)))
    SWEEP="unset"
  fi
  CSVS=()
  for ctas in $SWEEP; do
    CTAS=()
    [ "$ctas" != unset ] && CTAS=(-x "NCCL_SYM_CTAS=$ctas")
    mpirun_for "$NP" "${CTAS[@]}"
    run_step "bench-collectives-$ctas" 590 "${MPIRUN_NP[@]}" "$PY" "$SCRIPT" "${SIZES[@]}" \
      --csv "$LOGS/collectives-$ctas.csv" && CSVS+=("$LOGS/collectives-$ctas.csv")
  done
  [ ${#CSVS[@]} -gt 0 ] && run_step bench-collectives-report 60 "$PY" \
    "$ROOT/benchmarks/collectives_report.py" "$LOGS/plots" "${CSVS[@]}"
fi

if command -v compute-sanitizer >/dev/null; then
  # Memory errors only: NCCL probes kernel images for other architectures at init and handles the
  # resulting cudaErrorNoKernelImageForDevice itself; those API errors are not ours.
  SANITIZER=(compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3)
  run_step memcheck-units 600 "${SANITIZER[@]}" "$UNITS"
  run_step memcheck-np1 600 "${MPI[@]}" -np 1 "${SANITIZER[@]}" "$COMM"
  run_step memcheck-symm-np1 600 "${MPI[@]}" -np 1 "${PLAIN[@]}" "${SANITIZER[@]}" "$SYMM"
else
  log "memcheck: compute-sanitizer not found; skipped"
fi

run_step pip 300 env CMAKE_ARGS="-DGLOO_ROOT=$DEPS/usr -DDLPACK_ROOT=$DEPS/usr -DGROUPCOORD_WITH_CUDA=OFF" \
  "$PY" -m pip install --no-build-isolation --no-deps --no-index -t /tmp/gc-site "$ROOT/python" &&
  run_step pip-import 60 env PYTHONPATH=/tmp/gc-site "$PY" -c \
    'import groupcoord, os; print(groupcoord.__file__, sorted(os.listdir(os.path.dirname(groupcoord.__file__))))'

run_step debug-offloaded 60 "$PY" -X faulthandler "$ROOT/python/gpu/debug_steps.py" &&
  run_step debug-inline 60 env GC_INLINE=1 "$PY" -X faulthandler "$ROOT/python/gpu/debug_steps.py"

if selected python-asan-run; then  # a crash hunt: the debug steps on an ASan build of the binding
  run_step python-asan-configure 600 cmake -S "$ROOT" -B "$BUILD-asan" -DCMAKE_BUILD_TYPE=Debug \
    -DGROUPCOORD_SANITIZE=address -DGROUPCOORD_WITH_CUDA=ON -DGROUPCOORD_BUILD_PYTHON=ON \
    -DGROUPCOORD_BUILD_TESTS=OFF -DGROUPCOORD_BUILD_EXAMPLES=OFF -DPython_EXECUTABLE="$PY" \
    -Dpybind11_DIR="${PYBIND11_DIR:-}" -DGLOO_ROOT="$DEPS/usr" -DDLPACK_ROOT="$DEPS/usr" \
    -DCMAKE_CUDA_ARCHITECTURES=90 &&
    run_step python-asan-build 600 cmake --build "$BUILD-asan" -j "$(nproc)" --target groupcoord_python &&
    run_step python-asan-run 60 env PYTHONPATH="$BUILD-asan/python" \
      LD_PRELOAD="$(g++ -print-file-name=libasan.so)" \
      ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:symbolize=1 \
      "$PY" "$ROOT/python/gpu/debug_steps.py"
fi

if [ $STATUS -eq 0 ]; then log "all GPU steps passed"; else log "GPU STEPS FAILED"; fi
exit $STATUS
