// The verdict of a queue's handle exchange: every rank reports, for each group rank, whether it
// created or attached its segment (queue_handle.h's AttachStatus); the reports are all-gathered
// and combined here, identically on every rank, so that every rank raises the same error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace groupcoord {
namespace shm {

/// Combines `n` reports of `n` statuses each (report i at [i * n, (i + 1) * n)) into one status
/// per rank: the worst any report gave it.
std::vector<std::int32_t> combine_statuses(const std::vector<std::int32_t>& reports, std::size_t n);

/// Throws std::invalid_argument when some rank cannot see the segment (kAttachRemote: it is on
/// another node), else DistributedError when some rank failed (kAttachFailed). `op` and `group`
/// name the call; `anchor_role` / `anchor` the rank whose node counts ("writer" or "reader";
/// anchor -1 for a writer outside the group);
/// `writer_error`, when known, says why the writer failed. `remote_allowed`: ranks on another
/// node are served over sockets (create_from_process_group), not an error.
void raise_on_failure(const std::string& op, const std::string& group,
                      const std::vector<std::int32_t>& verdict, const char* anchor_role, int anchor,
                      const std::string& writer_error, bool remote_allowed = false);

}  // namespace shm
}  // namespace groupcoord
