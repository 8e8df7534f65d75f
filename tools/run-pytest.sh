#!/usr/bin/env bash
# Runs the Python suite (python/tests) against the binding in <build>/python: under mpirun with
# 1, 2 and 4 ranks. Every rank runs the same tests in the same order (python/tests/run_rank.py);
# rank 0 prints pytest's output, the other ranks only when they fail; -x stops every rank at the
# first failure (conftest.py makes the ranks agree on each outcome). Exit status is non-zero on
# any failure, including pytest's exit code 5 ("no tests collected").
#   tools/run-pytest.sh                      build/ (or GROUPCOORD_PRESET's folder), np 1 2 4
#   tools/run-pytest.sh -b build-py          another build folder
#   tools/run-pytest.sh -n "2" -- -k dict    some world sizes; arguments after -- go to pytest
#   tools/run-pytest.sh -a torch-cuda        another array flavour (GROUPCOORD_TEST_ARRAYS:
#                                            numpy (default), torch-cpu, torch-cuda, cupy; see
#                                            python/tests/gc_testing.py)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build_dir="$(gc_build_dir)"
world_sizes="1 2 4"
while [ $# -gt 0 ]; do
  case "$1" in
    -b) build_dir="$(cd "$2" && pwd)"; shift 2 ;;
    -n) world_sizes="$2"; shift 2 ;;
    -a) export GROUPCOORD_TEST_ARRAYS="$2"; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done

python=/usr/bin/python3
package_dir="$build_dir/python"
if [ ! -f "$package_dir/groupcoord/__init__.py" ]; then
  gc_log "no Python binding in $package_dir (configure with -DGROUPCOORD_BUILD_PYTHON=ON)"
  exit 1
fi

status=0
for np in $world_sizes; do
  gc_log "pytest, $np rank(s), ${GROUPCOORD_TEST_ARRAYS:-numpy} arrays"
  if ! PYTHONPATH="$package_dir${PYTHONPATH:+:$PYTHONPATH}" \
      timeout 300 mpirun --oversubscribe --allow-run-as-root --bind-to none -np "$np" \
      "$python" "$GROUPCOORD_ROOT/python/tests/run_rank.py" -x -q --tb=short -p no:cacheprovider \
      "$GROUPCOORD_ROOT/python/tests" "$@"; then
    gc_log "pytest FAILED with $np rank(s)"
    status=1
  fi
done

if [ $status -eq 0 ]; then gc_log "python tests passed"; else gc_log "PYTHON TESTS FAILED"; fi
exit $status
