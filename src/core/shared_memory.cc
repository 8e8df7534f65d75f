#include "core/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace shm {

namespace {

std::string errno_text(int error) { return std::strerror(error); }

/// Closes a descriptor when the scope ends (the mapping keeps the object alive without it).
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

/// Reserves the pages of a fresh object. tmpfs supports fallocate; where it does not, ftruncate
/// alone still works but a full /dev/shm then shows up as SIGBUS on first touch.
int reserve(int fd, std::size_t size) {
  int error = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (error == EOPNOTSUPP || error == EINVAL) {
    return ::ftruncate(fd, static_cast<off_t>(size)) == 0 ? 0 : errno;
  }
  return error;
}

}  // namespace

SharedMemory::SharedMemory(std::string name, void* data, std::size_t size, bool is_creator)
    : name_(std::move(name)), data_(data), size_(size), is_creator_(is_creator), unlinked_(false) {}

std::unique_ptr<SharedMemory> SharedMemory::create(const std::string& name, std::size_t size) {
  GC_CHECK(name.size() > 1 && name[0] == '/' && name.find('/', 1) == std::string::npos,
           "shared memory: bad segment name '", name, "'");
  GC_CHECK(size > 0, "shared memory: segment '", name, "' of size 0");
  // 0600: only this user's processes may attach to the job's queues.
  FdCloser fd{::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)};
  if (fd.fd < 0) {
    GC_THROW(DistributedError, "shared memory: cannot create '", name, "': ", errno_text(errno));
  }
  int error = reserve(fd.fd, size);
  void* data = MAP_FAILED;
  if (error == 0) {
    data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
    if (data == MAP_FAILED) error = errno;
  }
  if (error != 0) {
    ::shm_unlink(name.c_str());
    GC_THROW(DistributedError, "shared memory: cannot allocate ", size, " bytes for '", name,
             "' (is /dev/shm large enough?): ", errno_text(error));
  }
  return std::unique_ptr<SharedMemory>(new SharedMemory(name, data, size, true));
}

SharedMemory::OpenResult SharedMemory::open(const std::string& name, std::size_t min_size) {
  OpenResult result;
  FdCloser fd{::shm_open(name.c_str(), O_RDWR, 0)};
  if (fd.fd < 0) {
    result.not_found = errno == ENOENT;
    result.error = "cannot open '" + name + "': " + errno_text(errno);
    return result;
  }
  struct stat info {};
  if (::fstat(fd.fd, &info) != 0) {
    result.error = "cannot stat '" + name + "': " + errno_text(errno);
    return result;
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  if (size < min_size) {
    result.error = "segment '" + name + "' has " + std::to_string(size) + " bytes, expected " +
                   std::to_string(min_size);
    return result;
  }
  void* data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.fd, 0);
  if (data == MAP_FAILED) {
    result.error = "cannot map '" + name + "': " + errno_text(errno);
    return result;
  }
  result.segment.reset(new SharedMemory(name, data, size, false));
  return result;
}

SharedMemory::~SharedMemory() {
  if (::munmap(data_, size_) != 0) {
    GC_LOG(Warn, "shared memory: munmap of '", name_, "' failed: ", errno_text(errno));
  }
  if (is_creator_) unlink();
}

void SharedMemory::unlink() {
  if (unlinked_) return;
  unlinked_ = true;
  if (::shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    GC_LOG(Warn, "shared memory: unlink of '", name_, "' failed: ", errno_text(errno));
  }
}

std::uint64_t random_token() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

std::string unique_segment_name(const std::string& stem) {
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(random_token()));
  return stem + suffix;
}

}  // namespace shm
}  // namespace groupcoord
