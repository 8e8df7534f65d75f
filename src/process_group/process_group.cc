// ProcessGroup (groupcoord/process_group.h): creation, accessors and destruction, then the
// collectives on host memory, then the tagged point-to-point transfers.
#include "groupcoord/process_group.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/gather.h>
#include <gloo/rendezvous/context.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/host_copy.h"
#include "core/shape.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/prefix_store.h"
#include "process_group/gloo_errors.h"
#include "process_group/group_state.h"
#include "process_group/recv_op.h"
#include "process_group/reduce_functions.h"
#include "process_group/send_op.h"
#include "store/gloo_store_adapter.h"

namespace groupcoord {

namespace {

/// Where world generations are counted; each rank counts its own create_world() calls, so the
/// counts agree across ranks without any coordination.
std::string world_generation_key(int rank) {
  return "groupcoord/pg/world_generation/" + std::to_string(rank);
}

/// How the helper thread of connect_full_mesh_within ended, as plain values: an exception object
/// is never shared between the threads (whichever dropped it last would destroy it, while the
/// other may still be reading it).
struct MeshOutcome {
  enum class Kind { kConnected, kTimeout, kGloo, kInvalid, kOther } kind = Kind::kConnected;
  std::string what;
};

MeshOutcome connect_full_mesh(gloo::rendezvous::Context& context, gloo::rendezvous::Store& store,
                              std::shared_ptr<gloo::transport::Device>& device) {
  try {
    context.connectFullMesh(store, device);
    return {};
  } catch (const TimeoutError& e) {  // the store's deadline
    return {MeshOutcome::Kind::kTimeout, e.what()};
  } catch (const ::gloo::Exception& e) {
    return {MeshOutcome::Kind::kGloo, e.what()};
  } catch (const std::invalid_argument& e) {
    return {MeshOutcome::Kind::kInvalid, e.what()};
  } catch (const std::exception& e) {
    return {MeshOutcome::Kind::kOther, e.what()};
  }
}

/// Gloo's connectFullMesh with the caller's wait bounded by `timeout` (+ a little, so that Gloo's
/// own timeout error, which says more, wins when it comes in time). Gloo may wait several times
/// its timeout for a peer that died after publishing its address (each pair's connect retries
/// until its own deadline, one pair after another: 15 s for a 3 s timeout in
/// tests/faults/test_faults.cc). The connect runs on a helper thread that holds what it uses;
/// past the deadline the caller gets TimeoutError and the helper finishes on its own. Errors come
/// back as the same exception types (run_gloo_op classifies them), made anew on this thread.
void connect_full_mesh_within(std::shared_ptr<gloo::rendezvous::Context> context,
                              std::shared_ptr<gloo::rendezvous::Store> store,
                              std::shared_ptr<gloo::transport::Device> device,
                              std::chrono::milliseconds timeout) {
  constexpr std::chrono::milliseconds kGlooFirst{500};
  auto done = std::make_shared<std::promise<MeshOutcome>>();
  std::future<MeshOutcome> result = done->get_future();
  std::thread([context, store, device, done]() mutable {
    done->set_value(connect_full_mesh(*context, *store, device));
  }).detach();
  if (result.wait_for(timeout + kGlooFirst) != std::future_status::ready) {
    GC_THROW(TimeoutError, "the connections to every peer were not made within ", timeout.count(),
             " ms");
  }
  const MeshOutcome outcome = result.get();
  switch (outcome.kind) {
    case MeshOutcome::Kind::kConnected:
      return;
    case MeshOutcome::Kind::kTimeout:
      throw TimeoutError(outcome.what);
    case MeshOutcome::Kind::kGloo:
      throw ::gloo::IoException(outcome.what);
    case MeshOutcome::Kind::kInvalid:
      throw std::invalid_argument(outcome.what);
    case MeshOutcome::Kind::kOther:
      throw DistributedError(outcome.what);
  }
}

/// Builds the state of a group and connects its Gloo context (collective over its members).
std::shared_ptr<ProcessGroup::State> connect_group(std::shared_ptr<GlooTransport> transport,
                                                   std::shared_ptr<Store> world_store,
                                                   std::string prefix, int rank,
                                                   std::vector<int> world_ranks,
                                                   const ProcessGroupOptions& options) {
  auto state = std::make_shared<ProcessGroup::State>();
  state->rank = rank;
  state->size = static_cast<int>(world_ranks.size());
  state->world_ranks = std::move(world_ranks);
  state->name = options.name;
  state->timeout = options.timeout;
  state->prefix = std::move(prefix);
  state->world_store = world_store;
  state->store = std::make_shared<PrefixStore>(state->prefix + "/store", world_store);
  state->health =
      std::make_shared<GroupHealth>(group_label(state->name, state->rank, state->world_ranks));
  state->transport = std::move(transport);

  auto context = std::make_shared<gloo::rendezvous::Context>(state->rank, state->size);
  context->setTimeout(options.timeout);
  auto gloo_view = std::make_shared<PrefixStore>(state->prefix + "/gloo", world_store);
  gloo_view->set_timeout(options.timeout);  // Gloo's get() of a peer's address honours it
  auto gloo_store = make_gloo_store(gloo_view);
  // A failed rendezvous leaves no group behind, so the health this marks broken is discarded.
  run_gloo_op(*state->health, "rendezvous (connectFullMesh)", options.timeout, [&] {
    connect_full_mesh_within(context, gloo_store, state->transport->device(), options.timeout);
  });
  // Once broken, the connections are of no use to this rank; closing them ends the peers' waits
  // on it now (they see the connection closed) rather than at their deadlines. Closing a pair does
  // not wake this rank's own transfers waiting on it: they are aborted first.
  state->health->on_first_break(
      [weak_state = std::weak_ptr<ProcessGroup::State>(state),
       weak = std::weak_ptr<gloo::rendezvous::Context>(context)](const std::string& reason) {
        if (auto s = weak_state.lock()) s->abort_ops("the group broke: " + reason);
        if (auto connected = weak.lock()) connected->closeConnections();
      });
  state->context = std::move(context);
  GC_LOG(Debug, state->health->label(), ": connected over ", state->transport->description(),
         " (store prefix ", state->prefix, ")");
  return state;
}

void check_timeout(const ProcessGroupOptions& options, const char* op) {
  GC_CHECK(options.timeout.count() > 0, "process group '", options.name, "': ", op,
           ": timeout must be positive, got ", options.timeout.count(), " ms");
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<State> state) : state_(std::move(state)) {}

ProcessGroup::~ProcessGroup() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Error, "process group '", state_->name, "': destroy in destructor failed: ", e.what());
  }
}

