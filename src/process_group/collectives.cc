// Collectives on host memory. Every rank of the group must call each of them, in the same order,
// with matching arguments; each call takes the next tag of the group's sequence so that it never
// matches messages of another collective (or of point-to-point traffic, which uses its own slot
// prefix, see point_to_point.cc).
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/gather.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <sstream>
#include <vector>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/process_group.h"
#include "process_group/gloo_errors.h"
#include "process_group/group_state.h"
#include "process_group/reduce_functions.h"

namespace groupcoord {

namespace {

/// "all_reduce(1023 x float32, sum)"-style description for messages.
std::string describe(const char* op, std::size_t count, DType dtype,
                     const std::string& extra = {}) {
  std::ostringstream out;
  out << op << "(" << count << " x " << dtype_name(dtype);
  if (!extra.empty()) out << ", " << extra;
  out << ")";
  return out.str();
}

std::uint8_t* bytes_of(void* p) { return static_cast<std::uint8_t*>(p); }
std::uint8_t* bytes_of(const void* p) {
  // Gloo's buffers take non-const pointers even for data they only read.
  return static_cast<std::uint8_t*>(const_cast<void*>(p));
}

/// Runs Gloo's allreduce with the element type that has dtype's size.
template <typename T>
void gloo_allreduce(const std::shared_ptr<gloo::Context>& context, void* data, std::size_t count,
                    ReduceFunction fn, std::uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions options(context);
  options.setOutput(static_cast<T*>(data), count);
  options.setReduceFunction(std::move(fn));
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allreduce(options);
}

/// gloo_allreduce with the unsigned type of `element` bytes; `fn` does the typed arithmetic.
void gloo_allreduce_any(const std::shared_ptr<gloo::Context>& context, void* data,
                        std::size_t count, std::size_t element, const ReduceFunction& fn,
                        std::uint32_t tag, std::chrono::milliseconds timeout) {
  switch (element) {
    case 1:
      return gloo_allreduce<std::uint8_t>(context, data, count, fn, tag, timeout);
    case 2:
      return gloo_allreduce<std::uint16_t>(context, data, count, fn, tag, timeout);
    case 4:
      return gloo_allreduce<std::uint32_t>(context, data, count, fn, tag, timeout);
    case 8:
      return gloo_allreduce<std::uint64_t>(context, data, count, fn, tag, timeout);
  }
  GC_ASSERT(false, "all_reduce: unexpected element size ", element);
}

/// True when [a, a + a_len) and [b, b + b_len) share a byte.
bool overlaps(const void* a, std::size_t a_len, const void* b, std::size_t b_len) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return a_len > 0 && b_len > 0 && x < y + b_len && y < x + a_len;
}

}  // namespace

bool ProcessGroup::uses_shared_memory() const { return state_->shm != nullptr; }

bool ProcessGroup::uses_single_copy() const {
  return state_->shm != nullptr && state_->shm->single_copy();
}

void ProcessGroup::set_up_shared_memory(const char* op) {
  State& s = *state_;
  ShmCollectives::SetupChannel channel;  // Gloo: s.shm is still null while this runs
  channel.broadcast = [this](void* data, std::size_t bytes, int root) {
    broadcast(data, bytes, DType::UInt8, root);
  };
  channel.all_reduce_min = [this](std::int32_t value) {
    all_reduce(&value, 1, DType::Int32, ReduceOp::Min);
    return value;
  };
  // Run by create_world / new_group (collective anyway), so that no later collective's errors
  // are the set-up's; its failures (a rank that never comes) are `op`'s.
  try {
    s.shm = ShmCollectives::create(s.rank, s.size, s.name, s.health, s.timeout, channel);
  } catch (const TimeoutError& e) {
    GC_THROW(TimeoutError, op, " (setting up its transport): ", e.what());
  } catch (const DistributedError& e) {
    GC_THROW(DistributedError, op, " (setting up its transport): ", e.what());
  }
}

