// Elementwise operator throughput (Google Benchmark): every (type, op) MPI defines, at 4 KiB,
// 256 KiB and 16 MiB, in the form MPI_Reduce_local uses (inout = in op inout). Beside each: the
// same kernel built without SIMD, Open MPI's MPI_Reduce_local (its op/avx component) when built
// with Open MPI, and memcpy of the same bytes; then the k-ary form against chained two-input calls.
// After the usual Google Benchmark output, a table gives each contender's median as a ratio.
//
//   build/bin/shmcoll-bench-ops [--benchmark_filter=REGEX] [other --benchmark_* flags]
// Default: 5 repetitions, 0.05 s each, medians only.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ops/reduce.hpp"
#include "shmcoll/shmcoll.hpp"

#ifdef SHMCOLL_HAVE_OPENMPI
#include <mpi.h>
#endif

namespace {

using shmcoll::Dtype;
using shmcoll::Op;

constexpr std::size_t kSizes[] = {4096, 256 * 1024, 16 * 1024 * 1024};
constexpr std::size_t kLargest = 16 * 1024 * 1024;
constexpr int kKaryInputs = 8;

// Buffers allocated and touched once, before any timing.
struct Buffers {
  std::vector<std::vector<std::byte>> inputs;
  std::vector<std::byte> out;
  Buffers() : inputs(kKaryInputs, std::vector<std::byte>(kLargest)), out(kLargest) {}
};
Buffers& buffers() {
  static Buffers instance;
  return instance;
}

// Fills with the type's "one", which keeps every operation on ordinary (not denormal, not NaN)
// values for the whole run.
void fill_with_ones(Dtype dtype, void* data, std::size_t bytes) {
  shmcoll::visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T one{};
    if constexpr (std::is_same_v<T, shmcoll::float16>)
      one = shmcoll::to_float16(1.0f);
    else if constexpr (std::is_same_v<T, shmcoll::bfloat16>)
      one = shmcoll::to_bfloat16(1.0f);
    else if constexpr (std::is_same_v<T, std::byte>)
      one = std::byte{1};
    else if constexpr (requires { one.index; })
      one.value = 1;
    else
      one = T(1);
    auto* typed = static_cast<T*>(data);
    for (std::size_t i = 0; i < bytes / sizeof(T); ++i) typed[i] = one;
  });
}

std::string label(Dtype dtype, const Op& op, std::size_t bytes) {
  return std::string(shmcoll::dtype_name(dtype)) + "/" + shmcoll::op_name(op) + "/" +
         std::to_string(bytes);
}

// Reports the vector's bytes per second (the same for every contender, so ratios compare time)
// and, as `moved`, the bytes read plus written per second (memory traffic).
void count_bytes(benchmark::State& state, std::size_t bytes, int streams) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["moved"] = benchmark::Counter(double(state.iterations()) * double(bytes) * streams,
                                               benchmark::Counter::kIsRate);
}

using Kernel = void (*)(Dtype, const Op&, void*, const void* const*, int, std::size_t);

void register_kernel(const char* name, Kernel kernel, Dtype dtype, const Op& op,
                     std::size_t bytes) {
  benchmark::RegisterBenchmark((std::string(name) + "/" + label(dtype, op, bytes)).c_str(),
                               [=](benchmark::State& state) {
                                 auto& b = buffers();
                                 fill_with_ones(dtype, b.inputs[0].data(), bytes);
                                 fill_with_ones(dtype, b.out.data(), bytes);
                                 // replace (a op b = b) in this form leaves inout as it is; the
                                 // compiler then removes the
                                 // loop. Swapping the operands makes it the copy it is everywhere
                                 // else.
                                 const void* inputs[] = {b.inputs[0].data(), b.out.data()};
                                 if (op.kind() == Op::replace) std::swap(inputs[0], inputs[1]);
                                 const std::size_t count = bytes / shmcoll::dtype_size(dtype);
                                 for (auto _ : state) {
                                   kernel(dtype, op, b.out.data(), inputs, 2, count);
                                   benchmark::ClobberMemory();
                                 }
                                 count_bytes(state, bytes, 3);
                               });
}

