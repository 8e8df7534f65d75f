#include "coordinator/object_protocol.h"

#include <cstring>
#include <utility>

#include "coordinator/retained_work.h"
#include "core/host_copy.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

// Reads an int64 at `offset` of `packed`, advancing it; DistributedError past the end.
std::int64_t read_int64(const Bytes& packed, std::size_t& offset, const std::string& label) {
  if (offset > packed.size() || packed.size() - offset < sizeof(std::int64_t)) {
    GC_THROW(DistributedError, label, ": malformed object list (", packed.size(), " bytes)");
  }
  std::int64_t value = 0;
  std::memcpy(&value, packed.data() + offset, sizeof(value));
  offset += sizeof(value);
  return value;
}

void append_int64(Bytes& out, std::int64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// The size word announcing a failure text of text.size() bytes.
std::int64_t failure_size_word(const Bytes& text) {
  return -1 - static_cast<std::int64_t>(text.size());
}

// The length of the failure text a negative size word announces; DistributedError when it is
// beyond what a source sends.
std::size_t failure_text_length(std::int64_t size_word, int peer, const comm::OpLabel& label) {
  const std::uint64_t length = static_cast<std::uint64_t>(-(size_word + 1));
  if (length > kMaxFailureTextBytes) {
    GC_THROW(DistributedError, label, ": peer ", peer, " announced size ", size_word);
  }
  return static_cast<std::size_t>(length);
}

// Non-blocking send of a size word and its payload; the Work owns copies of both.
std::shared_ptr<Work> isend_sized(ProcessGroup& group, std::int64_t size_word, Bytes payload,
                                  int dst) {
  auto size = std::make_shared<std::int64_t>(size_word);
  auto bytes = std::make_shared<const Bytes>(std::move(payload));
  std::vector<std::shared_ptr<Work>> works;
  works.push_back(group.isend(size.get(), sizeof(std::int64_t), dst, kObjectTag));
  try {
    works.push_back(group.isend(bytes->data(), bytes->size(), dst, kObjectTag));
  } catch (...) {
    // The size is on its way: keep its buffer alive (the orphan list takes it) before rethrowing.
    RetainedWork sent_size(std::move(works), KeepAlive{size});
    throw;
  }
  return std::make_shared<RetainedWork>(std::move(works), KeepAlive{size, bytes});
}

}  // namespace

std::string cut_failure_text(const std::string& why) {
  if (why.size() <= kMaxFailureTextBytes) return why;
  std::size_t end = kMaxFailureTextBytes;
  // Back off over UTF-8 continuation bytes (10xxxxxx) so that no character is split: receivers
  // in Python decode the text as UTF-8.
  while (end > 0 && (static_cast<unsigned char>(why[end]) & 0xC0) == 0x80) --end;
  return why.substr(0, end);
}

void throw_source_failure(const comm::OpLabel& label, int src, const std::string& why) {
  throw SourceFailedError(detail::concat(__FILE__, ":", __LINE__, ": ", label, ": src ", src,
                                         " failed instead of sending its object: ", why),
                          src, why);
}

void send_object_bytes(ProcessGroup& group, const Bytes& obj, int dst) {
  const std::int64_t size = static_cast<std::int64_t>(obj.size());
  group.send(&size, sizeof(size), dst, kObjectTag);
  group.send(obj.data(), obj.size(), dst, kObjectTag);
}

Bytes recv_object_bytes(ProcessGroup& group, int src, const comm::OpLabel& label) {
  std::int64_t size = -1;
  group.recv(&size, sizeof(size), src, kObjectTag);
  const bool failed = size < 0;
  const std::size_t length =
      failed ? failure_text_length(size, src, label) : static_cast<std::size_t>(size);
  Bytes obj(length, '\0');
  group.recv(obj.data(), obj.size(), src, kObjectTag);
  if (failed) throw_source_failure(label, src, obj);
  return obj;
}

std::shared_ptr<Work> isend_object_bytes(ProcessGroup& group, Bytes obj, int dst) {
  const auto size = static_cast<std::int64_t>(obj.size());
  return isend_sized(group, size, std::move(obj), dst);
}

std::shared_ptr<Work> isend_object_failure(ProcessGroup& group, const std::string& why, int dst) {
  Bytes text = cut_failure_text(why);
  const std::int64_t size = failure_size_word(text);
  return isend_sized(group, size, std::move(text), dst);
}

std::optional<Bytes> broadcast_object_bytes(ProcessGroup& group, const Bytes* obj, int src,
                                            const comm::OpLabel& label) {
  const bool is_src = group.rank() == src;
  GC_ASSERT(is_src == (obj != nullptr), label,
            ": broadcast_object_bytes: the object goes with src");
  std::int64_t size = is_src ? static_cast<std::int64_t>(obj->size()) : 0;
  group.broadcast(&size, 1, DType::Int64, src);
  if (is_src) {
    // Sent from the caller's bytes, not from a copy: a broadcast never writes its root's buffer
    // (the shared-memory paths copy out of it or let the others read it; Gloo's is given only an
    // output, which on the root it sends from), so the const object stays as it was.
    if (size > 0) group.broadcast(const_cast<char*>(obj->data()), obj->size(), DType::UInt8, src);
    return std::nullopt;
  }
  const bool failed = size < 0;
  const std::size_t length =
      failed ? failure_text_length(size, src, label) : static_cast<std::size_t>(size);
  Bytes buffer(length, '\0');
  if (length > 0) group.broadcast(buffer.data(), buffer.size(), DType::UInt8, src);
  if (failed) throw_source_failure(label, src, buffer);
  return buffer;
}

void broadcast_object_failure(ProcessGroup& group, const std::string& why, int src) {
  Bytes text = cut_failure_text(why);
  std::int64_t size = failure_size_word(text);
  group.broadcast(&size, 1, DType::Int64, src);
  if (!text.empty()) group.broadcast(text.data(), text.size(), DType::UInt8, src);
}

Bytes pack_object_list(const std::vector<Bytes>& objects) {
  std::size_t total = sizeof(std::int64_t) * (objects.size() + 1);
  for (const Bytes& o : objects) total += o.size();
  Bytes packed;
  packed.reserve(total);
  append_int64(packed, static_cast<std::int64_t>(objects.size()));
  for (const Bytes& o : objects) append_int64(packed, static_cast<std::int64_t>(o.size()));
  for (const Bytes& o : objects) packed += o;
  return packed;
}

std::vector<Bytes> unpack_object_list(const Bytes& packed, const std::string& label) {
  std::size_t offset = 0;
  const std::int64_t count = read_int64(packed, offset, label);
  if (count < 0 || static_cast<std::uint64_t>(count) > packed.size() / sizeof(std::int64_t)) {
    GC_THROW(DistributedError, label, ": malformed object list (count ", count, ")");
  }
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(count));
  for (auto& s : sizes) s = read_int64(packed, offset, label);
  std::vector<Bytes> objects;
  objects.reserve(sizes.size());
  for (std::int64_t s : sizes) {
    if (s < 0 || static_cast<std::uint64_t>(s) > packed.size() - offset) {
      GC_THROW(DistributedError, label, ": malformed object list (size ", s, ")");
    }
    objects.emplace_back(packed, offset, static_cast<std::size_t>(s));
    offset += static_cast<std::size_t>(s);
  }
  if (offset != packed.size()) {
    GC_THROW(DistributedError, label, ": malformed object list (", packed.size() - offset,
             " trailing bytes)");
  }
  return objects;
}

}  // namespace coordinator_detail
}  // namespace groupcoord
