// How the survivors of a failure agree on who is gone before a shrink: each publishes the set it
// means to exclude in the world store and waits, with a deadline, for every other survivor's; all
// must name the same set. Without it one survivor could shrink around a rank that another still
// counts on, and both would then wait out a timeout in mismatched groups.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "groupcoord/store.h"

namespace groupcoord {

/// Collective over the world ranks of [0, world_size) not in `excluded` (ascending, without
/// `rank`): publishes `excluded` under attempt `attempt` and checks that every survivor published
/// the same. While it waits it asks `find_dead` (world ranks known dead) every 100 ms, so that a
/// survivor that dies before answering ends the wait at once: RankFailureError naming `excluded`
/// and it, the set to retry with (a later attempt). Sets that differ only by ranks known dead
/// (survivors that saw a second death at different moments) also give RankFailureError, with
/// their union. Throws TimeoutError naming the survivors that did not answer within `timeout`,
/// DistributedError naming those that disagree otherwise (or when the store cannot be reached:
/// its host is gone).
void agree_on_excluded(Store& store, int attempt, int rank, int world_size,
                       const std::vector<int>& excluded, std::chrono::milliseconds timeout,
                       const std::function<std::vector<int>()>& find_dead);

}  // namespace groupcoord
