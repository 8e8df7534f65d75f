// Caller-provided outputs (`out`, beyond vLLM's API) of the "cpu" communicator: results equal the
// out-of-place references, land in `out` itself, cost no allocation where the layout allows (a
// counting allocator watches), and a wrong `out` is refused with the group, op and mismatch named.
// The DeviceCommunicator defaults (result computed, then copied) are checked through a
// communicator that overrides only the out-of-place calls.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "comm_fixture.h"
#include "groupcoord/allocator.h"
#include "tensor_reference.h"

namespace groupcoord {
namespace testing {
namespace {

/// Counts the CPU allocations made while it is installed.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(std::size_t nbytes, Device device) override {
    ++count;
    return inner_.allocate(nbytes, device);
  }
  void deallocate(void* ptr, std::size_t nbytes, Device device) override {
    inner_.deallocate(ptr, nbytes, device);
  }
  std::atomic<int> count{0};

 private:
  CpuAllocator inner_;
};

/// Installs a CountingAllocator for the CPU for its lifetime.
class AllocationCounter {
 public:
  AllocationCounter() : allocator_(std::make_shared<CountingAllocator>()) {
    previous_ = get_allocator(DeviceType::CPU);
    set_allocator(DeviceType::CPU, allocator_);
  }
  ~AllocationCounter() { set_allocator(DeviceType::CPU, previous_); }
  int count() const { return allocator_->count.load(); }

 private:
  std::shared_ptr<CountingAllocator> allocator_;
  std::shared_ptr<Allocator> previous_;
};

class CpuOutputsTest : public CommunicatorTest {
 protected:
  /// Sum over ranks of rank_tensor's values at `index` of `shape`.
  IndexFn summed(const Shape& shape) const {
    const int n = group_size();
    return [shape, n](const Shape& index) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += datum(r, ravel(index, shape));
      return sum;
    };
  }
};

TEST_F(CpuOutputsTest, AllReduceWritesIntoOutWithoutAllocating) {
  const Shape shape{4, 6};
  const Tensor input = rank_tensor(shape, DType::Float32, group_rank());
  const Tensor out = Tensor::empty(shape, DType::Float32);
  Tensor result;
  int allocations = 0;
  {
    AllocationCounter counter;
    result = comm().all_reduce(input, out);
    allocations = counter.count();
  }
  EXPECT_EQ(result.data_ptr(), out.data_ptr());
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(compare(out, shape, DType::Float32, summed(shape)), "");
}

TEST_F(CpuOutputsTest, AllReduceInPlace) {
  const Shape shape{5};
  const Tensor x = rank_tensor(shape, DType::Int64, group_rank());
  comm().all_reduce(x, x);
  EXPECT_EQ(compare(x, shape, DType::Int64, summed(shape)), "");
}

TEST_F(CpuOutputsTest, AllGatherIntoOutEveryDim) {
  const Shape shape{2, 3, 4};
  const Tensor input = rank_tensor(shape, DType::BFloat16, group_rank());
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const int d = dim < 0 ? dim + 3 : dim;
    Shape out_shape = shape;
    out_shape[d] *= group_size();
    const Tensor out = Tensor::empty(out_shape, DType::BFloat16);
    int allocations = 0;
    {
      AllocationCounter counter;
      EXPECT_EQ(comm().all_gather(input, dim, out).data_ptr(), out.data_ptr());
      allocations = counter.count();
    }
    if (d == 0) EXPECT_EQ(allocations, 0) << "dim 0 gathers straight into out";
    EXPECT_EQ(compare(out, out_shape, DType::BFloat16,
                      [&](const Shape& index) {
                        Shape local = index;
                        local[d] = index[d] % shape[d];
                        return datum(static_cast<int>(index[d] / shape[d]), ravel(local, shape));
                      }),
              "");
  }
}

TEST_F(CpuOutputsTest, ReduceScatterIntoOut) {
  const int n = group_size();
  const Shape shape{2 * n, 3};
  const Tensor input = rank_tensor(shape, DType::Float32, group_rank());
  for (int dim : {0, -2}) {
    const Tensor out = Tensor::empty({2, 3}, DType::Float32);
    EXPECT_EQ(comm().reduce_scatter(input, dim, out).data_ptr(), out.data_ptr());
    const std::int64_t offset = 2 * group_rank();
    EXPECT_EQ(compare(out, {2, 3}, DType::Float32,
                      [&](const Shape& index) {
                        Shape full = index;
                        full[0] += offset;
                        return summed(shape)(full);
                      }),
              "");
  }
}

TEST_F(CpuOutputsTest, WrongOutIsRefused) {
  const Tensor input = rank_tensor({4, 2}, DType::Float32, group_rank());
  expect_invalid_argument(
      [&] {
        comm().all_reduce(input, Tensor::empty({4, 3}, DType::Float32));
      },
      {kGroupName, "all_reduce", "out has shape [4, 3]", "[4, 2]"});
  expect_invalid_argument(
      [&] {
        comm().all_reduce(input, Tensor::empty({4, 2}, DType::Int32));
      },
      {kGroupName, "all_reduce", "dtype int32", "float32"});
  expect_invalid_argument([&] { comm().all_reduce(input, Tensor()); },
                          {kGroupName, "all_reduce", "out is an undefined tensor"});
  const Tensor wide = Tensor::empty({2, 4}, DType::Float32);
  expect_invalid_argument([&] { comm().all_reduce(input, wide.movedim(0, 1)); },
                          {kGroupName, "all_reduce", "out must be contiguous"});
  expect_invalid_argument(
      [&] {
        comm().all_gather(input, 0, Tensor::empty({5, 2}, DType::Float32));
      },
      {kGroupName, "all_gather", "out has shape [5, 2]"});
  expect_invalid_argument(
      [&] {
        comm().reduce_scatter(input, 0, Tensor::empty({4, 3}, DType::Float32));
      },
      {kGroupName, "reduce_scatter"});
}

