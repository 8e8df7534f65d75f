// send/recv (default peers: next and previous rank) and isend/irecv of the "cpu" communicator,
// around a ring of the group's ranks.
#include <gtest/gtest.h>

#include "comm_fixture.h"
#include "tensor_reference.h"

namespace groupcoord {
namespace testing {
namespace {

class CpuPointToPointTest : public CommunicatorTest {
 protected:
  int next() const { return (group_rank() + 1) % group_size(); }
  int prev() const { return (group_rank() + group_size() - 1) % group_size(); }
};

TEST_F(CpuPointToPointTest, SendRecvRingWithDefaultPeers) {
  if (group_size() == 1) GTEST_SKIP() << "a ring needs two ranks";
  const Shape shape{3, 4};
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Int64}) {
    // A blocking send returns once the receiver has posted its recv, so the ring runs as a
    // chain: rank 0 sends first, every other rank receives before it sends.
    const Tensor mine = rank_tensor_strided(shape, dtype, group_rank());
    Tensor got;
    if (group_rank() == 0) {
      comm().send(mine);
      got = comm().recv(shape, dtype);
    } else {
      got = comm().recv(shape, dtype);
      comm().send(mine);
    }
    EXPECT_EQ(
        compare(got, shape, dtype, [&](const Shape& i) { return datum(prev(), ravel(i, shape)); }),
        "")
        << dtype_name(dtype);
  }
}

TEST_F(CpuPointToPointTest, ExplicitPeers) {
  if (group_size() == 1) GTEST_SKIP() << "needs two ranks";
  // Every rank sends to the previous rank and receives from the next: the reverse ring.
  const Shape shape{5};
  if (group_rank() == 0) {
    comm().send(rank_tensor(shape, DType::Int32, 0), prev());
    const Tensor got = comm().recv(shape, DType::Int32, next());
    EXPECT_EQ(
        compare(got, shape, DType::Int32, [&](const Shape& i) { return datum(next(), i[0]); }), "");
  } else {
    const Tensor got = comm().recv(shape, DType::Int32, next());
    EXPECT_EQ(
        compare(got, shape, DType::Int32, [&](const Shape& i) { return datum(next(), i[0]); }), "");
    comm().send(rank_tensor(shape, DType::Int32, group_rank()), prev());
  }
}

TEST_F(CpuPointToPointTest, IsendIrecvRing) {
  if (group_size() == 1) GTEST_SKIP() << "a ring needs two ranks";
  const Shape shape{2, 3, 4};
  std::vector<std::shared_ptr<Work>> works;
  std::vector<Tensor> received;
  // Three messages each way; the middle send is strided (sent from a copy the Work keeps) and
  // its handle is dropped at once, which must neither cancel it nor free its buffer early.
  for (int m = 0; m < 3; ++m) {
    Tensor buffer = Tensor::empty(shape, DType::Float16);
    works.push_back(comm().irecv(buffer, prev()));
    received.push_back(buffer);
  }
  for (int m = 0; m < 3; ++m) {
    const Tensor payload = m == 1 ? rank_tensor_strided(shape, DType::Float16, group_rank() + m)
                                  : rank_tensor(shape, DType::Float16, group_rank() + m);
    std::shared_ptr<Work> work = comm().isend(payload, next());
    if (m != 1) works.push_back(std::move(work));
  }
  for (auto& work : works) work->wait();
  for (int m = 0; m < 3; ++m) {
    EXPECT_EQ(compare(received[m], shape, DType::Float16,
                      [&](const Shape& i) { return datum(prev() + m, ravel(i, shape)); }),
              "")
        << "message " << m;
  }
}

// recv into a caller's tensor (beyond vLLM's API): the bytes land there, whatever was in it, and
// the very tensor comes back.
TEST_F(CpuPointToPointTest, RecvIntoOutWritesOutAndReturnsIt) {
  if (group_size() == 1) GTEST_SKIP() << "a ring needs two ranks";
  const Shape shape{4, 3};
  for (DType dtype : {DType::Float32, DType::BFloat16}) {
    const Tensor mine = rank_tensor(shape, dtype, group_rank());
    Tensor out = rank_tensor(shape, dtype, 1000);  // stale contents the receive must replace
    Tensor got;
    if (group_rank() == 0) {
      comm().send(mine);
      got = comm().recv(out);
    } else {
      got = comm().recv(out, prev());
      comm().send(mine);
    }
    EXPECT_EQ(got.data_ptr(), out.data_ptr()) << dtype_name(dtype);
    EXPECT_EQ(
        compare(out, shape, dtype, [&](const Shape& i) { return datum(prev(), ravel(i, shape)); }),
        "")
        << dtype_name(dtype);
  }
}

TEST_F(CpuPointToPointTest, RecvIntoOutNeedsACompactHostTensor) {
  if (group_size() == 1) GTEST_SKIP() << "needs a peer";
  expect_invalid_argument([&] { comm().recv(Tensor(), prev()); },
                          {kGroupName, "recv", "out is an undefined tensor"});
  expect_invalid_argument(
      [&] {
        comm().recv(rank_tensor_strided({2, 3}, DType::Float32, 0), prev());
      },
      {kGroupName, "recv", "contiguous"});
  expect_invalid_argument([&] { comm().recv(Tensor::empty({2}, DType::Float32), group_rank()); },
                          {kGroupName, "recv", "src"});
}

TEST_F(CpuPointToPointTest, IrecvNeedsAContiguousTensor) {
  if (group_size() == 1) GTEST_SKIP() << "needs a peer";
  expect_invalid_argument(
      [&] {
        comm().irecv(rank_tensor_strided({2, 3}, DType::Float32, 0), prev());
      },
      {kGroupName, "irecv", "contiguous"});
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
