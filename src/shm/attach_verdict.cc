#include "shm/attach_verdict.h"

#include <algorithm>
#include <sstream>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "shm/queue_handle.h"

namespace groupcoord {
namespace shm {

namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (std::size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
  return out.str();
}

}  // namespace

std::vector<std::int32_t> combine_statuses(const std::vector<std::int32_t>& reports,
                                           std::size_t n) {
  GC_ASSERT(reports.size() == n * n, "combine_statuses: ", reports.size(), " reports for ", n,
            " ranks");
  std::vector<std::int32_t> verdict(n, kAttachOk);
  for (std::size_t from = 0; from < n; ++from) {
    for (std::size_t r = 0; r < n; ++r) verdict[r] = std::max(verdict[r], reports[from * n + r]);
  }
  return verdict;
}

void raise_on_failure(const std::string& op, const std::string& group,
                      const std::vector<std::int32_t>& verdict, const char* anchor_role, int anchor,
                      const std::string& writer_error, bool remote_allowed) {
  std::vector<int> remote, failed;
  for (std::size_t r = 0; r < verdict.size(); ++r) {
    if (verdict[r] == kAttachRemote) remote.push_back(static_cast<int>(r));
    if (verdict[r] == kAttachFailed) failed.push_back(static_cast<int>(r));
  }
  GC_CHECK(remote_allowed || remote.empty(), "MessageQueue.", op, " on group '", group,
           "': group rank(s) ", ranks_text(remote), " cannot open the shared memory of the ",
           anchor_role,
           anchor >= 0 ? " (group rank " + std::to_string(anchor) + ")" : std::string(),
           ": another node, or another /dev/shm (or an external writer that is gone); only "
           "create_from_process_group with a writer of the group serves readers on other nodes");
  if (!failed.empty()) {
    GC_THROW(DistributedError, "MessageQueue.", op, " on group '", group, "': group rank(s) ",
             ranks_text(failed), " could not create or attach the shared-memory segment",
             writer_error.empty() ? std::string(" (see their log)") : ": " + writer_error);
  }
}

}  // namespace shm
}  // namespace groupcoord
