# Shared by tools/run-tests.sh and tools/run-demo.sh: installs missing Debian packages, then
# configures and builds into build/ (or the preset's folder). Idempotent and quick when done.
set -euo pipefail

GROUPCOORD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GROUPCOORD_PRESET="${GROUPCOORD_PRESET:-default}"
# Debian packages the build and the tests need.
GROUPCOORD_DEBIAN_PACKAGES=(
  build-essential cmake git
  libgloo-dev libgtest-dev pybind11-dev libdlpack-dev
  openmpi-bin libopenmpi-dev
  python3 python3-dev python3-numpy python3-pytest
  iproute2 util-linux clang-format doxygen pkgconf
)

gc_log() { printf '[groupcoord] %s\n' "$*"; }

# Tests only, and not required: the Python suite's torch-cpu flavour (Debian's torch is CPU-only,
# about 140 MB to download). When it cannot be installed, that flavour is left out.
GROUPCOORD_OPTIONAL_PACKAGES=(python3-torch)

gc_install_missing_packages() {
  gc_install_packages "${GROUPCOORD_DEBIAN_PACKAGES[@]}"
  gc_install_packages "${GROUPCOORD_OPTIONAL_PACKAGES[@]}" ||
    gc_log "optional packages not installed (${GROUPCOORD_OPTIONAL_PACKAGES[*]}); going on without"
}

# gc_install_packages PKG...: installs those of PKG that are missing (apt-get).
gc_install_packages() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  gc_log "installing Debian packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

gc_build_dir() {
  case "$GROUPCOORD_PRESET" in
    default) echo "$GROUPCOORD_ROOT/build" ;;
    *) echo "$GROUPCOORD_ROOT/build-$GROUPCOORD_PRESET" ;;
  esac
}

# gc_configure_and_build [TARGET...]: configures the preset's folder once (printing CMake's summary
# of what it found and what is built), then builds TARGETs (default: everything).
gc_configure_and_build() {
  local build_dir
  build_dir="$(gc_build_dir)"
  cd "$GROUPCOORD_ROOT"
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    gc_log "configuring ($GROUPCOORD_PRESET preset) into $build_dir"
    # The summary only; a failing configure still stops here (pipefail, errexit).
    cmake --preset "$GROUPCOORD_PRESET" |
      { grep -E '^-- (groupcoord|Found [A-Za-z]|The (C|CXX|CUDA) compiler)' || true; }
  fi
  if [ $# -gt 0 ]; then
    gc_log "building $* (and what it needs)"
    cmake --build "$build_dir" -j "$(nproc)" --target "$@"
  else
    gc_log "building everything"
    cmake --build "$build_dir" -j "$(nproc)"
  fi
}

# mpirun as root needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Containers often lack the /dev/shm size or ptrace rights Open MPI's fast paths assume; our tests
# do not use MPI for data, only as a launcher.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
