// MessageQueue (groupcoord/message_queue.h): the collective factories (create the ring(s),
// exchange the handles over the CPU group, attach), the operations on an existing ring, and the
// queues outside any group (vLLM's MessageQueue constructor and export_handle). The handle's
// validation and byte form are in message_queue_handle.cc.
#include "groupcoord/message_queue.h"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "core/deadline.h"
#include "core/env_switch.h"
#include "core/host_copy.h"
#include "core/wake_word.h"
#include "groupcoord/check.h"
#include "groupcoord/dtype.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "process_group/rank_liveness.h"
#include "shm/attach_verdict.h"
#include "shm/chunk_frame.h"
#include "shm/external_attach.h"
#include "shm/message_queue_impl.h"
#include "shm/process_liveness.h"
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

/// GROUPCOORD_MQ_FORCE_REMOTE=1: this process takes the path of a reader on another node (served
/// over TCP) even where it could map the writer's memory; tests run that path on one machine.
bool forced_remote() { return env_bool("GROUPCOORD_MQ_FORCE_REMOTE", false); }

/// Attaches to the ring a writer announced; returns this rank's AttachStatus.
std::int32_t attach_ring(const ProcessGroup& group, const QueueHandle& handle, std::size_t n_reader,
                         std::unique_ptr<ShmRingBuffer>& ring) {
  if (!shm::handle_is_valid(handle)) {
    GC_LOG(Error, "MessageQueue on group '", group.name(), "': received a malformed handle");
    return shm::kAttachFailed;
  }
  if (handle.status != shm::kAttachOk) return shm::kAttachFailed;  // the writer logged why
  if (forced_remote()) return shm::kAttachRemote;
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

/// Every rank says whether its side of the remote connections is up (`error` empty); all throw
/// the same DistributedError, naming the ranks that failed, when one is not. `who`: "readers" or
/// "writers" on other nodes.
void agree_on_connections(ProcessGroup& group, const std::string& name, const char* who,
                          const std::string& error) {
  const std::int32_t ok = error.empty() ? 1 : 0;
  std::vector<std::int32_t> all(static_cast<std::size_t>(group.size()));
  group.all_gather(&ok, all.data(), 1, DType::Int32);
  std::string failed;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r] == 0) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  }
  if (failed.empty()) return;
  if (!error.empty()) GC_LOG(Error, error);
  GC_THROW(DistributedError, name, ": connecting the ", who,
           " on other nodes failed on group "
           "rank(s) ",
           failed, error.empty() ? std::string(" (see their log)") : ": " + error);
}

/// Connects the readers that cannot map the writer's segment (`remote`, group ranks: on other
/// nodes) to the writer over TCP (remote_fanout.h): the writer listens and broadcasts where, they
/// connect, and every rank agrees on the outcome before anyone throws. Sets `fanout` on the
/// writer, `inbox` on a remote reader.
void connect_remote_readers(ProcessGroup& group, const std::string& name, int writer_rank,
                            const std::vector<int>& remote,
                            std::unique_ptr<shm::RemoteFanout>& fanout,
                            std::unique_ptr<shm::RemoteInbox>& inbox) {
  const int me = group.rank();
  shm::RemoteEndpoint endpoint;
  if (me == writer_rank) fanout = std::make_unique<shm::RemoteFanout>(name, remote, &endpoint);
  group.broadcast(&endpoint, sizeof endpoint, DType::UInt8, writer_rank);
  const shm::Deadline deadline(group.timeout());
  std::string error;
  if (endpoint.ok == 0) {
    error = name + ": the writer (rank " + std::to_string(writer_rank) +
            ") cannot serve readers on other nodes: " + endpoint.error;
  } else if (me == writer_rank) {
    error = fanout->accept_all(deadline);
  } else if (std::find(remote.begin(), remote.end(), me) != remote.end()) {
    inbox = std::make_unique<shm::RemoteInbox>(name, "rank " + std::to_string(writer_rank),
                                               endpoint, me, deadline, &error);
  }
  agree_on_connections(group, name, "readers", error);
}

