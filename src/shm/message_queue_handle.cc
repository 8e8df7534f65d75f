// MessageQueue::Handle: validation and its byte form.
//
// Layout of to_bytes(), every integer little-endian, no padding:
//   u64 magic "GCMQHDL1" | u32 version | u32 n_reader | u64 max_chunk_bytes | u64 max_chunks |
//   u64 token | i32 writer_pid | u32 name length | name bytes | i32 reader_ranks[n_reader]
// Fixed-width fields written byte by byte, so that the bytes mean the same in every process
// whatever its compiler or architecture; the exact total size is checked on parsing.
#include <algorithm>
#include <cstring>
#include <set>

#include "groupcoord/check.h"
#include "groupcoord/message_queue.h"
#include "shm/chunk_frame.h"
#include "shm/ring_buffer.h"

namespace groupcoord {

namespace {

constexpr std::uint64_t kHandleBytesMagic = 0x314c4448514d4347ULL;  // "GCMQHDL1" little-endian
constexpr std::uint32_t kHandleBytesVersion = 1;
constexpr std::size_t kFixedBytes = 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4;
// POSIX names are at most NAME_MAX (255) bytes; a reader count past this is garbage.
constexpr std::size_t kMaxNameBytes = 255;
constexpr std::size_t kMaxReaders = std::size_t{1} << 20;

template <typename T>
void put(Bytes& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff));
  }
}

/// Reads fixed-width little-endian integers from a byte string, never past its end.
class Reader {
 public:
  explicit Reader(const Bytes& bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      value |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += sizeof(T);
    return static_cast<T>(value);
  }
  std::string text(std::size_t n) {
    need(n);
    std::string out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::size_t left() const { return bytes_.size() - pos_; }

 private:
  void need(std::size_t n) const {
    GC_CHECK(n <= bytes_.size() - pos_, "MessageQueue.Handle.from_bytes: ", bytes_.size(),
             " bytes are too short for a handle");
  }
  const Bytes& bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

void MessageQueue::Handle::validate(const std::string& what) const {
  GC_CHECK(!reader_ranks.empty(), what, ": the handle lists no readers");
  GC_CHECK(reader_ranks.size() <= kMaxReaders, what, ": the handle lists ", reader_ranks.size(),
           " readers");
  std::set<int> seen;
  for (int rank : reader_ranks) {
    GC_CHECK(rank >= 0, what, ": reader rank ", rank, " is negative");
    GC_CHECK(seen.insert(rank).second, what, ": reader rank ", rank, " appears twice");
  }
  GC_CHECK(shm_name.size() > 1 && shm_name.size() <= kMaxNameBytes && shm_name[0] == '/' &&
               shm_name.find('/', 1) == std::string::npos &&
               shm_name.find('\0') == std::string::npos,
           what, ": '", shm_name, "' is not a shared-memory segment name");
  GC_CHECK(max_chunks > 0, what, ": max_chunks must be positive, got 0");
  GC_CHECK(max_chunk_bytes > shm::kChunkHeaderBytes, what, ": max_chunk_bytes must exceed the ",
           shm::kChunkHeaderBytes, "-byte chunk header, got ", max_chunk_bytes);
  try {
    shm::RingLayout::compute(reader_ranks.size(), max_chunk_bytes, max_chunks);
  } catch (const std::invalid_argument& error) {
    GC_THROW(std::invalid_argument, what, ": ", error.what());
  }
}

Bytes MessageQueue::Handle::to_bytes() const {
  GC_CHECK(shm_name.size() <= kMaxNameBytes, "MessageQueue.Handle.to_bytes: name of ",
           shm_name.size(), " bytes");
  GC_CHECK(reader_ranks.size() <= kMaxReaders,
           "MessageQueue.Handle.to_bytes: ", reader_ranks.size(), " readers");
  Bytes out;
  out.reserve(kFixedBytes + shm_name.size() + 4 * reader_ranks.size());
  put<std::uint64_t>(out, kHandleBytesMagic);
  put<std::uint32_t>(out, kHandleBytesVersion);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(reader_ranks.size()));
  put<std::uint64_t>(out, max_chunk_bytes);
  put<std::uint64_t>(out, max_chunks);
  put<std::uint64_t>(out, token);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(writer_pid));
  put<std::uint32_t>(out, static_cast<std::uint32_t>(shm_name.size()));
  out += shm_name;
  for (int rank : reader_ranks) put<std::uint32_t>(out, static_cast<std::uint32_t>(rank));
  return out;
}

MessageQueue::Handle MessageQueue::Handle::from_bytes(const Bytes& bytes) {
  const char* what = "MessageQueue.Handle.from_bytes";
  Reader in(bytes);
  GC_CHECK(in.get<std::uint64_t>() == kHandleBytesMagic, what,
           ": not a message queue handle (wrong magic)");
  const auto version = in.get<std::uint32_t>();
  GC_CHECK(version == kHandleBytesVersion, what, ": handle version ", version, ", expected ",
           kHandleBytesVersion);
  const auto n_reader = in.get<std::uint32_t>();
  Handle handle;
  handle.max_chunk_bytes = in.get<std::uint64_t>();
  handle.max_chunks = in.get<std::uint64_t>();
  handle.token = in.get<std::uint64_t>();
  handle.writer_pid = static_cast<std::int32_t>(in.get<std::uint32_t>());
  const auto name_bytes = in.get<std::uint32_t>();
  GC_CHECK(name_bytes <= kMaxNameBytes && n_reader <= kMaxReaders, what, ": malformed handle (",
           name_bytes, "-byte name, ", n_reader, " readers)");
  GC_CHECK(in.left() == name_bytes + 4 * std::size_t{n_reader}, what, ": ", bytes.size(),
           " bytes, expected ", kFixedBytes + name_bytes + 4 * std::size_t{n_reader},
           " for this handle");
  handle.shm_name = in.text(name_bytes);
  for (std::uint32_t i = 0; i < n_reader; ++i) {
    handle.reader_ranks.push_back(static_cast<std::int32_t>(in.get<std::uint32_t>()));
  }
  handle.validate(what);
  return handle;
}

bool MessageQueue::Handle::operator==(const Handle& other) const {
  return reader_ranks == other.reader_ranks && shm_name == other.shm_name &&
         max_chunk_bytes == other.max_chunk_bytes && max_chunks == other.max_chunks &&
         token == other.token && writer_pid == other.writer_pid;
}

}  // namespace groupcoord
