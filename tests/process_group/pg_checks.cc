#include "pg_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>

#include "groupcoord/errors.h"
#include "groupcoord/half.h"

namespace groupcoord {
namespace testing {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string where(const ProcessGroup& pg, DType dtype, std::size_t count) {
  return "group " + pg.name() + " rank " + std::to_string(pg.rank()) + " dtype " +
         dtype_name(dtype) + " count " + std::to_string(count);
}

/// A per-rank counter in the group's store: each rank counts its own calls, so the values agree
/// across ranks (every rank makes the same calls) without any synchronisation.
long next_round(ProcessGroup& pg, const std::string& what) {
  return static_cast<long>(pg.store()->add(what + "/" + std::to_string(pg.rank()), 1));
}

/// Counts the mismatching bytes between `got` and rank `rank`'s pattern, and reports the first.
void expect_pattern(const std::uint8_t* got, int rank, std::size_t nbytes, std::uint32_t salt,
                    const std::string& context) {
  for (std::size_t j = 0; j < nbytes; ++j) {
    if (got[j] != pattern_byte(rank, j, salt)) {
      ADD_FAILURE() << context << ": byte " << j << " of rank " << rank << "'s block is "
                    << int(got[j]) << ", expected " << int(pattern_byte(rank, j, salt));
      return;
    }
  }
}

}  // namespace

const std::vector<std::size_t>& small_counts() {
  static const std::vector<std::size_t> counts = {0, 1, 1023};
  return counts;
}

std::uint8_t pattern_byte(int rank, std::size_t j, std::uint32_t salt) {
  return static_cast<std::uint8_t>(j * 131u + (j >> 8) + static_cast<std::size_t>(rank) * 29u +
                                   salt * 7u + 1u);
}

std::vector<std::uint8_t> pattern(int rank, std::size_t nbytes, std::uint32_t salt) {
  std::vector<std::uint8_t> bytes(nbytes);
  for (std::size_t j = 0; j < nbytes; ++j) bytes[j] = pattern_byte(rank, j, salt);
  return bytes;
}

double reduce_input(DType dtype, int rank, std::size_t i) {
  const std::size_t mix = i * 7 + static_cast<std::size_t>(rank) * 3;
  switch (dtype) {
    case DType::Bool:
      return (i + static_cast<std::size_t>(rank)) % 3 == 0 ? 1.0 : 0.0;
    case DType::UInt8:
      return static_cast<double>(mix % 5);  // 0..4
    case DType::Int8:
    case DType::Int32:
    case DType::Int64:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      // -2..2: partial sums over <= 4 ranks stay within the integers e5m2 holds exactly.
      return static_cast<double>(static_cast<long>(mix % 5) - 2);
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64:
      return 0.5 * static_cast<double>(static_cast<long>(mix % 9) - 4);
  }
  return 0;
}

void store_value(DType dtype, void* base, std::size_t i, double value) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::Float32:
      static_cast<float*>(base)[i] = f;
      return;
    case DType::Float64:
      static_cast<double*>(base)[i] = value;
      return;
    case DType::Float16:
      static_cast<std::uint16_t*>(base)[i] = float_to_half(f);
      return;
    case DType::BFloat16:
      static_cast<std::uint16_t*>(base)[i] = float_to_bfloat16(f);
      return;
    case DType::Int8:
      static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(value);
      return;
    case DType::UInt8:
      static_cast<std::uint8_t*>(base)[i] = static_cast<std::uint8_t>(value);
      return;
    case DType::Int32:
      static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(value);
      return;
    case DType::Int64:
      static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(value);
      return;
    case DType::Bool:
      static_cast<std::uint8_t*>(base)[i] = value != 0 ? 1 : 0;
      return;
    case DType::Float8E4M3:
      static_cast<std::uint8_t*>(base)[i] = float_to_float8_e4m3fn(f);
      return;
    case DType::Float8E5M2:
      static_cast<std::uint8_t*>(base)[i] = float_to_float8_e5m2(f);
      return;
  }
}

double load_value(DType dtype, const void* base, std::size_t i) {
  switch (dtype) {
    case DType::Float32:
      return static_cast<const float*>(base)[i];
    case DType::Float64:
      return static_cast<const double*>(base)[i];
    case DType::Float16:
      return half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::BFloat16:
      return bfloat16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::Int8:
      return static_cast<const std::int8_t*>(base)[i];
    case DType::UInt8:
      return static_cast<const std::uint8_t*>(base)[i];
    case DType::Int32:
      return static_cast<const std::int32_t*>(base)[i];
    case DType::Int64:
      return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
    case DType::Bool:
      return static_cast<const std::uint8_t*>(base)[i];
    case DType::Float8E4M3:
      return float8_e4m3fn_to_float(static_cast<const std::uint8_t*>(base)[i]);
    case DType::Float8E5M2:
      return float8_e5m2_to_float(static_cast<const std::uint8_t*>(base)[i]);
  }
  return 0;
}

