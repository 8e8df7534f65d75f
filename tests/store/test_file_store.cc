// FileStore beyond the shared semantics: directory handling, atomic files, the lock's deadline,
// and atomic adds across processes (fork).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/file_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_test::Clock;
using store_test::elapsed_ms;

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Waits for `pid` for up to `timeout`; kills it when it overstays. Returns its exit status or -1.
TEST(FileStore, CreatesNestedDirectories) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/a/b/c";
  FileStore store(path, 1s);
  EXPECT_TRUE(is_directory(path));
  EXPECT_EQ(store.directory(), path);
  EXPECT_EQ(store.num_keys(), 0);
}

TEST(FileStore, RejectsAnEmptyDirectory) { EXPECT_THROW(FileStore("", 1s), std::invalid_argument); }

TEST(FileStore, DirectoryThatCannotBeCreatedIsADistributedError) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/plain_file";
  ASSERT_EQ(::close(::open(file.c_str(), O_CREAT | O_WRONLY, 0644)), 0);
  EXPECT_THROW(FileStore(file + "/sub", 1s), DistributedError);
}

TEST(FileStore, TwoObjectsOnOneDirectoryShareKeys) {
  testing::TempDir dir;
  FileStore a(dir.path(), 1s);
  FileStore b(dir.path(), 1s);
  a.set("k", "v");
  EXPECT_EQ(b.get("k"), "v");
  EXPECT_EQ(b.num_keys(), 1);  // the lock file is not a key
}

TEST(FileStore, RemoveDirectoryRemovesEverything) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/store";
  {
    FileStore store(path, 1s);
    store.set("a", "1");
    store.add("b", 2);
  }
  FileStore::remove_directory(path);
  EXPECT_FALSE(std::filesystem::exists(path));
  FileStore::remove_directory(path);  // already gone: fine
}

TEST(FileStore, ReadersNeverSeeAPartialValue) {
  testing::TempDir dir;
  FileStore writer(dir.path(), 5s);
  FileStore reader(dir.path(), 5s);
  constexpr std::size_t kSize = 256 * 1024;
  writer.set("v", std::string(kSize, 'a'));
  std::atomic<bool> stop{false};
  std::thread thread([&] {
    for (int i = 0; i < 100 && !stop; ++i) writer.set("v", std::string(kSize, i % 2 ? 'b' : 'a'));
  });
  int bad = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string value = reader.get("v");
    if (value.size() != kSize || value.find_first_not_of(value[0]) != std::string::npos) ++bad;
  }
  stop = true;
  thread.join();
  EXPECT_EQ(bad, 0);
}

TEST(FileStore, LockAcquisitionHasADeadline) {
  testing::TempDir dir;
  FileStore store(dir.path(), 200ms);
  // Another "process" (another open file description) holds the lock.
  const int fd = ::open((dir.path() + "/.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const auto start = Clock::now();
  EXPECT_THROW(store.add("k", 1), TimeoutError);
  EXPECT_LT(elapsed_ms(start), 5000);
  ::flock(fd, LOCK_UN);
  ::close(fd);
  EXPECT_EQ(store.add("k", 1), 1);  // the failed add left nothing behind
}

TEST(FileStore, AddIsAtomicAcrossProcesses) {
  // Fork before any thread of this test exists; children only touch their own FileStore.
  testing::TempDir dir;
  constexpr int kChildren = 4;
  constexpr int kAdds = 100;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        FileStore store(dir.path(), 10s);
        for (int j = 0; j < kAdds; ++j) store.add("counter", 1);
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  FileStore store(dir.path(), 10s);
  for (int j = 0; j < kAdds; ++j) store.add("counter", 1);
  for (pid_t pid : children) EXPECT_EQ(testing::wait_child(pid, 20s), 0);
  EXPECT_EQ(store.get("counter"), std::to_string((kChildren + 1) * kAdds));
}

}  // namespace
}  // namespace groupcoord