std::shared_ptr<ProcessGroup> ProcessGroup::create_world(std::shared_ptr<Store> store, int rank,
                                                         int world_size,
                                                         ProcessGroupOptions options) {
  if (options.name.empty()) options.name = "world";
  GC_CHECK(store != nullptr, "process group '", options.name, "': create_world: null store");
  GC_CHECK(world_size > 0, "process group '", options.name,
           "': create_world: world_size must be positive, got ", world_size);
  GC_CHECK(rank >= 0 && rank < world_size, "process group '", options.name,
           "': create_world: rank ", rank, " out of range [0, ", world_size, ")");
  check_timeout(options, "create_world");

  auto transport = GlooTransport::create(options);
  const std::int64_t generation = store->add(world_generation_key(rank), 1);
  std::vector<int> world_ranks(world_size);
  for (int r = 0; r < world_size; ++r) world_ranks[r] = r;
  auto state =
      connect_group(std::move(transport), store, "groupcoord/pg/world" + std::to_string(generation),
                    rank, std::move(world_ranks), options);
  auto group = std::make_shared<ProcessGroup>(std::move(state));
  group->set_up_shared_memory("create_world");
  return group;
}

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks,
                                                      std::optional<ProcessGroupOptions> options) {
  State& parent = *state_;
  const std::string& label = parent.health->label();
  GC_CHECK(!ranks.empty(), label, ": new_group: empty rank list");
  std::set<int> seen;
  for (int r : ranks) {
    GC_CHECK(r >= 0 && r < parent.size, label, ": new_group: rank ", r, " out of range [0, ",
             parent.size, ")");
    GC_CHECK(seen.insert(r).second, label, ": new_group: rank ", r, " listed twice");
  }
  if (options) check_timeout(*options, "new_group");
  std::shared_ptr<GlooTransport> transport;
  {
    std::lock_guard<std::mutex> lock(parent.mutex);
    parent.health->check_usable("new_group");
    transport = parent.transport;
  }

  // Every rank of the parent advances the counter, members or not, so prefixes agree.
  const std::uint64_t child = ++parent.next_child;
  const auto me = std::find(ranks.begin(), ranks.end(), parent.rank);
  if (me == ranks.end()) return nullptr;

  ProcessGroupOptions child_options;
  child_options.timeout = parent.timeout;
  if (options) child_options = *options;
  if (child_options.name.empty()) child_options.name = parent.name + "/" + std::to_string(child);
  std::vector<int> world_ranks;
  for (int r : ranks) world_ranks.push_back(parent.world_ranks[r]);
  auto state = connect_group(
      std::move(transport), parent.world_store, parent.prefix + "/" + std::to_string(child),
      static_cast<int>(me - ranks.begin()), std::move(world_ranks), child_options);
  auto group = std::make_shared<ProcessGroup>(std::move(state));
  group->set_up_shared_memory("new_group");
  return group;
}

