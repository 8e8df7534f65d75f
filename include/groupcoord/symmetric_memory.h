// What a device communicator reports about NCCL symmetric memory (docs/cuda.md): whether the
// symmetric path is on, why not when it is off, and counters an engine or a test can read to see
// that windows are registered once and which calls took the path. Plain data, no CUDA types, so
// that the coordinator layer and the Python binding can use it in every build.
#pragma once

#include <cstdint>
#include <string>

namespace groupcoord {

/// State and counters of one communicator's symmetric memory. Counters only grow.
struct SymmetricMemoryStats {
  /// True when routed collectives go through NCCL symmetric windows.
  bool enabled = false;
  /// Why the path is off ("" when enabled): the variable, version or capability that decided it.
  std::string disabled_reason;
  /// "symmetric" (NCCL_WIN_COLL_SYMMETRIC windows, symmetric kernels possible) or "default"
  /// (plain registered windows, GROUPCOORD_SYMM_WINDOW_FLAGS=default); "" when off.
  std::string window_kind;
  /// ncclCommWindowRegister calls made by this communicator (scratch, its growth, the pool).
  std::int64_t windows_registered = 0;
  /// Collectives that ran on buffers inside a window.
  std::int64_t symmetric_calls = 0;
  /// Routed collectives that took the regular path instead (e.g. a too-small scratch during CUDA
  /// graph capture, or a size above the scratch limit).
  std::int64_t fallbacks = 0;
  /// Symmetric calls whose input already lay in a window (symmetric_empty), so the input copy
  /// was skipped.
  std::int64_t zero_copy_calls = 0;
  /// Bytes of the current scratch window (0 until the first routed call or a reservation).
  std::int64_t scratch_bytes = 0;
  /// Bytes of the windows that back symmetric_empty tensors.
  std::int64_t pool_bytes = 0;
};

}  // namespace groupcoord