/// create_from_process_group_single_reader's counterpart of connect_remote_readers: every writer
/// in `remote` (group ranks on another node than `reader_rank`) serves the reader over TCP. The
/// writers' endpoints are gathered to the reader, which connects to each; every rank then agrees
/// on the outcome. Sets `fanout` on such a writer, `inboxes[w]` on the reader.
void connect_remote_writers(ProcessGroup& group, const std::string& name, int reader_rank,
                            const std::vector<int>& remote,
                            std::unique_ptr<shm::RemoteFanout>& fanout,
                            std::vector<std::unique_ptr<shm::RemoteInbox>>& inboxes) {
  const int me = group.rank();
  const int n = group.size();
  const bool remote_writer = std::find(remote.begin(), remote.end(), me) != remote.end();
  shm::RemoteEndpoint mine;
  if (remote_writer) {
    fanout = std::make_unique<shm::RemoteFanout>(name + " writer " + std::to_string(me),
                                                 std::vector<int>{reader_rank}, &mine);
  }
  std::vector<shm::RemoteEndpoint> endpoints(me == reader_rank ? n : 0);
  group.gather(&mine, endpoints.empty() ? nullptr : endpoints.data(), sizeof mine, DType::UInt8,
               reader_rank);
  const shm::Deadline deadline(group.timeout());
  std::string error;
  if (remote_writer) {
    error = fanout->accept_all(deadline);
  } else if (me == reader_rank) {
    inboxes.resize(static_cast<std::size_t>(n));
    // Every writer gets this reader's hello even after one failed, so that none waits for it
    // until the deadline; the first failure is the one reported.
    for (int w : remote) {
      const std::string writer = "rank " + std::to_string(w);
      std::string failed;
      if (endpoints[w].ok == 0) {
        failed = name + ": the writer (" + writer +
                 ") cannot serve a reader on another node: " + endpoints[w].error;
      } else {
        inboxes[w] =
            std::make_unique<shm::RemoteInbox>(name, writer, endpoints[w], me, deadline, &failed);
      }
      if (error.empty()) error = failed;
    }
  }
  agree_on_connections(group, name, "writers", error);
}

std::string queue_name(const ProcessGroup& group, int writer_rank) {
  return "mq[" + group.name() + ", writer " + std::to_string(writer_rank) + "]";
}

std::string prefix(const char* op, const ProcessGroup& group) {
  return std::string("MessageQueue.") + op + " on group '" + group.name() + "'";
}

/// The writer rank's announcement of an external writer's handle; `bytes` receives the handle
/// in serialised form. An invalid handle is announced as such (the peers must still take part
/// in the broadcast), so that every rank raises the same std::invalid_argument afterwards.
QueueHandle announce_external(const ProcessGroup& group, const char* op,
                              const MessageQueue::Handle& external, Bytes& bytes) {
  try {
    external.validate(prefix(op, group) + ": external_writer_handle");
    bytes = external.to_bytes();
    return shm::external_handle(bytes.size());
  } catch (const std::invalid_argument& error) {
    return shm::invalid_external_handle(error.what());
  }
}

/// Every group rank must be one of the handle's readers: remote readers are not supported.
/// Decided from the handle alone, so every rank throws alike.
void check_every_rank_reads(const ProcessGroup& group, const char* op,
                            const MessageQueue::Handle& handle) {
  std::vector<int> missing;
  for (int r = 0; r < group.size(); ++r) {
    if (shm::reader_index_of(handle, r) < 0) missing.push_back(r);
  }
  if (missing.empty()) return;
  std::string listed, absent;
  for (int r : handle.reader_ranks) listed += (listed.empty() ? "" : ", ") + std::to_string(r);
  for (int r : missing) absent += (absent.empty() ? "" : ", ") + std::to_string(r);
  GC_THROW(std::invalid_argument, prefix(op, group), ": group rank(s) ", absent,
           " are not among the external writer's reader ranks [", listed,
           "] (readers outside the writer's handle, e.g. on other nodes, are not supported)");
}

/// True when every reader the handle lists is a rank of `group` (then, once the group agreed
/// that all of them attached, nobody else will need the segment's name).
bool group_covers_readers(const ProcessGroup& group, const MessageQueue::Handle& handle) {
  return std::all_of(handle.reader_ranks.begin(), handle.reader_ranks.end(),
                     [&](int r) { return r < group.size(); });
}

