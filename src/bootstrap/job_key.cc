#include "bootstrap/job_key.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace groupcoord {
namespace bootstrap_detail {

namespace {

// Field 22 of /proc/<pid>/stat: start time in clock ticks since boot. The command name (field 2)
// may hold spaces and parentheses, so parsing starts after the last ')'.
std::string process_start_time(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return "0";
  std::size_t close = line.rfind(')');
  if (close == std::string::npos) return "0";
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  for (int index = 3; index <= 22 && (fields >> field); ++index) {
  }
  return field.empty() ? "0" : field;
}

std::string sanitize(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    if (!safe) c = '_';
  }
  return out;
}

}  // namespace

std::string single_node_job_key(const LauncherEnv& launcher) {
  pid_t parent = getppid();
  std::string job = launcher.job_id.empty() ? "nojob" : launcher.job_id;
  return sanitize(launcher.launcher + "-" + job + "-" + std::to_string(parent) + "-" +
                  process_start_time(parent));
}

std::string rendezvous_base_dir(const EnvLookup& env) {
  std::optional<std::string> dir = env("GROUPCOORD_RENDEZVOUS_DIR");
  if (dir && !dir->empty()) return *dir;
  return "/tmp/groupcoord-rdzv-" + std::to_string(getuid());
}

}  // namespace bootstrap_detail
}  // namespace groupcoord
