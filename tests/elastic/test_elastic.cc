// Surviving a dead rank: 4 forked ranks, one SIGKILLed in the middle of an all_reduce; the
// survivors get a RankFailureError naming it (RankFailurePolicy::kIdentify), shrink every group
// with shrink_model_parallel and pass the coordinator collectives at world size 3, then again at
// 2 after a second kill; within the timeout + 10 s of each death, leaving nothing in /dev/shm.
// The pieces are tested on their own below: RankLiveness, the agreement on the excluded set,
// shrink_world's checks, the refusals of a retired group.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "forked_job.h"
#include "groupcoord/errors.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/message_queue.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/process_group.h"
#include "groupcoord/tensor.h"
#include "groupcoord/world.h"
#include "process_group/rank_liveness.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing::Job;
using testing::outcome_name;

constexpr auto kTimeout = 3s;  // Job's default
// What the issue allows past the timeout, from a death to the survivors' shrunk groups.
constexpr auto kShrinkSlack = 10s;

std::string str(const std::vector<int>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

Tensor filled(std::int64_t n, float value) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (std::int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = value;
  return t;
}

// Fails the rank unless every element of `t` is `expected(i)`.
template <typename Expected>
void expect_values(int rank, const std::string& what, const Tensor& t, Expected expected) {
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float want = expected(i);
    if (t.data_ptr<float>()[i] != want) {
      Job::fail(rank, what + ": element " + std::to_string(i) + " is " +
                          std::to_string(t.data_ptr<float>()[i]) + ", expected " +
                          std::to_string(want));
    }
  }
}

void check_tensor_collectives(GroupCoordinator& g, int rank, const std::string& at, int n, int me,
                              float total) {
  expect_values(rank, at + " all_reduce", g.all_reduce(filled(1000, me + 1.0f)),
                [&](std::int64_t) { return total; });
  expect_values(rank, at + " all_gather", g.all_gather(filled(3, float(me)), 0),
                [](std::int64_t i) { return float(i / 3); });
  expect_values(rank, at + " reduce_scatter", g.reduce_scatter(filled(2 * n, me + 1.0f), 0),
                [&](std::int64_t) { return total; });
  const int last = n - 1;
  expect_values(rank, at + " broadcast", g.broadcast(filled(5, me == last ? 42.0f : -1.0f), last),
                [](std::int64_t) { return 42.0f; });
}

void check_object_collectives(GroupCoordinator& g, int rank, const std::string& at, int n, int me) {
  const Bytes object =
      g.broadcast_object(me == 0 ? std::optional<Bytes>("from rank 0") : std::nullopt, 0);
  if (object != "from rank 0") Job::fail(rank, at + " broadcast_object gave '" + object + "'");
  std::optional<TensorDict> dict = g.broadcast_tensor_dict(
      me == 0 ? std::optional<TensorDict>(TensorDict{{"t", filled(4, 7.0f)}, {"b", Bytes("meta")}})
              : std::nullopt,
      0);
  if (n > 1 && (!dict || dict->size() != 2 || std::get<Bytes>((*dict)[1].second) != "meta")) {
    Job::fail(rank, at + " broadcast_tensor_dict lost its entries");
  }
  if (dict)
    expect_values(rank, at + " broadcast_tensor_dict", std::get<Tensor>((*dict)[0].second),
                  [](std::int64_t) { return 7.0f; });
  if (n > 1) {
    std::shared_ptr<MessageQueue> queue = g.create_mq_broadcaster(0);
    if (me == 0) {
      queue->enqueue("step");
    } else if (queue->dequeue() != "step") {
      Job::fail(rank, at + " the message queue gave another message");
    }
  }
}

// The coordinator collectives on `g` at its current size, each against a sequential
// computation: all_reduce, all_gather, reduce_scatter, broadcast, the object and tensor-dict
// broadcasts, a message queue, barrier.
void check_collectives(GroupCoordinator& g, int rank, const std::string& where) {
  const int n = g.world_size();
  const int me = g.rank_in_group();
  const std::string at = where + " (" + g.unique_name() + ", rank " + std::to_string(me) + " of " +
                         std::to_string(n) + ")";
  const float total = n * (n + 1) / 2.0f;
  // The world coordinator has no device communicator (as in vLLM): objects, dicts, queue only.
  const bool tensors = n == 1 || g.device_communicator() != nullptr;
  if (tensors) check_tensor_collectives(g, rank, at, n, me, total);
  check_object_collectives(g, rank, at, n, me);
  g.barrier();
}

