// send/recv and isend/irecv of the "cuda" communicator.
#include <gtest/gtest.h>

#include "cuda_fixture.h"

namespace groupcoord {
namespace testing {
namespace {

class CudaPointToPoint : public CudaCommTest {};

TEST_F(CudaPointToPoint, SendRecvFromFirstToLast) {
  if (group_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int r = group_rank();
  const int last = group_size() - 1;
  if (r == 0) {
    // A strided tensor is sent from a compact copy.
    const Tensor base = device_floats({8, 4}, device(), [](std::int64_t i) { return i; });
    comm().send(base.movedim(0, 1), last);
  } else if (r == last) {
    const Tensor got = comm().recv({4, 8}, DType::Float32, 0);
    const std::vector<double> values = host_values(got);
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 8; ++b) ASSERT_EQ(values[a * 8 + b], b * 4 + a);
    }
  }
}

// recv into a caller's tensor (beyond vLLM's API): written in stream order, returned as is.
TEST_F(CudaPointToPoint, RecvIntoOutWritesOutAndReturnsIt) {
  if (group_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int r = group_rank();
  const int last = group_size() - 1;
  if (r == 0) {
    comm().send(device_floats({3, 5}, device(), [](std::int64_t i) { return 7 * i; }), last);
  } else if (r == last) {
    const Tensor out = device_floats({3, 5}, device(), [](std::int64_t) { return -1; });
    const Tensor got = comm().recv(out, 0);
    EXPECT_EQ(got.data_ptr(), out.data_ptr());
    const std::vector<double> values = host_values(out);
    for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], 7.0 * i);
  }
  // An out of the wrong place or layout is refused before anything is enqueued.
  expect_invalid_argument([&] { comm().recv(Tensor::empty({4}, DType::Float32), 0); },
                          {kCudaGroupName, "recv", "out must be on"});
  const Tensor strided = device_floats({4, 4}, device(), [](std::int64_t) { return 0; });
  expect_invalid_argument([&] { comm().recv(strided.movedim(0, 1), 0); }, {"recv", "contiguous"});
}

TEST_F(CudaPointToPoint, IsendIrecvWithWork) {
  if (group_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int r = group_rank();
  const int peer = 1 - r;
  if (r > 1) return;
  Tensor inbox = device_floats({1 << 16}, device(), [](std::int64_t) { return -1; });
  std::shared_ptr<Work> recv_work;
  std::shared_ptr<Work> send_work;
  {
    const Tensor outbox =
        device_floats({1 << 16}, device(), [&](std::int64_t i) { return r * 100000 + i; });
    // Rank 0 sends first, rank 1 receives first: a pairing NCCL can always match.
    if (r == 0) {
      send_work = comm().isend(outbox, peer);
      recv_work = comm().irecv(inbox, peer);
    } else {
      recv_work = comm().irecv(inbox, peer);
      send_work = comm().isend(outbox, peer);
    }
  }  // `outbox` is dropped: the Work keeps it alive
  send_work->wait();
  recv_work->wait(std::chrono::seconds(30));
  EXPECT_TRUE(send_work->is_completed());
  EXPECT_TRUE(recv_work->is_completed());
  const std::vector<double> got = host_values(inbox);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], peer * 100000.0 + i);
}

TEST_F(CudaPointToPoint, BadPeersAndLayoutsAreInvalid) {
  const Tensor x = device_floats({4}, device(), [](std::int64_t) { return 0; });
  expect_invalid_argument([&] { comm().send(x, group_rank()); }, {kCudaGroupName, "send", "dst"});
  expect_invalid_argument([&] { comm().recv({4}, DType::Float32, group_size()); }, {"recv", "src"});
  const Tensor strided = device_floats({4, 4}, device(), [](std::int64_t) { return 0; });
  if (group_size() > 1) {
    expect_invalid_argument([&] { comm().irecv(strided.movedim(0, 1), 1 - group_rank() % 2); },
                            {"irecv", "contiguous"});
  }
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
