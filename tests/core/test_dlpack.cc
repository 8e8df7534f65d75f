// DLPack import/export: every DType both ways, ownership (each deleter exactly once), layouts,
// devices and rejected inputs. DLPack codes are written out here by hand (DLPack 1.x values).
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace {

struct DLPackCase {
  DType dtype;
  std::uint8_t code;
  std::uint8_t bits;
};

// Int 0, UInt 1, Float 2, Bfloat 4, Bool 6, Float8_e4m3fn 10, Float8_e5m2 12.
const DLPackCase kCases[] = {
    {DType::Float32, 2, 32},    {DType::Float16, 2, 16},    {DType::BFloat16, 4, 16},
    {DType::Float64, 2, 64},    {DType::Int8, 0, 8},        {DType::UInt8, 1, 8},
    {DType::Int32, 0, 32},      {DType::Int64, 0, 64},      {DType::Bool, 6, 8},
    {DType::Float8E4M3, 10, 8}, {DType::Float8E5M2, 12, 8},
};

/// A DLManagedTensor as a foreign producer would make it: it owns its data, shape and strides
/// and counts how often its deleter runs.
struct Producer {
  std::vector<std::uint8_t> data;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  int* deleter_calls;
  DLManagedTensor managed{};

  static void deleter(DLManagedTensor* self) {
    auto* producer = static_cast<Producer*>(self->manager_ctx);
    ++*producer->deleter_calls;
    delete producer;
  }
};

/// Makes a producer tensor; `strides` empty means DLPack NULL strides (compact).
DLManagedTensor* make_producer(int* calls, std::vector<std::int64_t> shape,
                               std::vector<std::int64_t> strides, DLDataType dtype,
                               std::size_t data_bytes, DLDevice device = {kDLCPU, 0},
                               std::uint64_t byte_offset = 0) {
  auto* p = new Producer{
      std::vector<std::uint8_t>(data_bytes), std::move(shape), std::move(strides), calls, {}};
  for (std::size_t i = 0; i < p->data.size(); ++i) p->data[i] = static_cast<std::uint8_t>(i);
  DLTensor& dl = p->managed.dl_tensor;
  dl.data = p->data.empty() ? nullptr : p->data.data();
  dl.device = device;
  dl.ndim = static_cast<int>(p->shape.size());
  dl.dtype = dtype;
  dl.shape = p->shape.data();
  dl.strides = p->strides.empty() ? nullptr : p->strides.data();
  dl.byte_offset = byte_offset;
  p->managed.manager_ctx = p;
  p->managed.deleter = &Producer::deleter;
  return &p->managed;
}

template <typename Fn>
void expect_invalid(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected std::invalid_argument containing '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(DLPack, ExportEveryDType) {
  for (const DLPackCase& c : kCases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    Tensor t = Tensor::empty({2, 3}, c.dtype);
    DLManagedTensor* m = t.to_dlpack();
    const DLTensor& dl = m->dl_tensor;
    EXPECT_EQ(dl.data, t.data_ptr());
    EXPECT_EQ(dl.byte_offset, 0u);
    EXPECT_EQ(dl.device.device_type, kDLCPU);
    EXPECT_EQ(dl.ndim, 2);
    EXPECT_EQ(dl.dtype.code, c.code);
    EXPECT_EQ(dl.dtype.bits, c.bits);
    EXPECT_EQ(dl.dtype.lanes, 1);
    EXPECT_EQ(std::vector<std::int64_t>(dl.shape, dl.shape + 2), (std::vector<std::int64_t>{2, 3}));
    ASSERT_NE(dl.strides, nullptr);
    EXPECT_EQ(std::vector<std::int64_t>(dl.strides, dl.strides + 2),
              (std::vector<std::int64_t>{3, 1}));
    m->deleter(m);
  }
}

TEST(DLPack, ExportThenImportEveryDType) {
  for (const DLPackCase& c : kCases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    int calls = 0;
    std::vector<std::uint8_t> memory(4 * 5 * 8);
    for (std::size_t i = 0; i < memory.size(); ++i) memory[i] = static_cast<std::uint8_t>(i * 7);
    {
      Tensor original =
          Tensor::from_blob(memory.data(), {4, 5}, c.dtype, Device::cpu(), [&](void*) { ++calls; });
      // Export a non-compact view so strides and the offset have to survive the trip.
      Tensor view = original.narrow(0, 1, 2).movedim(0, 1);  // shape [5, 2], strides [1, 5]
      DLManagedTensor* m = view.to_dlpack();
      original = Tensor();
      view = Tensor();
      EXPECT_EQ(calls, 0);  // the DLManagedTensor keeps the memory alive
      Tensor back = Tensor::from_dlpack(m);
      EXPECT_EQ(back.dtype(), c.dtype);
      EXPECT_EQ(back.device(), Device::cpu());
      EXPECT_EQ(back.shape(), (Shape{5, 2}));
      EXPECT_EQ(back.strides(), (Shape{1, 5}));
      const std::size_t element = dtype_size(c.dtype);
      EXPECT_EQ(back.data_ptr(), memory.data() + 5 * element);
      // Element [3][1] is original [1 + 1][3] = flat 13; its bytes start at 13 * element.
      const auto* e = static_cast<const std::uint8_t*>(back.data_ptr()) +
                      (3 * back.stride(0) + 1 * back.stride(1)) * element;
      EXPECT_EQ(e, memory.data() + 13 * element);
      EXPECT_EQ(calls, 0);
    }
    EXPECT_EQ(calls, 1);
  }
}

TEST(DLPack, ImportEveryDTypeFromAProducer) {
  for (const DLPackCase& c : kCases) {
    SCOPED_TRACE(dtype_name(c.dtype));
    int calls = 0;
    const std::size_t element = c.bits / 8;
    DLManagedTensor* m =
        make_producer(&calls, {3, 2}, {}, DLDataType{c.code, c.bits, 1}, 6 * element);
    void* producer_data = m->dl_tensor.data;
    {
      Tensor t = Tensor::from_dlpack(m);
      EXPECT_EQ(t.dtype(), c.dtype);
      EXPECT_EQ(t.shape(), (Shape{3, 2}));
      EXPECT_EQ(t.strides(), (Shape{2, 1}));  // NULL strides mean compact
      EXPECT_EQ(t.data_ptr(), producer_data);
      // Re-export and re-import: the same memory, the producer still not released.
      DLManagedTensor* again = t.to_dlpack();
      EXPECT_EQ(again->dl_tensor.dtype.code, c.code);
      EXPECT_EQ(again->dl_tensor.dtype.bits, c.bits);
      Tensor t2 = Tensor::from_dlpack(again);
      t = Tensor();
      EXPECT_EQ(calls, 0);
      EXPECT_EQ(t2.data_ptr(), producer_data);
      EXPECT_EQ(t2.dtype(), c.dtype);
    }
    EXPECT_EQ(calls, 1);
  }
}

TEST(DLPack, ByteOffsetAndExplicitStrides) {
  int calls = 0;
  // int32 [2, 2] with row stride 3, starting 8 bytes (2 elements) into the buffer.
  DLManagedTensor* m =
      make_producer(&calls, {2, 2}, {3, 1}, DLDataType{0, 32, 1}, 64, DLDevice{kDLCPU, 0}, 8);
  auto* base = static_cast<std::uint8_t*>(m->dl_tensor.data);
  {
    Tensor t = Tensor::from_dlpack(m);
    EXPECT_EQ(t.data_ptr(), base + 8);
    EXPECT_EQ(t.strides(), (Shape{3, 1}));
    EXPECT_FALSE(t.is_contiguous());
    Tensor c = t.contiguous();
    // Elements at byte offsets 8, 12, 20, 24: each int32 is bytes (k, k+1, k+2, k+3).
    const auto* v = c.data_ptr<std::uint8_t>();
    const std::uint8_t expected[16] = {8,  9,  10, 11, 12, 13, 14, 15,
                                       20, 21, 22, 23, 24, 25, 26, 27};
    EXPECT_EQ(std::memcmp(v, expected, 16), 0);
  }
  EXPECT_EQ(calls, 1);
}

TEST(DLPack, DeviceMapping) {
  struct Case {
    DLDeviceType type;
    int id;
    Device expected;
  };
  const Case cases[] = {
      {kDLCPU, 0, Device::cpu()},
      {kDLCUDAHost, 0, Device::cpu()},
      {kDLCUDA, 1, Device::cuda(1)},
      {kDLCUDAManaged, 2, Device::cuda(2)},
  };
  for (const Case& c : cases) {
    int calls = 0;
    {
      Tensor t = Tensor::from_dlpack(
          make_producer(&calls, {4}, {}, DLDataType{2, 32, 1}, 16, DLDevice{c.type, c.id}));
      EXPECT_EQ(t.device(), c.expected) << c.type;
      // Export maps back to the canonical device type.
      DLManagedTensor* out = t.to_dlpack();
      EXPECT_EQ(out->dl_tensor.device.device_type, c.expected.is_cpu() ? kDLCPU : kDLCUDA);
      EXPECT_EQ(out->dl_tensor.device.device_id, c.expected.is_cpu() ? 0 : c.id);
      out->deleter(out);
    }
    EXPECT_EQ(calls, 1) << c.type;
  }
}

TEST(DLPack, ZeroDimAndEmptyTensors) {
  int calls = 0;
  {
    Tensor s = Tensor::from_dlpack(make_producer(&calls, {}, {}, DLDataType{2, 64, 1}, 8));
    EXPECT_EQ(s.dim(), 0);
    EXPECT_EQ(s.numel(), 1);
    DLManagedTensor* out = s.to_dlpack();
    EXPECT_EQ(out->dl_tensor.ndim, 0);
    out->deleter(out);
    // torch exports empty tensors with a NULL data pointer.
    Tensor e = Tensor::from_dlpack(make_producer(&calls, {0, 3}, {}, DLDataType{2, 32, 1}, 0));
    EXPECT_EQ(e.numel(), 0);
    EXPECT_EQ(e.data_ptr(), nullptr);
  }
  EXPECT_EQ(calls, 2);
}

TEST(DLPack, NullDeleterIsAccepted) {
  float data[2] = {1, 2};
  std::int64_t shape[1] = {2};
  DLManagedTensor m{};
  m.dl_tensor = DLTensor{data, DLDevice{kDLCPU, 0}, 1, DLDataType{2, 32, 1}, shape, nullptr, 0};
  {
    Tensor t = Tensor::from_dlpack(&m);
    EXPECT_EQ(t.data_ptr<float>()[1], 2.0f);
  }
}

TEST(DLPack, ExportedTensorKeepsStorageUntilDeleter) {
  int calls = 0;
  float memory[4] = {1, 2, 3, 4};
  DLManagedTensor* m;
  {
    Tensor t =
        Tensor::from_blob(memory, {4}, DType::Float32, Device::cpu(), [&](void*) { ++calls; });
    m = t.to_dlpack();
  }
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[3], 4.0f);
  m->deleter(m);
  EXPECT_EQ(calls, 1);
}

