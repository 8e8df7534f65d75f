// The tensor-dict protocol: broadcast_tensor_dict over the world, send/recv/irecv_tensor_dict
// over PP-like pairs (0 -> 1, 2 -> 3), with and without the all_gather optimisation over the
// TP-like columns ([0, 2] and [1, 3]) and with per-key overrides, and 100 fire-and-forget
// isend_tensor_dict calls.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "coord_env.h"
#include "coord_tensors.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace testing {
namespace {

class CoordinatorTensorDict : public CoordinatorTest {};

constexpr double kGarbage = -99;

// Which elements of a tensor of `numel` elements a sender writes: all of them, or only the slice
// reshape(ag_size, -1)[ag_rank] (the rest is garbage, so a whole-tensor send would be caught).
struct Fill {
  int ag_size = 1;
  int ag_rank = 0;
  bool only_slice = false;
  double operator()(std::int64_t i, std::int64_t numel, double value) const {
    if (!only_slice) return value;
    return i / (numel / ag_size) == ag_rank ? value : kGarbage;
  }
};

// The test dict (keys in this order): a f32 [8], b int8 [16], c bytes, d bytes, e bf16 [3, 4],
// f f32 [0, 3]. `salt` makes the values depend on the sender.
TensorDict make_dict(int salt, const Fill& fill_a = {}, const Fill& fill_b = {},
                     const Fill& fill_e = {}) {
  TensorDict dict;
  dict.emplace_back("a", make_tensor({8}, DType::Float32, [&](std::int64_t i) {
                      return fill_a(i, 8, double(i + salt));
                    }));
  dict.emplace_back("b", make_tensor({16}, DType::Int8, [&](std::int64_t i) {
                      return fill_b(i, 16, double(i + salt % 50));
                    }));
  dict.emplace_back("c", Bytes("c-value of ") + std::to_string(salt));
  dict.emplace_back("d", Bytes("\0d\0", 3));
  dict.emplace_back("e", make_tensor({3, 4}, DType::BFloat16, [&](std::int64_t i) {
                      return fill_e(i, 12, double(2 * i - salt % 7));
                    }));
  dict.emplace_back("f", Tensor::empty({0, 3}, DType::Float32));
  return dict;
}

// Compares against make_dict(salt) with every element valid.
void expect_dict(const TensorDict& got, int salt, const std::string& what) {
  SCOPED_TRACE(what);
  const TensorDict want = make_dict(salt);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].first, want[k].first);
    if (const Bytes* bytes = std::get_if<Bytes>(&want[k].second)) {
      ASSERT_TRUE(std::holds_alternative<Bytes>(got[k].second)) << got[k].first;
      EXPECT_EQ(std::get<Bytes>(got[k].second), *bytes) << got[k].first;
      continue;
    }
    ASSERT_TRUE(std::holds_alternative<Tensor>(got[k].second)) << got[k].first;
    const Tensor& w = std::get<Tensor>(want[k].second);
    expect_tensor(std::get<Tensor>(got[k].second), w.shape(), w.dtype(), tensor_values(w),
                  what + " key " + want[k].first);
  }
}

TEST_F(CoordinatorTensorDict, BroadcastFromEachSrc) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord(), &pairs_coord()}) {
    for (int src = 0; src < c->world_size(); ++src) {
      const int src_world = c->ranks()[src];
      std::optional<TensorDict> dict;
      if (c->rank_in_group() == src) dict = make_dict(src_world);
      auto got = c->broadcast_tensor_dict(dict, src);
      ASSERT_TRUE(got.has_value());
      expect_dict(*got, src_world, c->unique_name() + " src " + std::to_string(src));
    }
  }
}

