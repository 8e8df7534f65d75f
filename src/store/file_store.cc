// Store kept as one file per key in a directory (see groupcoord/file_store.h).
#include "groupcoord/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "store/socket.h"
#include "store/store_semantics.h"

namespace groupcoord {
namespace store_internal {

/// A lock with a deadline that the threads of this process queue on, one per store directory.
/// (A mutex + condition variable rather than std::timed_mutex, whose clock-based lock thread
/// sanitizers do not model.)
class DirectoryGate {
 public:
  /// Takes the gate; false when `deadline` passes first.
  bool lock_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!released_.wait_until(lock, deadline, [this] { return !held_; })) return false;
    held_ = true;
    return true;
  }

  void unlock() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
    }
    released_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  bool held_ = false;
};

}  // namespace store_internal

namespace {

namespace fs = std::filesystem;
using store_internal::Clock;
using store_internal::errno_text;
using store_internal::TimePoint;

constexpr char kLockFileName[] = ".lock";
constexpr char kTempPrefix[] = ".tmp.";
/// Encoded names longer than this are shortened with a hash (NAME_MAX is 255 on Linux).
constexpr std::size_t kMaxEncodedName = 200;
constexpr std::size_t kHashedNameHead = 100;

/// Waits between polls of the file system: a few yields (the key usually arrives within
/// microseconds in a tight rendezvous), then sleeps that double up to `max_sleep`, never past
/// the deadline. Oversubscribed ranks must not spin.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds max_sleep) : max_sleep_(max_sleep) {}

  void pause(TimePoint deadline) {
    if (yields_left_ > 0) {
      --yields_left_;
      std::this_thread::yield();
      return;
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(sleep_, left));
    sleep_ = std::min(sleep_ * 2, max_sleep_);
  }

 private:
  int yields_left_ = 16;
  std::chrono::microseconds sleep_{50};
  std::chrono::microseconds max_sleep_;
};

bool is_safe_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

/// 64-bit FNV-1a over `key`, from `basis`.
std::uint64_t fnv1a(const std::string& key, std::uint64_t basis) {
  std::uint64_t hash = basis;
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string hex64(std::uint64_t value) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = kDigits[value & 0xf];
  return out;
}

/// A file name for `key` that is unique, safe on any file system and never starts with '.'
/// (so it cannot collide with the lock or temporary files): "k_" + the key with unsafe bytes
/// written as %XX. Names that would be too long keep a readable head plus 128 bits of hash.
std::string encode_key(const std::string& key) {
  static const char kDigits[] = "0123456789ABCDEF";
  std::string name;
  name.reserve(key.size());
  for (unsigned char c : key) {
    if (is_safe_name_char(c)) {
      name.push_back(static_cast<char>(c));
    } else {
      name.push_back('%');
      name.push_back(kDigits[c >> 4]);
      name.push_back(kDigits[c & 0xf]);
    }
  }
  if (name.size() <= kMaxEncodedName) return "k_" + name;
  return "h_" + name.substr(0, kHashedNameHead) + "_" + hex64(fnv1a(key, 0xcbf29ce484222325ULL)) +
         hex64(fnv1a(key, 0x84222325cbf29ce4ULL));
}

bool is_key_file(const std::string& name) {
  return name.size() > 2 && (name[0] == 'k' || name[0] == 'h') && name[1] == '_';
}

/// The value in `path`, or nullopt when the file does not exist.
std::optional<Bytes> read_value(const std::string& path) {
  store_internal::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    GC_THROW(DistributedError, "FileStore: cannot open ", path, ": ", errno_text(errno));
  }
  Bytes value;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n > 0) {
      value.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      return value;
    } else if (errno != EINTR) {
      GC_THROW(DistributedError, "FileStore: cannot read ", path, ": ", errno_text(errno));
    }
  }
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

void write_all(int fd, const Bytes& value, const std::string& path) {
  std::size_t done = 0;
  while (done < value.size()) {
    const ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      GC_THROW(DistributedError, "FileStore: cannot write ", path, ": ", errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
}

/// Moves the temporary file `temp` over `path` (atomic on POSIX file systems).
void publish(const std::string& temp, const std::string& path) {
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    GC_THROW(DistributedError, "FileStore: cannot rename ", temp, " to ", path, ": ",
             errno_text(err));
  }
}

/// The gate of `directory` shared by this process's FileStore objects (see file_store.h).
std::shared_ptr<store_internal::DirectoryGate> directory_gate(const std::string& directory) {
  // Leaked on purpose: FileStore objects may outlive static destruction at exit.
  static auto* registry_mutex = new std::mutex();
  static auto* registry = new std::map<std::string, std::weak_ptr<store_internal::DirectoryGate>>();
  std::error_code ec;
  std::string key = fs::canonical(directory, ec).string();
  if (ec) key = directory;
  std::lock_guard<std::mutex> lock(*registry_mutex);
  for (auto it = registry->begin(); it != registry->end();) {
    it = it->second.expired() ? registry->erase(it) : std::next(it);
  }
  std::weak_ptr<store_internal::DirectoryGate>& entry = (*registry)[key];
  std::shared_ptr<store_internal::DirectoryGate> gate = entry.lock();
  if (!gate) {
    gate = std::make_shared<store_internal::DirectoryGate>();
    entry = gate;
  }
  return gate;
}

}  // namespace