std::shared_ptr<ProcessGroup> ProcessGroup::shrink(const std::vector<int>& excluded,
                                                   const std::vector<int>& new_world_ranks,
                                                   const std::string& shrink_id) {
  State& old = *state_;
  const std::string& label = old.health->label();
  std::set<int> gone;
  for (int r : excluded) {
    GC_CHECK(r >= 0 && r < old.size, label, ": shrink: rank ", r, " out of range [0, ", old.size,
             ")");
    GC_CHECK(gone.insert(r).second, label, ": shrink: rank ", r, " listed twice");
  }
  const int survivors = old.size - static_cast<int>(gone.size());
  GC_CHECK(survivors > 0, label, ": shrink: every rank is excluded");
  GC_CHECK(new_world_ranks.empty() || static_cast<int>(new_world_ranks.size()) == survivors, label,
           ": shrink: ", new_world_ranks.size(), " new world ranks for ", survivors, " survivors");
  std::shared_ptr<GlooTransport> transport;
  {
    std::lock_guard<std::mutex> lock(old.mutex);
    // A broken group may shrink (its transport, shared with the world, still works); a destroyed
    // one has nothing left to shrink.
    GC_CHECK(old.transport != nullptr, label, ": shrink: the group was destroyed");
    transport = old.transport;
  }
  const std::uint64_t attempt = ++old.shrink_attempts;  // on every rank, excluded or not
  if (gone.count(old.rank) != 0) return nullptr;

  int new_rank = 0;
  std::vector<int> world_ranks;
  for (int r = 0; r < old.size; ++r) {
    if (gone.count(r) != 0) continue;
    if (r == old.rank) new_rank = static_cast<int>(world_ranks.size());
    world_ranks.push_back(old.world_ranks[r]);
  }
  if (!new_world_ranks.empty()) world_ranks = new_world_ranks;
  ProcessGroupOptions options;
  options.name = old.name;
  options.timeout = old.timeout;
  auto state = connect_group(
      std::move(transport), old.world_store,
      old.prefix + "/shrink" + (shrink_id.empty() ? std::to_string(attempt) : "-" + shrink_id),
      new_rank, std::move(world_ranks), options);
  auto group = std::make_shared<ProcessGroup>(std::move(state));
  group->set_up_shared_memory("shrink");
  std::vector<int> excluded_world;
  for (int r : gone) excluded_world.push_back(old.world_ranks[r]);
  release("it was shrunk without world ranks " + detail::ranks_str(excluded_world) +
          "; use the group that shrink returned");
  return group;
}

int ProcessGroup::rank() const { return state_->rank; }
int ProcessGroup::size() const { return state_->size; }
const std::vector<int>& ProcessGroup::world_ranks() const { return state_->world_ranks; }
const std::string& ProcessGroup::name() const { return state_->name; }
std::chrono::milliseconds ProcessGroup::timeout() const { return state_->timeout; }
std::shared_ptr<Store> ProcessGroup::store() const { return state_->store; }
bool ProcessGroup::is_broken() const { return state_->health->is_broken(); }

void ProcessGroup::destroy() { release({}); }

