#include "native_bench.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "harness_method.h"

namespace bench {

namespace {

using shmcoll::Dtype;
using shmcoll::Op;

// Shared between the forked ranks: per-rank sample times and the check's count.
struct SharedResults {
  double seconds_per_call[256];
  int mismatches;
};

// Deterministic inputs that every rank can recompute for any peer. Small integers, so every
// reduction order gives exact results in every type.
double input_value(int rank, std::size_t index) {
  return static_cast<double>((rank * 7 + index) % 5);
}

// visit_dtype over the types the harness can fill and check (main() accepts no others).
template <typename Fn>
decltype(auto) visit_arithmetic(Dtype dtype, Fn&& fn) {
  return shmcoll::visit_dtype(dtype, [&](auto zero) {
    if constexpr (std::is_arithmetic_v<decltype(zero)>)
      return fn(zero);
    else
      throw std::invalid_argument("the benchmark harness takes arithmetic types only");
    return fn(0.0);
  });
}

// Each of --vary-data's slots is filled with its own `shift` (its number).
template <typename T>
void fill(std::span<std::byte> buffer, int rank, std::size_t shift) {
  auto* values = reinterpret_cast<T*>(buffer.data());
  for (std::size_t i = 0; i < buffer.size() / sizeof(T); ++i)
    values[i] = static_cast<T>(input_value(rank, i + shift));
}

// A call --check verifies: `coll` (root 0) on `ranks` ranks as `me` sees it, with `count`
// elements per block (the vector for reductions), inputs filled with `shift`.
struct CheckedCall {
  const std::string& coll;
  Op op;
  int ranks, me;
  std::size_t count, shift;
};

// What element i of `me`'s receive buffer must hold after `call`.
template <typename T>
double expected_value(const CheckedCall& call, std::size_t i) {
  const auto& [coll, op, ranks, me, count, shift] = call;
  const auto input = [&call](int rank, std::size_t index) {
    return input_value(rank, index + call.shift);
  };
  const std::size_t block = i / std::max<std::size_t>(count, 1),
                    at = i % std::max<std::size_t>(count, 1);
  const auto source = static_cast<int>(block);
  if (coll == "bcast") return input(0, i);
  if (coll.starts_with("scatter")) return input(0, static_cast<std::size_t>(me) * count + i);
  if (coll.starts_with("gather") || coll.starts_with("allgather")) return input(source, at);
  if (coll.starts_with("alltoall")) {
    return input(source, static_cast<std::size_t>(me) * count + at);
  }
  int first = 0, last = ranks;  // the ranks whose inputs combine, in rank order
  if (coll == "scan") last = me + 1;
  if (coll == "exscan") last = me;
  if (coll.starts_with("reduce_scatter")) i += static_cast<std::size_t>(me) * (count / ranks);
  T acc = static_cast<T>(input(first, i));
  for (int r = first + 1; r < last; ++r) {
    const T v = static_cast<T>(input(r, i));
    switch (op.kind()) {
      case Op::sum:
        acc = static_cast<T>(acc + v);
        break;
      case Op::prod:
        acc = static_cast<T>(acc * v);
        break;
      case Op::min:
        acc = std::min(acc, v);
        break;
      case Op::max:
        acc = std::max(acc, v);
        break;
      default:
        throw std::invalid_argument("--check supports sum, prod, min and max");
    }
  }
  return static_cast<double>(acc);
}

template <typename T>
int count_mismatches(std::span<const std::byte> result, std::size_t elements,
                     const CheckedCall& call) {
  const auto* values = reinterpret_cast<const T*>(result.data());
  int bad = 0;
  for (std::size_t i = 0; i < elements; ++i) {
    if (static_cast<double>(values[i]) != expected_value<T>(call, i)) ++bad;
  }
  return bad;
}

// Elements of the result the check reads on `me` (0: none, as off a reduce's or gather's root).
std::size_t result_elements(const std::string& coll, int ranks, int me, std::size_t count) {
  const bool rooted = coll == "reduce" || coll.starts_with("gather");
  if ((rooted && me != 0) || (coll == "exscan" && me == 0)) return 0;
  if (coll.starts_with("reduce_scatter")) return count / static_cast<std::size_t>(ranks);
  if (coll.starts_with("gather") || coll.starts_with("allgather") || coll.starts_with("alltoall")) {
    return count * static_cast<std::size_t>(ranks);
  }
  return count;
}

// Every block the same: the v and w forms' counts and displacements, sized once per team.
struct VLayout {
  std::vector<std::int64_t> counts, displs, byte_displs, block_counts;
  std::vector<shmcoll::Datatype> types;
  VLayout(int ranks, std::int64_t count, Dtype dtype) {
    for (int r = 0; r < ranks; ++r) {
      counts.push_back(count);
      displs.push_back(r * count);
      byte_displs.push_back(r * count * static_cast<std::int64_t>(shmcoll::dtype_size(dtype)));
      block_counts.push_back(count / ranks);
      types.emplace_back(dtype);
    }
  }
};

// Resolved once per row, so each call costs the harness a switch, not string compares.
shmcoll::Collective collective_of(const std::string& name) {
  for (int c = 0; c < shmcoll::kCollectiveCount; ++c) {
    const auto collective = static_cast<shmcoll::Collective>(c);
    if (name == shmcoll::collective_name(collective)) return collective;
  }
  throw std::invalid_argument("unknown collective " + name);
}

void call_collective(shmcoll::Team& team, shmcoll::Collective coll, const NativeConfig& config,
                     std::span<std::byte> send, std::span<std::byte> recv, std::int64_t count,
                     const VLayout& v) {
  using shmcoll::Collective;
  void* out = recv.data();
  const void* in = send.data();
  const Dtype t = config.dtype;
  switch (coll) {
    case Collective::allreduce:
      return team.allreduce(in, out, count, t, config.op);
    case Collective::reduce:
      return team.reduce(in, out, count, t, config.op, 0);
    case Collective::bcast:
      return team.bcast(out, count, t, 0);
    case Collective::reduce_scatter:
      return team.reduce_scatter(in, out, v.block_counts, t, config.op);
    case Collective::reduce_scatter_block:
      return team.reduce_scatter_block(in, out, count / team.size(), t, config.op);
    case Collective::scan:
      return team.scan(in, out, count, t, config.op);
    case Collective::exscan:
      return team.exscan(in, out, count, t, config.op);
    case Collective::scatter:
      return team.scatter(in, count, t, out, count, t, 0);
    case Collective::scatterv:
      return team.scatterv(in, v.counts, v.displs, t, out, count, t, 0);
    case Collective::gather:
      return team.gather(in, count, t, out, count, t, 0);
    case Collective::gatherv:
      return team.gatherv(in, count, t, out, v.counts, v.displs, t, 0);
    case Collective::allgather:
      return team.allgather(in, count, t, out, count, t);
    case Collective::allgatherv:
      return team.allgatherv(in, count, t, out, v.counts, v.displs, t);
    case Collective::alltoall:
      return team.alltoall(in, count, t, out, count, t);
    case Collective::alltoallv:
      return team.alltoallv(in, v.counts, v.displs, t, out, v.counts, v.displs, t);
    case Collective::alltoallw:
      return team.alltoallw(in, v.counts, v.byte_displs, v.types, out, v.counts, v.byte_displs,
                            v.types);
    default:
      return team.barrier();
  }
}

// --vary-data's slots (one when it is off): page-aligned copies of a buffer, each call of a batch
// taking the next.
struct Slots {
  std::size_t stride, count;
  std::size_t next = 0;
  Slots(std::size_t buffer_bytes, bool vary)
      : stride(vary ? vary_slot_stride(buffer_bytes) : buffer_bytes),
        count(vary ? vary_slot_count(stride) : 1) {}
  std::size_t advance() {
    const std::size_t slot = next;
    next = next + 1 == count ? 0 : next + 1;
    return slot;
  }
};

// Each rank's time for one sample; rank 0 keeps the slowest rank's.
void record_slowest(shmcoll::Team& team, double seconds, SharedResults& shared, Row& row) {
  shared.seconds_per_call[team.rank()] = seconds;
  team.barrier();
  if (team.rank() == 0) {
    row.samples.push_back(
        *std::max_element(shared.seconds_per_call, shared.seconds_per_call + team.size()));
  }
}

// The batch method (harness_method.h): a batch sized from timed calls, rank 0's length agreed,
// one batch untimed, then a batch per sample between barriers.
template <typename Call>
void sample_batches(shmcoll::Team& team, int samples, SharedResults& shared, Row& row,
                    Call& call_next) {
  double start = now_seconds();
  for (int i = 0; i < SIZING_CALLS; ++i) call_next();
  const double per_call = std::max(1e-9, (now_seconds() - start) / SIZING_CALLS);
  std::int64_t batch = std::clamp<std::int64_t>(static_cast<std::int64_t>(BATCH_SECONDS / per_call),
                                                1, MAX_BATCH_CALLS);
  team.bcast(&batch, 1, Dtype::i64, 0);
  for (std::int64_t i = 0; i < batch; ++i) call_next();
  for (int sample = 0; sample < samples; ++sample) {
    team.barrier();
    start = now_seconds();
    for (std::int64_t i = 0; i < batch; ++i) call_next();
    record_slowest(team, (now_seconds() - start) / static_cast<double>(batch), shared, row);
  }
}

// Anonymous memory mapped for one size and unmapped after. Not calloc: the ranks live through
// every size, and once glibc has freed a large block it serves the next from its heap, zeroed
// with stores, so "unwritten" buffers were written ones (where the MPI harness, a new process per
// size, always gets the zero page): the fork API's alltoall of 1 MiB measured 162 us against the
// layer's 98 on the same unwritten buffers (run-demo, Intel Xeon VM, 2026-12-05).
class FreshPages {
 public:
  explicit FreshPages(std::size_t bytes)
      : bytes_(std::max<std::size_t>(bytes, 1)),  // a barrier's are empty; mmap takes no 0
        base_(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {
    if (base_ == MAP_FAILED) throw std::bad_alloc();
  }
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;
  ~FreshPages() { munmap(base_, bytes_); }
  std::byte* get() const { return static_cast<std::byte*>(base_); }

 private:
  std::size_t bytes_;
  void* base_;
};

// The single-call method (OSU, IMB): a barrier, then one timed call per sample.
template <typename Call>
void sample_single_calls(shmcoll::Team& team, int samples, SharedResults& shared, Row& row,
                         Call& call_next) {
  for (int sample = 0; sample < samples; ++sample) {
    team.barrier();
    const double start = now_seconds();
    call_next();
    record_slowest(team, now_seconds() - start, shared, row);
  }
}

void bench_rank(shmcoll::Team& team, const NativeConfig& config, const std::string& coll,
                std::size_t bytes, SharedResults& shared, Row& row) {
  const std::size_t element = shmcoll::dtype_size(config.dtype);
  const auto count = static_cast<std::int64_t>(bytes / element);
  const VLayout v(team.size(), count, config.dtype);
  // Room for a block per rank (scatter's send side, gather's receive side ...).
  const std::size_t buffer_bytes = static_cast<std::size_t>(count) * element * team.size();
  Slots slots(buffer_bytes, config.vary_data);
  const std::size_t pool_bytes = slots.stride * slots.count;
  // Pages fresh from the kernel: the single-call method leaves them untouched unless --written
  // (harness_method.h), so unwritten sends read the zero page, as the MPI harness's do.
  const FreshPages private_send(config.heap ? 1 : pool_bytes), recv_memory(pool_bytes + 1);
  const std::span<std::byte> recv_pool(recv_memory.get(), pool_bytes);
  const std::span<std::byte> send_pool = config.heap ? team.allocate<std::byte>(pool_bytes)
                                                     : std::span(private_send.get(), pool_bytes);
  auto send_of = [&](std::size_t slot) {
    return send_pool.subspan(slot * slots.stride, buffer_bytes);
  };
  auto recv_of = [&](std::size_t slot) {
    return std::span<std::byte>(recv_pool).subspan(slot * slots.stride, buffer_bytes);
  };
  // The batch method touches every byte before timing, each slot with its own values.
  for (std::size_t slot = 0; slot < slots.count && (!config.single_call || config.written);
       ++slot) {
    visit_arithmetic(config.dtype,
                     [&](auto type) { fill<decltype(type)>(send_of(slot), team.rank(), slot); });
    std::copy_n(send_of(slot).begin(), buffer_bytes, recv_of(slot).begin());
  }
  const shmcoll::Collective which = collective_of(coll);
  auto call_next = [&] {
    const std::size_t slot = slots.advance();
    call_collective(team, which, config, send_of(slot), recv_of(slot), count, v);
  };

  for (int i = 0; i < WARMUP_CALLS; ++i) call_next();
  if (config.single_call) {
    sample_single_calls(team, config.iters, shared, row, call_next);
  } else {
    sample_batches(team, config.iters, shared, row, call_next);
  }
  if (config.check && coll != "barrier") {
    // The last slot, so that --vary-data's slot addressing and values are checked too.
    const std::size_t slot = slots.count - 1;
    const std::span<std::byte> send = send_of(slot), recv = recv_of(slot);
    visit_arithmetic(config.dtype,
                     [&](auto type) { fill<decltype(type)>(send, team.rank(), slot); });
    std::fill(recv.begin(), recv.end(), std::byte{0x5a});  // no stale result can pass
    if (coll == "bcast" && team.rank() == 0) std::copy(send.begin(), send.end(), recv.begin());
    call_collective(team, which, config, send, recv, count, v);
    if (config.inject_error && count > 0) recv[0] = ~recv[0];
    const std::size_t elements =
        result_elements(coll, team.size(), team.rank(), static_cast<std::size_t>(count));
    if (elements > 0) {
      const int bad = visit_arithmetic(config.dtype, [&](auto type) {
        return count_mismatches<decltype(type)>(
            recv, elements,
            {coll, config.op, team.size(), team.rank(), static_cast<std::size_t>(count), slot});
      });
      if (bad > 0) {
        __atomic_add_fetch(&shared.mismatches, bad, __ATOMIC_RELAXED);
        std::fprintf(stderr, "shmcoll-bench: %s %zu bytes: rank %d has %d wrong elements\n",
                     coll.c_str(), bytes, team.rank(), bad);
      }
    }
  }
  if (config.heap) team.deallocate(send_pool);
}

}  // namespace

bool ranks_fit_cores(int ranks) {
  return ranks <= sysconf(_SC_NPROCESSORS_ONLN);
}

const std::vector<std::string>& collective_names() {
  static const std::vector<std::string> names = {
      "barrier",   "bcast",      "reduce",   "allreduce", "reduce_scatter", "reduce_scatter_block",
      "scan",      "exscan",     "scatter",  "scatterv",  "gather",         "gatherv",
      "allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw"};
  return names;
}

Row run_native(const NativeConfig& config, const std::string& coll, std::size_t bytes,
               int& mismatches) {
  auto* shared = static_cast<SharedResults*>(mmap(
      nullptr, sizeof(SharedResults), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) throw std::runtime_error("cannot map the harness's shared results");
  Row row{bytes, {}};
  shmcoll::Options options;
  const bool bind =
      config.bind_to == "auto" ? ranks_fit_cores(config.ranks) : config.bind_to == "core";
  options.bind = bind ? shmcoll::Binding::core : shmcoll::Binding::none;
  try {
    shmcoll::run(config.ranks, options,
                 [&](shmcoll::Team& team) { bench_rank(team, config, coll, bytes, *shared, row); });
  } catch (...) {
    munmap(shared, sizeof(SharedResults));
    throw;
  }
  mismatches += shared->mismatches;
  munmap(shared, sizeof(SharedResults));
  return row;
}

}  // namespace bench
