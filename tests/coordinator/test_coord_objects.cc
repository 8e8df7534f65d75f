// Object operations (Bytes): broadcast_object, broadcast_object_list, send/recv/isend_object, and
// a source's report that it cannot produce its object (*_failed).
#include <gtest/gtest.h>

#include <chrono>

#include "coord_env.h"
#include "coord_tensors.h"
#include "groupcoord/errors.h"
#include "groupcoord/world.h"

namespace groupcoord {
namespace testing {
namespace {

class CoordinatorObjects : public CoordinatorTest {};

// Object `k` of world rank `r`: binary (NUL bytes included), sizes 0, small and 1 MiB.
Bytes object_of(int r, int k) {
  if (k == 0) return Bytes();
  if (k == 1) return Bytes("obj\0from ", 9) + std::to_string(r);
  Bytes big(1 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 31 + r * 7) & 0xFF);
  return big;
}

TEST_F(CoordinatorObjects, BroadcastObjectFromEachSrc) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord(), &pairs_coord()}) {
    for (int src = 0; src < c->world_size(); ++src) {
      const int src_world = c->ranks()[src];
      for (int k = 0; k < 3; ++k) {
        std::optional<Bytes> obj;
        if (c->rank_in_group() == src) obj = object_of(rank(), k);
        const Bytes got = c->broadcast_object(obj, src);
        EXPECT_EQ(got, object_of(src_world, k)) << c->unique_name() << " src " << src << " k " << k;
      }
    }
  }
}

TEST_F(CoordinatorObjects, BroadcastObjectListFromEachSrc) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    for (int src = 0; src < c->world_size(); ++src) {
      const int src_world = c->ranks()[src];
      std::vector<Bytes> list = {"placeholder", "", "x"};
      if (c->rank_in_group() == src)
        list = {object_of(rank(), 1), object_of(rank(), 0), object_of(rank(), 2)};
      const auto got = c->broadcast_object_list(list, src);
      const std::vector<Bytes> expected = {object_of(src_world, 1), object_of(src_world, 0),
                                           object_of(src_world, 2)};
      EXPECT_EQ(got, expected) << c->unique_name() << " src " << src;
    }
  }
}

TEST_F(CoordinatorObjects, BroadcastObjectListOfTheWrongLengthRaisesAfterTheCollective) {
  GroupCoordinator& c = world_coord();
  if (c.world_size() == 1) GTEST_SKIP() << "nothing is received at world size 1";
  if (c.rank_in_group() == 0) {
    EXPECT_EQ(c.broadcast_object_list({"a", "b"}, 0), (std::vector<Bytes>{"a", "b"}));
  } else {
    expect_invalid_argument([&] { c.broadcast_object_list({"only one"}, 0); },
                            {c.unique_name(), "broadcast_object_list", "1 objects", "broadcast 2"});
  }
  // Still in step.
  EXPECT_EQ(c.broadcast_object(c.rank_in_group() == 0 ? std::optional<Bytes>("ok") : std::nullopt),
            "ok");
}

TEST_F(CoordinatorObjects, SendAndRecvObjectBetweenPairs) {
  GroupCoordinator& c = pairs_coord();
  if (c.world_size() == 1) GTEST_SKIP() << "no peer";
  const int peer = 1 - c.rank_in_group();
  const int peer_world = c.ranks()[peer];
  for (int k = 0; k < 3; ++k) {
    if (c.rank_in_group() == 0) {
      c.send_object(object_of(rank(), k), peer);
      EXPECT_EQ(c.recv_object(peer), object_of(peer_world, k));
    } else {
      EXPECT_EQ(c.recv_object(peer), object_of(peer_world, k));
      c.send_object(object_of(rank(), k), peer);
    }
  }
}

TEST_F(CoordinatorObjects, IsendObjectKeepsItsBuffersUntilDone) {
  GroupCoordinator& c = world_coord();
  if (c.world_size() == 1) GTEST_SKIP() << "no peer";
  const int n = c.world_size();
  const int me = c.rank_in_group();
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  // Every rank sends 10 objects to the next rank without blocking, dropping half of the handles
  // at once (and every Bytes it passed), then receives 10 from the previous rank.
  std::vector<std::shared_ptr<Work>> kept;
  for (int k = 0; k < 10; ++k) {
    Bytes obj = object_of(rank(), k % 3) + std::to_string(k);
    auto handle = c.isend_object(std::move(obj), next);
    if (k % 2 == 0) kept.push_back(handle);
  }
  const int prev_world = c.ranks()[prev];
  for (int k = 0; k < 10; ++k) {
    EXPECT_EQ(c.recv_object(prev), object_of(prev_world, k % 3) + std::to_string(k)) << k;
  }
  for (auto& handle : kept) {
    handle->wait();
    EXPECT_TRUE(handle->is_completed());
  }
}

