// How a message is laid out in chunks. Every chunk starts with a 16-byte header; the payload
// follows. A message of n bytes takes max(1, ceil(n / payload)) consecutive chunks, so an empty
// message still takes one chunk and a large one ("overflow" in vLLM) streams through the ring.
// Writer and readers run on one machine, so the header is in host byte order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace groupcoord {
namespace shm {

/// Top bit of a message's size word (ChunkHeader::total_bytes here, the length word of a remote
/// reader's stream in remote_fanout.h): the message is the writer's failure text
/// (MessageQueue::enqueue_error), not an object. No message comes near 2^63 bytes.
inline constexpr std::uint64_t kWriterFailureBit = std::uint64_t{1} << 63;

/// The size word of a message of `bytes` bytes, flagged when it is the writer's failure text.
inline std::uint64_t size_word(std::uint64_t bytes, bool writer_failure) {
  return bytes | (writer_failure ? kWriterFailureBit : 0);
}
/// The message's length in bytes, from its size word.
inline std::uint64_t message_bytes(std::uint64_t size_word) {
  return size_word & ~kWriterFailureBit;
}
/// Whether the size word announces the writer's failure text.
inline bool is_writer_failure(std::uint64_t size_word) {
  return (size_word & kWriterFailureBit) != 0;
}

/// Header at the start of every chunk.
struct ChunkHeader {
  std::uint64_t total_bytes;  ///< size of the whole message, kWriterFailureBit included
  std::uint32_t index;        ///< position of this chunk in the message, from 0
  std::uint32_t count;        ///< chunks of the message
};
static_assert(sizeof(ChunkHeader) == 16, "chunk header layout");

/// Bytes a chunk needs beyond its payload.
constexpr std::size_t kChunkHeaderBytes = sizeof(ChunkHeader);

/// Payload bytes per chunk (max_chunk_bytes must exceed kChunkHeaderBytes).
inline std::size_t chunk_payload(std::size_t max_chunk_bytes) {
  return max_chunk_bytes - kChunkHeaderBytes;
}

/// Chunks a message of `total_bytes` takes (at least 1).
inline std::uint64_t chunks_for(std::uint64_t total_bytes, std::size_t payload) {
  return total_bytes == 0 ? 1 : (total_bytes + payload - 1) / payload;
}

/// Writes `header` at the start of a chunk (memcpy: chunk data has no alignment promise).
inline void write_chunk_header(std::uint8_t* chunk, const ChunkHeader& header) {
  std::memcpy(chunk, &header, sizeof header);
}

/// Reads the header at the start of a chunk.
inline ChunkHeader read_chunk_header(const std::uint8_t* chunk) {
  ChunkHeader header;
  std::memcpy(&header, chunk, sizeof header);
  return header;
}

}  // namespace shm
}  // namespace groupcoord