// Every model-parallel group and the world.
void check_every_group(int rank, const std::string& where) {
  for (GroupCoordinator* g :
       {&get_world_group(), &get_tp_group(), &get_pp_group(), &get_dp_group(), &get_ep_group()}) {
    check_collectives(*g, rank, where);
  }
}

// All-reduces on the EP group (it spans the world) until a peer dies; returns the dead ranks the
// error names. `rank`: the original world rank, which names the marker.
std::vector<int> reduce_until_a_death(Job& job, int rank, const std::string& marker,
                                      std::string* message = nullptr) {
  GroupCoordinator& ep = get_ep_group();
  Tensor x = filled(1 << 14, 1.0f);
  ep.all_reduce(x);
  job.at(rank, marker);
  try {
    for (;;) ep.all_reduce(x);
  } catch (const RankFailureError& e) {
    std::fprintf(stderr, "[rank %d] RankFailureError: %s\n", rank, e.what());
    if (message != nullptr) *message = e.what();
    return e.dead_ranks();
  }
}

// One survivor's whole run: world 4 (TP 2 x DP 2; EP spans all) -> 3 -> 2.
void survive_two_deaths(Job& job, int rank) {
  set_rank_failure_policy(RankFailurePolicy::kIdentify);
  initialize_model_parallel(/*tensor_model_parallel_size=*/2, 1, 1, 1, /*data_parallel_size=*/2);
  check_every_group(rank, "world size 4");
  std::shared_ptr<ProcessGroup> old_world = get_world_group().cpu_group();

  // First death: world rank 2 (the test kills it).
  std::vector<int> dead = reduce_until_a_death(job, rank, "working-4");
  if (dead != std::vector<int>{2}) Job::fail(rank, "first death: dead ranks " + str(dead));
  ModelParallelShrink shrink = shrink_model_parallel(dead);
  job.at(rank, "shrunk-3");
  if (shrink.world_size != 3 || shrink.rank != shrink.new_rank_of[rank] ||
      shrink.new_rank_of != std::vector<int>{0, 1, -1, 2} ||
      shrink.layout.tp != std::vector<std::vector<int>>{{0, 1}, {2}} ||
      shrink.layout.dp != std::vector<std::vector<int>>{{0}, {1, 2}} ||
      shrink.layout.ep != std::vector<std::vector<int>>{{0, 1, 2}} ||
      world_info().rank != shrink.rank || world_info().world_size != 3) {
    Job::fail(rank, "first shrink: world size " + std::to_string(shrink.world_size) + ", rank " +
                        std::to_string(shrink.rank) + ", new ranks " + str(shrink.new_rank_of));
  }
  check_every_group(rank, "world size 3");
  // The retired world group refuses, naming the shrink.
  try {
    old_world->barrier();
    Job::fail(rank, "the old world group still answered after the shrink");
  } catch (const DistributedError& e) {
    if (std::strstr(e.what(), "shrunk without world ranks [2]") == nullptr) {
      Job::fail(rank, std::string("the old group's refusal does not name the shrink: ") + e.what());
    }
  }

  // Second death: the process that was world rank 3, now 2.
  dead = reduce_until_a_death(job, rank, "working-3");
  if (dead != std::vector<int>{2}) Job::fail(rank, "second death: dead ranks " + str(dead));
  shrink = shrink_model_parallel(dead);
  job.at(rank, "shrunk-2");
  if (shrink.world_size != 2 || shrink.layout.tp != std::vector<std::vector<int>>{{0, 1}} ||
      shrink.layout.ep != std::vector<std::vector<int>>{{0, 1}}) {
    Job::fail(rank, "second shrink: world size " + std::to_string(shrink.world_size));
  }
  check_every_group(rank, "world size 2");
  get_world_group().barrier();
}

