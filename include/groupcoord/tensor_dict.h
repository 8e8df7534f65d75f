// Tensor dictionaries: what vLLM's *_tensor_dict protocols move between ranks (activations plus
// metadata). Values are tensors or opaque bytes (Python pickles its non-tensor values into bytes).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/tensor.h"

namespace groupcoord {

/// A tensor or an opaque byte string.
using TensorDictValue = std::variant<Tensor, Bytes>;

/// Ordered (key, value) pairs; keys are unique. Order is preserved end to end.
using TensorDict = std::vector<std::pair<std::string, TensorDictValue>>;

/// The value under `key`, or nullptr.
inline const TensorDictValue* find_value(const TensorDict& dict, const std::string& key) {
  for (const auto& item : dict) {
    if (item.first == key) return &item.second;
  }
  return nullptr;
}

/// The tensor under `key`, or std::nullopt when absent or not a tensor.
inline std::optional<Tensor> find_tensor(const TensorDict& dict, const std::string& key) {
  const TensorDictValue* value = find_value(dict, key);
  if (value == nullptr || !std::holds_alternative<Tensor>(*value)) return std::nullopt;
  return std::get<Tensor>(*value);
}

/// Per-key override of the all_gather optimisation of send/recv_tensor_dict (vLLM's
/// all_gather_tensors): key -> use it or not.
using AllGatherTensors = std::vector<std::pair<std::string, bool>>;

}  // namespace groupcoord
