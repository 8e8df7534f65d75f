// Tensor construction, metadata, ownership and argument checks.
#include "groupcoord/tensor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/address_sanitizer.h"
#include "groupcoord/allocator.h"

// This test binary counts the heap allocations of its threads while a HeapAllocationCount lives
// (collectives copy tensors on every call, so a copy must not allocate).
namespace {
thread_local long* t_heap_allocations = nullptr;
}  // namespace

void* operator new(std::size_t nbytes) {
  if (t_heap_allocations != nullptr) ++*t_heap_allocations;
  if (void* p = std::malloc(nbytes == 0 ? 1 : nbytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace groupcoord {
namespace {

/// Counts this thread's `operator new` calls while it lives.
class HeapAllocationCount {
 public:
  HeapAllocationCount() { t_heap_allocations = &count_; }
  ~HeapAllocationCount() { t_heap_allocations = nullptr; }
  long count() const { return count_; }

 private:
  long count_ = 0;
};

/// Expects `fn` to throw std::invalid_argument whose message contains `needle`.
template <typename Fn>
void expect_invalid(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected std::invalid_argument containing '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Tensor, EmptyHasCompactLayout) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::Float32);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.element_size(), 4u);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_NE(t.data_ptr(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(-3), 2);
  EXPECT_EQ(t.stride(-2), 4);
  // The memory is usable end to end.
  float* data = t.data_ptr<float>();
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  EXPECT_EQ(data[23], 23.0f);
}

TEST(Tensor, CopiesShareTheLayoutAndAllocateNothing) {
  const Tensor t = Tensor::empty({2, 3, 4}, DType::Float32);
  const Tensor view = t.narrow(1, 1, 2);
  long allocations = 0;
  {
    HeapAllocationCount count;
    Tensor a = t;
    Tensor b(view);
    a = b;
    b = t;
    Tensor moved = std::move(a);
    allocations = count.count();
    EXPECT_EQ(moved.shape(), (Shape{2, 2, 4}));
    EXPECT_EQ(moved.strides(), (Shape{12, 4, 1}));
    EXPECT_EQ(moved.data_ptr(), view.data_ptr());
    EXPECT_EQ(b.shape(), (Shape{2, 3, 4}));
  }
  EXPECT_EQ(allocations, 0);
  // A view made from a copy has its own layout; the original's is untouched.
  Tensor copy = t;
  const Tensor narrowed = copy.narrow(0, 0, 1);
  EXPECT_EQ(narrowed.shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(copy.shape(), (Shape{2, 3, 4}));
  // An undefined tensor has an empty shape and copies as undefined.
  const Tensor undefined;
  const Tensor undefined_copy = undefined;
  EXPECT_FALSE(undefined_copy.defined());
  EXPECT_TRUE(undefined_copy.shape().empty());
  EXPECT_EQ(undefined_copy.dim(), 0);
}

TEST(Tensor, EmptyOfARecentShapeAllocatesOnlyItsOwnerBlock) {
  const Shape shape{3, 5};
  const Tensor first = Tensor::empty(shape, DType::Float32);  // makes the layout
  long allocations = 0;
  Tensor second;
  {
    HeapAllocationCount count;
    second = Tensor::empty(shape, DType::Float32);
    allocations = count.count();
  }
  // The memory comes from the CPU allocator (aligned_alloc, not counted); operator new makes only
  // the owner's control block, the shape and strides are the first tensor's.
  EXPECT_EQ(allocations, 1);
  EXPECT_EQ(&second.shape(), &first.shape());
  EXPECT_EQ(second.strides(), (Shape{5, 1}));
  EXPECT_NE(second.data_ptr(), first.data_ptr());
  // A shape not seen recently gets a layout of its own.
  const Tensor other = Tensor::empty({5, 3}, DType::Float32);
  EXPECT_EQ(other.strides(), (Shape{3, 1}));
  EXPECT_NE(&other.shape(), &first.shape());
}

TEST(Tensor, EmptyOfEveryDType) {
  const std::size_t sizes[] = {4, 2, 2, 8, 1, 1, 4, 8, 1, 1, 1};  // declaration order
  for (int i = 0; i < kNumDTypes; ++i) {
    Tensor t = Tensor::empty({5}, all_dtypes()[i]);
    EXPECT_EQ(t.element_size(), sizes[i]);
    EXPECT_EQ(t.nbytes(), 5 * sizes[i]);
  }
}

TEST(Tensor, ZeroDimAndZeroSize) {
  Tensor scalar = Tensor::empty({}, DType::Int64);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.nbytes(), 8u);
  EXPECT_TRUE(scalar.is_contiguous());
  EXPECT_NE(scalar.data_ptr(), nullptr);

  Tensor none = Tensor::empty({0, 3}, DType::Float32);
  EXPECT_EQ(none.numel(), 0);
  EXPECT_EQ(none.nbytes(), 0u);
  EXPECT_EQ(none.strides(), (Shape{3, 1}));
  EXPECT_TRUE(none.is_contiguous());
}

TEST(Tensor, StrFormat) {
  EXPECT_EQ(Tensor::empty({2, 3}, DType::Float32).str(),
            "Tensor(shape=[2, 3], dtype=float32, device=cpu)");
  EXPECT_EQ(Tensor::empty({}, DType::BFloat16).str(),
            "Tensor(shape=[], dtype=bfloat16, device=cpu)");
  float dummy = 0;
  EXPECT_EQ(Tensor::from_blob(&dummy, {1}, DType::Float8E4M3, Device::cuda(1)).str(),
            "Tensor(shape=[1], dtype=float8_e4m3fn, device=cuda:1)");
  EXPECT_EQ(Tensor().str(), "Tensor(undefined)");
}

TEST(Tensor, BadArgumentsThrowInvalidArgument) {
  expect_invalid([] { Tensor::empty({2, -1}, DType::Float32); }, "-1");
  expect_invalid([] { Tensor::empty({1LL << 62, 1LL << 62}, DType::Float32); }, "overflow");
  expect_invalid([] { Tensor::empty({1LL << 62}, DType::Float64); }, "overflow");
  Tensor t = Tensor::empty({2, 3}, DType::Float32);
  expect_invalid([&] { t.size(2); }, "dim 2");
  expect_invalid([&] { t.size(-3); }, "dim -3");
  expect_invalid([&] { t.stride(5); }, "dim 5");
  expect_invalid([] { Tensor::empty({}, DType::Float32).size(0); }, "0-d");
  expect_invalid([] { Tensor::from_blob(nullptr, {4}, DType::Float32); }, "null data pointer");
  float buf[4];
  expect_invalid([&] { Tensor::from_blob(buf, {2, 2}, {2}, DType::Float32); }, "strides");
  expect_invalid([&] { Tensor::from_blob(buf, {2, 2}, {-2, 1}, DType::Float32); }, "-2");
  expect_invalid([&] { Tensor::from_blob(buf, {-4}, DType::Float32); }, "-4");
  expect_invalid([&] { Tensor::from_blob(buf, {4}, DType::Float32, Device::cuda(-1)); },
                 "device index -1");
}

TEST(Tensor, UndefinedTensorThrows) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  expect_invalid([&] { t.data_ptr(); }, "undefined");
  expect_invalid([&] { t.size(0); }, "undefined");
  expect_invalid([&] { t.narrow(0, 0, 1); }, "undefined");
  expect_invalid([&] { t.movedim(0, 0); }, "undefined");
  expect_invalid([&] { t.reshape({1}); }, "undefined");
  expect_invalid([&] { t.contiguous(); }, "undefined");
  expect_invalid([&] { t.clone(); }, "undefined");
  expect_invalid([&] { t.to_dlpack(); }, "undefined");
  Tensor dst = Tensor::empty({1}, DType::Float32);
  expect_invalid([&] { dst.copy_from(t); }, "undefined");
}

TEST(Tensor, FromBlobWithoutDeleterIsAView) {
  std::vector<std::int32_t> engine_memory = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_blob(engine_memory.data(), {2, 3}, DType::Int32);
  EXPECT_EQ(t.data_ptr(), engine_memory.data());
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  t.data_ptr<std::int32_t>()[4] = 50;
  EXPECT_EQ(engine_memory[4], 50);
}

TEST(Tensor, FromBlobDeleterRunsOnceWhenLastReferenceDies) {
  int calls = 0;
  void* seen = nullptr;
  auto* memory = new std::int64_t[12];
  {
    Tensor t = Tensor::from_blob(memory, {3, 4}, DType::Int64, Device::cpu(), [&](void* p) {
      ++calls;
      seen = p;
      delete[] static_cast<std::int64_t*>(p);
    });
    Tensor copy = t;
    Tensor view = t.narrow(1, 1, 2).movedim(0, 1);
    t = Tensor();
    copy = Tensor();
    EXPECT_EQ(calls, 0);  // `view` still refers to the memory
    EXPECT_EQ(view.data_ptr(), memory + 1);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, memory);
}

TEST(Tensor, FromBlobWithStrides) {
  // A 3x2 column-major view of 6 floats: element [i][j] lives at i + 3j.
  float memory[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = Tensor::from_blob(memory, {3, 2}, {1, 3}, DType::Float32);
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  Tensor compact = t.contiguous();  // held: the copy's memory lives as long as it does
  EXPECT_EQ(compact.shape(), (Shape{3, 2}));
  const float* c = compact.data_ptr<float>();
  const float expected[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c[i], expected[i]) << i;
}

TEST(Tensor, FromBlobNullPointerAllowedForEmptyShape) {
  Tensor t = Tensor::from_blob(nullptr, {0, 4}, DType::Float32);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.data_ptr(), nullptr);
  EXPECT_EQ(t.clone().numel(), 0);
}

TEST(Tensor, DeleterExceptionsAreSwallowed) {
  float x = 0;
  int calls = 0;
  void* seen = nullptr;
  {
    Tensor t = Tensor::from_blob(&x, {1}, DType::Float32, Device::cpu(), [&](void* p) {
      ++calls;
      seen = p;
      throw std::runtime_error("engine deleter failed");
    });
    EXPECT_EQ(calls, 0);
  }
  // Getting here means the destructor neither propagated the exception nor terminated; the
  // deleter must still have run, once, on the blob's pointer.
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, &x);
}

// ---- allocators -----------------------------------------------------------------------------

/// Host-memory allocator that records every call; used for CPU and, pretending, for CUDA.
class CountingAllocator : public Allocator {
 public:
  void* allocate(std::size_t nbytes, Device device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocations;
    last_device = device;
    last_nbytes = nbytes;
    void* p = ::operator new(nbytes == 0 ? 1 : nbytes);
    live.push_back(p);
    return p;
  }
  void deallocate(void* ptr, std::size_t nbytes, Device device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++deallocations;
    freed_nbytes += nbytes;
    freed_device = device;
    ::operator delete(ptr);
  }

  int allocations = 0;
  int deallocations = 0;
  std::size_t last_nbytes = 0;
  std::size_t freed_nbytes = 0;
  Device last_device;
  Device freed_device;
  std::vector<void*> live;

 private:
  std::mutex mutex_;
};

/// Restores the default allocators when a test ends, whatever it installed.
class AllocatorTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_allocator(DeviceType::CPU, nullptr);
    set_allocator(DeviceType::CUDA, nullptr);
  }
};

TEST_F(AllocatorTest, CpuDefaultIsInstalledAndCudaHasNone) {
  EXPECT_NE(get_allocator(DeviceType::CPU), nullptr);
  EXPECT_EQ(get_allocator(DeviceType::CUDA), nullptr);
  expect_invalid([] { Tensor::empty({4}, DType::Float32, Device::cuda(0)); },
                 "no allocator registered for cuda; install one with set_allocator");
}

TEST_F(AllocatorTest, CpuAllocatorAlignsAndHandlesZeroBytes) {
  CpuAllocator allocator;
  for (std::size_t n : {0u, 1u, 63u, 64u, 65u, 1000u}) {
    void* p = allocator.allocate(n, Device::cpu());
    ASSERT_NE(p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << n;
    std::memset(p, 0xAB, n);
    allocator.deallocate(p, n, Device::cpu());
  }
  void* a = allocator.allocate(0, Device::cpu());
  void* b = allocator.allocate(0, Device::cpu());
  EXPECT_NE(a, b);
  allocator.deallocate(a, 0, Device::cpu());
  allocator.deallocate(b, 0, Device::cpu());
  EXPECT_THROW(allocator.allocate(SIZE_MAX - 10, Device::cpu()), std::bad_alloc);
}

TEST_F(AllocatorTest, CpuAllocatorSmallBlocksAreAlignedWritableAndFreedInAnyOrder) {
  // Blocks under kCacheMinBytes come from malloc with the alignment slide stored below them:
  // many live at once, each written over its whole size class, freed out of order.
  CpuAllocator allocator;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (int round = 0; round < 4; ++round) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16},
                          std::size_t{100}, std::size_t{4097}, CpuAllocator::kCacheMinBytes - 65}) {
      void* p = allocator.allocate(n, Device::cpu());
      ASSERT_NE(p, nullptr) << n;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % CpuAllocator::kAlignment, 0u) << n;
      std::memset(p, round, CpuAllocator::block_bytes(n));
      blocks.emplace_back(p, n);
    }
  }
  for (std::size_t i = 0; i < blocks.size(); i += 2) {
    allocator.deallocate(blocks[i].first, blocks[i].second, Device::cpu());
  }
  for (std::size_t i = 1; i < blocks.size(); i += 2) {
    allocator.deallocate(blocks[i].first, blocks[i].second, Device::cpu());
  }
  EXPECT_EQ(allocator.cached_bytes(), 0u);  // none of them is large enough to be cached
}

