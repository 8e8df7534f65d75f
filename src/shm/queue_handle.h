// What the writer of a queue tells its readers at creation (vLLM's Handle): the segment's name,
// the ring's sizes and a random token that the segment's header must carry. A fixed-size plain
// struct, so that it travels as bytes through a Gloo broadcast or gather.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/shared_memory.h"  // random_token, unique_segment_name

namespace groupcoord {

class ProcessGroup;

namespace shm {

/// Outcome of one rank's part of the handle exchange (all-gathered so every rank agrees).
enum AttachStatus : std::int32_t {
  kAttachOk = 0,
  kAttachRemote = 1,  ///< the segment does not exist here: this rank is on another node
  kAttachFailed = 2,  ///< creating or attaching failed for another reason (logged on that rank)
};

/// What the writer rank announces in create_from_process_group (QueueHandle::external).
enum ExternalMode : std::int32_t {
  kNoExternal = 0,       ///< the writer rank created the ring itself
  kExternalHandle = 1,   ///< an external writer's MessageQueue::Handle follows (external_bytes)
  kExternalInvalid = 2,  ///< the writer rank was given an invalid handle (`error` says why)
};

/// The handle, as sent.
struct QueueHandle {
  std::uint64_t magic;
  std::int32_t status;    ///< the writer's AttachStatus: kAttachFailed when it could not create
  std::int32_t external;  ///< an ExternalMode
  std::uint64_t external_bytes;  ///< size of the serialised external handle (kExternalHandle)
  std::uint32_t n_reader;
  std::uint64_t max_chunk_bytes;
  std::uint64_t max_chunks;
  std::uint64_t token;
  char name[96];    ///< segment name, NUL-terminated
  char error[256];  ///< the writer's failure, NUL-terminated
};

/// A handle for a writer that could not create its segment (`error` says why).
QueueHandle failed_handle(const std::string& error);
/// A handle describing a created ring.
QueueHandle ok_handle(const std::string& name, std::size_t n_reader, std::size_t max_chunk_bytes,
                      std::size_t max_chunks, std::uint64_t token);
/// The announcement of an external writer's handle of `size` serialised bytes.
QueueHandle external_handle(std::size_t size);
/// The announcement of an invalid external handle (`error` says why).
QueueHandle invalid_external_handle(const std::string& error);
/// True when `handle` came from this library (guards against garbage from a mismatched peer).
bool handle_is_valid(const QueueHandle& handle);

/// A fresh segment name: "/gcmq-<hash of the group's store prefix and name>-<pid>-<random>".
/// The hash ties it to the group, the pid and 64 random bits make it unique per job and call.
std::string make_segment_name(const ProcessGroup& group);
/// The same for a writer outside any group: `scope` (e.g. "standalone") replaces the group.
std::string make_segment_name(const std::string& scope);

}  // namespace shm
}  // namespace groupcoord