class Elastic : public ::testing::Test {
 protected:
  std::string id() const {
    return std::string("elastic-") +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
           std::to_string(::getpid());
  }
  groupcoord::testing::TempDir dir_;
};

// Waits for `marker` from each of `ranks` (original numbering); returns the seconds since `since`.
double seconds_until(Job& job, const std::vector<int>& ranks, const std::string& marker,
                     Clock::time_point since) {
  for (int r : ranks) {
    EXPECT_TRUE(job.wait_for(
        r, marker, std::chrono::duration_cast<std::chrono::seconds>(kTimeout + kShrinkSlack)))
        << "rank " << r << " did not reach " << marker;
  }
  return std::chrono::duration<double>(Clock::now() - since).count();
}

TEST_F(Elastic, SurvivorsShrinkAfterEachOfTwoKillsAndKeepServing) {
  Job job(dir_.path(), id(), 4);
  for (int r = 0; r < 4; ++r) job.start(r, survive_two_deaths);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.wait_for(r, "working-4", 60s)) << "rank " << r;
  auto killed = job.kill(2);
  const double first = seconds_until(job, {0, 1, 3}, "shrunk-3", killed);
  std::printf("[elastic] world 4 -> 3: survivors shrunk %.2f s after the kill\n", first);
  EXPECT_LE(first, std::chrono::duration<double>(kTimeout + kShrinkSlack).count());
  // The shared-memory waits look for a missing peer's process: well before the 3 s deadline.
  EXPECT_LT(first, 2.0) << "the survivors waited for the deadline instead of seeing the death";

  for (int r : {0, 1, 3}) ASSERT_TRUE(job.wait_for(r, "working-3", 60s)) << "rank " << r;
  killed = job.kill_leaving_zombie(3);  // not reaped: the survivors see a zombie
  const double second = seconds_until(job, {0, 1}, "shrunk-2", killed);
  std::printf("[elastic] world 3 -> 2: survivors shrunk %.2f s after the kill\n", second);
  EXPECT_LE(second, std::chrono::duration<double>(kTimeout + kShrinkSlack).count());

  const auto deadline = Clock::now() + 60s;
  for (int r : {0, 1}) {
    const int outcome = job.wait_exit(r, deadline);
    EXPECT_EQ(outcome, testing::kCompleted) << "rank " << r << ": " << outcome_name(outcome);
  }
  job.wait_exit(3, Clock::now() + 5s);  // reaps the zombie
  testing::expect_no_segments_of(job.all_pids());
  testing::expect_empty(job.rendezvous_dir() + "/");
}

// In every rank of a 4-rank job: all-reduces until world rank 3 dies (the test kills it); rank 2
// then parks until the test kills it too. Returns the first error's dead ranks ([3]).
std::vector<int> lose_rank_3_then_park_rank_2(Job& j, int rank) {
  std::vector<int> dead = reduce_until_a_death(j, rank, "working-4");
  if (dead != std::vector<int>{3}) Job::fail(rank, "first death: dead ranks " + str(dead));
  if (rank == 2) {
    j.at(rank, "parked");
    std::this_thread::sleep_for(60s);
    Job::fail(rank, "not killed");
  }
  return dead;
}

// Shrinks around `dead`, which must end in RankFailureError asking to retry with [2, 3] (its
// message holding `must_say`); marks "told" when it does. Returns [2, 3].
std::vector<int> shrink_told_to_retry(Job& j, int rank, const std::vector<int>& dead,
                                      const char* must_say) {
  try {
    shrink_model_parallel(dead);
  } catch (const RankFailureError& e) {
    j.at(rank, "told");
    if (e.dead_ranks() != std::vector<int>{2, 3} || std::strstr(e.what(), must_say) == nullptr) {
      Job::fail(rank, std::string("unclear error (") + str(e.dead_ranks()) + "): " + e.what());
    }
    return e.dead_ranks();
  }
  Job::fail(rank, "the shrink around " + str(dead) + " went through, not told to retry");
}

