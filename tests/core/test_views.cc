// Views (movedim, narrow, reshape) and copies (contiguous, clone, copy_from) against element
// orders worked out by hand or by plain index arithmetic in the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace {

/// A compact float32 tensor holding 0, 1, 2, ... in row-major order.
Tensor iota(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  float* data = t.data_ptr<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) data[i] = static_cast<float>(i);
  return t;
}

/// The elements of a compact float32 tensor in memory order.
std::vector<float> values(const Tensor& t) {
  EXPECT_TRUE(t.is_contiguous());
  const float* data = t.data_ptr<float>();
  return std::vector<float>(data, data + t.numel());
}

/// Element [i][j] of a 2-d float tensor, addressed through its strides by hand.
float at(const Tensor& t, std::int64_t i, std::int64_t j) {
  return t.data_ptr<float>()[i * t.stride(0) + j * t.stride(1)];
}

std::ptrdiff_t elements_between(const Tensor& a, const Tensor& b) {
  return static_cast<const float*>(b.data_ptr()) - static_cast<const float*>(a.data_ptr());
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

TEST(Views, TransposeOfTwoByThree) {
  // [[0 1 2], [3 4 5]] transposed is [[0 3], [1 4], [2 5]].
  Tensor t = iota({2, 3});
  Tensor tt = t.movedim(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_EQ(tt.strides(), (Shape{1, 3}));
  EXPECT_EQ(tt.data_ptr(), t.data_ptr());
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(at(tt, 2, 1), 5.0f);
  Tensor c = tt.contiguous();
  EXPECT_NE(c.data_ptr(), t.data_ptr());
  EXPECT_EQ(c.strides(), (Shape{2, 1}));
  EXPECT_EQ(values(c), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Views, MovedimOfThreeDims) {
  // movedim(0, -1) on [2, 3, 4]: result[j][k][i] = i*12 + j*4 + k, shape [3, 4, 2].
  Tensor t = iota({2, 3, 4});
  Tensor m = t.movedim(0, -1);
  EXPECT_EQ(m.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(m.strides(), (Shape{4, 1, 12}));
  std::vector<float> expected;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i) expected.push_back(static_cast<float>(i * 12 + j * 4 + k));
  EXPECT_EQ(values(m.contiguous()), expected);
  // Hand-written start of the same order: [0, 12, 1, 13, 2, 14, 3, 15, 4, 16, ...].
  EXPECT_EQ(std::vector<float>(expected.begin(), expected.begin() + 6),
            (std::vector<float>{0, 12, 1, 13, 2, 14}));

  // movedim(2, 0): result[k][i][j] = i*12 + j*4 + k, shape [4, 2, 3].
  Tensor m2 = t.movedim(2, 0);
  EXPECT_EQ(m2.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(m2.strides(), (Shape{1, 12, 4}));
  std::vector<float> expected2;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) expected2.push_back(static_cast<float>(i * 12 + j * 4 + k));
  EXPECT_EQ(values(m2.contiguous()), expected2);

  // Moving a dim to where it is is the identity; moving back undoes it.
  EXPECT_EQ(t.movedim(1, 1).strides(), t.strides());
  EXPECT_EQ(m.movedim(-1, 0).strides(), t.strides());
  EXPECT_TRUE(m.movedim(2, 0).is_contiguous());
}

TEST(Views, MovedimBadDims) {
  Tensor t = iota({2, 3});
  expect_invalid([&] { t.movedim(2, 0); }, "dim 2");
  expect_invalid([&] { t.movedim(0, -3); }, "dim -3");
}

TEST(Views, NarrowColumnsAndRows) {
  // 4x5 iota, columns 1..3: rows [1 2 3], [6 7 8], [11 12 13], [16 17 18].
  Tensor t = iota({4, 5});
  Tensor cols = t.narrow(1, 1, 3);
  EXPECT_EQ(cols.shape(), (Shape{4, 3}));
  EXPECT_EQ(cols.strides(), (Shape{5, 1}));
  EXPECT_EQ(cols.storage_offset(), 1);
  EXPECT_EQ(elements_between(t, cols), 1);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(values(cols.contiguous()),
            (std::vector<float>{1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18}));

  // Rows 1..2 are one compact block starting at element 5.
  Tensor rows = t.narrow(0, 1, 2);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(elements_between(t, rows), 5);
  EXPECT_EQ(rows.contiguous().data_ptr(), rows.data_ptr());  // no copy
  EXPECT_EQ(values(rows), (std::vector<float>{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));

  // Negative start counts from the end; narrowing a narrowed view composes offsets.
  Tensor last = t.narrow(-1, -2, 2);
  EXPECT_EQ(elements_between(t, last), 3);
  Tensor inner = cols.narrow(0, 2, 2).narrow(1, 1, 1);
  EXPECT_EQ(elements_between(t, inner), 12);
  EXPECT_EQ(values(inner.contiguous()), (std::vector<float>{12, 17}));
  // Empty narrow is fine.
  EXPECT_EQ(t.narrow(0, 4, 0).numel(), 0);
}

TEST(Views, NarrowOutOfRangeThrows) {
  Tensor t = iota({4, 5});
  expect_invalid([&] { t.narrow(2, 0, 1); }, "dim 2");
  expect_invalid([&] { t.narrow(1, 6, 0); }, "start 6");
  expect_invalid([&] { t.narrow(1, -6, 1); }, "start -6");
  expect_invalid([&] { t.narrow(1, 3, 3); }, "length 3");
  expect_invalid([&] { t.narrow(0, 0, -1); }, "length -1");
}

TEST(Views, ReshapeOfCompactIsAView) {
  Tensor t = iota({2, 3, 4});
  Tensor r = t.reshape({4, -1});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  EXPECT_EQ(r.strides(), (Shape{6, 1}));
  EXPECT_EQ(r.data_ptr(), t.data_ptr());
  EXPECT_EQ(t.reshape({24}).data_ptr(), t.data_ptr());
  EXPECT_EQ(t.reshape({-1}).shape(), (Shape{24}));
  EXPECT_EQ(t.reshape({1, 2, 1, 12, 1}).strides(), (Shape{24, 12, 12, 1, 1}));
  // A narrowed block of rows is still compact: reshape keeps the offset.
  Tensor rows = iota({4, 5}).narrow(0, 1, 2);
  Tensor flat = rows.reshape({10});
  EXPECT_EQ(flat.data_ptr(), rows.data_ptr());
  EXPECT_EQ(values(flat), (std::vector<float>{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));
}

TEST(Views, ReshapeOfTransposeCopies) {
  Tensor t = iota({2, 3});
  Tensor flat = t.movedim(0, 1).reshape({6});
  EXPECT_NE(flat.data_ptr(), t.data_ptr());
  EXPECT_EQ(values(flat), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // The copy is independent of the original.
  t.data_ptr<float>()[0] = 100;
  EXPECT_EQ(flat.data_ptr<float>()[0], 0.0f);
}

TEST(Views, ReshapeMergesOnlyContiguousRuns) {
  // [2,3,4] moved to [3,4,2] has strides [4,1,12]: dims 0 and 1 form one run (4 == 4*1), so
  // [12, 2] is a view with strides [1, 12]; [3, 8] splits the run differently and must copy.
  Tensor t = iota({2, 3, 4});
  Tensor m = t.movedim(0, 2);
  Tensor v = m.reshape({12, 2});
  EXPECT_EQ(v.data_ptr(), t.data_ptr());
  EXPECT_EQ(v.strides(), (Shape{1, 12}));
  EXPECT_EQ(at(v, 5, 1), 17.0f);  // m[1][1][1] = 12 + 4 + 1
  // Splitting a run is a view as well: [3,4,2] -> [3,2,2,2] keeps strides [4,2,1,12].
  Tensor split = m.reshape({3, 2, 2, 2});
  EXPECT_EQ(split.data_ptr(), t.data_ptr());
  EXPECT_EQ(split.strides(), (Shape{4, 2, 1, 12}));
  Tensor c = m.reshape({3, 8});
  EXPECT_NE(c.data_ptr(), t.data_ptr());
  std::vector<float> expected;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i) expected.push_back(static_cast<float>(i * 12 + j * 4 + k));
  EXPECT_EQ(values(c), expected);
}

TEST(Views, ReshapeOfSizeOneDimsIgnoresTheirStrides) {
  // A [3,1,4] tensor whose size-1 dim has an odd stride is still compact.
  float memory[12];
  for (int i = 0; i < 12; ++i) memory[i] = static_cast<float>(i);
  Tensor t = Tensor::from_blob(memory, {3, 1, 4}, {4, 99, 1}, DType::Float32);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().data_ptr(), static_cast<void*>(memory));
  Tensor r = t.reshape({12});
  EXPECT_EQ(r.data_ptr(), static_cast<void*>(memory));
  EXPECT_EQ(r.strides(), (Shape{1}));
}

TEST(Views, ReshapeScalarsAndEmpties) {
  Tensor s = iota({});
  EXPECT_EQ(s.reshape({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(s.reshape({-1}).shape(), (Shape{1}));
  EXPECT_EQ(iota({1}).reshape({}).dim(), 0);
  Tensor e = iota({0, 4});
  EXPECT_EQ(e.reshape({2, 0, 3}).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(e.reshape({4, 0}).strides(), (Shape{1, 1}));
}

TEST(Views, ReshapeBadShapesThrow) {
  Tensor t = iota({2, 3});
  expect_invalid([&] { t.reshape({4}); }, "[4]");
  expect_invalid([&] { t.reshape({-1, -1}); }, "only one dimension");
  expect_invalid([&] { t.reshape({-1, 4}); }, "6 elements");
  expect_invalid([&] { t.reshape({-2, -3}); }, "-2");
  expect_invalid([&] { iota({0}).reshape({-1, 0}); }, "0 elements");
}

TEST(Copies, CopyFromAnyStridesBothSides) {
  // dst is a transposed view into a 3x2 buffer; src is a column slice of a 2x4 iota.
  Tensor src = iota({2, 4}).narrow(1, 1, 3);  // [[1 2 3], [5 6 7]]
  Tensor buffer = Tensor::empty({3, 2}, DType::Float32);
  for (int i = 0; i < 6; ++i) buffer.data_ptr<float>()[i] = -1;
  Tensor dst = buffer.movedim(0, 1);  // [2, 3] view, strides [1, 2]
  dst.copy_from(src);
  // buffer[j][i] = src[i][j]: [[1 5], [2 6], [3 7]].
  EXPECT_EQ(values(buffer), (std::vector<float>{1, 5, 2, 6, 3, 7}));
}

TEST(Copies, CopyFromIntoNarrowedRegionLeavesTheRestAlone) {
  Tensor big = iota({3, 4});
  Tensor patch = Tensor::empty({3, 2}, DType::Float32);
  for (int i = 0; i < 6; ++i) patch.data_ptr<float>()[i] = 100.0f + i;
  big.narrow(1, 1, 2).copy_from(patch);
  EXPECT_EQ(values(big), (std::vector<float>{0, 100, 101, 3, 4, 102, 103, 7, 8, 104, 105, 11}));
}

TEST(Copies, TransposeCopiesForEveryElementSize) {
  // 2x3 of each element size, transposed by contiguous(): byte patterns by hand.
  {
    std::uint8_t m[6] = {10, 11, 12, 20, 21, 22};
    Tensor t = Tensor::from_blob(m, {2, 3}, DType::Int8).movedim(0, 1).contiguous();
    const std::uint8_t* c = t.data_ptr<std::uint8_t>();
    EXPECT_EQ(std::vector<int>(c, c + 6), (std::vector<int>{10, 20, 11, 21, 12, 22}));
  }
  {
    std::uint16_t m[6] = {0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600};
    Tensor t = Tensor::from_blob(m, {2, 3}, DType::Float16).movedim(0, 1).contiguous();
    const std::uint16_t* c = t.data_ptr<std::uint16_t>();
    EXPECT_EQ(std::vector<int>(c, c + 6),
              (std::vector<int>{0x3C00, 0x4400, 0x4000, 0x4500, 0x4200, 0x4600}));
  }
  {
    double m[6] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5};
    Tensor t = Tensor::from_blob(m, {2, 3}, DType::Float64).movedim(0, 1).contiguous();
    const double* c = t.data_ptr<double>();
    EXPECT_EQ(std::vector<double>(c, c + 6), (std::vector<double>{0.5, 3.5, 1.5, 4.5, 2.5, 5.5}));
  }
}

TEST(Copies, CloneOwnsItsMemory) {
  Tensor t = iota({2, 2});
  Tensor c = t.clone();
  EXPECT_NE(c.data_ptr(), t.data_ptr());
  EXPECT_TRUE(c.is_contiguous());
  t.data_ptr<float>()[3] = -5;
  EXPECT_EQ(values(c), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(values(iota({}).clone()), (std::vector<float>{0}));
}

TEST(Copies, CopyFromMismatchThrows) {
  Tensor a = iota({2, 3});
  expect_invalid([&] { a.copy_from(iota({3, 2})); }, "shape mismatch");
  expect_invalid([&] { a.copy_from(Tensor::empty({2, 3}, DType::Int32)); }, "dtype mismatch");
}

}  // namespace
}  // namespace groupcoord