// Registered once per element type, right before that type's kernels, so each type's share of
// memcpy compares runs minutes apart at most (this machine's memory bandwidth drifts).
void register_memcpy(const char* tag, std::size_t bytes) {
  benchmark::RegisterBenchmark(("memcpy/" + std::string(tag) + "/" + std::to_string(bytes)).c_str(),
                               [=](benchmark::State& state) {
                                 auto& b = buffers();
                                 for (auto _ : state) {
                                   std::memcpy(b.out.data(), b.inputs[0].data(), bytes);
                                   benchmark::ClobberMemory();
                                 }
                                 count_bytes(state, bytes, 2);
                               });
}

// out = in[0] op ... op in[7] in one k-ary call, or in seven two-input calls.
void register_kary(Dtype dtype, const Op& op) {
  const std::size_t bytes = kLargest, count = bytes / shmcoll::dtype_size(dtype);
  const auto setup = [=] {
    auto& b = buffers();
    for (auto& input : b.inputs) fill_with_ones(dtype, input.data(), bytes);
    std::vector<const void*> inputs;
    for (auto& input : b.inputs) inputs.push_back(input.data());
    return inputs;
  };
  benchmark::RegisterBenchmark(("kary8/" + label(dtype, op, bytes)).c_str(),
                               [=](benchmark::State& state) {
                                 const auto inputs = setup();
                                 for (auto _ : state) {
                                   shmcoll::ops::reduce_kary(dtype, op, buffers().out.data(),
                                                             inputs.data(), kKaryInputs, count);
                                   benchmark::ClobberMemory();
                                 }
                                 count_bytes(state, bytes, kKaryInputs + 1);
                               });
  benchmark::RegisterBenchmark(
      ("chained7/" + label(dtype, op, bytes)).c_str(), [=](benchmark::State& state) {
        const auto inputs = setup();
        void* out = buffers().out.data();
        for (auto _ : state) {
          shmcoll::ops::reduce_pair(dtype, op, inputs[0], inputs[1], out, count);
          for (int k = 2; k < kKaryInputs; ++k) {
            shmcoll::ops::reduce_pair(dtype, op, out, inputs[k], out, count);
          }
          benchmark::ClobberMemory();
        }
        count_bytes(state, bytes, 3 * (kKaryInputs - 1));
      });
}

#ifdef SHMCOLL_HAVE_OPENMPI
MPI_Datatype mpi_type(Dtype dtype) {
  switch (dtype) {
    case Dtype::i8:
      return MPI_INT8_T;
    case Dtype::i16:
      return MPI_INT16_T;
    case Dtype::i32:
      return MPI_INT32_T;
    case Dtype::i64:
      return MPI_INT64_T;
    case Dtype::u8:
      return MPI_UINT8_T;
    case Dtype::u16:
      return MPI_UINT16_T;
    case Dtype::u32:
      return MPI_UINT32_T;
    case Dtype::u64:
      return MPI_UINT64_T;
    case Dtype::f32:
      return MPI_FLOAT;
    case Dtype::f64:
      return MPI_DOUBLE;
    case Dtype::long_double:
      return MPI_LONG_DOUBLE;
    case Dtype::complex_f32:
      return MPI_C_FLOAT_COMPLEX;
    case Dtype::complex_f64:
      return MPI_C_DOUBLE_COMPLEX;
    case Dtype::boolean:
      return MPI_C_BOOL;
    case Dtype::character:
      return MPI_CHAR;
    case Dtype::wchar:
      return MPI_WCHAR;
    case Dtype::byte:
      return MPI_BYTE;
    case Dtype::float_int:
      return MPI_FLOAT_INT;
    case Dtype::double_int:
      return MPI_DOUBLE_INT;
    case Dtype::long_int:
      return MPI_LONG_INT;
    case Dtype::int_int:
      return MPI_2INT;
    case Dtype::short_int:
      return MPI_SHORT_INT;
    case Dtype::long_double_int:
      return MPI_LONG_DOUBLE_INT;
    default:
      return MPI_DATATYPE_NULL;  // no MPI type for the 16-bit floats
  }
}

