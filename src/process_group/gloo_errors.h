// Maps exceptions thrown by Gloo (and by the store during rendezvous) to groupcoord's error types.
//
//   Gloo error saying it timed out         -> TimeoutError (see is_gloo_timeout_message)
//   groupcoord::TimeoutError (store wait)  -> TimeoutError
//   any other Gloo / runtime error         -> DistributedError
//   std::invalid_argument                  -> unchanged (the caller's fault; the group stays
//   usable)
//
// The new message names the group (its health label), the operation and the original text.
#pragma once

#include <chrono>
#include <exception>
#include <string>

#include "process_group/group_health.h"

namespace groupcoord {

/// Returns the groupcoord error for `error`, which `op` (e.g. "all_reduce(1023 x float32, sum)")
/// raised with deadline `timeout`, and marks `health` broken unless the error was the caller's.
std::exception_ptr map_gloo_error(std::exception_ptr error, GroupHealth& health,
                                  const std::string& op, std::chrono::milliseconds timeout);

/// Runs `fn`, rethrowing whatever it throws as map_gloo_error() maps it.
template <typename Fn>
void run_gloo_op(GroupHealth& health, const std::string& op, std::chrono::milliseconds timeout,
                 Fn&& fn) {
  try {
    fn();
  } catch (...) {
    std::rethrow_exception(map_gloo_error(std::current_exception(), health, op, timeout));
  }
}

/// True when a Gloo error text says that an operation ran past its deadline.
bool is_gloo_timeout_message(const std::string& what);

}  // namespace groupcoord
