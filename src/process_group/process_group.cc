// Creation, accessors and destruction of process groups. Collectives live in collectives.cc,
// point-to-point transfers in point_to_point.cc.
#include "groupcoord/process_group.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/prefix_store.h"
#include "process_group/gloo_errors.h"
#include "process_group/group_state.h"
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

int ProcessGroup::rank() const { return state_->rank; }
int ProcessGroup::size() const { return state_->size; }
const std::vector<int>& ProcessGroup::world_ranks() const { return state_->world_ranks; }
const std::string& ProcessGroup::name() const { return state_->name; }
std::chrono::milliseconds ProcessGroup::timeout() const { return state_->timeout; }
std::shared_ptr<Store> ProcessGroup::store() const { return state_->store; }
bool ProcessGroup::is_broken() const { return state_->health->is_broken(); }

void ProcessGroup::destroy() {
  State& state = *state_;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.health->is_destroyed()) return;
    // From here on no new transfer can be registered (register_op_locked checks this).
    state.health->mark_destroyed();
  }
  state.drain_ops(std::min<std::chrono::milliseconds>(state.timeout, std::chrono::seconds(10)));
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

}  // namespace groupcoord
