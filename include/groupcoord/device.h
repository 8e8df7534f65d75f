// Where a tensor's memory lives.
#pragma once

#include <string>

namespace groupcoord {

/// Kind of memory a Device names.
enum class DeviceType { CPU, CUDA };

/// A device: the CPU, or CUDA device `index` (an ordinal visible to this process).
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  /// The host.
  static Device cpu() { return Device{DeviceType::CPU, 0}; }
  /// CUDA device `index`.
  static Device cuda(int index) { return Device{DeviceType::CUDA, index}; }

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  /// "cpu" or "cuda:N".
  std::string str() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && (a.type == DeviceType::CPU || a.index == b.index);
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

}  // namespace groupcoord