double reduce_reference(DType dtype, ReduceOp op, int size, std::size_t i) {
  double result = reduce_input(dtype, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = reduce_input(dtype, r, i);
    switch (op) {
      case ReduceOp::Sum:
        result += v;
        break;
      case ReduceOp::Min:
        result = std::min(result, v);
        break;
      case ReduceOp::Max:
        result = std::max(result, v);
        break;
    }
  }
  if (dtype == DType::Bool && op == ReduceOp::Sum) result = result > 0 ? 1 : 0;  // logical or
  return result;
}

// ---- collectives ------------------------------------------------------------------------------

void check_broadcast_all_roots(ProcessGroup& pg, DType dtype, std::size_t count) {
  const std::size_t nbytes = count * dtype_size(dtype);
  for (int root = 0; root < pg.size(); ++root) {
    const std::uint32_t salt = static_cast<std::uint32_t>(root);
    std::vector<std::uint8_t> data =
        pg.rank() == root ? pattern(root, nbytes, salt) : std::vector<std::uint8_t>(nbytes, 0xEE);
    pg.broadcast(data.empty() ? nullptr : data.data(), count, dtype, root);
    expect_pattern(data.data(), root, nbytes, salt,
                   "broadcast root " + std::to_string(root) + " " + where(pg, dtype, count));
  }
}

void check_all_reduce(ProcessGroup& pg, DType dtype, ReduceOp op, std::size_t count,
                      bool out_of_place) {
  const std::size_t element = dtype_size(dtype);
  std::vector<std::uint8_t> in(count * element), out(count * element, 0xEE);
  for (std::size_t i = 0; i < count; ++i) {
    store_value(dtype, in.data(), i, reduce_input(dtype, pg.rank(), i));
  }
  const std::vector<std::uint8_t> original = in;
  if (out_of_place) {
    pg.all_reduce(count ? in.data() : nullptr, count ? out.data() : nullptr, count, dtype, op);
    EXPECT_EQ(in, original) << "all_reduce modified its input; " << where(pg, dtype, count);
  } else {
    pg.all_reduce(count ? in.data() : nullptr, count, dtype, op);
    out = in;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const double expected = reduce_reference(dtype, op, pg.size(), i);
    const double got = load_value(dtype, out.data(), i);
    if (got != expected) {
      ADD_FAILURE() << "all_reduce " << reduce_op_name(op) << (out_of_place ? " out" : " in")
                    << " of place, " << where(pg, dtype, count) << ": element " << i << " is "
                    << got << ", expected " << expected;
      return;
    }
  }
}

void check_all_gather(ProcessGroup& pg, DType dtype, std::size_t count, bool in_place) {
  const std::size_t chunk = count * dtype_size(dtype);
  const std::uint32_t salt = 11;
  std::vector<std::uint8_t> in = pattern(pg.rank(), chunk, salt);
  std::vector<std::uint8_t> out(chunk * pg.size(), 0xEE);
  if (in_place) {
    std::copy(in.begin(), in.end(), out.begin() + static_cast<std::ptrdiff_t>(chunk * pg.rank()));
    pg.all_gather(out.data() + chunk * pg.rank(), out.data(), count, dtype);
  } else {
    pg.all_gather(count ? in.data() : nullptr, count ? out.data() : nullptr, count, dtype);
  }
  for (int r = 0; r < pg.size(); ++r) {
    expect_pattern(
        out.data() + chunk * r, r, chunk, salt,
        std::string("all_gather") + (in_place ? " in place " : " ") + where(pg, dtype, count));
  }
}

void check_all_gatherv(ProcessGroup& pg, DType dtype, const std::vector<std::size_t>& counts) {
  const std::size_t element = dtype_size(dtype);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  const std::uint32_t salt = 23;
  std::vector<std::uint8_t> in = pattern(pg.rank(), counts[pg.rank()] * element, salt);
  std::vector<std::uint8_t> out(total * element, 0xEE);
  pg.all_gatherv(in.empty() ? nullptr : in.data(), out.empty() ? nullptr : out.data(), counts,
                 dtype);
  std::size_t offset = 0;
  for (int r = 0; r < pg.size(); ++r) {
    expect_pattern(out.data() + offset, r, counts[r] * element, salt,
                   "all_gatherv " + where(pg, dtype, total));
    offset += counts[r] * element;
  }
}