// The shrink around [2, 3] after the retry: world size 2, every group checked.
void shrink_to_the_last_two(Job& j, int rank, const std::vector<int>& dead) {
  const ModelParallelShrink shrink = shrink_model_parallel(dead);
  if (shrink.world_size != 2) {
    Job::fail(rank, "the retry: world size " + std::to_string(shrink.world_size));
  }
  j.at(rank, "shrunk-2");
  check_every_group(rank, "world size 2 after the retry");
  get_world_group().barrier();
}

// The test's side: kills rank 3, waits for rank 2 to park and for ranks 0 and 1 to reach
// `marker`, kills rank 2; returns when.
Clock::time_point kill_3_then_2(Job& job, const std::string& marker) {
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(job.wait_for(r, "working-4", 60s)) << "rank " << r;
  job.kill(3);
  EXPECT_TRUE(job.wait_for(2, "parked", 30s));
  for (int r : {0, 1}) EXPECT_TRUE(job.wait_for(r, marker, 30s)) << "rank " << r;
  std::this_thread::sleep_for(200ms);  // ranks 0 and 1 are past `marker` by now
  return job.kill(2);
}

void expect_the_last_two_complete(Job& job) {
  const auto deadline = Clock::now() + 60s;
  for (int r : {0, 1}) {
    const int outcome = job.wait_exit(r, deadline);
    EXPECT_EQ(outcome, testing::kCompleted) << "rank " << r << ": " << outcome_name(outcome);
  }
  testing::expect_no_segments_of(job.all_pids());
}

// A survivor dies before it joins the shrink (world rank 3 dies in an all_reduce, then rank 2
// while the others agree on excluding 3): the agreement sees it gone instead of waiting out the
// timeout, says to exclude [2, 3], and the retry shrinks the world to 2.
TEST_F(Elastic, ASurvivorThatDiesBeforeTheShrinkIsFoundAndTheShrinkRetried) {
  Job job(dir_.path(), id(), 4);
  const auto body = [](Job& j, int rank) {
    set_rank_failure_policy(RankFailurePolicy::kIdentify);
    initialize_model_parallel(2, 1, 1, 1, /*data_parallel_size=*/2);
    std::vector<int> dead = lose_rank_3_then_park_rank_2(j, rank);
    j.at(rank, "agreeing");
    dead = shrink_told_to_retry(j, rank, dead, "world ranks [2] died before saying");
    shrink_to_the_last_two(j, rank, dead);
  };
  for (int r = 0; r < 4; ++r) job.start(r, body);
  const auto killed = kill_3_then_2(job, "agreeing");
  const double told = seconds_until(job, {0, 1}, "told", killed);
  std::printf("[elastic] a survivor died before the shrink: told %.2f s after the kill\n", told);
  EXPECT_LT(told, 2.0) << "the agreement waited for its deadline instead of seeing the death";
  expect_the_last_two_complete(job);
}

// Two deaths seen at different moments: rank 3 dies, then rank 2; rank 0 shrinks around [3] only
// (it has not looked again), rank 1 around [2, 3]. Rank 0 finds rank 2 dead while it waits for
// it, rank 1 finds that the sets differ only by a dead rank: both are told to retry with [2, 3],
// and the retry shrinks to 2.
TEST_F(Elastic, SurvivorsThatSawDifferentDeathsRetryWithTheUnion) {
  Job job(dir_.path(), id(), 4);
  const auto body = [](Job& j, int rank) {
    set_rank_failure_policy(RankFailurePolicy::kIdentify);
    initialize_model_parallel(1, 1, 1, 1, /*data_parallel_size=*/4);
    std::vector<int> dead = lose_rank_3_then_park_rank_2(j, rank);
    j.at(rank, "told-3");
    j.wait_for(2, "killed", 30s);  // written by the test
    if (rank == 1) {
      const auto until = Clock::now() + 10s;
      while ((dead = find_dead_ranks()) != std::vector<int>{2, 3} && Clock::now() < until) {
        std::this_thread::sleep_for(10ms);
      }
    }
    dead = shrink_told_to_retry(j, rank, dead, "");
    shrink_to_the_last_two(j, rank, dead);
  };
  for (int r = 0; r < 4; ++r) job.start(r, body);
  kill_3_then_2(job, "told-3");
  job.at(2, "killed");
  expect_the_last_two_complete(job);
}