// Under AddressSanitizer a write just past a small block's size class is reported, as it was when
// the block came from aligned_alloc: the malloc'ed slack around it is poisoned.
TEST_F(AllocatorTest, CpuAllocatorSmallBlockOverflowIsReportedUnderAsan) {
#ifndef GROUPCOORD_ASAN
  GTEST_SKIP() << "needs AddressSanitizer (the asan preset, or run-tests.sh's ASan step)";
#else
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  for (std::size_t n : {std::size_t{1}, std::size_t{100}, std::size_t{4096}}) {
    EXPECT_DEATH(
        {
          CpuAllocator allocator;
          auto* p = static_cast<volatile unsigned char*>(allocator.allocate(n, Device::cpu()));
          p[CpuAllocator::block_bytes(n)] = 1;
        },
        "AddressSanitizer")
        << n << " bytes";
    EXPECT_DEATH(
        {
          CpuAllocator allocator;
          auto* p = static_cast<volatile unsigned char*>(allocator.allocate(n, Device::cpu()));
          p[-2] = 1;
        },
        "AddressSanitizer")
        << n << " bytes, before the block";
  }
#endif
}

TEST_F(AllocatorTest, CpuAllocatorCachesLargeBlocksBySizeClass) {
  CpuAllocator allocator(std::size_t{4} << 20);
  const std::size_t big = std::size_t{256} << 10;
  EXPECT_EQ(CpuAllocator::block_bytes(big), big);
  EXPECT_EQ(CpuAllocator::block_bytes(big + 1), big + (big * 2) / 16);  // a 16th of 512 KiB
  EXPECT_EQ(CpuAllocator::block_bytes(100), 128u);
  void* a = allocator.allocate(big, Device::cpu());
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
  std::memset(a, 0x5A, big);
  allocator.deallocate(a, big, Device::cpu());
  EXPECT_EQ(allocator.cached_bytes(), big);
  // The same size class comes back from the cache; another class does not take it.
  void* other = allocator.allocate(big + (big * 2) / 16, Device::cpu());
  EXPECT_NE(other, a);
  void* again = allocator.allocate(big - 100, Device::cpu());
  EXPECT_EQ(again, a);
  EXPECT_EQ(allocator.cached_bytes(), 0u);
  allocator.deallocate(again, big - 100, Device::cpu());
  allocator.deallocate(other, big + (big * 2) / 16, Device::cpu());
  EXPECT_EQ(allocator.cached_bytes(), big + big + (big * 2) / 16);
  // Small blocks are never cached.
  allocator.deallocate(allocator.allocate(1000, Device::cpu()), 1000, Device::cpu());
  EXPECT_EQ(allocator.cached_bytes(), big + big + (big * 2) / 16);
  // The bound: a block that does not fit under it is freed, not cached.
  const std::size_t huge = std::size_t{4} << 20;
  allocator.deallocate(allocator.allocate(huge, Device::cpu()), huge, Device::cpu());
  EXPECT_LE(allocator.cached_bytes(), allocator.max_cached_bytes());
  EXPECT_EQ(allocator.cached_bytes(), big + big + (big * 2) / 16);
  EXPECT_EQ(allocator.release_cached(), big + big + (big * 2) / 16);
  EXPECT_EQ(allocator.cached_bytes(), 0u);
  // A cache of 0 bytes caches nothing.
  CpuAllocator uncached(0);
  uncached.deallocate(uncached.allocate(big, Device::cpu()), big, Device::cpu());
  EXPECT_EQ(uncached.cached_bytes(), 0u);
}