void check_reduce_scatter(ProcessGroup& pg, DType dtype, ReduceOp op,
                          const std::vector<std::size_t>& counts) {
  const std::size_t element = dtype_size(dtype);
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  std::size_t offset = 0;  // this rank's part of the input
  for (int r = 0; r < pg.rank(); ++r) offset += counts[r];
  const std::size_t mine = counts[pg.rank()];
  std::vector<std::uint8_t> in(total * element), out(mine * element, 0xEE);
  for (std::size_t i = 0; i < total; ++i) {
    store_value(dtype, in.data(), i, reduce_input(dtype, pg.rank(), i));
  }
  const std::vector<std::uint8_t> original = in;
  pg.reduce_scatter(in.empty() ? nullptr : in.data(), out.empty() ? nullptr : out.data(), counts,
                    dtype, op);
  EXPECT_EQ(in, original) << "reduce_scatter modified its input; " << where(pg, dtype, total);
  for (std::size_t j = 0; j < mine; ++j) {
    const double expected = reduce_reference(dtype, op, pg.size(), offset + j);
    const double got = load_value(dtype, out.data(), j);
    if (got != expected) {
      ADD_FAILURE() << "reduce_scatter " << reduce_op_name(op) << ", " << where(pg, dtype, total)
                    << ": element " << j << " of this rank's part is " << got << ", expected "
                    << expected;
      return;
    }
  }
}

void check_gather_all_roots(ProcessGroup& pg, DType dtype, std::size_t count) {
  const std::size_t chunk = count * dtype_size(dtype);
  for (int root = 0; root < pg.size(); ++root) {
    const std::uint32_t salt = 40 + static_cast<std::uint32_t>(root);
    std::vector<std::uint8_t> in = pattern(pg.rank(), chunk, salt);
    std::vector<std::uint8_t> out(pg.rank() == root ? chunk * pg.size() : 0, 0xEE);
    pg.gather(count ? in.data() : nullptr, out.empty() ? nullptr : out.data(), count, dtype, root);
    if (pg.rank() != root) continue;
    for (int r = 0; r < pg.size(); ++r) {
      expect_pattern(out.data() + chunk * r, r, chunk, salt,
                     "gather root " + std::to_string(root) + " " + where(pg, dtype, count));
    }
  }
}

void check_barrier(ProcessGroup& pg) {
  const std::string round = "barrier_check/" + std::to_string(next_round(pg, "barrier_round"));
  pg.store()->set(round + "/entered/" + std::to_string(pg.rank()), "1");
  pg.barrier();
  // After the barrier every rank must have entered, so every key is already there.
  std::vector<std::string> keys;
  for (int r = 0; r < pg.size(); ++r) keys.push_back(round + "/entered/" + std::to_string(r));
  EXPECT_TRUE(pg.store()->check(keys)) << "barrier returned before every rank entered";
  pg.barrier();  // keep the next round's writes after everyone's check
}

void check_all_collectives_small(ProcessGroup& pg) {
  static const std::size_t kGathervSizes[] = {81, 20, 57, 52, 81, 5, 49, 49};
  const int n = pg.size();
  std::vector<std::size_t> sizes(n), with_zeros(n), all_zero(n, 0);
  for (int r = 0; r < n; ++r) {
    sizes[r] = kGathervSizes[r % 8];
    with_zeros[r] = r % 2 == 0 ? 0 : kGathervSizes[r % 8];
  }
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dtype = all_dtypes()[d];
    for (std::size_t count : small_counts()) {
      check_broadcast_all_roots(pg, dtype, count);
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max}) {
        check_all_reduce(pg, dtype, op, count, /*out_of_place=*/false);
        check_all_reduce(pg, dtype, op, count, /*out_of_place=*/true);
      }
      check_all_gather(pg, dtype, count, /*in_place=*/false);
      check_all_gather(pg, dtype, count, /*in_place=*/true);
      check_gather_all_roots(pg, dtype, count);
    }
    check_all_gatherv(pg, dtype, sizes);
    check_all_gatherv(pg, dtype, with_zeros);
    check_all_gatherv(pg, dtype, all_zero);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max}) {
      for (std::size_t count : small_counts()) {
        check_reduce_scatter(pg, dtype, op, std::vector<std::size_t>(n, count));
      }
      check_reduce_scatter(pg, dtype, op, sizes);
      check_reduce_scatter(pg, dtype, op, with_zeros);
    }
  }
  check_barrier(pg);
}