void ProcessGroup::release(const std::string& why) {
  State& state = *state_;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.health->is_destroyed()) return;
    // From here on no new transfer can be registered (register_op_locked checks this).
    state.health->mark_destroyed(why);
  }
  // After a shrink the transfers still in flight may involve the excluded rank: abort at once.
  const auto drain_bound =
      why.empty() ? std::min<std::chrono::milliseconds>(state.timeout, std::chrono::seconds(10))
                  : std::chrono::milliseconds(0);
  state.drain_ops(drain_bound);
  std::shared_ptr<gloo::Context> context;
  std::shared_ptr<GlooTransport> transport;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    context = std::move(state.context);
    transport = std::move(state.transport);
  }
  // Closing the context drops its connections; the last group of a world also takes the
  // device (and the waiter pool) with it.
  context.reset();
  transport.reset();
  GC_LOG(Debug, state.health->label(), ": destroyed");
}

// -------------------------------------------------------------------------------------------------
// Collectives on host memory. Every rank of the group must call each of them, in the same order,
// with matching arguments; each call takes the next tag of the group's sequence so that it never
// matches messages of another collective (or of point-to-point traffic, which uses its own slot
// prefix, see the point-to-point section below).

namespace {

/// "all_reduce(1023 x float32, sum)"-style description for messages.
std::string describe(const char* op, std::size_t count, DType dtype,
                     const std::string& extra = {}) {
  std::ostringstream out;
  out << op << "(" << count << " x " << dtype_name(dtype);
  if (!extra.empty()) out << ", " << extra;
  out << ")";
  return out.str();
}

std::uint8_t* bytes_of(void* p) { return static_cast<std::uint8_t*>(p); }
std::uint8_t* bytes_of(const void* p) {
  // Gloo's buffers take non-const pointers even for data they only read.
  return static_cast<std::uint8_t*>(const_cast<void*>(p));
}

/// Runs Gloo's allreduce with the element type that has dtype's size.
template <typename T>
void gloo_allreduce(const std::shared_ptr<gloo::Context>& context, void* data, std::size_t count,
                    ReduceFunction fn, std::uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions options(context);
  options.setOutput(static_cast<T*>(data), count);
  options.setReduceFunction(std::move(fn));
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allreduce(options);
}

/// gloo_allreduce with the unsigned type of `element` bytes; `fn` does the typed arithmetic.
void gloo_allreduce_any(const std::shared_ptr<gloo::Context>& context, void* data,
                        std::size_t count, std::size_t element, const ReduceFunction& fn,
                        std::uint32_t tag, std::chrono::milliseconds timeout) {
  switch (element) {
    case 1:
      return gloo_allreduce<std::uint8_t>(context, data, count, fn, tag, timeout);
    case 2:
      return gloo_allreduce<std::uint16_t>(context, data, count, fn, tag, timeout);
    case 4:
      return gloo_allreduce<std::uint32_t>(context, data, count, fn, tag, timeout);
    case 8:
      return gloo_allreduce<std::uint64_t>(context, data, count, fn, tag, timeout);
  }
  GC_ASSERT(false, "all_reduce: unexpected element size ", element);
}

/// True when [a, a + a_len) and [b, b + b_len) share a byte.
bool overlaps(const void* a, std::size_t a_len, const void* b, std::size_t b_len) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return a_len > 0 && b_len > 0 && x < y + b_len && y < x + a_len;
}

}  // namespace

bool ProcessGroup::uses_shared_memory() const { return state_->shm != nullptr; }

bool ProcessGroup::uses_single_copy() const {
  return state_->shm != nullptr && state_->shm->single_copy();
}

void ProcessGroup::set_up_shared_memory(const char* op) {
  State& s = *state_;
  ShmCollectives::SetupChannel channel;  // Gloo: s.shm is still null while this runs
  channel.broadcast = [this](void* data, std::size_t bytes, int root) {
    broadcast(data, bytes, DType::UInt8, root);
  };
  channel.all_reduce_min = [this](std::int32_t value) {
    all_reduce(&value, 1, DType::Int32, ReduceOp::Min);
    return value;
  };
  // Run by create_world / new_group (collective anyway), so that no later collective's errors
  // are the set-up's; its failures (a rank that never comes) are `op`'s.
  try {
    s.shm = ShmCollectives::create(s.rank, s.size, s.name, s.health, s.timeout, channel);
  } catch (const TimeoutError& e) {
    GC_THROW(TimeoutError, op, " (setting up its transport): ", e.what());
  } catch (const DistributedError& e) {
    GC_THROW(DistributedError, op, " (setting up its transport): ", e.what());
  }
}