/// Overrides only the out-of-place calls, so that `out` goes through the interface's defaults.
class OutOfPlaceOnly final : public DeviceCommunicator {
 public:
  explicit OutOfPlaceOnly(DeviceCommunicator& inner) : inner_(inner) {}
  std::string backend_name() const override { return "out-of-place-only"; }
  int rank_in_group() const override { return inner_.rank_in_group(); }
  int world_size() const override { return inner_.world_size(); }
  Tensor all_reduce(const Tensor& input) override { return inner_.all_reduce(input); }
  Tensor all_gather(const Tensor& input, int dim) override { return inner_.all_gather(input, dim); }
  using DeviceCommunicator::all_gatherv;
  std::vector<Tensor> all_gatherv(const std::vector<Tensor>& inputs, int dim,
                                  const std::optional<std::vector<std::int64_t>>& sizes) override {
    return inner_.all_gatherv(inputs, dim, sizes);
  }
  Tensor reduce_scatter(const Tensor& input, int dim) override {
    return inner_.reduce_scatter(input, dim);
  }
  Tensor reduce_scatterv(const Tensor& input, int dim,
                         const std::optional<std::vector<std::int64_t>>& sizes) override {
    return inner_.reduce_scatterv(input, dim, sizes);
  }
  std::optional<Tensor> gather(const Tensor& input, int dst, int dim) override {
    return inner_.gather(input, dst, dim);
  }
  Tensor broadcast(const Tensor& tensor, int src) override { return inner_.broadcast(tensor, src); }
  void send(const Tensor& tensor, std::optional<int> dst) override { inner_.send(tensor, dst); }
  using DeviceCommunicator::recv;
  Tensor recv(const Shape& shape, DType dtype, std::optional<int> src) override {
    return inner_.recv(shape, dtype, src);
  }
  std::shared_ptr<Work> isend(const Tensor& tensor, int dst) override {
    return inner_.isend(tensor, dst);
  }
  std::shared_ptr<Work> irecv(const Tensor& tensor, int src) override {
    return inner_.irecv(tensor, src);
  }
  DispatchRouterLogitsResult dispatch_router_logits(const Tensor& h, const Tensor& r, bool sp,
                                                    const std::vector<Tensor>& e) override {
    return inner_.dispatch_router_logits(h, r, sp, e);
  }
  DispatchResult dispatch(const Tensor& h, const Tensor& w, const Tensor& i, bool sp,
                          const std::vector<Tensor>& e) override {
    return inner_.dispatch(h, w, i, sp, e);
  }
  Tensor combine(const Tensor& h, bool sp) override { return inner_.combine(h, sp); }
  void destroy() override {}

 private:
  DeviceCommunicator& inner_;
};

TEST_F(CpuOutputsTest, InterfaceDefaultsComputeThenCopy) {
  OutOfPlaceOnly wrapper(comm());
  DeviceCommunicator& c = wrapper;
  const int n = group_size();
  const Shape shape{n, 2};
  const Tensor input = rank_tensor(shape, DType::Float32, group_rank());
  const Tensor reduced = Tensor::empty(shape, DType::Float32);
  EXPECT_EQ(c.all_reduce(input, reduced).data_ptr(), reduced.data_ptr());
  EXPECT_EQ(compare(reduced, shape, DType::Float32, summed(shape)), "");
  const Tensor gathered = Tensor::empty({n * n, 2}, DType::Float32);
  c.all_gather(input, 0, gathered);
  EXPECT_EQ(
      compare(
          gathered, {n * n, 2}, DType::Float32,
          [&](const Shape& index) {
            return datum(static_cast<int>(index[0] / n), ravel({index[0] % n, index[1]}, shape));
          }),
      "");
  const Tensor scattered = Tensor::empty({1, 2}, DType::Float32);
  c.reduce_scatter(input, 0, scattered);
  EXPECT_EQ(compare(scattered, {1, 2}, DType::Float32,
                    [&](const Shape& index) {
                      return summed(shape)({index[0] + group_rank(), index[1]});
                    }),
            "");
  expect_invalid_argument([&] { c.all_reduce(input, Tensor::empty({3}, DType::Float32)); },
                          {"out-of-place-only", "all_reduce", "out has shape [3]"});
  if (n > 1) {  // recv into out: the previous rank's input lands there, around the ring
    const Tensor received = rank_tensor(shape, DType::Float32, 1000);  // stale contents
    const int prev = (group_rank() + n - 1) % n;
    if (group_rank() == 0) {
      c.send(input, 1);
      EXPECT_EQ(c.recv(received, prev).data_ptr(), received.data_ptr());
    } else {
      EXPECT_EQ(c.recv(received, prev).data_ptr(), received.data_ptr());
      c.send(input, (group_rank() + 1) % n);
    }
    EXPECT_EQ(compare(received, shape, DType::Float32,
                      [&](const Shape& index) { return datum(prev, ravel(index, shape)); }),
              "");
    expect_invalid_argument([&] { c.recv(rank_tensor_strided(shape, DType::Float32, 0), prev); },
                            {"out-of-place-only", "recv", "contiguous"});
  }
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