/// The VmFlags line of /proc/self/smaps for the mapping that holds `address` ("" if none).
static std::string vm_flags_of(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto where = reinterpret_cast<std::uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2 &&
        line.find(':') > line.find(' ')) {
      inside = where >= begin && where < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST_F(AllocatorTest, CpuAllocatorAsksForHugePagesForBlocksOfAHugePageOrMore) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  CpuAllocator allocator(0);
  const std::size_t huge_page = std::size_t{2} << 20;
  const std::size_t bytes = 3 * huge_page + 100;
  void* block = allocator.allocate(bytes, Device::cpu());
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block) % huge_page, 0u);
  std::memset(block, 1, bytes);
  const std::string flags = vm_flags_of(block);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  // A mapping of its own, given back whole when freed (this allocator caches nothing).
  allocator.deallocate(block, bytes, Device::cpu());
  EXPECT_EQ(vm_flags_of(block), "");
}

TEST_F(AllocatorTest, TensorsReturnMemoryToTheirAllocator) {
  auto counting = std::make_shared<CountingAllocator>();
  set_allocator(DeviceType::CPU, counting);
  EXPECT_EQ(get_allocator(DeviceType::CPU), counting);
  {
    Tensor t = Tensor::empty({3, 5}, DType::Float16);
    EXPECT_EQ(counting->allocations, 1);
    EXPECT_EQ(counting->last_nbytes, 30u);
    EXPECT_EQ(t.data_ptr(), counting->live.back());
    Tensor view = t.narrow(0, 1, 1);
    // Replacing the allocator must not redirect memory already handed out.
    set_allocator(DeviceType::CPU, nullptr);
    t = Tensor();
    EXPECT_EQ(counting->deallocations, 0);
  }
  EXPECT_EQ(counting->deallocations, 1);
  EXPECT_EQ(counting->freed_nbytes, 30u);
}