void check_all_reduce_multi_chunk(ProcessGroup& pg) {
  // 1.2 MB of float32: four 256 KiB chunks and a partial one, parts not a multiple of the ranks.
  constexpr std::size_t kCount = 300001;
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Int64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
      check_all_reduce(pg, dtype, op, kCount, /*out_of_place=*/true);
      check_all_reduce(pg, dtype, op, kCount, /*out_of_place=*/false);
    }
  }
}

void check_collectives_64mib(ProcessGroup& pg) {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  const DType dtype = DType::Float32;
  const std::size_t count = kBytes / sizeof(float);
  {
    std::vector<float> data(count);
    for (std::size_t i = 0; i < count; ++i) data[i] = float(reduce_input(dtype, pg.rank(), i));
    pg.all_reduce(data.data(), count, dtype, ReduceOp::Sum);
    for (std::size_t i = 0; i < count; ++i) {
      const double expected = reduce_reference(dtype, ReduceOp::Sum, pg.size(), i);
      if (data[i] != expected) {
        ADD_FAILURE() << "64 MiB all_reduce: element " << i << " is " << data[i] << ", expected "
                      << expected;
        break;
      }
    }
  }
  {
    const int root = pg.size() - 1;
    std::vector<std::uint8_t> data =
        pg.rank() == root ? pattern(root, kBytes, 3) : std::vector<std::uint8_t>(kBytes, 0);
    pg.broadcast(data.data(), kBytes, DType::UInt8, root);
    expect_pattern(data.data(), root, kBytes, 3, "64 MiB broadcast");
  }
  {
    const std::size_t chunk = kBytes / pg.size();
    std::vector<std::uint8_t> in = pattern(pg.rank(), chunk, 5);
    std::vector<std::uint8_t> out(chunk * pg.size());
    pg.all_gather(in.data(), out.data(), chunk, DType::UInt8);
    for (int r = 0; r < pg.size(); ++r) {
      expect_pattern(out.data() + chunk * r, r, chunk, 5, "64 MiB all_gather");
    }
  }
  {
    // Unequal parts, the last rank's the largest, so that the chunks of a step straddle them.
    std::vector<std::size_t> counts(pg.size(), count / pg.size() - 3);
    counts.back() += 3 * static_cast<std::size_t>(pg.size());
    check_reduce_scatter(pg, dtype, ReduceOp::Sum, counts);
  }
}

// ---- point to point ---------------------------------------------------------------------------

void check_send_recv(ProcessGroup& pg, std::size_t nbytes) {
  const int n = pg.size();
  if (n < 2) return;
  const int me = pg.rank();
  // Pairs (0,1), (2,3), ...: the even rank sends first, so blocking calls cannot deadlock.
  const int partner = me ^ 1;
  if (partner < n) {
    std::vector<std::uint8_t> out = pattern(me, nbytes, 70);
    std::vector<std::uint8_t> in(nbytes, 0xEE);
    auto* in_ptr = nbytes ? in.data() : nullptr;
    auto* out_ptr = nbytes ? out.data() : nullptr;
    if (me % 2 == 0) {
      pg.send(out_ptr, nbytes, partner, 3);
      pg.recv(in_ptr, nbytes, partner, 3);
    } else {
      pg.recv(in_ptr, nbytes, partner, 3);
      pg.send(out_ptr, nbytes, partner, 3);
    }
    expect_pattern(in.data(), partner, nbytes, 70,
                   "send/recv of " + std::to_string(nbytes) + " bytes");
  }
  // A ring as well (odd sizes included): isend forward, recv from behind.
  std::vector<std::uint8_t> out = pattern(me, nbytes, 71);
  std::vector<std::uint8_t> in(nbytes, 0xEE);
  auto work = pg.isend(nbytes ? out.data() : nullptr, nbytes, (me + 1) % n, 4);
  pg.recv(nbytes ? in.data() : nullptr, nbytes, (me + n - 1) % n, 4);
  work->wait();
  EXPECT_TRUE(work->is_completed());
  expect_pattern(in.data(), (me + n - 1) % n, nbytes, 71, "ring isend/recv");
}

void check_tags_are_independent(ProcessGroup& pg) {
  if (pg.size() < 2 || pg.rank() > 1) return;
  constexpr std::size_t kBytes = 1000;
  if (pg.rank() == 0) {
    std::vector<std::uint8_t> a = pattern(0, kBytes, 101), b = pattern(0, kBytes, 102);
    auto first = pg.isend(a.data(), kBytes, 1, 101);
    auto second = pg.isend(b.data(), kBytes, 1, 102);
    second->wait();  // received first although posted second
    first->wait();
  } else {
    std::vector<std::uint8_t> a(kBytes), b(kBytes);
    pg.recv(b.data(), kBytes, 0, 102);
    pg.recv(a.data(), kBytes, 0, 101);
    expect_pattern(a.data(), 0, kBytes, 101, "tag 101");
    expect_pattern(b.data(), 0, kBytes, 102, "tag 102");
  }
}

