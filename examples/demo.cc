// The main job until the GroupCoordinator lands: 4 processes under mpirun meet through the
// rendezvous (no variables needed), build the world group and the subgroups a TP=2 x PP=2 layout
// uses, run the collectives an engine leans on, check every result against a value computed
// locally, and print PASS or FAIL with a small timing table.
//
//   mpirun -np 4 build/examples/groupcoord_demo
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "groupcoord/groupcoord.h"

namespace gc = groupcoord;

namespace {

struct Timing {
  std::string op;
  double micros;
};

// Runs `body` `repeats` times and records the mean time per call.
void timed(std::vector<Timing>& table, const std::string& op, int repeats,
           const std::function<void()>& body) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) body();
  auto elapsed = std::chrono::steady_clock::now() - start;
  table.push_back({op, std::chrono::duration<double, std::micro>(elapsed).count() / repeats});
}

// Subgroups over world ranks laid out as [PP][TP]: TP groups are rows, PP groups are columns.
std::vector<std::vector<int>> tp_groups(int world, int tp) {
  std::vector<std::vector<int>> groups;
  for (int first = 0; first < world; first += tp) {
    std::vector<int> ranks;
    for (int r = first; r < first + tp; ++r) ranks.push_back(r);
    groups.push_back(ranks);
  }
  return groups;
}

std::vector<std::vector<int>> pp_groups(int world, int tp) {
  std::vector<std::vector<int>> groups;
  for (int column = 0; column < tp; ++column) {
    std::vector<int> ranks;
    for (int r = column; r < world; r += tp) ranks.push_back(r);
    groups.push_back(ranks);
  }
  return groups;
}

// Creates every group of a layout (collective) and returns the one this rank belongs to.
std::shared_ptr<gc::ProcessGroup> make_groups(gc::ProcessGroup& world,
                                              const std::vector<std::vector<int>>& layout,
                                              const std::string& name) {
  std::shared_ptr<gc::ProcessGroup> mine;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    gc::ProcessGroupOptions options;
    options.name = name + ":" + std::to_string(i);
    options.timeout = world.timeout();
    auto group = world.new_group(layout[i], options);
    if (group) mine = group;
  }
  return mine;
}

int check(bool ok, const std::string& what, int rank) {
  if (!ok) std::fprintf(stderr, "[rank %d] FAILED: %s\n", rank, what.c_str());
  return ok ? 0 : 1;
}

int run(int& rank_out) {
  gc::RendezvousOptions rdzv_options;
  rdzv_options.timeout = std::chrono::seconds(60);
  gc::RendezvousResult rdzv = gc::rendezvous(rdzv_options);
  const int rank = rank_out = rdzv.rank;
  const int world_size = rdzv.world_size;
  const int tp = world_size % 2 == 0 ? 2 : 1;

  gc::ProcessGroupOptions world_options;
  world_options.name = "world";
  world_options.timeout = std::chrono::seconds(60);
  world_options.single_node = rdzv.single_node;
  auto world = gc::ProcessGroup::create_world(rdzv.store, rank, world_size, world_options);
  auto tp_group = make_groups(*world, tp_groups(world_size, tp), "tp");
  auto pp_group = make_groups(*world, pp_groups(world_size, tp), "pp");

  int failures = 0;
  std::vector<Timing> table;

  // all_reduce in the TP group: sum of (world rank + 1) over its members.
  std::vector<float> partial(4096);
  float expected_sum = 0;
  for (int r : tp_group->world_ranks()) expected_sum += static_cast<float>(r + 1);
  timed(table, "tp all_reduce 16 KiB f32", 50, [&] {
    std::fill(partial.begin(), partial.end(), static_cast<float>(rank + 1));
    tp_group->all_reduce(partial.data(), partial.size(), gc::DType::Float32);
  });
  failures += check(partial.front() == expected_sum && partial.back() == expected_sum,
                    "tp all_reduce", rank);

  // all_gather in the TP group: block r holds its member's world rank.
  std::vector<std::int32_t> mine(256, rank), gathered(256 * tp_group->size());
  timed(table, "tp all_gather 1 KiB/rank i32", 50, [&] {
    tp_group->all_gather(mine.data(), gathered.data(), mine.size(), gc::DType::Int32);
  });
  for (int r = 0; r < tp_group->size(); ++r) {
    failures += check(gathered[r * 256] == tp_group->world_ranks()[r], "tp all_gather", rank);
  }

  // Stage-to-stage send/recv along the PP group, then a broadcast of a "scheduler decision".
  std::vector<double> activation(1024);
  timed(table, "pp send/recv 8 KiB f64", 20, [&] {
    if (pp_group->size() < 2) return;
    if (pp_group->rank() == 0) {
      for (std::size_t i = 0; i < activation.size(); ++i) activation[i] = rank * 1000.0 + i;
      pp_group->send(activation.data(), activation.size() * sizeof(double), 1);
    } else if (pp_group->rank() == 1) {
      pp_group->recv(activation.data(), activation.size() * sizeof(double), 0);
    }
  });
  if (pp_group->size() >= 2 && pp_group->rank() == 1) {
    double sender = pp_group->world_ranks()[0];
    failures += check(activation[7] == sender * 1000.0 + 7, "pp send/recv", rank);
  }

  std::vector<std::int64_t> decision(8, rank == 0 ? 42 : -1);
  timed(table, "world broadcast 64 B i64", 50, [&] {
    if (rank != 0) std::fill(decision.begin(), decision.end(), -1);
    world->broadcast(decision.data(), decision.size(), gc::DType::Int64, 0);
  });
  failures += check(decision[3] == 42, "world broadcast", rank);

  timed(table, "world barrier", 50, [&] { world->barrier(); });

  // Everybody learns whether anybody failed.
  std::int32_t total_failures = failures;
  world->all_reduce(&total_failures, 1, gc::DType::Int32);

  if (rank == 0) {
    std::printf("groupcoord demo: %d ranks, %s\n", world_size, rdzv.description.c_str());
    std::printf("  TP groups of %d, PP groups of %d\n", tp_group->size(), pp_group->size());
    std::printf("  %-32s %12s\n", "op", "us/call");
    for (const auto& row : table) std::printf("  %-32s %12.1f\n", row.op.c_str(), row.micros);
    std::printf("%s\n", total_failures == 0 ? "PASS" : "FAIL");
  }
  world->barrier();  // rank 0 hosts the store: keep it up until everybody is done
  tp_group->destroy();
  pp_group->destroy();
  world->destroy();
  return total_failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  int rank = -1;
  try {
    return run(rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] demo error: %s\nFAIL\n", rank, e.what());
    return 1;
  }
}