/// The external-writer half of create_from_process_group, after the writer rank's
/// announcement `announced` reached every rank: the serialised handle follows in a second
/// broadcast, every rank attaches as a reader, and the ranks agree on the outcome.
std::unique_ptr<MessageQueue::Impl> attach_external(const std::shared_ptr<ProcessGroup>& group,
                                                    const char* op, int writer_rank,
                                                    const QueueHandle& announced, Bytes bytes) {
  const int n = group->size();
  const int me = group->rank();
  if (announced.external == shm::kExternalInvalid) {
    GC_THROW(std::invalid_argument, announced.error, " (passed by group rank ", writer_rank, ")");
  }
  // A handle is a few hundred bytes; a larger announcement is garbage from a mismatched peer.
  GC_CHECK(announced.external_bytes <= (std::size_t{1} << 24), prefix(op, *group), ": group rank ",
           writer_rank, " announced a handle of ", announced.external_bytes, " bytes");
  bytes.resize(static_cast<std::size_t>(announced.external_bytes));
  if (n > 1) group->broadcast(&bytes[0], bytes.size(), DType::UInt8, writer_rank);
  const MessageQueue::Handle handle = MessageQueue::Handle::from_bytes(bytes);
  check_every_rank_reads(*group, op, handle);

  const int index = shm::reader_index_of(handle, me);
  shm::HandleAttachment attached = shm::attach_to_handle(handle);
  if (attached.ring && !shm::claim_reader_slot(*attached.ring, index)) {
    attached = {};
    attached.status = shm::kAttachFailed;
    attached.error = "reader rank " + std::to_string(me) + " is attached already";
  }
  if (attached.status == shm::kAttachFailed) {  // the verdict says "see their log"
    GC_LOG(Error, prefix(op, *group), ": ", attached.error);
  }
  std::vector<std::int32_t> mine(n, shm::kAttachOk);
  mine[me] = attached.status;
  const std::vector<std::int32_t> verdict = n > 1 ? agree(*group, mine) : mine;
  if (attached.ring && group_covers_readers(*group, handle)) attached.ring->segment().unlink();
  shm::raise_on_failure(op, group->name(), verdict, "external writer", -1, "");

  auto impl = MessageQueue::Impl::make_reader(shm::external_queue_name(handle, group->name()), -1,
                                              handle.reader_ranks, index, group->timeout(),
                                              std::move(attached.ring), handle);
  shm::unlink_if_all_attached(*impl->ring);
  return impl;
}

}  // namespace

std::unique_ptr<MessageQueue> MessageQueue::create_from_process_group(
    std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
    int writer_rank, bool blocking) {
  return create_from_process_group(std::move(group), max_chunk_bytes, max_chunks, writer_rank,
                                   std::nullopt, blocking);
}