void check_many_async_sends_in_order(ProcessGroup& pg, int count) {
  const int n = pg.size();
  if (n < 2) return;
  const int me = pg.rank();
  const int dst = (me + 1) % n;
  const int src = (me + n - 1) % n;
  constexpr std::size_t kBytes = 257;
  std::vector<std::vector<std::uint8_t>> payloads;
  std::vector<std::shared_ptr<Work>> kept;
  for (int i = 0; i < count; ++i) {
    payloads.push_back(pattern(me, kBytes, 1000 + i));
  }
  for (int i = 0; i < count; ++i) {
    auto work = pg.isend(payloads[i].data(), kBytes, dst, 9);
    // Drop every third handle at once: that must neither block nor cancel the transfer.
    if (i % 3 != 0) kept.push_back(std::move(work));
  }
  for (int i = 0; i < count; ++i) {
    std::vector<std::uint8_t> got(kBytes);
    pg.recv(got.data(), kBytes, src, 9);
    expect_pattern(got.data(), src, kBytes, 1000 + i, "async send #" + std::to_string(i));
  }
  for (auto& work : kept) {
    work->wait();
    EXPECT_TRUE(work->is_completed());
  }
  // Payloads must outlive the dropped sends: the receiver has every message once it passes this.
  pg.barrier();
}

void check_irecv_completion(ProcessGroup& pg) {
  if (pg.size() < 2 || pg.rank() > 1) {
    pg.barrier();
    return;
  }
  constexpr std::size_t kBytes = 4096;
  if (pg.rank() == 1) {
    std::vector<std::uint8_t> got(kBytes, 0);
    auto work = pg.irecv(got.data(), kBytes, 0, 21);
    // Rank 0 sends only after the barrier below, which we have not entered yet.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(work->is_completed()) << "irecv reported completion before anything was sent";
    EXPECT_THROW(work->wait(std::chrono::milliseconds(20)), TimeoutError);
    EXPECT_FALSE(pg.is_broken()) << "a Work wait that runs out must not break the group";
    pg.barrier();
    work->wait();
    EXPECT_TRUE(work->is_completed());
    expect_pattern(got.data(), 0, kBytes, 21, "irecv");
  } else {
    pg.barrier();
    std::vector<std::uint8_t> data = pattern(0, kBytes, 21);
    pg.send(data.data(), kBytes, 1, 21);
  }
}

void check_irecv_stream_order(ProcessGroup& pg) {
  if (pg.size() < 2 || pg.rank() > 1) {
    pg.barrier();
    return;
  }
  constexpr int kMessages = 20;
  auto size_of = [](int i) { return static_cast<std::size_t>((i * 37) % 200); };  // 0 included
  if (pg.rank() == 1) {
    std::vector<std::vector<std::uint8_t>> got(kMessages);
    std::vector<std::shared_ptr<Work>> works;
    for (int i = 0; i < kMessages; ++i) {
      got[i].assign(size_of(i), 0);
      works.push_back(pg.irecv(got[i].empty() ? nullptr : got[i].data(), size_of(i), 0, 33));
    }
    pg.barrier();                                               // only now does rank 0 send
    for (int i = kMessages - 1; i >= 0; --i) works[i]->wait();  // any wait order works
    for (int i = 0; i < kMessages; ++i) {
      expect_pattern(got[i].data(), 0, size_of(i), 300 + i, "irecv #" + std::to_string(i));
    }
  } else {
    pg.barrier();
    for (int i = 0; i < kMessages; ++i) {
      std::vector<std::uint8_t> data = pattern(0, size_of(i), 300 + i);
      pg.send(data.empty() ? nullptr : data.data(), data.size(), 1, 33);
    }
  }
}

