// shmcoll-bench: OSU-style latency table for shmcoll collectives on N forked ranks.
//
// Method: per size, a warm-up, then --iters samples. A sample is a batch of back-to-back calls
// (batch length chosen so a batch lasts about 200 us) between barriers; each rank times its batch,
// and the sample is the slowest rank's time per call. We print the median and min/max of the
// samples, with two reference lines measured in the same run: the cache-line exchange between two
// ranks (the small-message floor) and memcpy of the same bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_report.hpp"
#include "shmcoll/shmcoll.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;

struct Config {
  int ranks = 2;
  std::vector<std::string> collectives;
  std::vector<std::size_t> sizes;
  Dtype dtype = Dtype::f32;
  Op op = Op::sum;
  int iters = 30;
  bool check = false;
  bool heap = false;          // send buffers from Team::allocate
  bool inject_error = false;  // corrupt one checked element, to prove --check catches it
};

// Shared between the forked ranks: per-rank sample times and the check verdict.
struct SharedResults {
  double seconds_per_call[256];
  int mismatches;
};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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

template <typename T>
void fill(std::span<std::byte> buffer, int rank) {
  auto* values = reinterpret_cast<T*>(buffer.data());
  for (std::size_t i = 0; i < buffer.size() / sizeof(T); ++i)
    values[i] = static_cast<T>(input_value(rank, i));
}

