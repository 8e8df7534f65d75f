// groupcoord.MessageQueue: vLLM's shm_broadcast.MessageQueue (same-node shared-memory
// broadcaster) over the C++ MessageQueue. Objects travel pickled.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "groupcoord/message_queue.h"

namespace groupcoord {
namespace python {

/// Python objects for C++ queues.
pybind11::object wrap_queue(std::unique_ptr<MessageQueue> queue);
pybind11::list wrap_queues(std::vector<std::unique_ptr<MessageQueue>> queues);

/// The ProcessGroup behind `group`: a ProcessGroup, or a GroupCoordinator (its cpu_group).
std::shared_ptr<ProcessGroup> process_group_arg(pybind11::handle group, const char* what);

}  // namespace python
}  // namespace groupcoord
