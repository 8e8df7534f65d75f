#include "process_group/shrink_agreement.h"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "core/shape.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "process_group/rank_liveness.h"

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

/// Removes from `ranks` those that published their set for `attempt`.
void drop_answered(Store& store, int attempt, std::vector<int>& ranks) {
  reach_store([&] {
    ranks.erase(std::remove_if(ranks.begin(), ranks.end(),
                               [&](int r) { return store.check({proposal_key(attempt, r)}); }),
                ranks.end());
  });
}

/// The ranks of a proposal as ranks_str wrote it ("[1, 3]").
std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> ranks;
  std::istringstream in(text);
  for (char c; in >> c;) {
    if (c >= '0' && c <= '9') {
      in.putback(c);
      int r = 0;
      in >> r;
      ranks.push_back(r);
    }
  }
  return ranks;
}

std::vector<int> sorted_union(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> both;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both;
}

[[noreturn]] void throw_retry(const std::string& why, const std::string& mine,
                              const std::vector<int>& retry) {
  throw RankFailureError("shrink: " + why + " (this rank would exclude " + mine +
                             "); nothing was changed: shrink again on every survivor, excluding " +
                             detail::ranks_str(retry),
                         retry);
}

/// Throws RankFailureError when one of `missing` is among the dead and did not answer after all
/// (one that answered and then died is left to the reconnect, as every survivor that saw its
/// answer will do): the shrink must then exclude it too, in a new attempt.
void throw_if_one_died(Store& store, int attempt, const std::vector<int>& missing,
                       const std::vector<int>& excluded, const std::string& mine,
                       const std::function<std::vector<int>()>& find_dead) {
  std::vector<int> dead;
  reach_store([&] { dead = find_dead(); });
  std::vector<int> died;
  std::set_intersection(missing.begin(), missing.end(), dead.begin(), dead.end(),
                        std::back_inserter(died));
  drop_answered(store, attempt, died);
  if (died.empty()) return;
  throw_retry(
      "world ranks " + detail::ranks_str(died) + " died before saying which ranks to exclude", mine,
      sorted_union(excluded, died));
}

/// Every survivor answered: throws when their sets differ. Sets that differ only by ranks now
/// known dead (survivors that saw a second death at different moments) give RankFailureError
/// with their union, the set to retry with; any other difference is a DistributedError.
void check_same_sets(Store& store, int attempt, int rank, const std::vector<int>& survivors,
                     const std::vector<int>& excluded, const std::string& mine,
                     const std::function<std::vector<int>()>& find_dead) {
  std::ostringstream disagreement;
  std::vector<int> all = excluded;
  std::vector<int> in_every = excluded;
  for (int r : survivors) {
    Bytes theirs;
    reach_store([&] { theirs = store.get(proposal_key(attempt, r)); });
    if (theirs == mine) continue;
    disagreement << " world rank " << r << " excludes " << theirs << ";";
    const std::vector<int> their_ranks = parse_ranks(theirs);
    all = sorted_union(all, their_ranks);
    std::vector<int> common;
    std::set_intersection(in_every.begin(), in_every.end(), their_ranks.begin(), their_ranks.end(),
                          std::back_inserter(common));
    in_every = common;
  }
  if (disagreement.str().empty()) return;
  std::vector<int> dead;
  reach_store([&] { dead = find_dead(); });
  std::vector<int> differing;
  std::set_difference(all.begin(), all.end(), in_every.begin(), in_every.end(),
                      std::back_inserter(differing));
  if (std::includes(dead.begin(), dead.end(), differing.begin(), differing.end())) {
    throw_retry(
        "the survivors saw different deaths (" + disagreement.str() + " all of them dead now)",
        mine, all);
  }
  GC_THROW(DistributedError, "shrink: the survivors disagree on whom to exclude: this rank (", rank,
           ") excludes ", mine, ";", disagreement.str(),
           " pass the same ranks everywhere (find_dead_ranks() gives every survivor the same "
           "answer once the failure is known)");
}

}  // namespace

void agree_on_excluded(Store& store, int attempt, int rank, int world_size,
                       const std::vector<int>& excluded, std::chrono::milliseconds timeout,
                       const std::function<std::vector<int>()>& find_dead) {
  const std::string mine = detail::ranks_str(excluded);
  std::vector<int> survivors;
  for (int r = 0; r < world_size; ++r) {
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) survivors.push_back(r);
  }
  reach_store([&] { store.set(proposal_key(attempt, rank), mine); });
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing = survivors;
  auto next_liveness_check = std::chrono::steady_clock::now() + kDeadPeerCheckInterval;
  // Polled rather than one wait on every key, so that a timeout can name who did not answer.
  for (std::chrono::milliseconds pause(1);; pause = std::min(pause * 2, kLongestPause)) {
    drop_answered(store, attempt, missing);
    if (missing.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_liveness_check) {
      next_liveness_check = now + kDeadPeerCheckInterval;
      throw_if_one_died(store, attempt, missing, excluded, mine, find_dead);
    }
    if (now >= deadline) {
      GC_THROW(TimeoutError, "shrink: world ranks ", detail::ranks_str(missing),
               " did not say which ranks to exclude within ", timeout.count(),
               " ms (this rank would exclude ", mine,
               "); every survivor must call the shrink, with the same ranks");
    }
    std::this_thread::sleep_for(pause);
  }
  check_same_sets(store, attempt, rank, survivors, excluded, mine, find_dead);
}

}  // namespace groupcoord
