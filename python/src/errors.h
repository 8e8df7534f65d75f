// groupcoord's C++ exceptions as Python exceptions (docs/architecture.md "Errors"):
//   std::invalid_argument         -> ValueError
//   groupcoord::TimeoutError      -> groupcoord.DistributedTimeoutError (a TimeoutError and a
//                                    groupcoord.DistributedError, as in C++ where TimeoutError
//                                    derives from DistributedError)
//   groupcoord::DistributedError  -> groupcoord.DistributedError (a RuntimeError)
//   groupcoord::RankFailureError  -> groupcoord.RankFailureError (a DistributedError with
//                                    .dead_ranks); under set_rank_failure_policy("identify") a
//                                    DistributedError after which dead ranks are known becomes one
//                                    here too (the fast paths bypass the coordinator's operations)
#pragma once

#include <pybind11/pybind11.h>

namespace groupcoord {
namespace python {

/// Creates the exception classes in `module` and registers the translator.
void bind_errors(pybind11::module_& module);

/// Sets the Python error for `error` when it is one of the exceptions above; false otherwise
/// (nothing set).
bool translate_groupcoord_exception(std::exception_ptr error);

}  // namespace python
}  // namespace groupcoord
