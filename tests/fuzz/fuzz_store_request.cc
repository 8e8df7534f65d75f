// libFuzzer target: the TCP store server's request decoder and table (ServerState), fed what a
// hostile client can send after the handshake. The input is split into requests, each prefixed
// by one byte naming the connection (so that parked waits, wake-ups and cancels interleave); a
// zero-length chunk advances the clock and expires waiters. Properties: no crash, no sanitizer
// report, every reply a well-formed frame, and the bytes held never past max_total_bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/tcp_store_protocol.h"
#include "store/tcp_store_server_state.h"

namespace {

using groupcoord::store_internal::ProtocolLimits;
using groupcoord::store_internal::ServerState;

// A reply frame: u32 length of the rest, then a status byte among the four the protocol has.
void check_frame(const std::string& frame) {
  if (frame.size() < 5) __builtin_trap();
  const std::uint32_t length = groupcoord::store_internal::decode_u32(frame.data());
  if (length != frame.size() - 4) __builtin_trap();
  if (static_cast<unsigned char>(frame[4]) > 3) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ProtocolLimits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 4096;
  limits.max_keys_per_request = 8;
  ServerState state(limits, /*max_total_bytes=*/16 * 1024);
  auto now = groupcoord::store_internal::Clock::now();
  std::size_t pos = 0;
  while (pos + 2 <= size) {
    const std::uint64_t connection = data[pos] % 4;
    const std::size_t length = data[pos + 1];
    pos += 2;
    if (length == 0) {
      now += std::chrono::milliseconds(500);
      for (const auto& delivery : state.expire(now)) check_frame(delivery.frame);
      continue;
    }
    const std::size_t take = length < size - pos ? length : size - pos;
    const std::string_view payload(reinterpret_cast<const char*>(data + pos), take);
    pos += take;
    if (payload.size() > 0 && payload[0] == 0x7f) {  // a client that hangs up
      state.cancel(connection);
      continue;
    }
    const auto result = state.handle(connection, payload, now);
    if (result.kind != groupcoord::store_internal::RequestResult::Kind::kParked) {
      check_frame(result.frame);
    }
    for (const auto& delivery : result.woken) check_frame(delivery.frame);
  }
  if (state.stored_bytes() > 16 * 1024) __builtin_trap();
  return 0;
}