TEST_F(CoordinatorTensorDict, SendAndRecvOverPairs) {
  GroupCoordinator& pp = pairs_coord();
  if (pp.world_size() == 1) {
    // Bypass: send returns the dict, recv returns nothing.
    auto sent = pp.send_tensor_dict(make_dict(0));
    ASSERT_TRUE(sent.has_value());
    expect_dict(*sent, 0, "bypass");
    EXPECT_FALSE(pp.recv_tensor_dict().has_value());
    return;
  }
  const int sender = pp.ranks()[0];
  if (pp.rank_in_group() == 0) {
    EXPECT_FALSE(pp.send_tensor_dict(make_dict(rank())).has_value());  // dst: the next rank
    pp.send_tensor_dict(make_dict(rank() + 1), 1);
    auto handles = pp.isend_tensor_dict(make_dict(rank() + 2));
    ASSERT_EQ(handles.size(), 4u);  // metadata, a, b, e (f is empty: not sent)
    for (auto& h : handles) h->wait();
  } else {
    auto first = pp.recv_tensor_dict();  // src: the previous rank
    ASSERT_TRUE(first.has_value());
    expect_dict(*first, sender, "recv_tensor_dict");
    auto second = pp.recv_tensor_dict(0);
    ASSERT_TRUE(second.has_value());
    expect_dict(*second, sender + 1, "recv_tensor_dict(src=0)");
    IrecvTensorDictResult pending = pp.irecv_tensor_dict();
    ASSERT_NE(pending.tensor_dict, nullptr);
    EXPECT_EQ(pending.handles.size(), 3u);
    EXPECT_TRUE(pending.postprocess.empty());
    for (auto& h : pending.handles) h->wait();
    expect_dict(*pending.tensor_dict, sender + 2, "irecv_tensor_dict");
  }
}

// The senders of a pair stage hold TP-replicated dicts; with all_gather_group each writes only
// its slice of the keys that take the all_gather path (the rest is garbage).
void check_all_gather_path(const std::optional<AllGatherTensors>& overrides, bool a_gathered,
                           bool irecv) {
  GroupCoordinator& pp = pairs_coord();
  GroupCoordinator& tp = columns_coord();
  const int salt = 3;  // the same on every sender: the tensors are replicated over tp
  if (pp.rank_in_group() == 0) {
    const Fill slice{tp.world_size(), tp.rank_in_group(), true};
    TensorDict dict = make_dict(salt, a_gathered ? slice : Fill{}, slice, slice);
    pp.send_tensor_dict(dict, 1, &tp, overrides);
    return;
  }
  if (!irecv) {
    auto got = pp.recv_tensor_dict(0, &tp, overrides);
    ASSERT_TRUE(got.has_value());
    expect_dict(*got, salt, "recv_tensor_dict with all_gather_group");
    return;
  }
  IrecvTensorDictResult pending = pp.irecv_tensor_dict(0, &tp, overrides);
  ASSERT_NE(pending.tensor_dict, nullptr);
  EXPECT_EQ(pending.postprocess.size(), a_gathered ? 3u : 2u);
  for (auto& h : pending.handles) h->wait();
  for (auto& step : pending.postprocess) step();
  expect_dict(*pending.tensor_dict, salt, "irecv_tensor_dict with all_gather_group");
}

TEST_F(CoordinatorTensorDict, AllGatherGroupSendsSlices) {
  if (world_size() == 1) GTEST_SKIP() << "bypassed at world size 1";
  check_all_gather_path(std::nullopt, true, false);
  check_all_gather_path(std::nullopt, true, true);
}

TEST_F(CoordinatorTensorDict, AllGatherTensorsOverridesPerKey) {
  if (world_size() == 1) GTEST_SKIP() << "bypassed at world size 1";
  // "a" opts out (sent whole), "b" explicitly in, "e" keeps the default (divisible: in).
  const AllGatherTensors overrides = {{"a", false}, {"b", true}};
  check_all_gather_path(overrides, false, false);
  check_all_gather_path(overrides, false, true);
}

