#!/usr/bin/env bash
# The Python binding on a GPU host (docs/testing.md: Ubuntu, CUDA 13, torch, pybind11 and numpy 2
# from pip, Gloo from Debian packages in .deps/). Logs go to $OUT (else build-gpu-py/logs).
# Always configures and builds build-gpu-py-sys/ (CUDA and Python on; incremental on a warm
# machine), then runs the steps named in GC_STEPS (default: all of them, in this order):
#   debug         smoke runs of python/gpu/debug_steps.py (helper-thread and inline calls)
#   pytest        the pytest suite, numpy flavour (gloo), 1 and 2 ranks
#   pytest-torch  the same suite with torch CUDA tensors (GROUPCOORD_TEST_ARRAYS=torch-cuda, nccl
#                 groups), 1 and 2 ranks; the 2 ranks share GPU 0 (NCCL_HOSTID per rank)
#   pytest-cupy   the same suite with cupy arrays (GROUPCOORD_TEST_ARRAYS=cupy), 1 and 2 ranks
#   pytest-graphs the CUDA graph tests (python/tests/test_cuda_graphs.py) at 4 ranks sharing GPU 0,
#                 torch and cupy
#   pytest-symm   the torch-cuda suite at 2 ranks with NCCL symmetric memory on and every routed
#                 call, all_reduce included, on the scratch window: NCCL_WIN_COLL_SYMMETRIC windows,
#                 then plain ones (GROUPCOORD_SYMM_WINDOW_FLAGS=default)
#   torch         torch / cupy interoperability, CPU and CUDA (python/gpu/torch_checks.py, 2 ranks)
#   bench         the Python-vs-C++ overhead benchmark with 2 ranks
#   bench-host    host time per CUDA call from Python: groupcoord (torch/cupy fast path, out=)
#                 against cupy's raw NCCL and torch.distributed (benchmarks/bench_host_overhead.py),
#                 1 rank, then 2 ranks sharing GPU 0; tables in bench-host-py-np*.log, figures in
#                 host-py-np*.json
#   bench-collectives  groupcoord regular vs symmetric vs torch.distributed (benchmarks/
#                 bench_collectives_torch.py; CSV files, crossovers and SVG plots in $LOGS); not in
#                 the default list
#   pip           pip install ./python through scikit-build-core (CPU only), then an import
# e.g. GC_STEPS="pytest pytest-torch" python/gpu/run-gpu-checks.sh
# GC_HOST_BENCH_RANKS="1" (default "1 2"): the rank counts of the bench-host step.
set -uo pipefail
GC_STEPS="${GC_STEPS:-debug pytest pytest-torch pytest-cupy pytest-graphs pytest-symm torch bench bench-host pip}"
wanted() { [[ " $GC_STEPS " == *" $1 "* ]]; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$ROOT/build-gpu-py-sys"  # system compiler (see below); a fresh cache
DEPS=/opt/deps
LOGS="${OUT:-$BUILD/logs}"
mkdir -p "$LOGS"
STATUS=0
step() {  # step NAME TIMEOUT COMMAND...
  local name="$1" limit="$2"; shift 2
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && STATUS=1
  echo "[gpu-py] $name: exit $rc in $((SECONDS - start)) s" | tee -a "$LOGS/summary.txt"
  tail -n 25 "$LOGS/$name.log" >>"$LOGS/summary.txt"
  return $rc
}

if [ ! -d "$DEPS/usr" ]; then
  mkdir -p "$DEPS"
  for deb in "$ROOT"/.deps/*.deb; do dpkg -x "$deb" "$DEPS"; done
fi
export LD_LIBRARY_PATH="$DEPS/usr/lib:$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH" NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# /opt/gcc's g++ (first on PATH there) links libstdc++ statically; a second, static libstdc++ in a
# Python process that already has the shared one crashes in iostreams (seen: std::ostream inside
# ProcessGroup::create_world). Build the binding with the system compiler instead.
if [ -x /usr/bin/g++ ]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++
fi
echo "compiler: $(${CXX:-g++} --version | head -1)" | tee -a "$LOGS/summary.txt"
PY="$(command -v python3)"
TORCH_NCCL="$("$PY" -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)"
[ -f "$TORCH_NCCL" ] && export GROUPCOORD_NCCL_LIBRARY="$TORCH_NCCL"
PYBIND11_DIR="$("$PY" -m pybind11 --cmakedir)"
"$PY" -c 'import sysconfig, numpy, pybind11; print(sysconfig.get_paths()["include"], numpy.__version__, pybind11.__version__)' | tee -a "$LOGS/summary.txt"

if [ "${GC_DEBUG:-0}" = 1 ]; then  # a crash hunt: faulthandler, then an ASan build
  step configure 300 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGROUPCOORD_WITH_CUDA=ON -DGROUPCOORD_BUILD_PYTHON=ON -DGROUPCOORD_BUILD_TESTS=OFF \
    -DGROUPCOORD_BUILD_EXAMPLES=OFF -DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$PYBIND11_DIR" \
    -DGLOO_ROOT="$DEPS/usr" -DDLPACK_ROOT="$DEPS/usr" -DCMAKE_CUDA_ARCHITECTURES=90
  step build 300 cmake --build "$BUILD" -j "$(nproc)" --target groupcoord_python
  export PYTHONPATH="$BUILD/python"
  step debug-np1 60 mpirun --allow-run-as-root -np 1 -x PYTHONPATH -x LD_LIBRARY_PATH \
    "$PY" -X faulthandler "$ROOT/python/gpu/debug_steps.py"
  step debug-np1-plain 60 "$PY" -X faulthandler "$ROOT/python/gpu/debug_steps.py"
  step configure-asan 300 cmake -S "$ROOT" -B "$BUILD-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DGROUPCOORD_SANITIZE=address -DGROUPCOORD_WITH_CUDA=ON -DGROUPCOORD_BUILD_PYTHON=ON \
    -DGROUPCOORD_BUILD_TESTS=OFF -DGROUPCOORD_BUILD_EXAMPLES=OFF -DPython_EXECUTABLE="$PY" \
    -Dpybind11_DIR="$PYBIND11_DIR" -DGLOO_ROOT="$DEPS/usr" -DDLPACK_ROOT="$DEPS/usr" \
    -DCMAKE_CUDA_ARCHITECTURES=90
  step build-asan 300 cmake --build "$BUILD-asan" -j "$(nproc)" --target groupcoord_python
  step debug-asan 60 env PYTHONPATH="$BUILD-asan/python" \
    LD_PRELOAD="$(g++ -print-file-name=libasan.so)" \
    ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:symbolize=1 \
    "$PY" "$ROOT/python/gpu/debug_steps.py"
  exit $STATUS
fi

step configure 300 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGROUPCOORD_WITH_CUDA=ON -DGROUPCOORD_BUILD_PYTHON=ON -DGROUPCOORD_BUILD_TESTS=OFF \
  -DGROUPCOORD_BUILD_EXAMPLES=OFF -DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$PYBIND11_DIR" \
  -DGLOO_ROOT="$DEPS/usr" -DDLPACK_ROOT="$DEPS/usr" -DCMAKE_CUDA_ARCHITECTURES=90 || exit 1
TARGETS=(groupcoord_python)
wanted bench && TARGETS+=(bench_all_reduce)
step build 400 cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]}" || exit 1
readelf -d "$BUILD/src/libgroupcoord.so" | grep NEEDED | tee -a "$LOGS/summary.txt"
echo "steps: $GC_STEPS" | tee -a "$LOGS/summary.txt"
export PYTHONPATH="$BUILD/python"
if wanted debug; then
  step debug-offloaded 60 "$PY" -X faulthandler "$ROOT/python/gpu/debug_steps.py"
  step debug-inline 60 env GC_INLINE=1 "$PY" -X faulthandler "$ROOT/python/gpu/debug_steps.py"
fi

MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -x PYTHONPATH
     -x NCCL_NVLS_ENABLE -x NCCL_SOCKET_IFNAME=lo -x GROUPCOORD_NCCL_LIBRARY)
export PYTHONPATH="$BUILD/python" NCCL_SOCKET_IFNAME=lo
# Each rank its own NCCL host id: ranks sharing one GPU then talk over sockets (docs/testing.md).
PER_RANK_HOST=(bash -c 'NCCL_HOSTID=h$OMPI_COMM_WORLD_RANK exec "$@"' per-rank-host)
PYTEST=("$PY" "$ROOT/python/tests/run_rank.py" -x -q --tb=short -p no:cacheprovider
        "$ROOT/python/tests")
if wanted pytest; then
  for np in 1 2; do
    step "pytest-np$np" 200 "${MPI[@]}" -x GROUPCOORD_TEST_ARRAYS=numpy -np "$np" "${PYTEST[@]}"
  done
fi
if wanted pytest-torch; then
  for np in 1 2; do
    step "pytest-torch-np$np" 300 "${MPI[@]}" -x GROUPCOORD_TEST_ARRAYS=torch-cuda -np "$np" \
      "${PER_RANK_HOST[@]}" "${PYTEST[@]}"
  done
fi
if wanted pytest-cupy; then
  for np in 1 2; do
    step "pytest-cupy-np$np" 300 "${MPI[@]}" -x GROUPCOORD_TEST_ARRAYS=cupy -np "$np" \
      -x GROUPCOORD_TEST_LOG_DIR="$LOGS/pytest-cupy-np$np-ranks" \
      "${PER_RANK_HOST[@]}" "${PYTEST[@]}"
  done
fi
if wanted pytest-graphs; then
  for flavour in torch-cuda cupy; do
    step "pytest-graphs-$flavour-np4" 300 "${MPI[@]}" -x GROUPCOORD_TEST_ARRAYS=$flavour -np 4 \
      -x GROUPCOORD_TEST_LOG_DIR="$LOGS/pytest-graphs-$flavour-np4-ranks" \
      "${PER_RANK_HOST[@]}" "${PYTEST[@]:0:${#PYTEST[@]}-1}" "$ROOT/python/tests/test_cuda_graphs.py"
  done
fi
if wanted pytest-symm; then
  for windows in symmetric default; do
    step "pytest-symm-$windows-np2" 300 "${MPI[@]}" -x GROUPCOORD_TEST_ARRAYS=torch-cuda \
      -x GROUPCOORD_USE_NCCL_SYMM_MEM=1 -x GROUPCOORD_SYMM_WINDOW_FLAGS=$windows \
      -x GROUPCOORD_SYMM_ALL_REDUCE=always -np 2 "${PER_RANK_HOST[@]}" "${PYTEST[@]}"
  done
fi
if wanted torch; then
  step torch 200 "${MPI[@]}" -np 2 "${PER_RANK_HOST[@]}" "$PY" "$ROOT/python/gpu/torch_checks.py"
fi
if wanted bench; then
  step bench 120 "${MPI[@]}" -np 2 "$PY" "$ROOT/benchmarks/bench_python_overhead.py" --rounds 9
  step bench-cpp 60 "${MPI[@]}" -np 2 "${PER_RANK_HOST[@]}" "$BUILD/benchmarks/bench_all_reduce" \
    2000 7
fi
if wanted bench-host; then
  HOST_BENCH="$ROOT/benchmarks/bench_host_overhead.py"
  # GC_HOST_BENCH_RANKS="1" runs only the 1-rank table (the 2-rank one takes minutes).
  HOST_BENCH_RANKS=" ${GC_HOST_BENCH_RANKS:-1 2} "
  if [[ "$HOST_BENCH_RANKS" != *" 1 "* && "$HOST_BENCH_RANKS" != *" 2 "* ]]; then
    echo "[gpu-py] GC_HOST_BENCH_RANKS=\"$GC_HOST_BENCH_RANKS\" names neither 1 nor 2 (a list such as \"1 2\")" |
      tee -a "$LOGS/summary.txt"
    STATUS=1
  fi
  if [[ "$HOST_BENCH_RANKS" == *" 1 "* ]]; then
    step bench-host-py-np1 300 "${MPI[@]}" -np 1 "$PY" "$HOST_BENCH" --json "$LOGS/host-py-np1.json"
  fi
  # Two ranks time-slice one GPU: each collective then takes milliseconds of GPU time (every
  # call waits for the other process's time slice), so fewer calls per round.
  if [[ "$HOST_BENCH_RANKS" == *" 2 "* ]]; then
    step bench-host-py-np2 300 "${MPI[@]}" -np 2 "${PER_RANK_HOST[@]}" "$PY" "$HOST_BENCH" \
      --rounds 5 --calls 50 --json "$LOGS/host-py-np2.json"
  fi
fi
if wanted bench-collectives; then
  # One rank per GPU with every size and an NCCL_SYM_CTAS sweep (issue: multi-GPU run); on a
  # one-GPU host two ranks share it over sockets, up to 16 MiB, which checks the harness only.
  GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
  SCRIPT="$ROOT/benchmarks/bench_collectives_torch.py"
  if [ "$GPUS" -ge 2 ]; then
    RANKS=(-np "$GPUS" "$PY" "$SCRIPT")
    SWEEP="${GC_SYM_CTAS:-unset 1 2 4 8 16 32}"
  else
    RANKS=(-np 2 "${PER_RANK_HOST[@]}" "$PY" "$SCRIPT" --max-bytes $((16 << 20)))
    SWEEP=unset
  fi
  CSVS=()
  for ctas in $SWEEP; do
    CTAS=()
    [ "$ctas" != unset ] && CTAS=(-x "NCCL_SYM_CTAS=$ctas")
    step "bench-collectives-$ctas" 590 "${MPI[@]}" "${CTAS[@]}" "${RANKS[@]}" \
      --csv "$LOGS/collectives-$ctas.csv" && CSVS+=("$LOGS/collectives-$ctas.csv")
  done
  [ ${#CSVS[@]} -gt 0 ] && step bench-collectives-report 60 "$PY" \
    "$ROOT/benchmarks/collectives_report.py" "$LOGS/plots" "${CSVS[@]}"
fi
if wanted pip; then
  step pip 300 env CMAKE_ARGS="-DGLOO_ROOT=$DEPS/usr -DDLPACK_ROOT=$DEPS/usr -DGROUPCOORD_WITH_CUDA=OFF" \
    "$PY" -m pip install --no-build-isolation --no-deps --no-index -t /tmp/gc-site "$ROOT/python" \
    && step pip-import 60 env PYTHONPATH=/tmp/gc-site "$PY" -c \
    'import groupcoord, os; print(groupcoord.__file__, sorted(os.listdir(os.path.dirname(groupcoord.__file__))))'
fi
exit $STATUS
