#include "shm/ring_buffer.h"

#include <unistd.h>

#include <limits>
#include <new>

#include "groupcoord/check.h"
#include "process_group/rank_liveness.h"
#include "shm/process_liveness.h"

namespace groupcoord {
namespace shm {

void WaitOptions::throw_if_cancelled(const std::string& label, const char* op) const {
  if (cancelled == nullptr || !cancelled->load(std::memory_order_acquire)) return;
  GC_THROW(DistributedError, label, ": ", op,
           ": cancelled (the queue was shut down in this process)");
}

namespace {

constexpr std::uint64_t kMagic = 0x474e4952514d4347ULL;  // "GCMQRING" little-endian
constexpr std::uint32_t kVersion =
    3;  // 2: the wake words; 3: the writer-failure bit (chunk_frame.h)
constexpr std::size_t kAlign = 64;

/// a + b, throwing instead of wrapping.
std::size_t checked_add(std::size_t a, std::size_t b) {
  GC_CHECK(a <= std::numeric_limits<std::size_t>::max() - b, "message queue: ring size overflows (",
           a, " + ", b, " bytes)");
  return a + b;
}

/// a * b, throwing instead of wrapping.
std::size_t checked_mul(std::size_t a, std::size_t b) {
  GC_CHECK(b == 0 || a <= std::numeric_limits<std::size_t>::max() / b,
           "message queue: ring size overflows (", a, " * ", b, " bytes)");
  return a * b;
}

std::size_t round_up(std::size_t value) { return checked_add(value, kAlign - 1) / kAlign * kAlign; }

}  // namespace

RingLayout RingLayout::compute(std::size_t n_reader, std::size_t max_chunk_bytes,
                               std::size_t max_chunks) {
  RingLayout layout;
  layout.reader_slots = round_up(sizeof(RingHeader));
  layout.flags = checked_add(layout.reader_slots, checked_mul(n_reader, sizeof(ReaderSlot)));
  const std::size_t flags_per_chunk = checked_add(n_reader, 1);
  layout.chunks = checked_add(
      layout.flags, checked_mul(checked_mul(max_chunks, flags_per_chunk), sizeof(PaddedFlag)));
  layout.chunk_stride = round_up(max_chunk_bytes);
  layout.total = checked_add(layout.chunks, checked_mul(max_chunks, layout.chunk_stride));
  return layout;
}

ShmRingBuffer::ShmRingBuffer(std::unique_ptr<SharedMemory> segment, std::size_t n_reader,
                             std::size_t max_chunk_bytes, std::size_t max_chunks)
    : segment_(std::move(segment)),
      n_reader_(n_reader),
      max_chunk_bytes_(max_chunk_bytes),
      max_chunks_(max_chunks),
      layout_(RingLayout::compute(n_reader, max_chunk_bytes, max_chunks)) {}

std::unique_ptr<ShmRingBuffer> ShmRingBuffer::create(const std::string& name, std::size_t n_reader,
                                                     std::size_t max_chunk_bytes,
                                                     std::size_t max_chunks, std::uint64_t token) {
  const RingLayout layout = RingLayout::compute(n_reader, max_chunk_bytes, max_chunks);
  std::unique_ptr<ShmRingBuffer> ring(new ShmRingBuffer(SharedMemory::create(name, layout.total),
                                                        n_reader, max_chunk_bytes, max_chunks));
  // The fresh segment is zero-filled; constructing the atomics in place makes them objects in
  // the C++ sense (their value stays 0: kOpen, kAbsent, not written, not read).
  auto* header = new (ring->segment_->data()) RingHeader{};
  header->magic = kMagic;
  header->version = kVersion;
  header->n_reader = static_cast<std::uint32_t>(n_reader);
  header->max_chunk_bytes = max_chunk_bytes;
  header->max_chunks = max_chunks;
  header->token = token;
  header->pid_namespace = this_pid_namespace();
  header->writer_pid = static_cast<std::int32_t>(::getpid());
  auto* slots = reinterpret_cast<ReaderSlot*>(ring->base() + layout.reader_slots);
  for (std::size_t r = 0; r < n_reader; ++r) new (&slots[r]) ReaderSlot{};
  const std::size_t n_flags = max_chunks * (n_reader + 1);
  auto* flags = reinterpret_cast<PaddedFlag*>(ring->base() + layout.flags);
  for (std::size_t i = 0; i < n_flags; ++i) new (&flags[i]) PaddedFlag{};
  // Attachers learn of the segment through the handle exchange, which happens after this
  // (a collective call), so plain stores suffice for the header.
  return ring;
}

ShmRingBuffer::AttachResult ShmRingBuffer::attach(const std::string& name, std::size_t n_reader,
                                                  std::size_t max_chunk_bytes,
                                                  std::size_t max_chunks, std::uint64_t token) {
  AttachResult result;
  const RingLayout layout = RingLayout::compute(n_reader, max_chunk_bytes, max_chunks);
  SharedMemory::OpenResult opened = SharedMemory::open(name, layout.total);
  if (!opened.segment) {
    result.not_found = opened.not_found;
    result.error = opened.error;
    return result;
  }
  const auto* header = static_cast<const RingHeader*>(opened.segment->data());
  if (header->magic == kMagic && header->token == token && header->version != kVersion) {
    // This job's segment, laid out by another build: say so rather than "foreign".
    result.error = "segment '" + name + "' has ring layout version " +
                   std::to_string(header->version) + ", this reader reads version " +
                   std::to_string(kVersion) + ": the ranks run different groupcoord builds";
    return result;
  }
  if (header->magic != kMagic || header->version != kVersion || header->token != token ||
      header->n_reader != n_reader || header->max_chunk_bytes != max_chunk_bytes ||
      header->max_chunks != max_chunks) {
    // A segment of that name that is not the one the writer described: treat it as foreign.
    result.error = "segment '" + name + "' does not match the writer's handle";
    return result;
  }
  result.ring.reset(
      new ShmRingBuffer(std::move(opened.segment), n_reader, max_chunk_bytes, max_chunks));
  return result;
}

ReaderSlot& ShmRingBuffer::reader_slot(std::size_t reader) const {
  return reinterpret_cast<ReaderSlot*>(base() + layout_.reader_slots)[reader];
}

std::atomic<std::uint32_t>& ShmRingBuffer::flag(std::size_t chunk, std::size_t index) const {
  auto* flags = reinterpret_cast<PaddedFlag*>(base() + layout_.flags);
  return flags[chunk * (n_reader_ + 1) + index].value;
}

}  // namespace shm
}  // namespace groupcoord
