// Object operations (Bytes): broadcast_object, broadcast_object_list, send/recv/isend_object.
#include <gtest/gtest.h>

#include "coord_env.h"
#include "coord_tensors.h"

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

}  // namespace
}  // namespace testing
}  // namespace groupcoord