TEST_F(CoordinatorTensorDict, ForcedAllGatherOfAnIndivisibleTensorSendsOnlyAFailure) {
  GroupCoordinator& pp = pairs_coord();
  GroupCoordinator& tp = columns_coord();
  if (tp.world_size() < 2) GTEST_SKIP() << "needs an all_gather_group of 2 or more";
  if (pp.rank_in_group() == 0) {
    TensorDict dict = {{"odd", make_tensor({5}, DType::Float32, [](std::int64_t i) { return i; })}};
    expect_invalid_argument(
        [&] {
          pp.send_tensor_dict(dict, 1, &tp, AllGatherTensors{{"odd", true}});
        },
        {pp.unique_name(), "isend_tensor_dict", "'odd'", "5 elements"});
  } else {
    // The receiver is told why instead of waiting for its deadline.
    expect_error<SourceFailedError>([&] { pp.recv_tensor_dict(0, &tp); },
                                    {"irecv_tensor_dict", "src 0", "'odd'", "5 elements"});
  }
  // No tensor was sent: the pair is still in step.
  check_all_gather_path(std::nullopt, true, false);
}

TEST_F(CoordinatorTensorDict, ABroadcastSourceWithABadDictTellsTheOthers) {
  GroupCoordinator& c = world_coord();
  if (c.world_size() == 1) GTEST_SKIP() << "nobody waits at world size 1";
  const int src = c.world_size() - 1;
  if (c.rank_in_group() == src) {
    TensorDict bad = {{"undefined", Tensor()}};
    expect_invalid_argument([&] { c.broadcast_tensor_dict(bad, src); },
                            {c.unique_name(), "broadcast_tensor_dict", "'undefined'"});
  } else {
    expect_error<SourceFailedError>(
        [&] { c.broadcast_tensor_dict(std::nullopt, src); },
        {"broadcast_object", "src " + std::to_string(src), "'undefined' is undefined"});
  }
  // Still in step.
  std::optional<TensorDict> dict;
  if (c.rank_in_group() == src) dict = make_dict(src, Fill{}, Fill{}, Fill{});
  auto got = c.broadcast_tensor_dict(dict, src);
  ASSERT_TRUE(got.has_value());
  expect_dict(*got, src, "after a failed broadcast");
}

TEST_F(CoordinatorTensorDict, HundredFireAndForgetIsendsArriveInOrderAndIntact) {
  GroupCoordinator& pp = pairs_coord();
  if (pp.world_size() == 1) GTEST_SKIP() << "bypassed at world size 1";
  constexpr int kCount = 100;
  auto dict_of = [](int i) {
    TensorDict dict;
    dict.emplace_back("x", make_tensor({64}, DType::Float32,
                                       [&](std::int64_t j) { return double(i * 100 + j); }));
    dict.emplace_back("meta", "step " + std::to_string(i));
    dict.emplace_back("id",
                      make_tensor({2}, DType::Int64, [&](std::int64_t j) { return j ? -i : i; }));
    dict.emplace_back("none", Tensor::empty({0}, DType::Float32));
    return dict;
  };
  if (pp.rank_in_group() == 0) {
    for (int i = 0; i < kCount; ++i) {
      pp.isend_tensor_dict(dict_of(i));  // handles and dict dropped at once
      // Fresh allocations of the same size would reuse freed send buffers if nothing retained them.
      make_tensor({64}, DType::Float32, [](std::int64_t) { return kGarbage; });
    }
  } else {
    // Let the sender run ahead so its sends are in flight while it drops everything.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (int i = 0; i < kCount; ++i) {
      auto got = pp.recv_tensor_dict();
      ASSERT_TRUE(got.has_value());
      ASSERT_EQ(got->size(), 4u);
      const TensorDict want = dict_of(i);
      EXPECT_EQ(std::get<Bytes>((*got)[1].second), "step " + std::to_string(i));
      for (std::size_t k : {0u, 2u, 3u}) {
        const Tensor& w = std::get<Tensor>(want[k].second);
        expect_tensor(std::get<Tensor>((*got)[k].second), w.shape(), w.dtype(), tensor_values(w),
                      "message " + std::to_string(i) + " key " + want[k].first);
      }
    }
  }
  pp.barrier();
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
