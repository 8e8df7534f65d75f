// A named POSIX shared-memory segment (shm_open + mmap) with RAII cleanup. The name only serves
// to attach: it is unlinked as soon as every peer has attached (so a crash later leaks nothing)
// and, failing that, when the creator's object is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace groupcoord {
namespace shm {

/// One mapping of a POSIX shared-memory object.
class SharedMemory {
 public:
  /// Creates the object `name` (must start with '/', no other '/'; fails if it exists), sizes it
  /// to `size` bytes with the memory reserved up front (so a full /dev/shm fails here, not with
  /// SIGBUS on a later write), zero-filled, and maps it read-write. Throws DistributedError with
  /// the system's reason on failure (nothing is left behind).
  static std::unique_ptr<SharedMemory> create(const std::string& name, std::size_t size);

  /// Result of open(): the mapping, or why there is none.
  struct OpenResult {
    std::unique_ptr<SharedMemory> segment;
    bool not_found = false;  ///< no object of that name here (e.g. the creator is on another node)
    std::string error;       ///< any failure, in words (empty on success)
  };
  /// Maps the existing object `name` read-write; fails when it is smaller than `min_size`.
  static OpenResult open(const std::string& name, std::size_t min_size);

  /// Unmaps; the creator also unlinks the name if it still exists. Never throws.
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  /// Removes the name from the system (idempotent; a name some peer removed already is fine).
  /// Attachers may call it too: once every peer has attached, whoever gets there first removes
  /// the name, so that no rank returns from the handshake while the name still exists. The
  /// mappings stay valid; the memory is freed when the last one goes. Never throws.
  void unlink();
  /// True once unlink() ran in this process.
  bool unlinked() const { return unlinked_; }

  /// Start of the mapping.
  void* data() const { return data_; }
  /// Size of the mapping in bytes.
  std::size_t size() const { return size_; }
  /// The object's name, e.g. "/gcmq-...".
  const std::string& name() const { return name_; }
  /// True in the process that created the object.
  bool is_creator() const { return is_creator_; }

 private:
  SharedMemory(std::string name, void* data, std::size_t size, bool is_creator);

  std::string name_;
  void* data_;
  std::size_t size_;
  bool is_creator_;
  bool unlinked_;
};

/// 64 random bits (std::random_device).
std::uint64_t random_token();

/// A fresh segment name: `stem` + "-<pid>-<64 random bits in hex>", unique per process and call
/// (`stem` starts with '/', e.g. "/gccpu").
std::string unique_segment_name(const std::string& stem);

}  // namespace shm
}  // namespace groupcoord