// The store host (world rank 0 of an env:// job) dies: the survivors learn that it cannot be
// survived, by a clear error, not a hang.
TEST_F(Elastic, TheStoreHostsDeathIsRefusedClearly) {
  Job job(dir_.path(), id(), 3);
  const auto body = [](Job& j, int rank) {
    set_rank_failure_policy(RankFailurePolicy::kIdentify);
    initialize_model_parallel(1, 1, 1, 1, /*data_parallel_size=*/3);
    std::string message;
    std::vector<int> dead = reduce_until_a_death(j, rank, "working", &message);
    if (dead != std::vector<int>{0}) Job::fail(rank, "dead ranks " + str(dead));
    if (message.find("hosted the world store, whose loss cannot be survived") ==
        std::string::npos) {
      Job::fail(rank, "the RankFailureError does not say the store's host is gone: " + message);
    }
    try {
      shrink_model_parallel(dead);
    } catch (const std::invalid_argument& e) {
      if (std::strstr(e.what(), "hosts the world store") == nullptr) {
        Job::fail(rank, std::string("unclear refusal: ") + e.what());
      }
      // Leaves once the other survivor is done too (an exit earlier would be a death it sees);
      // the world cannot be destroyed cleanly without its store.
      j.at(rank, "refused");
      j.wait_for(3 - rank, "refused");
      std::_Exit(testing::kCompleted);
    }
    Job::fail(rank, "the shrink without the store's host was not refused");
  };
  for (int r = 0; r < 3; ++r) job.start(r, body);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job.wait_for(r, "working", 60s));
  const auto killed = job.kill(0);
  for (int r : {1, 2}) {
    const int outcome = job.wait_exit(r, killed + kTimeout + kShrinkSlack);
    EXPECT_EQ(outcome, testing::kCompleted) << "rank " << r << ": " << outcome_name(outcome);
  }
}

// Survivors that disagree: rank 0 and 1 exclude rank 3, rank 2 excludes rank 1. Rank 0 and 1
// see the disagreement (DistributedError naming rank 2's set); rank 2 waits for rank 3, which
// never answers (TimeoutError naming it). Nobody shrinks.
TEST_F(Elastic, SurvivorsThatDisagreeAreToldWhoDiffers) {
  Job job(dir_.path(), id(), 4);
  const auto body = [](Job& j, int rank) {
    if (rank == 3) {
      j.at(rank, "idle");
      std::this_thread::sleep_for(30s);
      return;
    }
    const std::vector<int> excluded = rank == 2 ? std::vector<int>{1} : std::vector<int>{3};
    // Rank 0 hosts the store: it waits until the others are done with it.
    const auto leave = [&] {
      j.at(rank, "decided");
      if (rank == 0) {
        for (int r : {1, 2}) j.wait_for(r, "decided");
      }
      std::_Exit(testing::kCompleted);
    };
    try {
      shrink_world(excluded);
    } catch (const TimeoutError& e) {
      if (rank != 2 || std::strstr(e.what(), "world ranks [3] did not say") == nullptr) {
        Job::fail(rank, std::string("unexpected timeout: ") + e.what());
      }
      leave();
    } catch (const DistributedError& e) {
      if (rank == 2 || std::strstr(e.what(), "world rank 2 excludes [1]") == nullptr) {
        Job::fail(rank, std::string("unexpected disagreement: ") + e.what());
      }
      leave();
    }
    Job::fail(rank, "the shrink went through without agreement");
  };
  for (int r = 0; r < 4; ++r) job.start(r, body);
  const auto deadline = Clock::now() + 60s;
  for (int r = 0; r < 3; ++r) {
    const int outcome = job.wait_exit(r, deadline);
    EXPECT_EQ(outcome, testing::kCompleted) << "rank " << r << ": " << outcome_name(outcome);
  }
}