void ProcessGroup::broadcast(void* data, std::size_t count, DType dtype, int root) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(root >= 0 && root < s.size, label, ": broadcast: root ", root, " out of range [0, ",
           s.size, ")");
  GC_CHECK(data != nullptr || count == 0, label, ": broadcast: null data with count ", count);
  auto context = s.acquire("broadcast");
  if (count == 0 || s.size == 1) return;
  const std::size_t nbytes = count * dtype_size(dtype);
  if (s.shm) return s.shm->broadcast(data, nbytes, root);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("broadcast", count, dtype, "root=" + std::to_string(root)),
              s.timeout, [&] {
                gloo::BroadcastOptions options(context);
                options.setOutput(bytes_of(data), nbytes);
                options.setRoot(root);
                options.setTag(tag);
                options.setTimeout(s.timeout);
                gloo::broadcast(options);
              });
}

void ProcessGroup::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  all_reduce(data, data, count, dtype, op);
}

void ProcessGroup::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                              ReduceOp op) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK((in != nullptr && out != nullptr) || count == 0, label,
           ": all_reduce: null buffer with count ", count);
  auto context = s.acquire("all_reduce");
  if (count == 0) return;
  const std::size_t element = dtype_size(dtype);
  const std::size_t nbytes = count * element;
  // Shared memory reads `in` and writes `out` itself unless they partly overlap; Gloo reduces in
  // place. Otherwise copy first (memmove: `in` may overlap `out`), which also covers size 1.
  const void* source = in;
  if (in != out && (!s.shm || overlaps(in, nbytes, out, nbytes))) {
    std::memmove(out, in, nbytes);
    source = out;
  }
  if (s.size == 1) return;
  if (s.shm) return s.shm->all_reduce(source, out, count, dtype, op);
  ReduceFunction fn = reduce_function(dtype, op);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("all_reduce", count, dtype, reduce_op_name(op)), s.timeout,
              [&] { gloo_allreduce_any(context, out, count, element, fn, tag, s.timeout); });
}

void ProcessGroup::reduce_scatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                                  DType dtype, ReduceOp op) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(counts.size() == static_cast<std::size_t>(s.size), label,
           ": reduce_scatter: ", counts.size(), " counts for a group of ", s.size);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const std::size_t mine = counts[s.rank];
  const std::size_t element = dtype_size(dtype);
  GC_CHECK(in != nullptr || total == 0, label, ": reduce_scatter: null input with total ", total);
  GC_CHECK(out != nullptr || mine == 0, label, ": reduce_scatter: null output with count ", mine);
  GC_CHECK(!overlaps(in, total * element, out, mine * element), label,
           ": reduce_scatter: the output overlaps the input");
  if (s.shm) {
    auto context = s.acquire("reduce_scatter");
    if (total == 0) return;
    return s.shm->reduce_scatter(in, out, counts, dtype, op);
  }
  // Gloo: the whole input reduced, then this rank's part kept.
  std::size_t offset = 0;  // this rank's part of the input, in elements
  for (int r = 0; r < s.rank; ++r) offset += counts[r];
  std::vector<std::uint8_t> reduced(total * element);
  all_reduce(in, reduced.data(), total, dtype, op);
  if (mine > 0) detail::copy_bytes(out, reduced.data() + offset * element, mine * element);
}

void ProcessGroup::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK((in != nullptr && out != nullptr) || count_per_rank == 0, label,
           ": all_gather: null buffer with count_per_rank ", count_per_rank);
  auto context = s.acquire("all_gather");
  if (count_per_rank == 0) return;
  const std::size_t chunk = count_per_rank * dtype_size(dtype);
  std::uint8_t* own_slot = bytes_of(out) + static_cast<std::size_t>(s.rank) * chunk;
  const bool in_place = in == own_slot;
  GC_CHECK(in_place || !overlaps(in, chunk, out, chunk * s.size), label,
           ": all_gather: input overlaps the output other than at this rank's slot");
  if (s.shm) return s.shm->all_gather(in, out, chunk);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("all_gather", count_per_rank, dtype), s.timeout, [&] {
    gloo::AllgatherOptions options(context);
    // In place (input already in our slot): Gloo must not be given the input, or it would
    // memcpy the slot onto itself.
    if (!in_place) options.setInput(bytes_of(in), chunk);
    options.setOutput(bytes_of(out), chunk * s.size);
    options.setTag(tag);
    options.setTimeout(s.timeout);
    gloo::allgather(options);
  });
}

