// Checks of ProcessGroup shared by the thread test (ranks are threads) and the multi-process test
// (ranks are processes under mpirun). Each check is collective over the group it is given: every
// rank calls it with the same arguments. Results are compared with references computed here,
// independently of the code under test: every rank can recompute what any other rank
// contributed, because contributions are pure functions of (rank, index).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "groupcoord/dtype.h"
#include "groupcoord/process_group.h"
#include "groupcoord/reduce_op.h"

namespace groupcoord {
namespace testing {

/// Element counts every collective is checked at (the 64 MiB case has its own checks).
const std::vector<std::size_t>& small_counts();

/// Byte `j` of what rank `rank` contributes to a data-movement collective.
std::uint8_t pattern_byte(int rank, std::size_t j, std::uint32_t salt);
/// `nbytes` pattern bytes of `rank`.
std::vector<std::uint8_t> pattern(int rank, std::size_t nbytes, std::uint32_t salt);

/// Value of element `i` that `rank` contributes to a reduction: small, exactly representable in
/// `dtype`, and such that sums over up to 8 ranks stay exact in every dtype (fp8 included).
double reduce_input(DType dtype, int rank, std::size_t i);
/// Writes `value` as element `i` of a `dtype` array.
void store_value(DType dtype, void* base, std::size_t i, double value);
/// Reads element `i` of a `dtype` array as a double.
double load_value(DType dtype, const void* base, std::size_t i);
/// Sequential reference of all_reduce element `i` over ranks 0..size-1.
double reduce_reference(DType dtype, ReduceOp op, int size, std::size_t i);

void check_broadcast_all_roots(ProcessGroup& pg, DType dtype, std::size_t count);
void check_all_reduce(ProcessGroup& pg, DType dtype, ReduceOp op, std::size_t count,
                      bool out_of_place);
void check_all_gather(ProcessGroup& pg, DType dtype, std::size_t count, bool in_place);
void check_all_gatherv(ProcessGroup& pg, DType dtype, const std::vector<std::size_t>& counts);
/// reduce_scatter with rank r keeping counts[r] elements, against the sequential reference.
void check_reduce_scatter(ProcessGroup& pg, DType dtype, ReduceOp op,
                          const std::vector<std::size_t>& counts);
void check_gather_all_roots(ProcessGroup& pg, DType dtype, std::size_t count);
/// Every rank's barrier exit comes after every rank's entry (checked through the group's store).
void check_barrier(ProcessGroup& pg);

/// All collectives on every dtype at small_counts(), plus all_gatherv with the brief's sizes.
void check_all_collectives_small(ProcessGroup& pg);
/// 64 MiB all_reduce (float32), broadcast, all_gather and reduce_scatter.
void check_collectives_64mib(ProcessGroup& pg);
/// all_reduce of several chunks with a partial last one (the split reduction of the shared-memory
/// path, in and out of place), on float32, bfloat16 (accumulated in float) and int64.
void check_all_reduce_multi_chunk(ProcessGroup& pg);

/// Blocking send/recv between neighbours of `nbytes` (0 allowed).
void check_send_recv(ProcessGroup& pg, std::size_t nbytes);
/// Streams on different tags do not block each other (received in the opposite order).
void check_tags_are_independent(ProcessGroup& pg);
/// `n` isends to the next rank are received in posting order; is_completed() after wait();
/// dropped Work handles do not block.
void check_many_async_sends_in_order(ProcessGroup& pg, int n);
/// irecv is not completed before its sender sent, and is after wait().
void check_irecv_completion(ProcessGroup& pg);
/// Many irecvs of varying sizes posted on one stream before anything was sent complete in
/// posting order with the right bytes.
void check_irecv_stream_order(ProcessGroup& pg);
/// A receive whose size differs from the sent size raises DistributedError (no crash), and the
/// stream and the group stay usable.
void check_size_mismatch(ProcessGroup& pg);
/// Point-to-point and collectives on the same group at the same time (p2p on another thread).
void check_p2p_concurrent_with_collectives(ProcessGroup& pg);

/// Every argument error raises std::invalid_argument and leaves the group usable.
void check_bad_arguments(ProcessGroup& pg);
/// Sub-groups [[0,1],[2,3]] and [[0,2],[1,3]] (4 ranks; adapted for other sizes) in one job.
void check_subgroup_layouts(ProcessGroup& world);
/// A rank that skips a collective on a 2 s sub-group makes the others raise TimeoutError; the
/// group is broken afterwards; everyone destroys it cleanly; `world` stays usable.
void check_absent_rank_times_out(ProcessGroup& world);
/// destroy() with an isend nobody receives returns within the bound and fails that Work.
void check_destroy_with_pending_work(ProcessGroup& world);

}  // namespace testing
}  // namespace groupcoord
