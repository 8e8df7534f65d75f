// Unit tests of the coordinator's private pieces (one process): the metadata codec, object-list
// packing, unique names, RetainedWork and the isend retention FIFO.
#include <gtest/gtest.h>

#include <atomic>

#include "coordinator/group_registry.h"
#include "coordinator/object_protocol.h"
#include "coordinator/pending_isends.h"
#include "coordinator/retained_work.h"
#include "coordinator/tensor_metadata.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace coordinator_detail {
namespace {

TEST(TensorMetadata, RoundTripsEveryKindInOrder) {
  TensorDict dict;
  dict.emplace_back("z", Tensor::empty({2, 0, 3}, DType::BFloat16));
  dict.emplace_back("bytes", Bytes("\0\1\2", 3));
  dict.emplace_back("", Tensor::empty({}, DType::Int64));  // 0-d, empty key
  dict.emplace_back("fp8", Tensor::empty({5}, DType::Float8E5M2));
  dict.emplace_back("empty bytes", Bytes());
  const SplitTensorDict split = split_tensor_dict(dict, "t:0 op");
  ASSERT_EQ(split.tensors.size(), 3u);
  EXPECT_EQ(split.tensors[1].first, "");
  const auto decoded = decode_metadata(encode_metadata(split.metadata), "t:0 op");
  ASSERT_EQ(decoded.size(), 5u);
  EXPECT_EQ(decoded[0].key, "z");
  EXPECT_EQ(decoded[0].kind, MetadataEntry::Kind::Tensor);
  EXPECT_EQ(decoded[0].dtype, DType::BFloat16);
  EXPECT_EQ(decoded[0].shape, (Shape{2, 0, 3}));
  EXPECT_EQ(decoded[0].device_type, DeviceType::CPU);
  EXPECT_EQ(decoded[1].kind, MetadataEntry::Kind::Bytes);
  EXPECT_EQ(decoded[1].value, Bytes("\0\1\2", 3));
  EXPECT_EQ(decoded[2].shape, Shape{});
  EXPECT_EQ(decoded[2].dtype, DType::Int64);
  EXPECT_EQ(decoded[3].dtype, DType::Float8E5M2);
  EXPECT_EQ(decoded[4].value, "");
}

TEST(TensorMetadata, RejectsDuplicateKeysAndUndefinedTensors) {
  TensorDict dup = {{"k", Bytes("a")}, {"k", Bytes("b")}};
  EXPECT_THROW(split_tensor_dict(dup, "t:0 op"), std::invalid_argument);
  TensorDict undefined = {{"u", Tensor()}};
  EXPECT_THROW(split_tensor_dict(undefined, "t:0 op"), std::invalid_argument);
}

TEST(TensorMetadata, MalformedInputIsADistributedError) {
  TensorDict dict = {{"a", Tensor::empty({4, 4}, DType::Float32)}, {"b", Bytes("xyz")}};
  const Bytes good = encode_metadata(split_tensor_dict(dict, "t").metadata);
  // Every truncation, and a few corrupted bytes, fail cleanly.
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(decode_metadata(good.substr(0, n), "t:0 recv"), DistributedError) << n;
  }
  EXPECT_THROW(decode_metadata(good + "x", "t:0 recv"), DistributedError);
  Bytes bad_magic = good;
  bad_magic[0] ^= 1;
  EXPECT_THROW(decode_metadata(bad_magic, "t:0 recv"), DistributedError);
  try {
    decode_metadata(good.substr(0, 10), "t:0 recv");
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("t:0 recv"), std::string::npos) << e.what();
  }
}

TEST(ObjectList, PacksAndUnpacks) {
  const std::vector<Bytes> objects = {"", Bytes("a\0b", 3), std::string(1000, 'q')};
  EXPECT_EQ(unpack_object_list(pack_object_list(objects), "t"), objects);
  EXPECT_TRUE(unpack_object_list(pack_object_list({}), "t").empty());
  const Bytes packed = pack_object_list(objects);
  for (std::size_t n = 0; n < packed.size(); ++n) {
    EXPECT_THROW(unpack_object_list(packed.substr(0, n), "t"), DistributedError) << n;
  }
}

TEST(GroupRegistry, UniqueNamesCountPerName) {
  EXPECT_EQ(make_unique_name("units_a"), "units_a:0");
  EXPECT_EQ(make_unique_name("units_a"), "units_a:1");
  EXPECT_EQ(make_unique_name("units_b"), "units_b:0");
  EXPECT_EQ(make_unique_name("units_a"), "units_a:2");
  auto* fake = reinterpret_cast<GroupCoordinator*>(0x1000);
  register_group("units_a:0", fake);
  EXPECT_EQ(find_group("units_a:0"), fake);
  unregister_group("units_a:0", reinterpret_cast<GroupCoordinator*>(0x2000));  // not the owner
  EXPECT_EQ(find_group("units_a:0"), fake);
  unregister_group("units_a:0", fake);
  EXPECT_EQ(find_group("units_a:0"), nullptr);
}

// A Work completed by the test.
class FakeWork : public Work {
 public:
  bool is_completed() override { return done; }
  void wait() override {
    if (!done) throw TimeoutError("fake: not done");
  }
  void wait(std::chrono::milliseconds) override { wait(); }
  std::atomic<bool> done{false};
};

TEST(RetainedWork, GroupsWorksAndOrphansUnfinishedBuffers) {
  auto first = std::make_shared<FakeWork>();
  auto second = std::make_shared<FakeWork>();
  auto buffer = std::make_shared<int>(7);
  std::weak_ptr<int> watch = buffer;
  const std::size_t orphans_before = orphaned_transfer_count();
  {
    RetainedWork work({first, second}, KeepAlive{buffer});
    buffer.reset();
    first->done = true;
    EXPECT_FALSE(work.is_completed());
    EXPECT_THROW(work.wait(), TimeoutError);
  }  // dropped while `second` is in flight: the buffer must survive
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(orphaned_transfer_count(), orphans_before + 1);
  second->done = true;
  EXPECT_EQ(orphaned_transfer_count(), orphans_before);  // reaped
  EXPECT_TRUE(watch.expired());

  auto done = std::make_shared<FakeWork>();
  done->done = true;
  auto finished_buffer = std::make_shared<int>(1);
  std::weak_ptr<int> finished_watch = finished_buffer;
  auto handle = retain(done, KeepAlive{std::move(finished_buffer)});
  EXPECT_TRUE(handle->is_completed());
  handle->wait();
  handle.reset();
  EXPECT_TRUE(finished_watch.expired());
}

TEST(PendingIsends, ReapsOldestFirstAndStopsAtTheFirstUnfinished) {
  PendingIsends pending;
  std::vector<std::shared_ptr<FakeWork>> works;
  std::vector<std::vector<std::shared_ptr<Work>>> entries;
  for (int i = 0; i < 3; ++i) {
    works.push_back(std::make_shared<FakeWork>());
    entries.push_back({works.back()});
    pending.push(entries.back(), {});
  }
  works[1]->done = true;
  pending.reap();
  EXPECT_EQ(pending.size(), 3u);  // the oldest is still running
  works[0]->done = true;
  pending.reap();
  EXPECT_EQ(pending.size(), 1u);
  pending.drop(entries[2]);
  EXPECT_EQ(pending.size(), 0u);
  pending.push({works[2]}, {});
  pending.clear();
  EXPECT_EQ(pending.size(), 0u);
}

}  // namespace
}  // namespace coordinator_detail
}  // namespace groupcoord