std::unique_ptr<MessageQueue> MessageQueue::create_from_process_group(
    std::shared_ptr<ProcessGroup> group, std::size_t max_chunk_bytes, std::size_t max_chunks,
    int writer_rank, const std::optional<Handle>& external_writer_handle, bool blocking) {
  const char* op = "create_from_process_group";
  validate(op, group.get(), max_chunk_bytes, max_chunks, writer_rank, "writer_rank");
  const int n = group->size();
  const int me = group->rank();
  // Only the writer rank's handle counts (as in vLLM): it announces the mode to the others.
  const bool external = me == writer_rank && external_writer_handle.has_value();
  std::vector<int> readers;
  for (int r = 0; r < n; ++r) {
    if (r != writer_rank) readers.push_back(r);
  }
  const std::string name = queue_name(*group, writer_rank);
  if (n == 1 && !external) {
    // No readers, no segment (vLLM creates no buffer either): enqueue() does nothing.
    return std::unique_ptr<MessageQueue>(new MessageQueue(Impl::make_writer(
        name, writer_rank, readers, max_chunk_bytes, max_chunks, group->timeout(), nullptr)));
  }

  std::unique_ptr<ShmRingBuffer> ring;
  QueueHandle handle{};
  Bytes external_bytes;
  if (external) {
    handle = announce_external(*group, op, *external_writer_handle, external_bytes);
  } else if (me == writer_rank) {
    handle = create_ring(*group, n - 1, max_chunk_bytes, max_chunks, ring);
  }
  if (n > 1) group->broadcast(&handle, sizeof handle, DType::UInt8, writer_rank);
  if (shm::handle_is_valid(handle) && handle.external != shm::kNoExternal) {
    std::unique_ptr<MessageQueue> queue(new MessageQueue(
        attach_external(group, op, writer_rank, handle, std::move(external_bytes))));
    if (blocking) queue->wait_until_ready();
    return queue;
  }

  std::vector<std::int32_t> mine(n, shm::kAttachOk);
  mine[me] = me == writer_rank ? handle.status : attach_ring(*group, handle, n - 1, ring);
  const std::vector<std::int32_t> verdict = agree(*group, mine);
  // Every reader has mapped the segment (or failed): the name is no longer needed. Every rank
  // removes it, so that on return from here no rank can still see it.
  if (ring) ring->segment().unlink();
  shm::raise_on_failure(op, group->name(), verdict, "writer", writer_rank,
                        shm::handle_is_valid(handle) ? handle.error : "",
                        /*remote_allowed=*/true);
  // Readers on other nodes (vLLM's remote readers) are served over TCP; their ring slots stay
  // unused.
  std::vector<int> remote;
  for (int r : readers) {
    if (verdict[r] == shm::kAttachRemote) remote.push_back(r);
  }
  std::unique_ptr<shm::RemoteFanout> fanout;
  std::unique_ptr<shm::RemoteInbox> inbox;
  if (!remote.empty()) connect_remote_readers(*group, name, writer_rank, remote, fanout, inbox);

  std::unique_ptr<Impl> impl;
  const int index =
      static_cast<int>(std::find(readers.begin(), readers.end(), me) - readers.begin());
  if (me == writer_rank) {
    impl = Impl::make_writer(name, writer_rank, readers, max_chunk_bytes, max_chunks,
                             group->timeout(), std::move(ring), std::move(fanout));
  } else if (inbox) {
    impl =
        Impl::make_remote_reader(name, writer_rank, readers, index, readers.size() - remote.size(),
                                 max_chunk_bytes, max_chunks, group->timeout(), std::move(inbox));
  } else {
    impl = Impl::make_reader(name, writer_rank, readers, index, group->timeout(), std::move(ring));
    impl->n_local_reader = readers.size() - remote.size();
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
  shm::raise_on_failure(op, group->name(), verdict, "reader", reader_rank, "",
                        /*remote_allowed=*/true);
  // Writers on another node than the reader serve it over TCP.
  std::vector<int> remote;
  for (int w = 0; w < n; ++w) {
    if (w != reader_rank && verdict[w] == shm::kAttachRemote) remote.push_back(w);
  }
  std::unique_ptr<shm::RemoteFanout> fanout;
  std::vector<std::unique_ptr<shm::RemoteInbox>> inboxes;
  if (!remote.empty()) {
    connect_remote_writers(
        *group, "mq[" + group->name() + " -> reader " + std::to_string(reader_rank) + "]",
        reader_rank, remote, fanout, inboxes);
  }

  for (int w = 0; w < n; ++w) {
    if (w == reader_rank || (me != reader_rank && w != me)) continue;
    const std::string name = "mq[" + group->name() + ", writer " + std::to_string(w) +
                             " -> reader " + std::to_string(reader_rank) + "]";
    std::unique_ptr<Impl> impl;
    if (me != reader_rank) {
      impl = Impl::make_writer(name, w, {reader_rank}, max_chunk_bytes, max_chunks,
                               group->timeout(), std::move(own_ring), std::move(fanout));
    } else if (!inboxes.empty() && inboxes[w]) {
      impl = Impl::make_remote_reader(name, w, {reader_rank}, 0, 0, max_chunk_bytes, max_chunks,
                                      group->timeout(), std::move(inboxes[w]));
    } else {
      impl = Impl::make_reader(name, w, {reader_rank}, 0, group->timeout(), std::move(rings[w]));
    }
    queues.emplace_back(new MessageQueue(std::move(impl)));
  }
  if (blocking) {
    for (auto& queue : queues) queue->wait_until_ready();
  }
  return queues;
}

// -------------------------------------------------------------------------------------------------
// MessageQueue's operations on an existing ring.

namespace {

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

std::uint32_t as_word(shm::ReaderState state) { return static_cast<std::uint32_t>(state); }

// Whether ring reader `r` of the writer `q` reads over a socket (the fanout's readers).
bool is_remote(const MessageQueue::Impl& q, std::size_t r) {
  return q.fanout && q.fanout->serves(q.reader_ranks[r]);
}

// enqueue() and enqueue_error(): `message` to every reader, flagged as the writer's failure text
// when `writer_failure`.
void send_message(MessageQueue::Impl& q, const char* op, const Bytes& message, bool writer_failure,
                  std::optional<std::chrono::milliseconds> timeout);

// The writer's half of send_message() for the readers of the ring.
void enqueue_local(MessageQueue::Impl& q, const char* op, const Bytes& obj, bool writer_failure,
                   const shm::Deadline& deadline);

}  // namespace

// ---- construction ---------------------------------------------------------------------------

std::unique_ptr<MessageQueue::Impl> MessageQueue::Impl::make_writer(
    std::string name, int writer_rank, std::vector<int> reader_ranks, std::size_t max_chunk_bytes,
    std::size_t max_chunks, std::chrono::milliseconds timeout,
    std::unique_ptr<shm::ShmRingBuffer> ring, std::unique_ptr<shm::RemoteFanout> fanout) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->writer_rank = writer_rank;
  impl->reader_ranks = std::move(reader_ranks);
  impl->max_chunk_bytes = max_chunk_bytes;
  impl->max_chunks = max_chunks;
  impl->timeout = timeout;
  impl->n_local_reader = impl->reader_ranks.size() - (fanout ? fanout->size() : 0);
  impl->fanout = std::move(fanout);
  if (ring) {
    std::vector<std::string> reader_names;
    std::vector<bool> remote;
    for (std::size_t r = 0; r < impl->reader_ranks.size(); ++r) {
      reader_names.push_back("reader " + rank_name(impl->reader_ranks[r]));
      remote.push_back(is_remote(*impl, r));
    }
    impl->shm_name = ring->segment().name();
    impl->writer = std::make_unique<shm::RingWriter>(*ring, impl->name, std::move(reader_names),
                                                     std::move(remote));
    impl->ring = std::move(ring);
  }
  return impl;
}