void check_size_mismatch(ProcessGroup& pg) {
  if (pg.size() < 2 || pg.rank() > 1) return;
  std::vector<std::uint8_t> big = pattern(0, 300, 61), small(100, 0), after(50, 0);
  if (pg.rank() == 0) {
    pg.send(big.data(), 300, 1, 44);  // receiver expects 100
    pg.send(big.data(), 100, 1, 44);  // receiver expects 300
    std::vector<std::uint8_t> ok = pattern(0, 50, 62);
    pg.send(ok.data(), 50, 1, 44);
  } else {
    try {
      pg.recv(small.data(), 100, 0, 44);
      ADD_FAILURE() << "oversized message accepted";
    } catch (const DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find("300 bytes"), std::string::npos) << e.what();
    }
    std::vector<std::uint8_t> large(300, 0);
    EXPECT_THROW(pg.recv(large.data(), 300, 0, 44), DistributedError);
    pg.recv(after.data(), 50, 0, 44);  // the stream is still in step
    expect_pattern(after.data(), 0, 50, 62, "message after a size mismatch");
    EXPECT_FALSE(pg.is_broken());
  }
}

void check_p2p_concurrent_with_collectives(ProcessGroup& pg) {
  const int n = pg.size();
  if (n < 2) return;
  const int me = pg.rank();
  constexpr int kRounds = 20;
  std::atomic<bool> p2p_ok{true};
  std::thread p2p([&] {
    try {
      for (int i = 0; i < kRounds; ++i) {
        std::vector<std::uint8_t> out = pattern(me, 333, 500 + i), in(333);
        auto work = pg.isend(out.data(), out.size(), (me + 1) % n, 77);
        pg.recv(in.data(), in.size(), (me + n - 1) % n, 77);
        work->wait();
        if (in != pattern((me + n - 1) % n, 333, 500 + i)) p2p_ok = false;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "p2p thread: " << e.what();
      p2p_ok = false;
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    check_all_reduce(pg, DType::Int32, ReduceOp::Sum, 100, false);
  }
  p2p.join();
  EXPECT_TRUE(p2p_ok.load());
}

// ---- errors -----------------------------------------------------------------------------------

void check_bad_arguments(ProcessGroup& pg) {
  const int n = pg.size();
  const int me = pg.rank();
  std::vector<float> buf(8 * n, 0.f), out(8 * n, 0.f);
  auto expect_invalid = [&](const char* what, auto&& call) {
    try {
      call();
      ADD_FAILURE() << what << ": no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(pg.name()), std::string::npos)
          << what << ": message does not name the group: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": wrong exception: " << e.what();
    }
  };
  expect_invalid("broadcast root = size", [&] { pg.broadcast(buf.data(), 8, DType::Float32, n); });
  expect_invalid("broadcast root = -1", [&] { pg.broadcast(buf.data(), 8, DType::Float32, -1); });
  expect_invalid("broadcast null", [&] { pg.broadcast(nullptr, 8, DType::Float32, 0); });
  expect_invalid("all_reduce null", [&] { pg.all_reduce(nullptr, 8, DType::Float32); });
  expect_invalid("all_reduce null out",
                 [&] { pg.all_reduce(buf.data(), nullptr, 8, DType::Float32); });
  expect_invalid("all_gather null", [&] { pg.all_gather(nullptr, out.data(), 8, DType::Float32); });
  expect_invalid("all_gatherv counts", [&] {
    pg.all_gatherv(buf.data(), out.data(), std::vector<std::size_t>(n + 1, 1), DType::Float32);
  });
  expect_invalid("all_gatherv null", [&] {
    pg.all_gatherv(nullptr, out.data(), std::vector<std::size_t>(n, 1), DType::Float32);
  });
  expect_invalid("reduce_scatter counts", [&] {
    pg.reduce_scatter(buf.data(), out.data(), std::vector<std::size_t>(n + 1, 1), DType::Float32);
  });
  expect_invalid("reduce_scatter null", [&] {
    pg.reduce_scatter(nullptr, out.data(), std::vector<std::size_t>(n, 1), DType::Float32);
  });
  expect_invalid("reduce_scatter overlap", [&] {
    pg.reduce_scatter(buf.data(), buf.data(), std::vector<std::size_t>(n, 2), DType::Float32);
  });
  expect_invalid("gather root", [&] { pg.gather(buf.data(), out.data(), 8, DType::Float32, n); });
  expect_invalid("gather null root output",
                 [&] { pg.gather(buf.data(), nullptr, 8, DType::Float32, me); });
  expect_invalid("send to self", [&] { pg.send(buf.data(), 4, me, 0); });
  expect_invalid("send out of range", [&] { pg.send(buf.data(), 4, n, 0); });
  expect_invalid("recv out of range", [&] { pg.recv(buf.data(), 4, -1, 0); });
  expect_invalid("isend to self", [&] { pg.isend(buf.data(), 4, me, 0); });
  expect_invalid("irecv from self", [&] { pg.irecv(buf.data(), 4, me, 0); });
  expect_invalid("irecv null", [&] { pg.irecv(nullptr, 4, (me + 1) % n, 0); });
  expect_invalid("new_group duplicate", [&] { pg.new_group({0, 0}); });
  expect_invalid("new_group out of range", [&] { pg.new_group({n}); });
  expect_invalid("new_group empty", [&] { pg.new_group({}); });
  EXPECT_FALSE(pg.is_broken());
  // Nothing was sent: the group still works, and the tag sequence still agrees across ranks.
  check_all_reduce(pg, DType::Float32, ReduceOp::Sum, 17, false);
}

// ---- sub-groups -------------------------------------------------------------------------------

namespace {

/// Collective checks of one sub-group whose members are `members` (world ranks, group order).
void exercise_subgroup(ProcessGroup& g, const std::vector<int>& members, int world_rank) {
  EXPECT_EQ(g.world_ranks(), members);
  EXPECT_EQ(g.size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[g.rank()], world_rank);
  const int n = g.size();
  // all_reduce of values derived from world ranks.
  std::vector<std::int32_t> values(5);
  for (int i = 0; i < 5; ++i) values[i] = world_rank * 10 + i;
  g.all_reduce(values.data(), 5, DType::Int32, ReduceOp::Sum);
  for (int i = 0; i < 5; ++i) {
    std::int32_t expected = 0;
    for (int m : members) expected += m * 10 + i;
    EXPECT_EQ(values[i], expected) << "sub-group " << g.name() << " all_reduce element " << i;
  }
  // all_gather in group order.
  std::int64_t mine[2] = {world_rank, 7};
  std::vector<std::int64_t> gathered(2 * n, -1);
  g.all_gather(mine, gathered.data(), 2, DType::Int64);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(gathered[2 * r], members[r]) << "sub-group " << g.name() << " all_gather slot " << r;
  }
  // reduce_scatter: member q keeps element q of the sum of the members' world-rank vectors.
  std::vector<std::int32_t> parts(n), part(1, -1);
  for (int q = 0; q < n; ++q) parts[q] = world_rank * 100 + q;
  g.reduce_scatter(parts.data(), part.data(), std::vector<std::size_t>(n, 1), DType::Int32);
  std::int32_t expected_part = 0;
  for (int m : members) expected_part += m * 100 + g.rank();
  EXPECT_EQ(part[0], expected_part) << "sub-group " << g.name() << " reduce_scatter";
  // broadcast from the last member.
  std::int32_t root_value = world_rank;
  g.broadcast(&root_value, 1, DType::Int32, n - 1);
  EXPECT_EQ(root_value, members[n - 1]) << "sub-group " << g.name() << " broadcast";
  // a ring of sends inside the group.
  if (n >= 2) {
    std::int32_t out = world_rank * 3, in = -1;
    auto work = g.isend(&out, sizeof(out), (g.rank() + 1) % n, 1);
    g.recv(&in, sizeof(in), (g.rank() + n - 1) % n, 1);
    work->wait();
    EXPECT_EQ(in, members[(g.rank() + n - 1) % n] * 3) << "sub-group " << g.name() << " ring";
  }
}

/// Creates one sub-group per entry of `layout` (all ranks call new_group for each, in order) and
/// returns this rank's group with its member list.
std::pair<std::shared_ptr<ProcessGroup>, std::vector<int>> make_layout(
    ProcessGroup& world, const std::vector<std::vector<int>>& layout, const std::string& name) {
  std::pair<std::shared_ptr<ProcessGroup>, std::vector<int>> mine;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    ProcessGroupOptions options;
    options.timeout = world.timeout();
    options.name = name + ":" + std::to_string(i);
    auto group = world.new_group(layout[i], options);
    const bool member =
        std::find(layout[i].begin(), layout[i].end(), world.rank()) != layout[i].end();
    EXPECT_EQ(group != nullptr, member) << "new_group " << options.name;
    if (group) mine = {group, layout[i]};
  }
  return mine;
}

}  // namespace

void check_subgroup_layouts(ProcessGroup& world) {
  const int n = world.size();
  // Consecutive pairs ([[0,1],[2,3]] on 4 ranks) and even/odd ([[0,2],[1,3]]).
  std::vector<std::vector<int>> pairs, parity(std::min(n, 2));
  for (int r = 0; r < n; r += 2) {
    pairs.push_back(r + 1 < n ? std::vector<int>{r, r + 1} : std::vector<int>{r});
  }
  for (int r = 0; r < n; ++r) parity[r % 2].push_back(r);
  std::vector<int> reversed(n);
  for (int r = 0; r < n; ++r) reversed[r] = n - 1 - r;

  auto a = make_layout(world, pairs, "pairs");
  auto b = make_layout(world, parity, "parity");
  auto c = make_layout(world, {reversed}, "reversed");
  ASSERT_TRUE(a.first && b.first && c.first);
  // Interleave the layouts: they coexist in one job.
  exercise_subgroup(*a.first, a.second, world.rank());
  exercise_subgroup(*b.first, b.second, world.rank());
  exercise_subgroup(*c.first, c.second, world.rank());
  exercise_subgroup(*a.first, a.second, world.rank());
  check_all_reduce(*b.first, DType::BFloat16, ReduceOp::Sum, 1023, true);
  check_all_gatherv(*a.first, DType::Float16, std::vector<std::size_t>(a.first->size(), 3));
  // A group of a group: ranks are relative to the parent.
  auto inner = c.first->new_group({0});
  EXPECT_EQ(inner != nullptr, c.first->rank() == 0);
  if (inner) EXPECT_EQ(inner->world_ranks(), std::vector<int>{n - 1});
  world.barrier();
  a.first->destroy();
  b.first->destroy();
  c.first->destroy();
  world.barrier();
}

void check_absent_rank_times_out(ProcessGroup& world) {
  const int n = world.size();
  if (n < 2) return;
  const int absent = n - 1;
  std::vector<int> everyone(n);
  std::iota(everyone.begin(), everyone.end(), 0);
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(2);
  options.name = "absent_probe";
  auto collective_probe = world.new_group(everyone, options);
  options.name = "absent_probe_p2p";
  auto p2p_probe = world.new_group(everyone, options);
  ASSERT_TRUE(collective_probe && p2p_probe);

  if (world.rank() != absent) {
    // Gather to the absent rank: every other rank waits on it directly.
    std::int32_t value = world.rank();
    auto start = Clock::now();
    try {
      collective_probe->gather(&value, nullptr, 1, DType::Int32, absent);
      ADD_FAILURE() << "gather to an absent root returned";
    } catch (const TimeoutError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("absent_probe"), std::string::npos) << what;
      EXPECT_NE(what.find("gather"), std::string::npos) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected TimeoutError, got: " << e.what();
    }
    const double waited = seconds_since(start);
    EXPECT_GE(waited, 1.5);
    EXPECT_LT(waited, 15.0);
    EXPECT_TRUE(collective_probe->is_broken());
    // Later calls fail at once instead of hanging.
    start = Clock::now();
    try {
      collective_probe->barrier();
      ADD_FAILURE() << "barrier on a broken group returned";
    } catch (const TimeoutError& e) {
      ADD_FAILURE() << "broken group should raise DistributedError, got TimeoutError: " << e.what();
    } catch (const DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
    }
    EXPECT_LT(seconds_since(start), 0.5);

    // An irecv from the absent rank: its Work reports the timeout and completes.
    std::int32_t got = 0;
    auto work = p2p_probe->irecv(&got, sizeof(got), absent, 5);
    EXPECT_THROW(work->wait(), TimeoutError);
    EXPECT_TRUE(work->is_completed());
    EXPECT_TRUE(p2p_probe->is_broken());
  }
  // The absent rank waits here (on the healthy world group) until the others are done, so its
  // probes' connections stay open while they time out.
  world.barrier();
  collective_probe->destroy();
  p2p_probe->destroy();
  collective_probe->destroy();  // idempotent
  EXPECT_THROW(collective_probe->barrier(), DistributedError);
  world.barrier();
  check_all_reduce(world, DType::Int64, ReduceOp::Max, 31, false);
}

void check_destroy_with_pending_work(ProcessGroup& world) {
  const int n = world.size();
  if (n < 2) return;
  std::vector<int> everyone(n);
  std::iota(everyone.begin(), everyone.end(), 0);
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(2);
  options.name = "pending_probe";
  auto group = world.new_group(everyone, options);
  ASSERT_TRUE(group);
  if (world.rank() == 0) {
    std::vector<std::uint8_t> data(100, 1);
    auto work = group->isend(data.data(), data.size(), 1, 8);  // nobody receives it
    EXPECT_FALSE(work->is_completed());
    const auto start = Clock::now();
    group->destroy();
    EXPECT_LT(seconds_since(start), 8.0) << "destroy did not bound its wait";
    EXPECT_TRUE(work->is_completed());
    EXPECT_THROW(work->wait(), DistributedError);
    EXPECT_THROW(group->isend(data.data(), data.size(), 1, 8), DistributedError);
  }
  world.barrier();
  group->destroy();
  world.barrier();
}

}  // namespace testing
}  // namespace groupcoord