void ProcessGroup::broadcast(void* data, std::size_t count, DType dtype, int root) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(root >= 0 && root < s.size, label, ": broadcast: root ", root, " out of range [0, ",
           s.size, ")");
  GC_CHECK(data != nullptr || count == 0, label, ": broadcast: null data with count ", count);
  auto context = s.acquire("broadcast");
  if (count == 0 || s.size == 1) return;
  const std::size_t nbytes = count * dtype_size(dtype);
  if (s.shm) return s.shm->broadcast(data, nbytes, root);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("broadcast", count, dtype, "root=" + std::to_string(root)),
              s.timeout, [&] {
                gloo::BroadcastOptions options(context);
                options.setOutput(bytes_of(data), nbytes);
                options.setRoot(root);
                options.setTag(tag);
                options.setTimeout(s.timeout);
                gloo::broadcast(options);
              });
}

void ProcessGroup::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  all_reduce(data, data, count, dtype, op);
}

void ProcessGroup::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                              ReduceOp op) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK((in != nullptr && out != nullptr) || count == 0, label,
           ": all_reduce: null buffer with count ", count);
  auto context = s.acquire("all_reduce");
  if (count == 0) return;
  const std::size_t element = dtype_size(dtype);
  const std::size_t nbytes = count * element;
  // Shared memory reads `in` and writes `out` itself unless they partly overlap; Gloo reduces in
  // place. Otherwise copy first (memmove: `in` may overlap `out`), which also covers size 1.
  const void* source = in;
  if (in != out && (!s.shm || overlaps(in, nbytes, out, nbytes))) {
    std::memmove(out, in, nbytes);
    source = out;
  }
  if (s.size == 1) return;
  if (s.shm) return s.shm->all_reduce(source, out, count, dtype, op);
  ReduceFunction fn = reduce_function(dtype, op);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("all_reduce", count, dtype, reduce_op_name(op)), s.timeout,
              [&] { gloo_allreduce_any(context, out, count, element, fn, tag, s.timeout); });
}

void ProcessGroup::reduce_scatter(const void* in, void* out, const std::vector<std::size_t>& counts,
                                  DType dtype, ReduceOp op) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(counts.size() == static_cast<std::size_t>(s.size), label,
           ": reduce_scatter: ", counts.size(), " counts for a group of ", s.size);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const std::size_t mine = counts[s.rank];
  const std::size_t element = dtype_size(dtype);
  GC_CHECK(in != nullptr || total == 0, label, ": reduce_scatter: null input with total ", total);
  GC_CHECK(out != nullptr || mine == 0, label, ": reduce_scatter: null output with count ", mine);
  GC_CHECK(!overlaps(in, total * element, out, mine * element), label,
           ": reduce_scatter: the output overlaps the input");
  if (s.shm) {
    auto context = s.acquire("reduce_scatter");
    if (total == 0) return;
    return s.shm->reduce_scatter(in, out, counts, dtype, op);
  }
  // Gloo: the whole input reduced, then this rank's part kept.
  std::size_t offset = 0;  // this rank's part of the input, in elements
  for (int r = 0; r < s.rank; ++r) offset += counts[r];
  std::vector<std::uint8_t> reduced(total * element);
  all_reduce(in, reduced.data(), total, dtype, op);
  if (mine > 0) std::memcpy(out, reduced.data() + offset * element, mine * element);
}

void ProcessGroup::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK((in != nullptr && out != nullptr) || count_per_rank == 0, label,
           ": all_gather: null buffer with count_per_rank ", count_per_rank);
  auto context = s.acquire("all_gather");
  if (count_per_rank == 0) return;
  const std::size_t chunk = count_per_rank * dtype_size(dtype);
  std::uint8_t* own_slot = bytes_of(out) + static_cast<std::size_t>(s.rank) * chunk;
  const bool in_place = in == own_slot;
  GC_CHECK(in_place || !overlaps(in, chunk, out, chunk * s.size), label,
           ": all_gather: input overlaps the output other than at this rank's slot");
  if (s.shm) return s.shm->all_gather(in, out, chunk);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("all_gather", count_per_rank, dtype), s.timeout, [&] {
    gloo::AllgatherOptions options(context);
    // In place (input already in our slot): Gloo must not be given the input, or it would
    // memcpy the slot onto itself.
    if (!in_place) options.setInput(bytes_of(in), chunk);
    options.setOutput(bytes_of(out), chunk * s.size);
    options.setTag(tag);
    options.setTimeout(s.timeout);
    gloo::allgather(options);
  });
}