TEST(DLPack, RejectedInputsThrowAndLeaveOwnershipWithTheCaller) {
  expect_invalid([] { Tensor::from_dlpack(nullptr); }, "null DLManagedTensor");
  struct Bad {
    const char* needle;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    DLDataType dtype;
    DLDevice device;
  };
  const Bad bad[] = {
      {"code=5", {2}, {}, DLDataType{5, 64, 1}, {kDLCPU, 0}},           // complex64
      {"lanes=4", {2}, {}, DLDataType{2, 32, 4}, {kDLCPU, 0}},          // float4 vector
      {"code=1, bits=16", {2}, {}, DLDataType{1, 16, 1}, {kDLCPU, 0}},  // uint16
      {"device type 4", {2}, {}, DLDataType{2, 32, 1}, {kDLOpenCL, 0}},
      {"device type 10", {2}, {}, DLDataType{2, 32, 1}, {kDLROCM, 0}},
      {"negative size -2", {-2}, {}, DLDataType{2, 32, 1}, {kDLCPU, 0}},
      {"negative stride -1", {2}, {-1}, DLDataType{2, 32, 1}, {kDLCPU, 0}},
      {"invalid CUDA device id -1", {2}, {}, DLDataType{2, 32, 1}, {kDLCUDA, -1}},
  };
  for (const Bad& b : bad) {
    int calls = 0;
    DLManagedTensor* m = make_producer(&calls, b.shape, b.strides, b.dtype, 64, b.device);
    expect_invalid([&] { Tensor::from_dlpack(m); }, b.needle);
    EXPECT_EQ(calls, 0) << b.needle;  // not consumed: the caller still owns it
    m->deleter(m);
    EXPECT_EQ(calls, 1);
  }
  // Structural problems: negative ndim, NULL shape, NULL data with elements.
  int calls = 0;
  DLManagedTensor* m = make_producer(&calls, {2}, {}, DLDataType{2, 32, 1}, 8);
  m->dl_tensor.ndim = -1;
  expect_invalid([&] { Tensor::from_dlpack(m); }, "negative ndim");
  m->dl_tensor.ndim = 1;
  m->dl_tensor.shape = nullptr;
  expect_invalid([&] { Tensor::from_dlpack(m); }, "null shape");
  m->dl_tensor.shape = static_cast<Producer*>(m->manager_ctx)->shape.data();
  m->dl_tensor.data = nullptr;
  expect_invalid([&] { Tensor::from_dlpack(m); }, "null data pointer");
  EXPECT_EQ(calls, 0);
  m->deleter(m);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace groupcoord