// A live rank leaves on request (world rank 3 destroys its environment and exits); the others
// shrink each coordinator by hand, a later coordinator given another set than the world shrink's
// is refused, and the collectives then work at world size 3.
TEST_F(Elastic, ALiveRankLeavesOnRequestAndEachGroupFollowsTheWorldShrink) {
  Job job(dir_.path(), id(), 4);
  const auto body = [](Job& j, int rank) {
    initialize_model_parallel(1, 1, 1, 1, /*data_parallel_size=*/4);  // EP spans the world
    get_world_group().barrier();
    if (rank == 3) {
      destroy_distributed_environment();
      std::_Exit(testing::kCompleted);
    }
    get_world_group().shrink({3});
    try {
      get_tp_group().shrink({2});
      Job::fail(rank, "a coordinator shrank with another set than the world's");
    } catch (const std::invalid_argument& e) {
      if (std::strstr(e.what(), "the world's shrink #1") == nullptr ||
          std::strstr(e.what(), "excluded [3]") == nullptr) {
        Job::fail(rank, std::string("unclear refusal: ") + e.what());
      }
    }
    for (GroupCoordinator* g : {&get_tp_group(), &get_dcp_group(), &get_pcp_group(),
                                &get_pp_group(), &get_dp_group(), &get_ep_group()}) {
      g->shrink({3});
    }
    if (get_ep_group().world_size() != 3 || get_dp_group().world_size() != 3) {
      Job::fail(rank, "the groups are not the three that stayed");
    }
    check_collectives(get_ep_group(), rank, "after a rank left");
    check_collectives(get_world_group(), rank, "after a rank left");
    get_world_group().barrier();
  };
  for (int r = 0; r < 4; ++r) job.start(r, body);
  const auto deadline = Clock::now() + 60s;
  for (int r = 0; r < 4; ++r) {
    const int outcome = job.wait_exit(r, deadline);
    EXPECT_EQ(outcome, testing::kCompleted) << "rank " << r << ": " << outcome_name(outcome);
  }
}

// shrink_world's argument checks, on a world of one.
TEST(ShrinkWorld, RejectsBadSetsClearly) {
  WorldOptions options;
  options.world_size = 1;
  options.rank = 0;
  groupcoord::testing::ScopedEnv no_master("MASTER_ADDR", std::nullopt);
  init_world(options);
  const auto message_of = [](const std::vector<int>& excluded) {
    try {
      shrink_world(excluded);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of({}).find("no rank to exclude"), std::string::npos);
  EXPECT_NE(message_of({5}).find("world rank 5 out of range [0, 1)"), std::string::npos);
  EXPECT_NE(message_of({0}).find("this rank (0) is in the excluded set"), std::string::npos);
  EXPECT_TRUE(world_shrinks().empty());
  EXPECT_TRUE(find_dead_ranks().empty());
  destroy_world();
}

TEST(RankLiveness, TellsAGoneOrZombieProcessFromALiveOne) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string identity = RankLiveness::this_process();
    (void)!::write(pipe_fds[1], identity.data(), identity.size());
    ::close(pipe_fds[1]);
    ::pause();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char buffer[256] = {};
  ASSERT_GT(::read(pipe_fds[0], buffer, sizeof buffer - 1), 0);
  ::close(pipe_fds[0]);
  const std::string identity(buffer);
  EXPECT_FALSE(RankLiveness::known_gone(identity)) << identity;
  EXPECT_FALSE(RankLiveness::known_gone(RankLiveness::this_process()));
  ::kill(child, SIGKILL);
  // Not reaped yet: a zombie, which has exited all the same.
  const auto deadline = Clock::now() + 5s;
  while (!RankLiveness::known_gone(identity) && Clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(RankLiveness::known_gone(identity)) << "the zombie was not seen as gone";
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(RankLiveness::known_gone(identity)) << "the reaped process was not seen as gone";
  // What cannot be judged here is never called dead: garbage, another boot, another start time
  // of a live pid (pid reuse is the opposite case: a live process with another start time IS
  // another process, so the record's process is gone).
  EXPECT_FALSE(RankLiveness::known_gone("garbage"));
  std::string other_boot = RankLiveness::this_process();
  other_boot[0] = other_boot[0] == '0' ? '1' : '0';
  EXPECT_FALSE(RankLiveness::known_gone(other_boot));
  std::string reused = RankLiveness::this_process();
  reused += "1";  // the same pid with a later start time: not this process
  EXPECT_TRUE(RankLiveness::known_gone(reused));
}

}  // namespace
}  // namespace groupcoord
