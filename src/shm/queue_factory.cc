// The collective factories of MessageQueue: create the ring(s), exchange the handles over the
// group's Gloo pair, attach, agree on the outcome, unlink the names.
//
// Collective rule: every rank of the group calls the factory, with the same arguments, in the
// same order as the group's other collectives (it runs a broadcast or gather and an all_gather
// on the group).
#include <algorithm>
#include <cstdlib>

#include "groupcoord/check.h"
#include "groupcoord/dtype.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/message_queue.h"
#include "shm/attach_verdict.h"
#include "shm/chunk_frame.h"
#include "shm/external_attach.h"
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

/// GROUPCOORD_MQ_FORCE_REMOTE=1: this process takes the path of a reader on another node (served
/// over TCP) even where it could map the writer's memory; tests run that path on one machine.
bool forced_remote() {
  const char* value = std::getenv("GROUPCOORD_MQ_FORCE_REMOTE");
  return value != nullptr && std::string(value) == "1";
}

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
    for (int w : remote) {
      const std::string writer = "rank " + std::to_string(w);
      if (endpoints[w].ok == 0) {
        error = name + ": the writer (" + writer +
                ") cannot serve a reader on another node: " + endpoints[w].error;
        break;
      }
      inboxes[w] =
          std::make_unique<shm::RemoteInbox>(name, writer, endpoints[w], me, deadline, &error);
      if (!error.empty()) break;
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

}  // namespace groupcoord
