#include "cuda/nccl/in_flight_ring.h"

#include <algorithm>

#include "cuda/runtime/driver_calls.h"

namespace groupcoord {
namespace cuda {

namespace {

std::size_t round_up_to_power_of_two(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

InFlightRing::InFlightRing(std::size_t capacity)
    : slots_(round_up_to_power_of_two(std::max<std::size_t>(capacity, 2))),
      mask_(slots_.size() - 1) {}

InFlightRing::~InFlightRing() {
  for (Slot& s : slots_) {
    if (s.event != nullptr) cudaEventDestroy(s.event);
  }
  (void)cudaGetLastError();
}

cudaError_t InFlightRing::create_events() {
  for (Slot& s : slots_) {
    if (s.event != nullptr) continue;
    const cudaError_t error = cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming);
    if (error != cudaSuccess) {
      s.event = nullptr;
      return error;
    }
  }
  return cudaSuccess;
}

InFlightRing::Push InFlightRing::push(const char* op, cudaStream_t stream, std::int64_t enqueued_ns,
                                      Tensor& keepalive, cudaError_t* error) {
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) >= slots_.size()) return Push::kFull;
  Slot& s = slot(tail);
  if (s.event == nullptr) {
    *error = cudaEventCreateWithFlags(&s.event, cudaEventDisableTiming);
    if (*error != cudaSuccess) {
      s.event = nullptr;
      return Push::kCudaError;
    }
  }
  *error = record_event(s.event, stream);
  if (*error != cudaSuccess) return Push::kCudaError;
  s.op = op;
  s.stream.stream = stream;
  s.stream.has_id = stream_id(stream, &s.stream.id);
  s.enqueued_ns = enqueued_ns;
  s.keepalive = std::move(keepalive);
  s.done = false;
  tail_.store(tail + 1, std::memory_order_release);
  return Push::kDone;
}

InFlightRing::Scan InFlightRing::reap(std::vector<Tensor>& released) {
  std::lock_guard<std::mutex> lock(consumer_mutex_);
  std::uint64_t head = head_.load(std::memory_order_relaxed);
  const std::uint64_t tail = tail_.load(std::memory_order_acquire);
  Scan scan;
  streams_.clear();
  for (std::uint64_t i = head; i < tail; ++i) {
    const Slot& s = slot(i);
    if (!s.done && std::find(streams_.begin(), streams_.end(), s.stream) == streams_.end()) {
      streams_.push_back(s.stream);
    }
  }
  for (const StreamKey& stream : streams_) reap_stream(stream, head, tail, scan, released);
  while (head < tail && slot(head).done) ++head;
  head_.store(head, std::memory_order_release);  // the producer may now reuse those slots
  for (std::uint64_t i = head; i < tail; ++i) {
    const Slot& s = slot(i);
    if (s.done) continue;
    if (scan.pending++ == 0) {
      scan.oldest_op = s.op;
      scan.oldest_enqueued_ns = s.enqueued_ns;
    }
  }
  return scan;
}

void InFlightRing::reap_stream(const StreamKey& stream, std::uint64_t from, std::uint64_t to,
                               Scan& scan, std::vector<Tensor>& released) {
  entries_.clear();
  for (std::uint64_t i = from; i < to; ++i) {
    const Slot& s = slot(i);
    if (!s.done && s.stream == stream) entries_.push_back(i);
  }
  const std::size_t completed = completed_prefix(stream.has_id, scan);
  for (std::size_t k = 0; k < completed; ++k) {
    Slot& s = slot(entries_[k]);
    s.done = true;
    released.push_back(std::move(s.keepalive));
  }
}

std::size_t InFlightRing::completed_prefix(bool by_boundary, Scan& scan) {
  const std::size_t n = entries_.size();
  if (n == 0) return 0;
  if (!by_boundary) {
    std::size_t k = 0;
    while (k < n && query(entries_[k], scan) == cudaSuccess) ++k;
    return k;
  }
  // One stream runs its work in order, so its completed entries are a prefix: the newest first
  // (an idle stream costs one query), then a binary search keeping entries [0, low) completed and
  // entry `high` not.
  cudaError_t state = query(entries_[n - 1], scan);
  if (state == cudaSuccess) return n;
  std::size_t low = 0, high = n - 1;
  while (state == cudaErrorNotReady && low < high) {
    const std::size_t mid = low + (high - low) / 2;
    state = query(entries_[mid], scan);
    if (state == cudaSuccess) {
      low = mid + 1;
      state = cudaErrorNotReady;  // keep searching
    } else if (state == cudaErrorNotReady) {
      high = mid;
    }
  }
  return low;  // an error stops the search: what is known completed is released
}

cudaError_t InFlightRing::query(std::uint64_t index, Scan& scan) {
  const Slot& s = slot(index);
  ++scan.queries;
  const cudaError_t state = cudaEventQuery(s.event);
  if (state == cudaSuccess || state == cudaErrorNotReady) return state;
  (void)cudaGetLastError();
  ++scan.failed;
  if (scan.failed_op == nullptr) {
    scan.failed_op = s.op;
    scan.failure = state;
  }
  return state;
}

bool InFlightRing::empty() const {
  return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
}

std::size_t InFlightRing::room() const {
  // Asked by the producer, so tail cannot move meanwhile and head <= tail: no wrap.
  const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
  return slots_.size() - static_cast<std::size_t>(tail - head_.load(std::memory_order_acquire));
}

std::size_t InFlightRing::release_all(bool all_completed, const std::function<void(Tensor)>& keep) {
  std::lock_guard<std::mutex> lock(consumer_mutex_);
  const std::uint64_t tail = tail_.load(std::memory_order_acquire);
  std::size_t running = 0;
  for (std::uint64_t i = head_.load(std::memory_order_relaxed); i < tail; ++i) {
    Slot& s = slot(i);
    if (s.done) continue;
    if (all_completed || cudaEventQuery(s.event) == cudaSuccess) {
      s.keepalive = Tensor();
    } else {
      keep(std::move(s.keepalive));
      ++running;
    }
    s.done = true;
  }
  (void)cudaGetLastError();
  head_.store(tail, std::memory_order_release);
  return running;
}

}  // namespace cuda
}  // namespace groupcoord