std::unique_ptr<MessageQueue::Impl> MessageQueue::Impl::make_remote_reader(
    std::string name, int writer_rank, std::vector<int> reader_ranks, int reader_index,
    std::size_t n_local_reader, std::size_t max_chunk_bytes, std::size_t max_chunks,
    std::chrono::milliseconds timeout, std::unique_ptr<shm::RemoteInbox> inbox) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->writer_rank = writer_rank;
  impl->reader_ranks = std::move(reader_ranks);
  impl->reader_index = reader_index;
  impl->n_local_reader = n_local_reader;
  impl->max_chunk_bytes = max_chunk_bytes;
  impl->max_chunks = max_chunks;
  impl->timeout = timeout;
  impl->inbox = std::move(inbox);
  return impl;
}

std::unique_ptr<MessageQueue::Impl> MessageQueue::Impl::make_reader(
    std::string name, int writer_rank, std::vector<int> reader_ranks, int reader_index,
    std::chrono::milliseconds timeout, std::unique_ptr<shm::ShmRingBuffer> ring,
    std::optional<MessageQueue::Handle> handle) {
  auto impl = std::make_unique<Impl>();
  impl->handle = std::move(handle);
  impl->name = std::move(name);
  impl->writer_rank = writer_rank;
  impl->reader_ranks = std::move(reader_ranks);
  impl->reader_index = reader_index;
  impl->n_local_reader = impl->reader_ranks.size();
  impl->max_chunk_bytes = ring->max_chunk_bytes();
  impl->max_chunks = ring->max_chunks();
  impl->timeout = timeout;
  impl->shm_name = ring->segment().name();
  impl->reader = std::make_unique<shm::RingReader>(*ring, static_cast<std::size_t>(reader_index),
                                                   impl->name, impl->writer_label());
  // The writer watches our pid only when it means the same process to it (same namespace).
  shm::ReaderSlot& slot = ring->reader_slot(static_cast<std::size_t>(reader_index));
  if (ring->header().pid_namespace != 0 && ring->header().pid_namespace == this_pid_namespace()) {
    slot.pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_relaxed);
  }
  // seq_cst, not just release: readers attaching at the same time from a handle then cannot
  // both miss each other's attachment (see shm::unlink_if_all_attached).
  slot.state.store(as_word(shm::ReaderState::kAttached), std::memory_order_seq_cst);
  shm::notify_waiters(ring->header().space_free);  // a writer may be waiting for it
  impl->ring = std::move(ring);
  return impl;
}

std::string MessageQueue::Impl::writer_label() const {
  if (writer_rank >= 0) return rank_name(writer_rank);
  return "the external writer" +
         (handle ? " (pid " + std::to_string(handle->writer_pid) + ")" : std::string());
}

void MessageQueue::Impl::throw_writer_failure(const Bytes& why) const {
  throw SourceFailedError(
      detail::concat(__FILE__, ":", __LINE__, ": ", name, ": dequeue: the writer (", writer_label(),
                     ") failed instead of sending a message: ", why),
      writer_rank, why);
}

