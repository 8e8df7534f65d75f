// Queues outside any group (vLLM's MessageQueue constructor, export_handle and
// create_from_handle): a writer in one process, readers that attach from its handle in others.
// The collective variant for a group of readers is in queue_factory.cc.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <sstream>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/message_queue.h"
#include "shm/chunk_frame.h"
#include "shm/external_attach.h"
#include "shm/message_queue_impl.h"
#include "shm/queue_handle.h"
#include "shm/ring_buffer.h"

namespace groupcoord {

namespace shm {

HandleAttachment attach_to_handle(const MessageQueue::Handle& handle) {
  HandleAttachment out;
  ShmRingBuffer::AttachResult attached =
      ShmRingBuffer::attach(handle.shm_name, handle.reader_ranks.size(), handle.max_chunk_bytes,
                            handle.max_chunks, handle.token);
  if (attached.ring) {
    out.ring = std::move(attached.ring);
    out.status = kAttachOk;
  } else if (attached.not_found) {
    out.status = kAttachRemote;
    out.error = "segment '" + handle.shm_name + "' does not exist here: its writer (pid " +
                std::to_string(handle.writer_pid) +
                ") is gone or runs on another node, or every reader it listed attached already";
  } else {
    out.status = kAttachFailed;
    out.error = attached.error;
  }
  return out;
}

bool claim_reader_slot(ShmRingBuffer& ring, int index) {
  auto expected = static_cast<std::uint32_t>(ReaderState::kAbsent);
  return ring.reader_state(static_cast<std::size_t>(index))
      .compare_exchange_strong(expected, static_cast<std::uint32_t>(ReaderState::kAttached),
                               std::memory_order_seq_cst);
}

int reader_index_of(const MessageQueue::Handle& handle, int rank) {
  const auto& ranks = handle.reader_ranks;
  const auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

void unlink_if_all_attached(ShmRingBuffer& ring) {
  const auto absent = static_cast<std::uint32_t>(ReaderState::kAbsent);
  for (std::size_t r = 0; r < ring.n_reader(); ++r) {
    if (ring.reader_state(r).load(std::memory_order_seq_cst) == absent) return;
  }
  ring.segment().unlink();
}

std::string external_queue_name(const MessageQueue::Handle& handle, const std::string& group) {
  return "mq[" + (group.empty() ? std::string() : group + ", ") + "external writer pid " +
         std::to_string(handle.writer_pid) + "]";
}

}  // namespace shm

namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  out << "]";
  return out.str();
}

void check_timeout(const char* what, std::chrono::milliseconds timeout) {
  GC_CHECK(timeout.count() >= 0, what, ": negative timeout ", timeout.count(), " ms");
}

}  // namespace

std::unique_ptr<MessageQueue> MessageQueue::create(std::size_t n_reader,
                                                   std::size_t max_chunk_bytes,
                                                   std::size_t max_chunks,
                                                   std::vector<int> reader_ranks,
                                                   std::chrono::milliseconds timeout) {
  const char* what = "MessageQueue.create";
  check_timeout(what, timeout);
  if (reader_ranks.empty()) {
    reader_ranks.resize(n_reader);
    std::iota(reader_ranks.begin(), reader_ranks.end(), 0);
  }
  GC_CHECK(reader_ranks.size() == n_reader, what, ": ", reader_ranks.size(), " reader ranks ",
           ranks_text(reader_ranks), " for n_reader = ", n_reader);
  const std::string name = "mq[writer pid " + std::to_string(::getpid()) + "]";
  if (n_reader == 0) {
    // vLLM makes no buffer either: enqueue() does nothing, there is nothing to export.
    GC_CHECK(max_chunks > 0 && max_chunk_bytes > shm::kChunkHeaderBytes, what,
             ": need max_chunks > 0 and max_chunk_bytes > ", shm::kChunkHeaderBytes, ", got ",
             max_chunks, " and ", max_chunk_bytes);
    return std::unique_ptr<MessageQueue>(new MessageQueue(
        Impl::make_writer(name, -1, {}, max_chunk_bytes, max_chunks, timeout, nullptr)));
  }
  Handle handle;
  handle.reader_ranks = std::move(reader_ranks);
  handle.shm_name = shm::make_segment_name(std::string("standalone"));
  handle.max_chunk_bytes = max_chunk_bytes;
  handle.max_chunks = max_chunks;
  handle.token = shm::random_token();
  handle.writer_pid = static_cast<std::int32_t>(::getpid());
  handle.validate(what);
  auto ring = shm::ShmRingBuffer::create(handle.shm_name, n_reader, max_chunk_bytes, max_chunks,
                                         handle.token);
  auto impl = Impl::make_writer(name, -1, handle.reader_ranks, max_chunk_bytes, max_chunks, timeout,
                                std::move(ring));
  impl->handle = std::move(handle);
  return std::unique_ptr<MessageQueue>(new MessageQueue(std::move(impl)));
}

MessageQueue::Handle MessageQueue::export_handle() const {
  GC_CHECK(impl_->handle.has_value(), impl_->name, ": export_handle: ",
           impl_->ring ? "a queue created collectively has no handle to export (its segment's "
                         "name was removed once the group's readers attached)"
                       : "a queue without readers has no handle");
  return *impl_->handle;
}

std::unique_ptr<MessageQueue> MessageQueue::create_from_handle(const Handle& handle, int rank,
                                                               std::chrono::milliseconds timeout) {
  const char* what = "MessageQueue.create_from_handle";
  check_timeout(what, timeout);
  handle.validate(what);
  const int index = shm::reader_index_of(handle, rank);
  GC_CHECK(index >= 0, what, ": rank ", rank, " is not among the handle's reader ranks ",
           ranks_text(handle.reader_ranks), " (readers on other nodes are not supported)");
  shm::HandleAttachment attached = shm::attach_to_handle(handle);
  if (!attached.ring) GC_THROW(DistributedError, what, ": ", attached.error);
  GC_CHECK(shm::claim_reader_slot(*attached.ring, index), what, ": reader rank ", rank,
           " of segment '", handle.shm_name, "' is attached already (each reader attaches once)");
  auto impl = Impl::make_reader(shm::external_queue_name(handle, ""), -1, handle.reader_ranks,
                                index, timeout, std::move(attached.ring), handle);
  shm::unlink_if_all_attached(*impl->ring);
  return std::unique_ptr<MessageQueue>(new MessageQueue(std::move(impl)));
}

}  // namespace groupcoord
