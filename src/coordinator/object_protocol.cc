#include "coordinator/object_protocol.h"

#include <cstring>
#include <utility>

#include "coordinator/retained_work.h"
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

}  // namespace

void send_object_bytes(ProcessGroup& group, const Bytes& obj, int dst) {
  const std::int64_t size = static_cast<std::int64_t>(obj.size());
  group.send(&size, sizeof(size), dst, kObjectTag);
  group.send(obj.data(), obj.size(), dst, kObjectTag);
}

Bytes recv_object_bytes(ProcessGroup& group, int src, const std::string& label) {
  std::int64_t size = -1;
  group.recv(&size, sizeof(size), src, kObjectTag);
  if (size < 0) GC_THROW(DistributedError, label, ": peer ", src, " announced size ", size);
  Bytes obj(static_cast<std::size_t>(size), '\0');
  group.recv(obj.data(), obj.size(), src, kObjectTag);
  return obj;
}

std::shared_ptr<Work> isend_object_bytes(ProcessGroup& group, Bytes obj, int dst) {
  auto size = std::make_shared<std::int64_t>(static_cast<std::int64_t>(obj.size()));
  auto payload = std::make_shared<const Bytes>(std::move(obj));
  std::vector<std::shared_ptr<Work>> works;
  works.push_back(group.isend(size.get(), sizeof(std::int64_t), dst, kObjectTag));
  try {
    works.push_back(group.isend(payload->data(), payload->size(), dst, kObjectTag));
  } catch (...) {
    // The size is on its way: keep its buffer alive (the orphan list takes it) before rethrowing.
    RetainedWork sent_size(std::move(works), KeepAlive{size});
    throw;
  }
  return std::make_shared<RetainedWork>(std::move(works), KeepAlive{size, payload});
}

Bytes broadcast_object_bytes(ProcessGroup& group, const std::optional<Bytes>& obj, int src) {
  const bool is_src = group.rank() == src;
  std::int64_t size = is_src ? static_cast<std::int64_t>(obj->size()) : 0;
  group.broadcast(&size, 1, DType::Int64, src);
  // The root's buffer is only read; a copy keeps the caller's const object untouched by API.
  Bytes buffer = is_src ? *obj : Bytes(static_cast<std::size_t>(size), '\0');
  if (size > 0) group.broadcast(buffer.data(), buffer.size(), DType::UInt8, src);
  return buffer;
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
