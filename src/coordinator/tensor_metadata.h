// The metadata list of vLLM's tensor-dict protocol: for each (key, value) of a TensorDict, either
// the tensor's description (dtype, shape, device type) or the Bytes value itself, in dict order.
// It travels as one object; the tensors follow it separately.
//
// Binary layout (host byte order: every rank of a job runs on the same architecture):
//   u32 magic "GCTD", u32 version, u64 count, then per entry:
//   u64 key length, key bytes, u8 kind (1 tensor, 2 bytes),
//     tensor: u8 dtype, u8 device type, u32 ndim, ndim x i64 sizes
//     bytes:  u64 length, the bytes
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/device.h"
#include "groupcoord/dtype.h"
#include "groupcoord/tensor.h"
#include "groupcoord/tensor_dict.h"

namespace groupcoord {
namespace coordinator_detail {

/// One entry of the metadata list.
struct MetadataEntry {
  /// What the value is.
  enum class Kind : std::uint8_t { Tensor = 1, Bytes = 2 };

  std::string key;
  Kind kind = Kind::Bytes;
  DType dtype = DType::Float32;              ///< Tensor only
  Shape shape;                               ///< Tensor only
  DeviceType device_type = DeviceType::CPU;  ///< Tensor only: the receiver uses its own device
  Bytes value;                               ///< Bytes only
};

/// A TensorDict taken apart: the metadata of every entry and the tensors, in dict order.
struct SplitTensorDict {
  std::vector<MetadataEntry> metadata;
  std::vector<std::pair<std::string, Tensor>> tensors;
};

/// vLLM's _split_tensor_dict. Throws std::invalid_argument naming `label` for a duplicate key or
/// an undefined tensor.
SplitTensorDict split_tensor_dict(const TensorDict& dict, const std::string& label);

/// Serializes the metadata list (layout in the file comment).
Bytes encode_metadata(const std::vector<MetadataEntry>& metadata);

/// Parses encode_metadata's output. Throws DistributedError naming `label` for malformed input
/// (it came from a peer).
std::vector<MetadataEntry> decode_metadata(const Bytes& encoded, const std::string& label);

}  // namespace coordinator_detail
}  // namespace groupcoord