TEST_F(AllocatorTest, CudaTensorsUseTheInstalledCudaAllocator) {
  auto fake_cuda = std::make_shared<CountingAllocator>();
  set_allocator(DeviceType::CUDA, fake_cuda);
  {
    Tensor t = Tensor::empty({4, 2}, DType::BFloat16, Device::cuda(1));
    EXPECT_EQ(t.device(), Device::cuda(1));
    EXPECT_EQ(fake_cuda->last_device, Device::cuda(1));
    EXPECT_EQ(fake_cuda->last_nbytes, 16u);
    // Views and contiguous-of-contiguous need no copy and work on any device.
    EXPECT_EQ(t.contiguous().data_ptr(), t.data_ptr());
    EXPECT_EQ(t.reshape({8}).data_ptr(), t.data_ptr());
    // Copies need device kernels that this layer does not have.
    expect_invalid([&] { t.clone(); }, "not supported");
    expect_invalid([&] { t.movedim(0, 1).contiguous(); }, "not supported");
    expect_invalid([&] { t.movedim(0, 1).reshape({8}); }, "not supported");
    Tensor host = Tensor::empty({4, 2}, DType::BFloat16);
    expect_invalid([&] { host.copy_from(t); }, "not supported");
    expect_invalid([&] { t.copy_from(host); }, "not supported");
  }
  EXPECT_EQ(fake_cuda->deallocations, 1);
  EXPECT_EQ(fake_cuda->freed_device, Device::cuda(1));
}

