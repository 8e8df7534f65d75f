#include "process_group/rank_liveness.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

/// Who a process is, as far as this node can tell.
struct ProcessIdentity {
  std::string boot_id;            ///< this boot of this node
  unsigned long long pid_ns = 0;  ///< inode of the pid namespace (pids compare only inside one)
  long pid = 0;
  unsigned long long start = 0;  ///< start time in clock ticks since boot (tells pid reuse)
};

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// State letter and start time of `pid` from /proc/<pid>/stat; false when it does not exist.
bool read_stat(long pid, char& state, unsigned long long& start) {
  const std::string stat = read_line("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(stat.substr(close + 1));
  fields >> state;
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;  // fields 4..21
  fields >> start;                                          // field 22: starttime
  return static_cast<bool>(fields);
}

unsigned long long pid_namespace() {
  struct stat info {};
  if (::stat("/proc/self/ns/pid", &info) != 0) return 0;
  return static_cast<unsigned long long>(info.st_ino);
}

/// This boot of this node (read once: it does not change while the process runs).
const std::string& boot_id() {
  static const std::string id = read_line("/proc/sys/kernel/random/boot_id");
  return id;
}

ProcessIdentity parse(const std::string& text) {
  ProcessIdentity id;
  std::istringstream in(text);
  in >> id.boot_id >> id.pid_ns >> id.pid >> id.start;
  if (!in) return {};
  return id;
}

}  // namespace

std::string RankLiveness::this_process() {
  const long pid = static_cast<long>(::getpid());
  char state = '?';
  unsigned long long start = 0;
  read_stat(pid, state, start);
  std::ostringstream out;
  out << boot_id() << " " << pid_namespace() << " " << pid << " " << start;
  return out.str();
}

std::uint64_t this_pid_namespace() { return pid_namespace(); }

std::uint64_t this_start_time() {
  char state = '?';
  unsigned long long start = 0;
  read_stat(static_cast<long>(::getpid()), state, start);
  return start;
}

bool process_gone(std::uint64_t pid_ns, long pid, std::uint64_t start) {
  // Only a process of this pid namespace can be looked up here.
  if (pid <= 0 || pid_ns == 0 || pid_ns != pid_namespace()) return false;
  char state = '?';
  unsigned long long now_start = 0;
  if (!read_stat(pid, state, now_start)) return true;  // no such process
  // A zombie has exited (its parent has not reaped it yet); another start time is another
  // process that got the same pid.
  return state == 'Z' || state == 'X' || now_start != start;
}

bool RankLiveness::known_gone(const std::string& identity) {
  const ProcessIdentity id = parse(identity);
  // Only a process of this boot can be looked up here.
  if (id.boot_id.empty() || id.boot_id != boot_id()) {
    return false;
  }
  return process_gone(id.pid_ns, id.pid, id.start);
}

std::shared_ptr<RankLiveness> RankLiveness::gather(ProcessGroup& world) {
  // Fixed-size records: "boot-id pid-namespace pid start-time" is under 100 characters.
  constexpr std::size_t kRecord = 128;
  const std::string mine = this_process();
  GC_ASSERT(mine.size() < kRecord, "RankLiveness: identity '", mine, "' longer than ", kRecord);
  std::vector<char> record(kRecord, '\0');
  std::copy(mine.begin(), mine.end(), record.begin());
  std::vector<char> all(kRecord * static_cast<std::size_t>(world.size()));
  world.all_gather(record.data(), all.data(), kRecord, DType::UInt8);
  std::vector<std::string> identities;
  for (int r = 0; r < world.size(); ++r) identities.emplace_back(all.data() + r * kRecord);
  return std::shared_ptr<RankLiveness>(
      new RankLiveness(world.store(), world.rank(), std::move(identities)));
}

RankLiveness::RankLiveness(std::shared_ptr<Store> store, int rank,
                           std::vector<std::string> identities)
    : store_(std::move(store)), rank_(rank), identities_(std::move(identities)) {}

std::string RankLiveness::dead_key(int rank) const {
  return "liveness/dead/" + std::to_string(rank);
}

bool RankLiveness::on_this_node(int rank) const {
  const ProcessIdentity id = parse(identities_[rank]);
  return !id.boot_id.empty() && id.boot_id == boot_id();
}

std::vector<int> RankLiveness::dead_ranks() {
  std::vector<int> dead;
  for (int r = 0; r < static_cast<int>(identities_.size()); ++r) {
    if (r == rank_) continue;
    bool gone = known_gone(identities_[r]);
    try {
      if (gone) {
        store_->set(dead_key(r), std::to_string(rank_));  // tells the ranks of other nodes
      } else {
        gone = store_->check({dead_key(r)});
      }
    } catch (const std::exception&) {
      // The store's host is gone (perhaps the rank found dead): local findings stand alone.
    }
    if (gone) dead.push_back(r);
  }
  return dead;
}

}  // namespace groupcoord
