#include "message_reference.h"

namespace groupcoord {
namespace testing {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

std::size_t reference_size(std::uint64_t stream, std::size_t index, std::size_t max_bytes,
                           std::size_t chunk_bytes) {
  if (index % 17 == 0) return 0;
  const std::size_t payload = chunk_bytes - 16;
  switch (index % 23) {
    case 1:
      return payload;  // exactly one full chunk
    case 2:
      return payload + 1;  // one byte into a second chunk
    case 3:
      return 3 * payload;  // exactly three chunks
    default:
      break;
  }
  std::uint64_t state = stream * 1000003 + index;
  return static_cast<std::size_t>(splitmix64(state) % (max_bytes + 1));
}

std::string reference_message(std::uint64_t stream, std::size_t index, std::size_t size) {
  std::string bytes(size, '\0');
  std::uint64_t state = (stream << 32) ^ (index * 0x2545f4914f6cdd1dULL);
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t word = splitmix64(state);
    for (std::size_t b = 0; b < 8 && i + b < size; ++b) {
      bytes[i + b] = static_cast<char>((word >> (8 * b)) & 0xff);
    }
  }
  return bytes;
}

}  // namespace testing
}  // namespace groupcoord
