#include "coordinator/tensor_metadata.h"

#include <cstring>
#include <set>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

constexpr std::uint32_t kMagic = 0x44544347;  // "GCTD" in little-endian bytes
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kMaxDims = 64;  // far above any real tensor; bounds a corrupt ndim

template <typename T>
void put(Bytes& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void put_string(Bytes& out, const std::string& text) {
  put<std::uint64_t>(out, text.size());
  out += text;
}

// Bounds-checked reader over an encoded list; every overrun is a DistributedError.
class Reader {
 public:
  Reader(const Bytes& data, const std::string& label) : data_(data), label_(label) {}

  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  std::string get_string(const char* what) {
    const auto length = get<std::uint64_t>(what);
    need(length, what);
    std::string text(data_, offset_, static_cast<std::size_t>(length));
    offset_ += static_cast<std::size_t>(length);
    return text;
  }

  [[noreturn]] void fail(const std::string& why) const {
    GC_THROW(DistributedError, label_, ": malformed tensor-dict metadata (", data_.size(),
             " bytes) from the peer: ", why);
  }

  bool at_end() const { return offset_ == data_.size(); }

 private:
  void need(std::uint64_t n, const char* what) const {
    if (n > data_.size() - offset_) fail(std::string("truncated ") + what);
  }

  const Bytes& data_;
  const std::string& label_;
  std::size_t offset_ = 0;
};

MetadataEntry read_entry(Reader& in) {
  MetadataEntry entry;
  entry.key = in.get_string("key");
  const auto kind = in.get<std::uint8_t>("kind");
  if (kind == static_cast<std::uint8_t>(MetadataEntry::Kind::Bytes)) {
    entry.kind = MetadataEntry::Kind::Bytes;
    entry.value = in.get_string("bytes value");
    return entry;
  }
  if (kind != static_cast<std::uint8_t>(MetadataEntry::Kind::Tensor)) {
    in.fail("unknown kind " + std::to_string(kind) + " for key '" + entry.key + "'");
  }
  entry.kind = MetadataEntry::Kind::Tensor;
  const auto dtype = in.get<std::uint8_t>("dtype");
  if (dtype >= kNumDTypes) in.fail("unknown dtype " + std::to_string(dtype));
  entry.dtype = static_cast<DType>(dtype);
  const auto device = in.get<std::uint8_t>("device");
  if (device > static_cast<std::uint8_t>(DeviceType::CUDA)) {
    in.fail("unknown device type " + std::to_string(device));
  }
  entry.device_type = static_cast<DeviceType>(device);
  const auto ndim = in.get<std::uint32_t>("ndim");
  if (ndim > kMaxDims) in.fail("ndim " + std::to_string(ndim));
  entry.shape.resize(ndim);
  for (auto& size : entry.shape) {
    size = in.get<std::int64_t>("shape");
    if (size < 0) in.fail("negative size " + std::to_string(size));
  }
  return entry;
}

}  // namespace

SplitTensorDict split_tensor_dict(const TensorDict& dict, const std::string& label) {
  SplitTensorDict split;
  std::set<std::string> keys;
  for (const auto& [key, value] : dict) {
    GC_CHECK(keys.insert(key).second, label, ": key '", key, "' appears twice in the tensor dict");
    MetadataEntry entry;
    entry.key = key;
    if (const Tensor* tensor = std::get_if<Tensor>(&value)) {
      GC_CHECK(tensor->defined(), label, ": tensor '", key, "' is undefined");
      entry.kind = MetadataEntry::Kind::Tensor;
      entry.dtype = tensor->dtype();
      entry.shape = tensor->shape();
      entry.device_type = tensor->device().type;
      split.tensors.emplace_back(key, *tensor);
    } else {
      entry.kind = MetadataEntry::Kind::Bytes;
      entry.value = std::get<Bytes>(value);
    }
    split.metadata.push_back(std::move(entry));
  }
  return split;
}

Bytes encode_metadata(const std::vector<MetadataEntry>& metadata) {
  Bytes out;
  put(out, kMagic);
  put(out, kVersion);
  put<std::uint64_t>(out, metadata.size());
  for (const MetadataEntry& e : metadata) {
    put_string(out, e.key);
    put(out, static_cast<std::uint8_t>(e.kind));
    if (e.kind == MetadataEntry::Kind::Bytes) {
      put_string(out, e.value);
      continue;
    }
    put(out, static_cast<std::uint8_t>(e.dtype));
    put(out, static_cast<std::uint8_t>(e.device_type));
    put(out, static_cast<std::uint32_t>(e.shape.size()));
    for (std::int64_t size : e.shape) put(out, size);
  }
  return out;
}

std::vector<MetadataEntry> decode_metadata(const Bytes& encoded, const std::string& label) {
  Reader in(encoded, label);
  if (in.get<std::uint32_t>("magic") != kMagic) in.fail("bad magic");
  const auto version = in.get<std::uint32_t>("version");
  if (version != kVersion) in.fail("unsupported version " + std::to_string(version));
  const auto count = in.get<std::uint64_t>("count");
  // Each entry takes at least 9 bytes: a count beyond that is corrupt (and must not be reserved).
  if (count > encoded.size() / 9) in.fail("count " + std::to_string(count));
  std::vector<MetadataEntry> metadata;
  metadata.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) metadata.push_back(read_entry(in));
  if (!in.at_end()) in.fail("trailing bytes");
  return metadata;
}

}  // namespace coordinator_detail
}  // namespace groupcoord
