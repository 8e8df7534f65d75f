#include "shm/queue_handle.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "groupcoord/prefix_store.h"
#include "groupcoord/process_group.h"

namespace groupcoord {
namespace shm {

namespace {

constexpr std::uint64_t kHandleMagic = 0x4c444e48514d4347ULL;  // "GCMQHNDL"

/// Copies `text` into a fixed buffer, truncating, always NUL-terminated.
template <std::size_t N>
void set_text(char (&out)[N], const std::string& text) {
  const std::size_t n = text.size() < N - 1 ? text.size() : N - 1;
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

/// FNV-1a: a stable 64-bit hash, the same in every process.
std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

QueueHandle failed_handle(const std::string& error) {
  QueueHandle handle{};
  handle.magic = kHandleMagic;
  handle.status = kAttachFailed;
  set_text(handle.error, error);
  return handle;
}

QueueHandle ok_handle(const std::string& name, std::size_t n_reader, std::size_t max_chunk_bytes,
                      std::size_t max_chunks, std::uint64_t token) {
  QueueHandle handle{};
  handle.magic = kHandleMagic;
  handle.status = kAttachOk;
  handle.n_reader = static_cast<std::uint32_t>(n_reader);
  handle.max_chunk_bytes = max_chunk_bytes;
  handle.max_chunks = max_chunks;
  handle.token = token;
  set_text(handle.name, name);
  return handle;
}

QueueHandle external_handle(std::size_t size) {
  QueueHandle handle{};
  handle.magic = kHandleMagic;
  handle.status = kAttachOk;
  handle.external = kExternalHandle;
  handle.external_bytes = size;
  return handle;
}

QueueHandle invalid_external_handle(const std::string& error) {
  QueueHandle handle = failed_handle(error);
  handle.external = kExternalInvalid;
  return handle;
}

bool handle_is_valid(const QueueHandle& handle) {
  return handle.magic == kHandleMagic &&
         std::memchr(handle.name, '\0', sizeof handle.name) != nullptr &&
         std::memchr(handle.error, '\0', sizeof handle.error) != nullptr;
}

std::string make_segment_name(const ProcessGroup& group) {
  std::string scope = group.name();
  if (auto* prefixed = dynamic_cast<const PrefixStore*>(group.store().get())) {
    scope += "|" + prefixed->prefix();
  }
  return make_segment_name(scope);
}

std::string make_segment_name(const std::string& scope) {
  char stem[16];
  std::snprintf(stem, sizeof stem, "/gcmq-%08x", static_cast<unsigned>(fnv1a(scope) & 0xffffffffu));
  return unique_segment_name(stem);
}

}  // namespace shm
}  // namespace groupcoord
