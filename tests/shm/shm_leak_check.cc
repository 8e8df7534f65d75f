#include "shm_leak_check.h"

#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace groupcoord {
namespace testing {

void expect_no_queue_segments_left(const std::shared_ptr<ProcessGroup>& world) {
  world->barrier();
  const int pid = static_cast<int>(::getpid());
  std::vector<int> pids(world->size());
  world->all_gather(&pid, pids.data(), 1, DType::Int32);
  DIR* dir = ::opendir("/dev/shm");
  ASSERT_NE(dir, nullptr);
  while (dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind("gcmq-", 0) != 0) continue;
    for (int p : pids) {
      EXPECT_EQ(name.find("-" + std::to_string(p) + "-"), std::string::npos)
          << "leaked segment /dev/shm/" << name;
    }
  }
  ::closedir(dir);
}

}  // namespace testing
}  // namespace groupcoord