MessageQueue::MessageQueue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MessageQueue::~MessageQueue() {
  Impl& q = *impl_;
  if (!q.ring) return;
  // Tell the peers, so that they fail at once instead of waiting for their deadline. The
  // writer's release store comes after its last publish: a reader that sees "closed" also sees
  // every message that was published.
  if (q.is_writer()) {
    const auto state = q.broken ? shm::WriterState::kBroken : shm::WriterState::kClosed;
    q.ring->header().writer_state.value.store(static_cast<std::uint32_t>(state),
                                              std::memory_order_release);
    shm::notify_waiters(q.ring->header().data_ready);  // sleeping readers see it now
  } else {
    q.ring->reader_state(q.reader_index)
        .store(as_word(shm::ReaderState::kClosed), std::memory_order_release);
    shm::notify_waiters(q.ring->header().space_free);  // as the writer waiting for this reader
  }
}

// ---- handshake ------------------------------------------------------------------------------

void MessageQueue::wait_until_ready(std::optional<std::chrono::milliseconds> timeout) {
  Impl& q = *impl_;
  q.check_not_cancelled("wait_until_ready");
  if (q.ready || !q.ring) {
    q.ready = true;
    return;
  }
  GC_CHECK(!timeout || timeout->count() >= 0, q.name, ": wait_until_ready: negative timeout ",
           timeout->count(), " ms");
  const shm::Deadline deadline(timeout.value_or(q.timeout));
  shm::ShmRingBuffer& ring = *q.ring;
  if (q.is_writer()) {
    // Every reader must have attached (mapped the segment); one that closed never will. Not
    // "called wait_until_ready": as in vLLM, one thread may make a writer and a reader and call
    // the writer's wait_until_ready first.
    std::size_t waiting_for = 0;
    auto all_ready = [&] {
      q.check_not_cancelled("wait_until_ready");
      for (std::size_t r = 0; r < ring.n_reader(); ++r) {
        if (is_remote(q, r)) continue;  // reads over its socket, never announces itself here
        const std::uint32_t state = ring.reader_state(r).load(std::memory_order_acquire);
        if (state == as_word(shm::ReaderState::kClosed)) {
          GC_THROW(DistributedError, q.name, ": wait_until_ready: reader ",
                   rank_name(q.reader_ranks[r]), " closed the queue");
        }
        if (state != as_word(shm::ReaderState::kAttached) &&
            state != as_word(shm::ReaderState::kReady)) {
          waiting_for = r;
          return false;
        }
      }
      return true;
    };
    if (!shm::wait_on(ring.header().space_free, all_ready, deadline)) {
      GC_THROW(TimeoutError, q.name, ": wait_until_ready timed out after ",
               deadline.timeout().count(), " ms waiting for reader ",
               rank_name(q.reader_ranks[waiting_for]));
    }
    // Every reader has attached: the name is no longer needed (a no-op for collectively made
    // queues, whose name is gone already; create() queues lose theirs here at the latest).
    ring.segment().unlink();
    ring.header().writer_ready.value.store(1, std::memory_order_release);
    shm::notify_waiters(ring.header().data_ready);
  } else {
    ring.reader_state(q.reader_index)
        .store(as_word(shm::ReaderState::kReady), std::memory_order_release);
    shm::notify_waiters(ring.header().space_free);
    auto writer_ready = [&] {
      q.check_not_cancelled("wait_until_ready");
      if (ring.header().writer_ready.value.load(std::memory_order_acquire) == 1) return true;
      if (ring.header().writer_state.value.load(std::memory_order_acquire) !=
          static_cast<std::uint32_t>(shm::WriterState::kOpen)) {
        GC_THROW(DistributedError, q.name, ": wait_until_ready: the writer (", q.writer_label(),
                 ") closed the queue");
      }
      return false;
    };
    if (!shm::wait_on(ring.header().data_ready, writer_ready, deadline)) {
      GC_THROW(TimeoutError, q.name, ": wait_until_ready timed out after ",
               deadline.timeout().count(), " ms waiting for the writer (", q.writer_label(), ")");
    }
  }
  q.ready = true;
}

// ---- messages -------------------------------------------------------------------------------

void MessageQueue::enqueue(const Bytes& obj, std::optional<std::chrono::milliseconds> timeout) {
  send_message(*impl_, "enqueue", obj, /*writer_failure=*/false, timeout);
}

void MessageQueue::enqueue_error(const std::string& why,
                                 std::optional<std::chrono::milliseconds> timeout) {
  send_message(*impl_, "enqueue_error", why, /*writer_failure=*/true, timeout);
}