void ProcessGroup::all_gatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                               DType dtype) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(counts.size() == static_cast<std::size_t>(s.size), label,
           ": all_gatherv: ", counts.size(), " counts for a group of ", s.size);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const std::size_t mine = counts[s.rank];
  GC_CHECK(in != nullptr || mine == 0, label, ": all_gatherv: null input with count ", mine);
  GC_CHECK(out != nullptr || total == 0, label, ": all_gatherv: null output with total ", total);
  auto context = s.acquire("all_gatherv");
  if (total == 0) return;
  const std::size_t element = dtype_size(dtype);
  std::vector<std::size_t> byte_counts(counts.size());
  std::size_t my_offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    byte_counts[r] = counts[r] * element;
    if (static_cast<int>(r) < s.rank) my_offset += byte_counts[r];
  }
  const bool in_place = in == bytes_of(out) + my_offset || mine == 0;
  GC_CHECK(in_place || !overlaps(in, mine * element, out, total * element), label,
           ": all_gatherv: input overlaps the output other than at this rank's slot");
  if (s.shm) return s.shm->all_gatherv(in, out, byte_counts);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("all_gatherv", total, dtype), s.timeout, [&] {
    gloo::AllgathervOptions options(context);
    if (!in_place) options.setInput(bytes_of(in), mine * element);
    options.setOutput(bytes_of(out), byte_counts);
    options.setTag(tag);
    options.setTimeout(s.timeout);
    gloo::allgatherv(options);
  });
}

void ProcessGroup::gather(const void* in, void* out, std::size_t count, DType dtype, int root) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(root >= 0 && root < s.size, label, ": gather: root ", root, " out of range [0, ", s.size,
           ")");
  GC_CHECK(in != nullptr || count == 0, label, ": gather: null input with count ", count);
  GC_CHECK(out != nullptr || count == 0 || s.rank != root, label,
           ": gather: null output on the root with count ", count);
  auto context = s.acquire("gather");
  if (count == 0) return;
  const std::size_t chunk = count * dtype_size(dtype);
  const bool is_root = s.rank == root;
  // A root input that overlaps the output anywhere but exactly at the root's own place would be
  // overwritten by the others' parts before all of it is read (the shared-memory paths write
  // those parts while the root's input is still being copied), so it goes through a private
  // copy. Gloo copies the root's input into its place with memcpy, so there even an input
  // already in place is staged.
  const bool overlapping = is_root && overlaps(in, chunk, out, chunk * s.size);
  const bool in_place = is_root && in == bytes_of(out) + static_cast<std::size_t>(root) * chunk;
  std::vector<std::uint8_t> staged;
  const void* input = in;
  if (overlapping && (!s.shm || !in_place)) {
    staged.assign(bytes_of(in), bytes_of(in) + chunk);
    input = staged.data();
  }
  if (s.shm) return s.shm->gather(input, out, chunk, root);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("gather", count, dtype, "root=" + std::to_string(root)),
              s.timeout, [&] {
                gloo::GatherOptions options(context);
                options.setInput(bytes_of(input), chunk);
                if (is_root) options.setOutput(bytes_of(out), chunk * s.size);
                options.setRoot(root);
                options.setTag(tag);
                options.setTimeout(s.timeout);
                gloo::gather(options);
              });
}

void ProcessGroup::barrier() {
  State& s = *state_;
  auto context = s.acquire("barrier");
  if (s.size == 1) return;
  if (s.shm) return s.shm->barrier();
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, "barrier", s.timeout, [&] {
    gloo::BarrierOptions options(context);
    options.setTag(tag);
    options.setTimeout(s.timeout);
    gloo::barrier(options);
  });
}

