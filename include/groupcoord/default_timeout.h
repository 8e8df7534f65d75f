// The deadline of every blocking call whose caller gives none (stores, rendezvous, groups,
// queues, init_distributed_environment): GROUPCOORD_TIMEOUT_S when set, else 300 s.
#pragma once

#include <chrono>

namespace groupcoord {

/// The deadline used when a caller gives none, without GROUPCOORD_TIMEOUT_S.
inline constexpr std::chrono::milliseconds kBuiltinTimeout{std::chrono::seconds(300)};

/// GROUPCOORD_TIMEOUT_S seconds (read once per process; fractions allowed) when set, else
/// kBuiltinTimeout. Throws std::invalid_argument naming the variable and its value when that is
/// not a positive number of seconds (the next call asks again).
std::chrono::milliseconds default_timeout();

}  // namespace groupcoord