TEST_F(AllocatorTest, ZeroByteTensorsGoThroughTheAllocator) {
  auto counting = std::make_shared<CountingAllocator>();
  set_allocator(DeviceType::CPU, counting);
  { Tensor t = Tensor::empty({0}, DType::Float32); }
  EXPECT_EQ(counting->allocations, 1);
  EXPECT_EQ(counting->deallocations, 1);
  EXPECT_EQ(counting->last_nbytes, 0u);
}

TEST_F(AllocatorTest, ScopedAllocatorServesOnlyItsThreadAndNests) {
  auto installed = std::make_shared<CountingAllocator>();
  auto outer = std::make_shared<CountingAllocator>();
  auto inner = std::make_shared<CountingAllocator>();
  set_allocator(DeviceType::CUDA, installed);
  Tensor kept;
  {
    ScopedAllocator scope(DeviceType::CUDA, outer);
    EXPECT_EQ(get_allocator(DeviceType::CUDA), outer);
    EXPECT_NE(get_allocator(DeviceType::CPU), outer);  // another type keeps its own
    {
      ScopedAllocator nested(DeviceType::CUDA, inner);
      Tensor::empty({2}, DType::Float32, Device::cuda(0));
    }
    kept = Tensor::empty({4}, DType::Float32, Device::cuda(0));
    std::thread other([] { Tensor::empty({8}, DType::Float32, Device::cuda(0)); });
    other.join();
  }
  EXPECT_EQ(inner->allocations, 1);
  EXPECT_EQ(inner->deallocations, 1);
  EXPECT_EQ(outer->allocations, 1);
  EXPECT_EQ(installed->allocations, 1);  // the other thread's
  EXPECT_EQ(installed->last_nbytes, 32u);
  EXPECT_EQ(get_allocator(DeviceType::CUDA), installed);
  // A block outlives its scope and still goes back to the allocator that made it.
  kept = Tensor();
  EXPECT_EQ(outer->deallocations, 1);
  EXPECT_EQ(installed->deallocations, 1);
  expect_invalid([] { ScopedAllocator null_scope(DeviceType::CPU, nullptr); },
                 "ScopedAllocator: the allocator for cpu is null");
}

TEST_F(AllocatorTest, SetAndGetFromManyThreads) {
  auto a = std::make_shared<CountingAllocator>();
  auto b = std::make_shared<CountingAllocator>();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 500; ++k) {
        set_allocator(DeviceType::CPU, (k + i) % 2 ? a : b);
        Tensor t = Tensor::empty({16}, DType::Float32);
        if (t.data_ptr() == nullptr) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(a->allocations + b->allocations, 2000);
  EXPECT_EQ(a->allocations, a->deallocations);
  EXPECT_EQ(b->allocations, b->deallocations);
}

}  // namespace
}  // namespace groupcoord