// -------------------------------------------------------------------------------------------------
// Tagged point-to-point transfers (wire protocol: p2p_protocol.h). Each is an AsyncOp:
// isend/irecv hand it to a waiter thread, send/recv complete it on the calling thread. Either way
// the op is posted and registered under the group's mutex, which keeps the messages of one stream
// in posting order and lets destroy() find every transfer to wait for or abort.

namespace {

std::string describe(const char* op, const char* peer_name, int peer, std::uint32_t tag,
                     std::size_t nbytes) {
  std::ostringstream out;
  out << op << "(" << peer_name << "=" << peer << ", tag=" << tag << ", " << nbytes << " bytes)";
  return out.str();
}

void check_peer(const ProcessGroup::State& s, const char* op, const char* peer_name, int peer,
                const void* data, std::size_t nbytes) {
  const std::string& label = s.health->label();
  GC_CHECK(peer >= 0 && peer < s.size, label, ": ", op, ": ", peer_name, " ", peer,
           " out of range [0, ", s.size, ")");
  GC_CHECK(peer != s.rank, label, ": ", op, ": ", peer_name, " ", peer, " is this rank itself");
  GC_CHECK(data != nullptr || nbytes == 0, label, ": ", op, ": null buffer with ", nbytes,
           " bytes");
}

/// Posts a send and registers it; the caller completes it.
std::shared_ptr<AsyncOp> post_send(ProcessGroup::State& s, const void* data, std::size_t nbytes,
                                   int dst, std::uint32_t tag, const char* op) {
  check_peer(s, op, "dst", dst, data, nbytes);
  const std::string what = describe(op, "dst", dst, tag, nbytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.health->check_usable(op);
  std::shared_ptr<AsyncOp> result;
  run_gloo_op(*s.health, what, s.timeout, [&] {
    result = std::make_shared<SendOp>(s.context, s.health, what, s.timeout, data, nbytes, dst, tag);
  });
  s.register_op_locked(result, op);
  return result;
}

/// Posts a receive and registers it; the caller completes it.
std::shared_ptr<AsyncOp> post_recv(ProcessGroup::State& s, void* data, std::size_t nbytes, int src,
                                   std::uint32_t tag, const char* op) {
  check_peer(s, op, "src", src, data, nbytes);
  const std::string what = describe(op, "src", src, tag, nbytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.health->check_usable(op);
  auto& stream = s.recv_streams[{src, tag}];
  if (!stream) stream = std::make_shared<RecvStream>();
  std::shared_ptr<AsyncOp> result;
  run_gloo_op(*s.health, what, s.timeout, [&] {
    result = std::make_shared<RecvOp>(s.context, s.health, what, s.timeout, data, nbytes, src, tag,
                                      stream);
  });
  s.register_op_locked(result, op);
  return result;
}

/// Hands `op` to a waiter thread and wraps it in a Work.
std::shared_ptr<Work> start(ProcessGroup::State& s, std::shared_ptr<AsyncOp> op) {
  std::shared_ptr<GlooTransport> transport;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    transport = s.transport;
  }
  if (transport) {
    transport->waiters().submit([op] { op->complete(); });
  } else {
    // destroy() ran between posting and here and has aborted the op: finish it inline.
    op->complete();
  }
  return std::make_shared<AsyncWork>(std::move(op));
}

/// Completes `op` on this thread and rethrows its error.
void finish(const std::shared_ptr<AsyncOp>& op) {
  op->complete();
  if (auto error = op->error()) std::rethrow_exception(error);
}

}  // namespace

void ProcessGroup::send(const void* data, std::size_t nbytes, int dst, std::uint32_t tag) {
  finish(post_send(*state_, data, nbytes, dst, tag, "send"));
}

void ProcessGroup::recv(void* data, std::size_t nbytes, int src, std::uint32_t tag) {
  finish(post_recv(*state_, data, nbytes, src, tag, "recv"));
}

std::shared_ptr<Work> ProcessGroup::isend(const void* data, std::size_t nbytes, int dst,
                                          std::uint32_t tag) {
  return start(*state_, post_send(*state_, data, nbytes, dst, tag, "isend"));
}

std::shared_ptr<Work> ProcessGroup::irecv(void* data, std::size_t nbytes, int src,
                                          std::uint32_t tag) {
  return start(*state_, post_recv(*state_, data, nbytes, src, tag, "irecv"));
}

}  // namespace groupcoord