/// Holds the store's lock: this object's mutex, then flock(2) on the lock file. Acquisition is
/// bounded by the store's timeout().
class FileStore::ExclusiveLock {
 public:
  ExclusiveLock(FileStore& store, const char* op) : store_(store) {
    const TimePoint deadline = store_internal::deadline_after(store.timeout());
    if (!store.gate_->lock_until(deadline)) timeout(op);
    Backoff backoff(std::chrono::milliseconds(2));
    while (::flock(store.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        const int err = errno;
        store.gate_->unlock();
        GC_THROW(DistributedError, "FileStore ", store.directory_, ": ", op,
                 ": flock failed: ", errno_text(err));
      }
      if (Clock::now() >= deadline) {
        store.gate_->unlock();
        timeout(op);
      }
      backoff.pause(deadline);
    }
  }
  ~ExclusiveLock() {
    ::flock(store_.lock_fd_, LOCK_UN);
    store_.gate_->unlock();
  }
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

 private:
  [[noreturn]] void timeout(const char* op) {
    GC_THROW(TimeoutError, "FileStore ", store_.directory_, ": ", op, ": could not take the lock ",
             kLockFileName, " within ", store_.timeout().count(), " ms");
  }

  FileStore& store_;
};

FileStore::FileStore(std::string directory, std::chrono::milliseconds timeout)
    : Store(timeout), directory_(std::move(directory)) {
  GC_CHECK(!directory_.empty(), "FileStore: the directory must not be empty");
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) {
    GC_THROW(DistributedError, "FileStore: cannot create directory ", directory_, ": ",
             ec.message());
  }
  gate_ = directory_gate(directory_);
  const std::string lock_path = directory_ + "/" + kLockFileName;
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    GC_THROW(DistributedError, "FileStore: cannot open lock file ", lock_path, ": ",
             errno_text(errno));
  }
  GC_LOG(Debug, "FileStore: opened ", directory_);
}

FileStore::~FileStore() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string FileStore::key_path(const std::string& key) const {
  return directory_ + "/" + encode_key(key);
}

std::string FileStore::write_temp(const Bytes& value) const {
  static std::atomic<std::uint64_t> counter{0};
  const std::string path = directory_ + "/" + kTempPrefix + std::to_string(::getpid()) + "." +
                           std::to_string(counter.fetch_add(1));
  store_internal::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    GC_THROW(DistributedError, "FileStore: cannot create ", path, ": ", errno_text(errno));
  }
  try {
    write_all(fd.get(), value, path);
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  return path;
}

void FileStore::set(const std::string& key, const Bytes& value) {
  store_internal::check_key("FileStore", "set", key);
  // The expensive write happens outside the lock; only the rename is serialized.
  const std::string temp = write_temp(value);
  ExclusiveLock lock(*this, "set");
  publish(temp, key_path(key));
}

Bytes FileStore::get(const std::string& key) {
  store_internal::check_key("FileStore", "get", key);
  const std::string path = key_path(key);
  const TimePoint deadline = store_internal::deadline_after(timeout());
  Backoff backoff(std::chrono::milliseconds(10));
  for (;;) {
    std::optional<Bytes> value = read_value(path);
    if (value) return std::move(*value);
    if (Clock::now() >= deadline) {
      GC_THROW(TimeoutError, "FileStore ", directory_, ": get timed out after ", timeout().count(),
               " ms waiting for key '", key, "'");
    }
    backoff.pause(deadline);
  }
}

std::int64_t FileStore::add(const std::string& key, std::int64_t delta) {
  store_internal::check_key("FileStore", "add", key);
  const std::string path = key_path(key);
  ExclusiveLock lock(*this, "add");
  const std::optional<Bytes> current = read_value(path);
  const std::int64_t result =
      store_internal::add_to_counter(key, current ? &*current : nullptr, delta);
  publish(write_temp(store_internal::counter_text(result)), path);
  return result;
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  store_internal::check_key("FileStore", "compare_set", key);
  const std::string path = key_path(key);
  ExclusiveLock lock(*this, "compare_set");
  const std::optional<Bytes> current = read_value(path);
  store_internal::CompareSetOutcome outcome =
      store_internal::decide_compare_set(current ? &*current : nullptr, expected, desired);
  if (outcome.store) publish(write_temp(desired), path);
  return std::move(outcome.result);
}

bool FileStore::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) store_internal::check_key("FileStore", "check", key);
  for (const std::string& key : keys) {
    if (!path_exists(key_path(key))) return false;
  }
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  for (const std::string& key : keys) store_internal::check_key("FileStore", "wait", key);
  store_internal::check_timeout("FileStore", "wait", timeout);
  const TimePoint deadline = store_internal::deadline_after(timeout);
  Backoff backoff(std::chrono::milliseconds(10));
  for (;;) {
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (!path_exists(key_path(key))) missing.push_back(key);
    }
    if (missing.empty()) return;
    if (Clock::now() >= deadline) {
      GC_THROW(TimeoutError, "FileStore ", directory_, ": wait timed out after ", timeout.count(),
               " ms; missing keys ", store_internal::format_keys(missing));
    }
    backoff.pause(deadline);
  }
}

bool FileStore::delete_key(const std::string& key) {
  store_internal::check_key("FileStore", "delete_key", key);
  const std::string path = key_path(key);
  ExclusiveLock lock(*this, "delete_key");
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  GC_THROW(DistributedError, "FileStore: cannot delete ", path, ": ", errno_text(errno));
}

std::int64_t FileStore::num_keys() {
  std::error_code ec;
  std::int64_t count = 0;
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_key_file(it->path().filename().string())) ++count;
  }
  if (ec) {
    GC_THROW(DistributedError, "FileStore: cannot list ", directory_, ": ", ec.message());
  }
  return count;
}

void FileStore::remove_directory(const std::string& directory) {
  GC_CHECK(!directory.empty(), "FileStore::remove_directory: the directory must not be empty");
  std::error_code ec;
  fs::remove_all(directory, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    GC_THROW(DistributedError, "FileStore: cannot remove ", directory, ": ", ec.message());
  }
}

}  // namespace groupcoord
