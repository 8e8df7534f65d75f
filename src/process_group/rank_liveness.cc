#include "process_group/rank_liveness.h"

#include <sys/stat.h>
#include <unistd.h>

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

RankLiveness::RankLiveness(std::shared_ptr<Store> store, int rank, int world_size)
    : store_(std::move(store)), rank_(rank), world_size_(world_size) {
  GC_CHECK(store_ != nullptr, "RankLiveness: null store");
  store_->set(identity_key(rank_), this_process());
}

std::string RankLiveness::identity_key(int rank) const {
  return "liveness/identity/" + std::to_string(rank);
}

std::string RankLiveness::dead_key(int rank) const {
  return "liveness/dead/" + std::to_string(rank);
}

void RankLiveness::learn_identities() {
  std::vector<std::string> identities(world_size_);
  for (int r = 0; r < world_size_; ++r) identities[r] = store_->get(identity_key(r));
  identities_ = std::move(identities);
}

std::string RankLiveness::identity_of(int rank) const {
  return identities_.empty() ? std::string() : identities_[rank];
}

bool RankLiveness::on_this_node(int rank) const {
  const ProcessIdentity id = parse(identity_of(rank));
  return !id.boot_id.empty() && id.boot_id == boot_id();
}

std::vector<int> RankLiveness::dead_ranks() {
  std::vector<int> dead;
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    bool gone = known_gone(identity_of(r));
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