MPI_Op mpi_op(Op::Kind op) {
  const MPI_Op ops[] = {MPI_SUM,    MPI_PROD,   MPI_MIN,     MPI_MAX,  MPI_LAND,
                        MPI_LOR,    MPI_LXOR,   MPI_BAND,    MPI_BOR,  MPI_BXOR,
                        MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP};
  return ops[op];
}

// Registers Open MPI's MPI_Reduce_local where Open MPI accepts the pair.
void register_openmpi(Dtype dtype, const Op& op, std::size_t bytes) {
  const MPI_Datatype type = mpi_type(dtype);
  if (type == MPI_DATATYPE_NULL) return;
  auto& b = buffers();
  if (MPI_Reduce_local(b.inputs[0].data(), b.out.data(), 1, type, mpi_op(op.kind())) != MPI_SUCCESS)
    return;
  benchmark::RegisterBenchmark(
      ("openmpi/" + label(dtype, op, bytes)).c_str(), [=](benchmark::State& state) {
        auto& b = buffers();
        fill_with_ones(dtype, b.inputs[0].data(), bytes);
        fill_with_ones(dtype, b.out.data(), bytes);
        const int count = static_cast<int>(bytes / shmcoll::dtype_size(dtype));
        for (auto _ : state) {
          MPI_Reduce_local(b.inputs[0].data(), b.out.data(), count, type, mpi_op(op.kind()));
          benchmark::ClobberMemory();
        }
        count_bytes(state, bytes, 3);
      });
}
#endif

// Whether a run failed: Google Benchmark 1.8 replaced Run::error_occurred (1.7, Debian 12) by
// Run::skipped (1.9 in Debian 13 has only that).
template <typename Run>
bool run_failed(const Run& run) {
  if constexpr (requires { run.skipped; }) {
    return static_cast<bool>(run.skipped);
  } else {
    return run.error_occurred;
  }
}

