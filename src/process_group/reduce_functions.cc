#include "process_group/reduce_functions.h"

#include <gloo/math.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "groupcoord/check.h"
#include "groupcoord/half.h"

namespace groupcoord {

namespace {

/// Sum of two's-complement integers computed in the unsigned type, so overflow wraps.
template <typename T>
void wrapping_sum(void* out, const void* a, const void* b, std::size_t n) {
  using U = std::make_unsigned_t<T>;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    o[i] = static_cast<T>(static_cast<U>(static_cast<U>(x[i]) + static_cast<U>(y[i])));
  }
}

/// Gloo's kernels are overloaded (a two-operand form exists too); this picks the three-operand one.
using RawReduce = void (*)(void*, const void*, const void*, std::size_t);

template <typename T>
ReduceFunction native_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return &wrapping_sum<T>;
      return static_cast<RawReduce>(&gloo::sum<T>);
    case ReduceOp::Min:
      return static_cast<RawReduce>(&gloo::min<T>);
    case ReduceOp::Max:
      return static_cast<RawReduce>(&gloo::max<T>);
  }
  return nullptr;
}

/// A narrow floating format: its storage type and conversions through float.
template <typename Bits, float (*ToFloat)(Bits), Bits (*FromFloat)(float)>
struct NarrowFloat {
  using Storage = Bits;
  static float to_float(Bits bits) { return ToFloat(bits); }
  static Bits from_float(float value) { return FromFloat(value); }
};

using Half = NarrowFloat<std::uint16_t, &half_to_float, &float_to_half>;
using BFloat16 = NarrowFloat<std::uint16_t, &bfloat16_to_float, &float_to_bfloat16>;
using E4M3 = NarrowFloat<std::uint8_t, &float8_e4m3fn_to_float, &float_to_float8_e4m3fn>;
using E5M2 = NarrowFloat<std::uint8_t, &float8_e5m2_to_float, &float_to_float8_e5m2>;

template <typename F>
void narrow_sum(void* out, const void* a, const void* b, std::size_t n) {
  using S = typename F::Storage;
  auto* o = static_cast<S*>(out);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    o[i] = F::from_float(F::to_float(x[i]) + F::to_float(y[i]));
  }
}

/// Min (kMax = false) or max: copies the winning element's bits, so no rounding happens.
template <typename F, bool kMax>
void narrow_select(void* out, const void* a, const void* b, std::size_t n) {
  using S = typename F::Storage;
  auto* o = static_cast<S*>(out);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    const float fx = F::to_float(x[i]);
    const float fy = F::to_float(y[i]);
    const bool take_y = kMax ? fy > fx : fy < fx;
    o[i] = take_y ? y[i] : x[i];
  }
}

template <typename F>
ReduceFunction narrow_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return &narrow_sum<F>;
    case ReduceOp::Min:
      return &narrow_select<F, false>;
    case ReduceOp::Max:
      return &narrow_select<F, true>;
  }
  return nullptr;
}

/// Bool as bytes: any non-zero byte is true; results are 0 or 1.
template <bool kAnd>
void bool_reduce(void* out, const void* a, const void* b, std::size_t n) {
  auto* o = static_cast<std::uint8_t*>(out);
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    o[i] = kAnd ? (x[i] != 0 && y[i] != 0) : (x[i] != 0 || y[i] != 0);
  }
}

}  // namespace

ReduceFunction reduce_function(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::Float32:
      return native_function<float>(op);
    case DType::Float64:
      return native_function<double>(op);
    case DType::Int8:
      return native_function<std::int8_t>(op);
    case DType::UInt8:
      return native_function<std::uint8_t>(op);
    case DType::Int32:
      return native_function<std::int32_t>(op);
    case DType::Int64:
      return native_function<std::int64_t>(op);
    case DType::Float16:
      return narrow_function<Half>(op);
    case DType::BFloat16:
      return narrow_function<BFloat16>(op);
    case DType::Float8E4M3:
      return narrow_function<E4M3>(op);
    case DType::Float8E5M2:
      return narrow_function<E5M2>(op);
    case DType::Bool:
      return op == ReduceOp::Min ? ReduceFunction(&bool_reduce<true>)
                                 : ReduceFunction(&bool_reduce<false>);
  }
  GC_THROW(std::invalid_argument, "reduce_function: unknown dtype ", static_cast<int>(dtype));
}

}  // namespace groupcoord
