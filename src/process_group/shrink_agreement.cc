#include "process_group/shrink_agreement.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <thread>

#include "core/shape.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {

namespace {

std::string proposal_key(int attempt, int rank) {
  return "shrink/" + std::to_string(attempt) + "/excluded_by/" + std::to_string(rank);
}

constexpr std::chrono::milliseconds kLongestPause(50);

/// Runs a store call; a store that cannot be reached (its host died) is the one failure a shrink
/// cannot get past, so it says so.
template <typename Call>
void reach_store(Call call) {
  try {
    call();
  } catch (const TimeoutError& e) {
    GC_THROW(DistributedError, "shrink: the world store does not answer (", e.what(),
             "); if the process that hosts it is gone, the job cannot be shrunk");
  } catch (const DistributedError& e) {
    GC_THROW(DistributedError, "shrink: the world store cannot be reached (", e.what(),
             "); the process that hosts it is gone, which a shrink cannot survive");
  }
}

}  // namespace

void agree_on_excluded(Store& store, int attempt, int rank, int world_size,
                       const std::vector<int>& excluded, std::chrono::milliseconds timeout) {
  const std::string mine = detail::ranks_str(excluded);
  std::vector<int> survivors;
  for (int r = 0; r < world_size; ++r) {
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) survivors.push_back(r);
  }
  reach_store([&] { store.set(proposal_key(attempt, rank), mine); });
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing = survivors;
  // Polled rather than one wait on every key, so that a timeout can name who did not answer.
  for (std::chrono::milliseconds pause(1);; pause = std::min(pause * 2, kLongestPause)) {
    reach_store([&] {
      missing.erase(std::remove_if(missing.begin(), missing.end(),
                                   [&](int r) { return store.check({proposal_key(attempt, r)}); }),
                    missing.end());
    });
    if (missing.empty()) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      GC_THROW(TimeoutError, "shrink: world ranks ", detail::ranks_str(missing),
               " did not say which ranks to exclude within ", timeout.count(),
               " ms (this rank would exclude ", mine,
               "); every survivor must call the shrink, with the same ranks");
    }
    std::this_thread::sleep_for(pause);
  }
  std::ostringstream disagreement;
  for (int r : survivors) {
    Bytes theirs;
    reach_store([&] { theirs = store.get(proposal_key(attempt, r)); });
    if (theirs != mine) disagreement << " world rank " << r << " excludes " << theirs << ";";
  }
  if (!disagreement.str().empty()) {
    GC_THROW(DistributedError, "shrink: the survivors disagree on whom to exclude: this rank (",
             rank, ") excludes ", mine, ";", disagreement.str(),
             " pass the same ranks everywhere (find_dead_ranks() gives every survivor the same "
             "answer once the failure is known)");
  }
}

}  // namespace groupcoord
