// groupcoord.MessageQueue: vLLM's shm_broadcast.MessageQueue (same-node shared-memory
// broadcaster) over the C++ MessageQueue. Objects travel pickled.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/message_queue.h"

namespace groupcoord {
namespace python {

/// Python objects for C++ queues.
pybind11::object wrap_queue(std::unique_ptr<MessageQueue> queue);
pybind11::list wrap_queues(std::vector<std::unique_ptr<MessageQueue>> queues);

/// Registers groupcoord.MessageQueueHandle (bind_message_queue calls it first).
void bind_message_queue_handle(pybind11::module_& module);

/// An external_writer_handle argument: None, a MessageQueueHandle, or its to_bytes(). Throws
/// std::invalid_argument (ValueError) naming `what` for anything else or malformed bytes.
std::optional<MessageQueue::Handle> handle_arg(pybind11::handle obj, const char* what);

/// MessageQueue::create_from_process_group for Python callers (collective over `group`):
/// external_writer_handle is None, a MessageQueueHandle or its bytes; only group rank
/// `writer_rank`'s value is read, as in vLLM. `what` names the call in errors.
std::shared_ptr<MessageQueue> create_collective(std::shared_ptr<ProcessGroup> group,
                                                std::size_t max_chunk_bytes, std::size_t max_chunks,
                                                int writer_rank,
                                                pybind11::handle external_writer_handle,
                                                bool blocking, const std::string& what);

/// The ProcessGroup behind `group`: a ProcessGroup, or a GroupCoordinator (its cpu_group).
std::shared_ptr<ProcessGroup> process_group_arg(pybind11::handle group, const char* what);

}  // namespace python
}  // namespace groupcoord