void ProcessGroup::all_gatherv(const void* in, void* out, const std::vector<std::size_t>& counts,
                               DType dtype) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(counts.size() == static_cast<std::size_t>(s.size), label,
           ": all_gatherv: ", counts.size(), " counts for a group of ", s.size);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const std::size_t mine = counts[s.rank];
  GC_CHECK(in != nullptr || mine == 0, label, ": all_gatherv: null input with count ", mine);
  GC_CHECK(out != nullptr || total == 0, label, ": all_gatherv: null output with total ", total);
  auto context = s.acquire("all_gatherv");
  if (total == 0) return;
  const std::size_t element = dtype_size(dtype);
  std::vector<std::size_t> byte_counts(counts.size());
  std::size_t my_offset = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    byte_counts[r] = counts[r] * element;
    if (static_cast<int>(r) < s.rank) my_offset += byte_counts[r];
  }
  const bool in_place = in == bytes_of(out) + my_offset || mine == 0;
  GC_CHECK(in_place || !overlaps(in, mine * element, out, total * element), label,
           ": all_gatherv: input overlaps the output other than at this rank's slot");
  if (s.shm) return s.shm->all_gatherv(in, out, byte_counts);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("all_gatherv", total, dtype), s.timeout, [&] {
    gloo::AllgathervOptions options(context);
    if (!in_place) options.setInput(bytes_of(in), mine * element);
    options.setOutput(bytes_of(out), byte_counts);
    options.setTag(tag);
    options.setTimeout(s.timeout);
    gloo::allgatherv(options);
  });
}

void ProcessGroup::gather(const void* in, void* out, std::size_t count, DType dtype, int root) {
  State& s = *state_;
  const std::string& label = s.health->label();
  GC_CHECK(root >= 0 && root < s.size, label, ": gather: root ", root, " out of range [0, ", s.size,
           ")");
  GC_CHECK(in != nullptr || count == 0, label, ": gather: null input with count ", count);
  GC_CHECK(out != nullptr || count == 0 || s.rank != root, label,
           ": gather: null output on the root with count ", count);
  auto context = s.acquire("gather");
  if (count == 0) return;
  const std::size_t chunk = count * dtype_size(dtype);
  const bool is_root = s.rank == root;
  // A root input that overlaps the output anywhere but exactly at the root's own place would be
  // overwritten by the others' parts before all of it is read (the shared-memory paths write
  // those parts while the root's input is still being copied), so it goes through a private
  // copy. Gloo copies the root's input into its place with memcpy, so there even an input
  // already in place is staged.
  const bool overlapping = is_root && overlaps(in, chunk, out, chunk * s.size);
  const bool in_place = is_root && in == bytes_of(out) + static_cast<std::size_t>(root) * chunk;
  std::vector<std::uint8_t> staged;
  const void* input = in;
  if (overlapping && (!s.shm || !in_place)) {
    staged.assign(bytes_of(in), bytes_of(in) + chunk);
    input = staged.data();
  }
  if (s.shm) return s.shm->gather(input, out, chunk, root);
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, describe("gather", count, dtype, "root=" + std::to_string(root)),
              s.timeout, [&] {
                gloo::GatherOptions options(context);
                options.setInput(bytes_of(input), chunk);
                if (is_root) options.setOutput(bytes_of(out), chunk * s.size);
                options.setRoot(root);
                options.setTag(tag);
                options.setTimeout(s.timeout);
                gloo::gather(options);
              });
}

void ProcessGroup::barrier() {
  State& s = *state_;
  auto context = s.acquire("barrier");
  if (s.size == 1) return;
  if (s.shm) return s.shm->barrier();
  const std::uint32_t tag = s.next_tag++;
  run_gloo_op(*s.health, "barrier", s.timeout, [&] {
    gloo::BarrierOptions options(context);
    options.setTag(tag);
    options.setTimeout(s.timeout);
    gloo::barrier(options);
  });
}

}  // namespace groupcoord