// What element i of `me`'s receive buffer must hold, after the call with `count` elements per
// block (the vector for reductions) on `ranks` ranks, root 0.
template <typename T>
double expected_value(const std::string& coll, Op op, int ranks, int me, std::size_t count,
                      std::size_t i) {
  const std::size_t block = i / std::max<std::size_t>(count, 1),
                    at = i % std::max<std::size_t>(count, 1);
  const auto source = static_cast<int>(block);
  if (coll == "bcast") return input_value(0, i);
  if (coll.starts_with("scatter")) return input_value(0, static_cast<std::size_t>(me) * count + i);
  if (coll.starts_with("gather") || coll.starts_with("allgather")) return input_value(source, at);
  if (coll.starts_with("alltoall")) {
    return input_value(source, static_cast<std::size_t>(me) * count + at);
  }
  int first = 0, last = ranks;  // the ranks whose inputs combine, in rank order
  if (coll == "scan") last = me + 1;
  if (coll == "exscan") last = me;
  if (coll.starts_with("reduce_scatter")) i += static_cast<std::size_t>(me) * (count / ranks);
  T acc = static_cast<T>(input_value(first, i));
  for (int r = first + 1; r < last; ++r) {
    const T v = static_cast<T>(input_value(r, i));
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
int count_mismatches(const std::vector<std::byte>& result, std::size_t elements,
                     const std::string& coll, Op op, int ranks, int me, std::size_t count) {
  const auto* values = reinterpret_cast<const T*>(result.data());
  int bad = 0;
  for (std::size_t i = 0; i < elements; ++i) {
    if (static_cast<double>(values[i]) != expected_value<T>(coll, op, ranks, me, count, i)) ++bad;
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

constexpr const char* kCollectives[] = {
    "barrier",   "bcast",      "reduce",   "allreduce", "reduce_scatter", "reduce_scatter_block",
    "scan",      "exscan",     "scatter",  "scatterv",  "gather",         "gatherv",
    "allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw"};

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

void call_collective(shmcoll::Team& team, const std::string& coll, const Config& config,
                     std::span<std::byte> send, std::vector<std::byte>& recv, std::int64_t count,
                     const VLayout& v) {
  void* out = recv.data();
  const void* in = send.data();
  const Dtype t = config.dtype;
  if (coll == "allreduce")
    team.allreduce(in, out, count, t, config.op);
  else if (coll == "reduce")
    team.reduce(in, out, count, t, config.op, 0);
  else if (coll == "bcast")
    team.bcast(out, count, t, 0);
  else if (coll == "reduce_scatter")
    team.reduce_scatter(in, out, v.block_counts, t, config.op);
  else if (coll == "reduce_scatter_block")
    team.reduce_scatter_block(in, out, count / team.size(), t, config.op);
  else if (coll == "scan")
    team.scan(in, out, count, t, config.op);
  else if (coll == "exscan")
    team.exscan(in, out, count, t, config.op);
  else if (coll == "scatter")
    team.scatter(in, count, t, out, count, t, 0);
  else if (coll == "scatterv")
    team.scatterv(in, v.counts, v.displs, t, out, count, t, 0);
  else if (coll == "gather")
    team.gather(in, count, t, out, count, t, 0);
  else if (coll == "gatherv")
    team.gatherv(in, count, t, out, v.counts, v.displs, t, 0);
  else if (coll == "allgather")
    team.allgather(in, count, t, out, count, t);
  else if (coll == "allgatherv")
    team.allgatherv(in, count, t, out, v.counts, v.displs, t);
  else if (coll == "alltoall")
    team.alltoall(in, count, t, out, count, t);
  else if (coll == "alltoallv")
    team.alltoallv(in, v.counts, v.displs, t, out, v.counts, v.displs, t);
  else if (coll == "alltoallw")
    team.alltoallw(in, v.counts, v.byte_displs, v.types, out, v.counts, v.byte_displs, v.types);
  else
    team.barrier();
}

using bench::Row;

// On a terminal, one line on stderr that rewrites itself: collective, size, how far.
void show_progress(const std::string& coll, std::size_t bytes, std::size_t done,
                   std::size_t total) {
  static const bool terminal = isatty(STDERR_FILENO) != 0;
  if (!terminal) return;
  std::fprintf(stderr, "\r\033[K%s %zu bytes [%zu/%zu]", coll.c_str(), bytes, done + 1, total);
  if (done + 1 == total) std::fprintf(stderr, "\r\033[K");
}

void bench_rank(shmcoll::Team& team, const Config& config, const std::string& coll,
                SharedResults& shared, std::vector<Row>& rows) {
  const std::size_t element = shmcoll::dtype_size(config.dtype);
  const bool is_barrier = coll == "barrier";
  const std::vector<std::size_t> sizes = is_barrier ? std::vector<std::size_t>{0} : config.sizes;
  for (std::size_t bytes : sizes) {
    if (team.rank() == 0) show_progress(coll, bytes, rows.size(), sizes.size());
    const auto count = static_cast<std::int64_t>(bytes / element);
    const VLayout v(team.size(), count, config.dtype);
    // Room for a block per rank (scatter's send side, gather's receive side ...).
    const std::size_t buffer_bytes = static_cast<std::size_t>(count) * element * team.size();
    std::vector<std::byte> private_send(config.heap ? 0 : buffer_bytes), recv(buffer_bytes);
    const std::span<std::byte> send =
        config.heap ? team.allocate<std::byte>(buffer_bytes) : std::span<std::byte>(private_send);
    visit_arithmetic(config.dtype, [&](auto type) { fill<decltype(type)>(send, team.rank()); });
    std::copy(send.begin(), send.end(), recv.begin());  // touched before timing, like send

    // Warm up and size the batch on rank 0, then agree on it.
    double start = now_seconds();
    for (int i = 0; i < 5; ++i) call_collective(team, coll, config, send, recv, count, v);
    std::int64_t batch = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(200e-6 / std::max(1e-9, (now_seconds() - start) / 5)), 1, 10000);
    team.bcast(&batch, 1, Dtype::i64, 0);

    Row row{bytes, {}};
    for (int sample = 0; sample < config.iters; ++sample) {
      team.barrier();
      start = now_seconds();
      for (std::int64_t i = 0; i < batch; ++i)
        call_collective(team, coll, config, send, recv, count, v);
      shared.seconds_per_call[team.rank()] = (now_seconds() - start) / static_cast<double>(batch);
      team.barrier();
      if (team.rank() == 0) {
        row.samples.push_back(
            *std::max_element(shared.seconds_per_call, shared.seconds_per_call + team.size()));
      }
    }
    if (config.check && !is_barrier) {
      visit_arithmetic(config.dtype, [&](auto type) { fill<decltype(type)>(send, team.rank()); });
      std::fill(recv.begin(), recv.end(), std::byte{0x5a});  // no stale result can pass
      if (coll == "bcast" && team.rank() == 0) std::copy(send.begin(), send.end(), recv.begin());
      call_collective(team, coll, config, send, recv, count, v);
      if (config.inject_error && count > 0) recv[0] = ~recv[0];
      const std::size_t elements =
          result_elements(coll, team.size(), team.rank(), static_cast<std::size_t>(count));
      if (elements > 0) {
        const int bad = visit_arithmetic(config.dtype, [&](auto type) {
          return count_mismatches<decltype(type)>(recv, elements, coll, config.op, team.size(),
                                                  team.rank(), static_cast<std::size_t>(count));
        });
        if (bad > 0) {
          __atomic_add_fetch(&shared.mismatches, bad, __ATOMIC_RELAXED);
          std::fprintf(stderr, "shmcoll-bench: %s %zu bytes: rank %d has %d wrong elements\n",
                       coll.c_str(), bytes, team.rank(), bad);
        }
      }
    }
    if (config.heap) team.deallocate(send);
    if (team.rank() == 0) rows.push_back(std::move(row));
  }
}

std::size_t parse_size(const std::string& text) {
  std::size_t pos = 0;
  std::size_t value = std::stoull(text, &pos);
  const std::string suffix = text.substr(pos);
  if (suffix == "K" || suffix == "k")
    value <<= 10;
  else if (suffix == "M" || suffix == "m")
    value <<= 20;
  else if (suffix == "G" || suffix == "g")
    value <<= 30;
  else if (!suffix.empty())
    throw std::invalid_argument("bad size suffix in " + text);
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Latency of shmcoll collectives on N forked ranks, with reference lines.\n"
      "Example: shmcoll-bench -n 2 --coll allreduce --sizes 8,1K,1M --check"};
  Config config;
  std::string colls = "allreduce", sizes = "8,64,1K,8K,64K,256K,1M,4M", dtype = "f32", op = "sum";
  app.add_option("-n,--np", config.ranks, "ranks")->check(CLI::Range(1, 256));
  app.add_option("--coll", colls,
                 "comma list of collectives (barrier, bcast, reduce, allreduce, "
                 "reduce_scatter[_block], scan, exscan, scatter[v], gather[v], allgather[v], "
                 "alltoall[v|w]), or all; sizes are vectors for reductions, blocks per rank pair "
                 "otherwise");
  std::string min_size, max_size, json_path, csv_path;
  app.add_option("--sizes", sizes, "comma list of message sizes in bytes (K, M suffixes)");
  app.add_option("--min", min_size, "smallest size of a power-of-two sweep (with --max)");
  app.add_option("--max", max_size, "largest size of a power-of-two sweep (with --min)");
  app.add_option("--dtype", dtype, "i8..i64, u8..u64, f32, f64");
  app.add_option("--op", op, "sum, prod, min, max");
  app.add_option("--iters", config.iters, "samples per size")->check(CLI::Range(1, 100000));
  app.add_flag("--check", config.check, "verify every result; exit 1 on a mismatch");
  app.add_flag("--heap", config.heap,
               "send buffers from Team::allocate, so receivers may copy straight out of them");
  app.add_option("--json", json_path, "also write every row to this JSON file");
  app.add_option("--csv", csv_path, "also write every row to this CSV file");
  app.add_flag("--inject-error", config.inject_error,
               "corrupt one result element before --check reads it (tests the harness)");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto known = [](const std::string& name) {
      return std::find(std::begin(kCollectives), std::end(kCollectives), name) !=
             std::end(kCollectives);
    };
    for (const auto& name : CLI::detail::split(colls, ',')) {
      if (name == "all") {
        config.collectives.insert(config.collectives.end(), std::begin(kCollectives),
                                  std::end(kCollectives));
        continue;
      }
      if (!known(name)) throw std::invalid_argument("--coll: unknown collective " + name);
      config.collectives.push_back(name);
    }
    if (min_size.empty() != max_size.empty()) {
      throw std::invalid_argument("--min and --max go together");
    }
    if (!min_size.empty()) {
      const std::size_t low = parse_size(min_size), high = parse_size(max_size);
      if (low == 0 || low > high) {
        throw std::invalid_argument("--min must be at least 1 and at most --max");
      }
      for (std::size_t size = low; size <= high; size *= 2) config.sizes.push_back(size);
    } else {
      for (const auto& size : CLI::detail::split(sizes, ','))
        config.sizes.push_back(parse_size(size));
    }
    bool known_dtype = false, known_op = false;
    // The harness fills and checks plain arithmetic types with sum, prod, min and max.
    for (int d = 0; d <= static_cast<int>(Dtype::f64); ++d) {
      if (dtype == shmcoll::dtype_name(static_cast<Dtype>(d)))
        config.dtype = static_cast<Dtype>(d), known_dtype = true;
    }
    for (int o = 0; o <= static_cast<int>(Op::max); ++o) {
      const Op candidate(static_cast<Op::Kind>(o));
      if (op == shmcoll::op_name(candidate)) config.op = candidate, known_op = true;
    }
    if (!known_dtype) throw std::invalid_argument("--dtype: unknown type " + dtype);
    if (!known_op) throw std::invalid_argument("--op: unknown operation " + op);

    const bench::References refs = bench::measure_references(config.sizes);
    std::printf("# references: cache-line round trip %.3f us, two-rank line exchange %.3f us\n",
                refs.line_round_trip_seconds * 1e6, refs.line_exchange_seconds * 1e6);

    auto* shared = static_cast<SharedResults*>(mmap(
        nullptr, sizeof(SharedResults), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    const bench::RunInfo info{config.ranks, shmcoll::dtype_name(config.dtype),
                              shmcoll::op_name(config.op), config.iters, refs};
    std::vector<bench::Sweep> sweeps;
    for (const std::string& coll : config.collectives) {
      bench::Sweep sweep{coll, {}};
      shmcoll::Options options;
      options.bind = shmcoll::Binding::core;
      shmcoll::run(config.ranks, options, [&](shmcoll::Team& team) {
        bench_rank(team, config, coll, *shared, sweep.rows);
      });
      bench::print_table(sweep, info);
      sweeps.push_back(std::move(sweep));
    }
    if (!json_path.empty()) bench::write_json(json_path, info, sweeps);
    if (!csv_path.empty()) bench::write_csv(csv_path, info, sweeps);
    if (config.check) {
      std::printf("# check: %s\n", shared->mismatches == 0 ? "all results correct" : "MISMATCHES");
      return shared->mismatches == 0 ? 0 : 1;
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "shmcoll-bench: %s\n", error.what());
    return 2;
  }
}