// The ranks waiting for a source that reported its failure raise SourceFailedError carrying its
// text at once (well before the group's 60 s timeout, which would be a TimeoutError without it).
void expect_told(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  const auto start = std::chrono::steady_clock::now();
  expect_error<SourceFailedError>(fn, parts);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(CoordinatorObjects, ASourceThatCannotProduceItsObjectTellsTheOthersAndStaysInStep) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    if (c->world_size() == 1) GTEST_SKIP() << "nobody waits at world size 1";
    for (int src = 0; src < c->world_size(); ++src) {
      const std::string why = "serializer threw for " + std::to_string(src);
      if (c->rank_in_group() == src) {
        c->broadcast_object_failed(why, src);
        c->broadcast_object_list_failed(why + " (list)", src);
      } else {
        const std::string src_text = "src " + std::to_string(src);
        expect_told([&] { c->broadcast_object(std::nullopt, src); },
                    {c->unique_name(), "broadcast_object", src_text, why});
        expect_told([&] { c->broadcast_object_list({"x"}, src); },
                    {"broadcast_object_list", src_text, why + " (list)"});
      }
      // Still in step: the next broadcast from the same source arrives whole.
      std::optional<Bytes> obj;
      if (c->rank_in_group() == src) obj = object_of(rank(), 2);
      EXPECT_EQ(c->broadcast_object(obj, src), object_of(c->ranks()[src], 2)) << src;
    }
  }
}

TEST_F(CoordinatorObjects, ASenderThatCannotProduceItsObjectTellsTheReceiverWithoutWaiting) {
  GroupCoordinator& c = pairs_coord();
  if (c.world_size() == 1) GTEST_SKIP() << "no peer";
  const int peer = 1 - c.rank_in_group();
  if (c.rank_in_group() == 0) {
    c.send_object_failed("cannot pickle a lock", peer);  // returns before the peer has read it
    c.send_object_failed("and no tensor dict either");   // dst: the next rank
    c.send_object(object_of(rank(), 1), peer);
  } else {
    expect_told([&] { c.recv_object(peer); },
                {c.unique_name(), "recv_object", "src 0", "cannot pickle a lock"});
    expect_told([&] { c.recv_tensor_dict(peer); },
                {"irecv_tensor_dict", "src 0", "and no tensor dict either"});
    EXPECT_EQ(c.recv_object(peer), object_of(c.ranks()[peer], 1));
  }
}

// Under RankFailurePolicy::kIdentify a told failure stays what it is: nobody died, so there is no
// search for dead ranks (up to 2 s) and no RankFailureError. The text is cut to 64 KiB on a
// character boundary (here a 2-byte UTF-8 character straddles the cut).
TEST_F(CoordinatorObjects, AToldFailureIsNoRankFailureAndIsCutOnACharacterBoundary) {
  GroupCoordinator& c = world_coord();
  if (c.world_size() == 1) GTEST_SKIP() << "nobody waits at world size 1";
  const RankFailurePolicy before = rank_failure_policy();
  set_rank_failure_policy(RankFailurePolicy::kIdentify);
  const std::string why = std::string(65535, 'x') + "\xC3\xA9" + "tail";  // U+00E9 at 65535-65536
  if (c.rank_in_group() == 0) {
    c.broadcast_object_failed(why, 0);
  } else {
    const auto start = std::chrono::steady_clock::now();
    try {
      c.broadcast_object(std::nullopt, 0);
      ADD_FAILURE() << "no error";
    } catch (const SourceFailedError& e) {
      EXPECT_EQ(e.src(), 0);
      // The cut backs off over the whole character (sizes, not texts: a failure prints less).
      EXPECT_EQ(e.why().size(), 65535u);
      EXPECT_EQ(e.why().find_first_not_of('x'), std::string::npos);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong error: " << std::string(e.what()).substr(0, 300);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  }
  set_rank_failure_policy(before);
  EXPECT_EQ(c.broadcast_object(c.rank_in_group() == 0 ? std::optional<Bytes>("ok") : std::nullopt),
            "ok");
}

TEST_F(CoordinatorObjects, OnlyTheSourceReportsItsFailure) {
  GroupCoordinator& c = world_coord();
  const int other = (c.rank_in_group() + 1) % c.world_size();
  if (other != c.rank_in_group()) {
    expect_invalid_argument([&] { c.broadcast_object_failed("x", other); },
                            {c.unique_name(), "broadcast_object_failed", "src"});
  }
  expect_invalid_argument([&] { c.broadcast_object_list_failed("x", c.world_size()); },
                          {"broadcast_object_list_failed", "src", std::to_string(c.world_size())});
  expect_invalid_argument([&] { c.send_object_failed("x", -1); },
                          {"send_object_failed", "dst", "-1"});
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