// Prints, after the benchmark's own output, each pair's medians side by side.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      const bool median = run.aggregate_name == "median";
      const bool single = run.repetitions <= 1 && run.run_type == Run::RT_Iteration;
      if ((median || single) && !run_failed(run)) {
        const std::string name = run.run_name.function_name;
        rate_[name] = run.counters.at("bytes_per_second");
        moved_[name] = run.counters.at("moved");
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf(
        "\n# median GB/s of inout = in op inout; x scalar / x openmpi: how many times "
        "faster; memcpy%%: bytes moved per second against memcpy's\n");
    std::printf("%-22s %-8s %9s %8s %8s %9s %8s %8s %9s %8s %8s %8s\n", "type", "op", "4K GB/s",
                "x scal", "x ompi", "256K GB/s", "x scal", "x ompi", "16M GB/s", "x scal", "x ompi",
                "memcpy%");
    double worst_ompi = 1e9, worst_memcpy = 1e9;
    std::string worst_ompi_name, worst_memcpy_name;
    int below_ompi = 0;
    for (int d = 0; d < shmcoll::kDtypeCount; ++d) {
      for (int o = 0; o < shmcoll::kPredefinedOpCount; ++o) {
        const auto dtype = static_cast<Dtype>(d);
        const Op op(static_cast<Op::Kind>(o));
        if (!rate_.count("reduce/" + label(dtype, op, kSizes[0]))) continue;
        std::printf("%-22s %-8s", shmcoll::dtype_name(dtype), shmcoll::op_name(op));
        for (std::size_t bytes : kSizes) {
          const std::string key = label(dtype, op, bytes);
          const double ours = value(rate_, "reduce/" + key);
          const double ompi = value(rate_, "openmpi/" + key);
          std::printf(" %9.2f %8s %8s", ours / 1e9,
                      ratio(ours, value(rate_, "scalar/" + key)).c_str(),
                      ratio(ours, ompi).c_str());
          if (ompi > 0 && ours / ompi < worst_ompi) worst_ompi = ours / ompi, worst_ompi_name = key;
          if (ompi > 0 && ours < ompi) ++below_ompi;
        }
        const std::string key = label(dtype, op, kLargest);
        const double memcpy_moved =
            value(moved_, "memcpy/" + std::string(shmcoll::dtype_name(dtype)) + "/" +
                              std::to_string(kLargest));
        const double share = memcpy_moved > 0 ? value(moved_, "reduce/" + key) / memcpy_moved : 0;
        if (share > 0 && share < worst_memcpy) worst_memcpy = share, worst_memcpy_name = key;
        std::printf(" %7.0f%%\n", 100 * share);
      }
    }
    std::printf("# slowest against Open MPI: %s at %.2fx; %d (type, op, size) below 1.0x\n",
                worst_ompi_name.c_str(), worst_ompi, below_ompi);
    std::printf("# lowest share of memcpy's bytes moved at 16 MiB: %s at %.0f%%\n",
                worst_memcpy_name.c_str(), 100 * worst_memcpy);
    for (const auto& [name, rate] : rate_) {
      if (name.rfind("kary8/", 0) != 0) continue;
      const std::string key = name.substr(6);
      std::printf("# k-ary (8 inputs) against 7 chained two-input calls, %s: %s faster\n",
                  key.c_str(), ratio(rate, value(rate_, "chained7/" + key)).c_str());
    }
  }

 private:
  static double value(const std::map<std::string, double>& map, const std::string& key) {
    const auto it = map.find(key);
    return it == map.end() ? 0 : it->second;
  }
  static std::string ratio(double ours, double theirs) {
    if (theirs <= 0 || ours <= 0) return "-";
    char text[32];
    std::snprintf(text, sizeof(text), "%.2fx", ours / theirs);
    return text;
  }
  std::map<std::string, double> rate_, moved_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  bool repetitions_given = false;
  for (int i = 1; i < argc; ++i) {
    repetitions_given |= std::strncmp(argv[i], "--benchmark_repetitions", 23) == 0;
    if (std::strcmp(argv[i], "--help") == 0) {  // ours first, then Google Benchmark's options
      std::printf(
          "Throughput of the elementwise operators (every type and op MPI defines) beside the "
          "same kernels without SIMD, Open MPI's MPI_Reduce_local and memcpy, as ratios.\n"
          "Example: shmcoll-bench-ops --benchmark_filter='f32/sum'\n"
          "Default: --benchmark_repetitions=5 --benchmark_min_time=0.05, medians only.\n\n");
    }
  }
  std::string defaults[] = {"--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true",
                            "--benchmark_min_time=0.05"};
  if (!repetitions_given) {
    for (auto& flag : defaults) args.push_back(flag.data());
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
#ifdef SHMCOLL_HAVE_OPENMPI
  MPI_Init(nullptr, nullptr);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#endif
  buffers();  // allocate and touch before the first timing
  for (int d = 0; d < shmcoll::kDtypeCount; ++d) {
    register_memcpy(shmcoll::dtype_name(static_cast<Dtype>(d)), kLargest);
    for (int o = 0; o < shmcoll::kPredefinedOpCount; ++o) {
      const auto dtype = static_cast<Dtype>(d);
      const Op op(static_cast<Op::Kind>(o));
      if (!shmcoll::op_defined_on(op, dtype)) continue;
      for (std::size_t bytes : kSizes) {
        register_kernel("reduce", &shmcoll::ops::reduce_kary, dtype, op, bytes);
        register_kernel("scalar", &shmcoll::ops::scalar::reduce_kary, dtype, op, bytes);
#ifdef SHMCOLL_HAVE_OPENMPI
        register_openmpi(dtype, op, bytes);
#endif
      }
    }
  }
  for (Dtype dtype : {Dtype::f32, Dtype::f64, Dtype::i32, Dtype::u8}) register_kary(dtype, Op::sum);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
#ifdef SHMCOLL_HAVE_OPENMPI
  MPI_Finalize();
#endif
  return 0;
}