namespace {

void send_message(MessageQueue::Impl& q, const char* op, const Bytes& message, bool writer_failure,
                  std::optional<std::chrono::milliseconds> timeout) {
  GC_CHECK(q.is_writer(), q.name, ": ", op, ": only the writer (", q.writer_label(),
           ") can enqueue; this process is reader ", q.reader_index);
  GC_CHECK(!timeout || timeout->count() >= 0, q.name, ": ", op, ": negative timeout ",
           timeout->count(), " ms");
  q.check_not_cancelled(op);
  if (q.broken) {
    GC_THROW(DistributedError, q.name, ": ", op,
             ": the queue is broken (an earlier enqueue timed out half-way through a message "
             "larger than the ring)");
  }
  if (!q.ring) return;  // no readers: nothing to do, as in vLLM
  const shm::Deadline deadline(timeout.value_or(q.timeout));
  if (q.n_local_reader > 0) enqueue_local(q, op, message, writer_failure, deadline);
  // The readers on other nodes get it after the local ones (their sockets buffer it).
  if (q.fanout) q.fanout->send(message, writer_failure, deadline);
}

void enqueue_local(MessageQueue::Impl& q, const char* op, const Bytes& obj, bool writer_failure,
                   const shm::Deadline& deadline) {
  const std::size_t payload = shm::chunk_payload(q.max_chunk_bytes);
  const std::uint64_t count = shm::chunks_for(obj.size(), payload);
  const std::uint64_t word = shm::size_word(obj.size(), writer_failure);
  GC_CHECK(count <= UINT32_MAX, q.name, ": ", op, ": a message of ", obj.size(),
           " bytes needs more than 2^32 chunks of ", q.max_chunk_bytes, " bytes");

  // Wait up front for every chunk the message needs that fits in the ring: when that times out
  // nothing has been written and the queue stays usable. Only a message larger than the ring
  // must stream, and can time out half-way.
  q.writer->wait_free(static_cast<std::size_t>(std::min<std::uint64_t>(count, q.max_chunks)),
                      deadline, op, q.wait_options());
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint8_t* chunk = nullptr;
    try {
      chunk = q.writer->acquire(deadline, op, q.wait_options());
    } catch (...) {
      if (i > 0) {
        // Readers hold part of a message that can never be completed.
        q.broken = true;
        q.ring->header().writer_state.value.store(
            static_cast<std::uint32_t>(shm::WriterState::kBroken), std::memory_order_release);
        shm::notify_waiters(q.ring->header().data_ready);
      }
      throw;
    }
    const std::size_t offset = static_cast<std::size_t>(i) * payload;
    const std::size_t n = std::min(payload, obj.size() - offset);
    shm::write_chunk_header(
        chunk, {word, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(count)});
    if (n > 0) detail::copy_bytes(chunk + shm::kChunkHeaderBytes, obj.data() + offset, n);
    q.writer->publish();
  }
}

}  // namespace

Bytes MessageQueue::dequeue(std::optional<std::chrono::milliseconds> timeout, bool indefinite) {
  Impl& q = *impl_;
  q.check_not_cancelled("dequeue");
  GC_CHECK(!q.is_writer(), q.name, ": dequeue: only readers can dequeue; this process is ",
           "the writer (", q.writer_label(), ")");
  GC_CHECK(!timeout || timeout->count() >= 0, q.name, ": dequeue: negative timeout ",
           timeout->count(), " ms");
  const shm::Deadline deadline(timeout.value_or(q.timeout));
  if (q.inbox) {
    bool writer_failed = false;
    Bytes message = q.inbox->receive(deadline, &writer_failed);
    if (writer_failed) q.throw_writer_failure(message);
    return message;
  }
  const std::size_t payload = shm::chunk_payload(q.max_chunk_bytes);
  while (true) {
    const std::uint8_t* chunk = nullptr;
    try {
      chunk = q.reader->acquire(deadline, "dequeue", q.wait_options(indefinite));
    } catch (const TimeoutError& error) {
      if (!q.partial) throw;
      // What we have so far is kept: the next dequeue() continues with the next chunk.
      throw TimeoutError(std::string(error.what()) + " (chunk " + std::to_string(q.partial->next) +
                         " of " + std::to_string(q.partial->count) +
                         " of a message; dequeue again to resume it)");
    }
    const shm::ChunkHeader header = shm::read_chunk_header(chunk);
    const std::uint64_t size = shm::message_bytes(header.total_bytes);
    if (!q.partial) {
      if (header.index != 0 || header.count != shm::chunks_for(size, payload)) {
        GC_THROW(DistributedError, q.name, ": dequeue: corrupt chunk ", q.reader->current(),
                 " (index ", header.index, ", count ", header.count, ", size ", size, ")");
      }
      q.partial.emplace();
      // Reserved, not resized: the chunks are appended in order, so no byte is written twice
      // (zero-filling first: 2.0 against 1.4 µs to make a 64 KiB message on the 2-core VM).
      q.partial->data.reserve(size);
      q.partial->size_word = header.total_bytes;
      q.partial->count = header.count;
    } else if (header.index != q.partial->next || header.count != q.partial->count ||
               header.total_bytes != q.partial->size_word) {
      GC_THROW(DistributedError, q.name, ": dequeue: chunk ", q.reader->current(),
               " does not continue the current message (index ", header.index, ", expected ",
               q.partial->next, ")");
    }
    Impl::Partial& message = *q.partial;
    const std::size_t offset = static_cast<std::size_t>(header.index) * payload;  // == data.size()
    const std::size_t n = std::min<std::size_t>(payload, size - offset);
    if (n > 0) detail::append_bytes(message.data, chunk + shm::kChunkHeaderBytes, n);
    q.reader->release();
    if (++message.next == message.count) {
      const bool writer_failed = shm::is_writer_failure(message.size_word);
      Bytes result = std::move(message.data);
      q.partial.reset();
      if (writer_failed) q.throw_writer_failure(result);
      return result;
    }
  }
}

