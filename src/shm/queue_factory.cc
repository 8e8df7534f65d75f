// The collective factories of MessageQueue: create the ring(s), exchange the handles over the
// group's Gloo pair, attach, agree on the outcome, unlink the names.
//
// Collective rule: every rank of the group calls the factory, with the same arguments, in the
// same order as the group's other collectives (it runs a broadcast or gather and an all_gather
// on the group).
#include <algorithm>

#include "groupcoord/check.h"
#include "groupcoord/dtype.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/message_queue.h"
#include "shm/attach_verdict.h"
#include "shm/chunk_frame.h"
#include "shm/message_queue_impl.h"
#include "shm/queue_handle.h"
#include "shm/ring_buffer.h"

namespace groupcoord {

namespace {

using shm::QueueHandle;
using shm::ShmRingBuffer;

/// Argument checks shared by both factories; identical on every rank, so all ranks throw alike
/// before any collective starts.
void validate(const char* op, const ProcessGroup* group, std::size_t max_chunk_bytes,
              std::size_t max_chunks, int rank, const char* rank_name) {
  GC_CHECK(group != nullptr, "MessageQueue.", op, ": group is null");
  GC_CHECK(max_chunks > 0, "MessageQueue.", op, " on group '", group->name(),
           "': max_chunks must be positive, got 0");
  GC_CHECK(max_chunk_bytes > shm::kChunkHeaderBytes, "MessageQueue.", op, " on group '",
           group->name(), "': max_chunk_bytes must exceed the ", shm::kChunkHeaderBytes,
           "-byte chunk header, got ", max_chunk_bytes);
  GC_CHECK(rank >= 0 && rank < group->size(), "MessageQueue.", op, " on group '", group->name(),
           "': ", rank_name, " ", rank, " is out of range for a group of ", group->size(),
           " ranks");
  try {
    shm::RingLayout::compute(static_cast<std::size_t>(group->size()), max_chunk_bytes, max_chunks);
  } catch (const std::invalid_argument& error) {
    GC_THROW(std::invalid_argument, "MessageQueue.", op, " on group '", group->name(),
             "': a ring of ", max_chunks, " chunks of ", max_chunk_bytes, " bytes: ", error.what());
  }
}

/// Creates a ring for `n_reader` readers; on failure returns a handle saying why (the peers
/// must still take part in the exchange, so the writer does not throw here).
QueueHandle create_ring(const ProcessGroup& group, std::size_t n_reader,
                        std::size_t max_chunk_bytes, std::size_t max_chunks,
                        std::unique_ptr<ShmRingBuffer>& ring) {
  try {
    const std::string name = shm::make_segment_name(group);
    const std::uint64_t token = shm::random_token();
    ring = ShmRingBuffer::create(name, n_reader, max_chunk_bytes, max_chunks, token);
    return shm::ok_handle(name, n_reader, max_chunk_bytes, max_chunks, token);
  } catch (const std::exception& error) {
    GC_LOG(Error, "MessageQueue on group '", group.name(), "': ", error.what());
    return shm::failed_handle(error.what());
  }
}

/// Attaches to the ring a writer announced; returns this rank's AttachStatus.
std::int32_t attach_ring(const ProcessGroup& group, const QueueHandle& handle, std::size_t n_reader,
                         std::unique_ptr<ShmRingBuffer>& ring) {
  if (!shm::handle_is_valid(handle)) {
    GC_LOG(Error, "MessageQueue on group '", group.name(), "': received a malformed handle");
    return shm::kAttachFailed;
  }
  if (handle.status != shm::kAttachOk) return shm::kAttachFailed;  // the writer logged why
  ShmRingBuffer::AttachResult attached = ShmRingBuffer::attach(
      handle.name, n_reader, handle.max_chunk_bytes, handle.max_chunks, handle.token);
  if (attached.not_found) return shm::kAttachRemote;
  if (!attached.ring) {
    GC_LOG(Error, "MessageQueue on group '", group.name(), "': ", attached.error);
    return shm::kAttachFailed;
  }
  ring = std::move(attached.ring);
  return shm::kAttachOk;
}

/// All-gathers every rank's view (one status per group rank) and combines them, so that every
/// rank ends up with the same verdict.
std::vector<std::int32_t> agree(ProcessGroup& group, const std::vector<std::int32_t>& mine) {
  const std::size_t n = mine.size();
  std::vector<std::int32_t> all(n * n);
  group.all_gather(mine.data(), all.data(), n, DType::Int32);
  return shm::combine_statuses(all, n);
}

std::string queue_name(const ProcessGroup& group, int writer_rank) {
  return "mq[" + group.name() + ", writer " + std::to_string(writer_rank) + "]";
}

}  // namespace

std::unique_ptr<MessageQueue> MessageQueue::create_from_process_group(
    std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
    int writer_rank, bool blocking) {
  const char* op = "create_from_process_group";
  validate(op, group.get(), max_chunk_bytes, max_chunks, writer_rank, "writer_rank");
  const int n = group->size();
  const int me = group->rank();
  std::vector<int> readers;
  for (int r = 0; r < n; ++r) {
    if (r != writer_rank) readers.push_back(r);
  }
  const std::string name = queue_name(*group, writer_rank);
  if (n == 1) {
    // No readers, no segment (vLLM creates no buffer either): enqueue() does nothing.
    return std::unique_ptr<MessageQueue>(new MessageQueue(Impl::make_writer(
        name, writer_rank, readers, max_chunk_bytes, max_chunks, group->timeout(), nullptr)));
  }

  std::unique_ptr<ShmRingBuffer> ring;
  QueueHandle handle{};
  if (me == writer_rank) handle = create_ring(*group, n - 1, max_chunk_bytes, max_chunks, ring);
  group->broadcast(&handle, sizeof handle, DType::UInt8, writer_rank);

  std::vector<std::int32_t> mine(n, shm::kAttachOk);
  mine[me] = me == writer_rank ? handle.status : attach_ring(*group, handle, n - 1, ring);
  const std::vector<std::int32_t> verdict = agree(*group, mine);
  // Every reader has mapped the segment (or failed): the name is no longer needed. Every rank
  // removes it, so that on return from here no rank can still see it.
  if (ring) ring->segment().unlink();
  shm::raise_on_failure(op, group->name(), verdict, "writer", writer_rank,
                        shm::handle_is_valid(handle) ? handle.error : "");

  std::unique_ptr<Impl> impl;
  if (me == writer_rank) {
    impl = Impl::make_writer(name, writer_rank, readers, max_chunk_bytes, max_chunks,
                             group->timeout(), std::move(ring));
  } else {
    const int index =
        static_cast<int>(std::find(readers.begin(), readers.end(), me) - readers.begin());
    impl = Impl::make_reader(name, writer_rank, readers, index, group->timeout(), std::move(ring));
  }
  std::unique_ptr<MessageQueue> queue(new MessageQueue(std::move(impl)));
  if (blocking) queue->wait_until_ready();
  return queue;
}

std::vector<std::unique_ptr<MessageQueue>> MessageQueue::create_from_process_group_single_reader(
    std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
    int reader_rank, bool blocking) {
  const char* op = "create_from_process_group_single_reader";
  validate(op, group.get(), max_chunk_bytes, max_chunks, reader_rank, "reader_rank");
  const int n = group->size();
  const int me = group->rank();
  std::vector<std::unique_ptr<MessageQueue>> queues;
  if (n == 1) return queues;  // the only rank is the reader, and nobody writes to it

  // Each writer creates its one-reader ring; the reader gathers every handle.
  std::unique_ptr<ShmRingBuffer> own_ring;
  QueueHandle own{};
  if (me != reader_rank) own = create_ring(*group, 1, max_chunk_bytes, max_chunks, own_ring);
  std::vector<QueueHandle> handles(me == reader_rank ? n : 0);
  group->gather(&own, handles.empty() ? nullptr : handles.data(), sizeof(QueueHandle), DType::UInt8,
                reader_rank);

  std::vector<std::int32_t> mine(n, shm::kAttachOk);
  std::vector<std::unique_ptr<ShmRingBuffer>> rings(n);
  if (me == reader_rank) {
    for (int w = 0; w < n; ++w) {
      if (w != reader_rank) mine[w] = attach_ring(*group, handles[w], 1, rings[w]);
    }
  } else {
    mine[me] = own.status;
  }
  const std::vector<std::int32_t> verdict = agree(*group, mine);
  // As above: the writer and the reader both remove the names.
  if (own_ring) own_ring->segment().unlink();
  for (auto& ring : rings) {
    if (ring) ring->segment().unlink();
  }
  shm::raise_on_failure(op, group->name(), verdict, "reader", reader_rank, "");

  for (int w = 0; w < n; ++w) {
    if (w == reader_rank || (me != reader_rank && w != me)) continue;
    const std::string name = "mq[" + group->name() + ", writer " + std::to_string(w) +
                             " -> reader " + std::to_string(reader_rank) + "]";
    std::unique_ptr<Impl> impl =
        me == reader_rank
            ? Impl::make_reader(name, w, {reader_rank}, 0, group->timeout(), std::move(rings[w]))
            : Impl::make_writer(name, w, {reader_rank}, max_chunk_bytes, max_chunks,
                                group->timeout(), std::move(own_ring));
    queues.emplace_back(new MessageQueue(std::move(impl)));
  }
  if (blocking) {
    for (auto& queue : queues) queue->wait_until_ready();
  }
  return queues;
}

}  // namespace groupcoord