Bytes MessageQueue::broadcast_object(const std::optional<Bytes>& obj) {
  if (!impl_->is_writer()) return dequeue();
  GC_CHECK(obj.has_value(), impl_->name,
           ": broadcast_object: the writer must pass the object to broadcast");
  return broadcast_held_object(*obj);
}

Bytes MessageQueue::broadcast_held_object(const Bytes& obj) {
  if (!impl_->is_writer()) return dequeue();
  enqueue(obj);
  return detail::bytes_copy(obj);  // after the enqueue: the readers need not wait for it
}

// ---- accessors ------------------------------------------------------------------------------

bool MessageQueue::is_writer() const { return impl_->is_writer(); }
bool MessageQueue::is_reader() const { return !impl_->is_writer(); }
int MessageQueue::num_readers() const { return static_cast<int>(impl_->reader_ranks.size()); }
int MessageQueue::num_local_readers() const { return static_cast<int>(impl_->n_local_reader); }
int MessageQueue::writer_rank() const { return impl_->writer_rank; }
const std::vector<int>& MessageQueue::reader_ranks() const { return impl_->reader_ranks; }
int MessageQueue::reader_index() const { return impl_->reader_index; }
std::size_t MessageQueue::max_chunk_bytes() const { return impl_->max_chunk_bytes; }
std::size_t MessageQueue::max_chunks() const { return impl_->max_chunks; }
const std::string& MessageQueue::name() const { return impl_->name; }
const std::string& MessageQueue::shm_name() const { return impl_->shm_name; }
std::chrono::milliseconds MessageQueue::default_timeout() const { return impl_->timeout; }

void MessageQueue::shutdown() {
  Impl& q = *impl_;
  q.cancelled.store(true, std::memory_order_release);
  // Wake this process's sleeping waits (a wake-up reaches every sleeper of the word; the other
  // processes' find nothing new and sleep again).
  if (q.ring) {
    shm::notify_waiters(q.ring->header().data_ready);
    shm::notify_waiters(q.ring->header().space_free);
  }
}

bool MessageQueue::is_shut_down() const { return impl_->cancelled.load(std::memory_order_acquire); }

void MessageQueue::set_warning_interval(std::chrono::milliseconds interval) {
  GC_CHECK(interval.count() > 0, impl_->name, ": set_warning_interval: the interval must be ",
           "positive, got ", interval.count(), " ms");
  impl_->warn_every = interval;
}

std::chrono::milliseconds MessageQueue::warning_interval() const { return impl_->warn_every; }

std::chrono::milliseconds MessageQueue::Impl::default_warning_interval() {
  const char* text = std::getenv("GROUPCOORD_RINGBUFFER_WARNING_INTERVAL");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(60);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0)) {
    throw std::invalid_argument(std::string("GROUPCOORD_RINGBUFFER_WARNING_INTERVAL=") + text +
                                ": expected a positive number of seconds");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

void MessageQueue::set_default_timeout(std::chrono::milliseconds timeout) {
  GC_CHECK(timeout.count() >= 0, impl_->name, ": set_default_timeout: negative timeout ",
           timeout.count(), " ms");
  impl_->timeout = timeout;
}

// -------------------------------------------------------------------------------------------------
// Queues outside any group (vLLM's MessageQueue constructor, export_handle and
// create_from_handle): a writer in one process, readers that attach from its handle in others.
// The collective variant for a group of readers is above.

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
