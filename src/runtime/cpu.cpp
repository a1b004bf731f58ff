#include <cpuid.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "runtime/checks.hpp"
#include "runtime/env.hpp"
#include "trnsparse/runtime.hpp"

namespace trnsparse {

namespace {

constexpr int kMaxThreads = 4096;

/// AMX-TILE and AMX-BF16 in CPUID (leaf 7: EDX bits 24 and 22), the OS saving the tile
/// state (XCR0 bits 17 and 18), and Linux's leave for this process to use tile data
/// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; refused before Linux 5.16),
/// asked once here for every thread.
bool amx_usable() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  if (!(edx >> 24 & 1u) || !(edx >> 22 & 1u)) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo >> 17 & 3u) != 3u) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

CpuFeatures detect() noexcept {
  // __builtin_cpu_supports checks CPUID and that the OS saves the wider registers.
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
  f.amx = f.avx512_bf16 && amx_usable();
  return f;
}

Isa isa_from_env() {
  const char* env = std::getenv("TRNSPARSE_ISA");
  if (!env || !*env) return best_isa();
  const std::string_view name(env);
  Isa isa{};
  try {
    isa = isa_named(name);
  } catch (const InvalidArgument& e) {
    throw NotSupported(detail::concat("TRNSPARSE_ISA=", name, ": ", e.what()));
  }
  if (!isa_supported(isa))
    throw NotSupported(detail::concat("TRNSPARSE_ISA=", name, ": this CPU does not support ", name));
  return isa;
}

/// OMP_NUM_THREADS's first number, as OpenMP programs read it, else the CPUs this process
/// may run on.
int default_threads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
    char* end = nullptr;
    const long n = std::strtol(omp, &end, 10);
    if (end != omp && (*end == '\0' || *end == ',') && n >= 1) return static_cast<int>(std::min<long>(n, kMaxThreads));
  }
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) return std::clamp(CPU_COUNT(&cpus), 1, kMaxThreads);
  return 1;
}

int threads_from_env() {
  const char* env = std::getenv("TRNSPARSE_NUM_THREADS");
  if (!env || !*env) return default_threads();
  return static_cast<int>(detail::env_integer("TRNSPARSE_NUM_THREADS", env, 1, kMaxThreads));
}

// -1: not chosen yet. Set once from the environment, or by set_isa / set_num_threads.
std::atomic<int> g_isa{-1};
std::atomic<int> g_threads{-1};
std::mutex g_init;

template <class F>
int chosen(std::atomic<int>& slot, F&& from_env) {
  int v = slot.load(std::memory_order_acquire);
  if (v >= 0) return v;
  std::lock_guard lock(g_init);
  v = slot.load(std::memory_order_relaxed);
  if (v < 0) {
    v = from_env();
    slot.store(v, std::memory_order_release);
  }
  return v;
}

}  // namespace

const CpuFeatures& cpu_features() noexcept {
  static const CpuFeatures features = detect();
  return features;
}

bool isa_supported(Isa isa) noexcept {
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return cpu_features().avx2_fma;
    case Isa::avx512: return cpu_features().avx512;
    case Isa::avx512_bf16: return cpu_features().avx512_bf16;
    case Isa::amx: return cpu_features().amx;
  }
  return false;
}

Isa best_isa() noexcept {
  const CpuFeatures& f = cpu_features();
  return f.amx           ? Isa::amx
         : f.avx512_bf16 ? Isa::avx512_bf16
         : f.avx512      ? Isa::avx512
         : f.avx2_fma    ? Isa::avx2
                         : Isa::scalar;
}

std::string_view to_string(Isa isa) noexcept {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::amx: return "amx";
  }
  return "unknown";
}

Isa isa_named(std::string_view name) {
  std::string names;
  for (const Isa isa : all_isas) {
    if (name == to_string(isa)) return isa;
    names += detail::concat(names.empty() ? "" : ", ", to_string(isa));
  }
  throw InvalidArgument(detail::concat("isa ", name, " is not one of ", names));
}

Isa active_isa() { return static_cast<Isa>(chosen(g_isa, [] { return static_cast<int>(isa_from_env()); })); }

void set_isa(Isa isa) {
  if (!isa_supported(isa)) throw NotSupported(detail::concat("set_isa: this CPU does not support ", to_string(isa)));
  g_isa.store(static_cast<int>(isa), std::memory_order_release);
}

int num_threads() { return chosen(g_threads, threads_from_env); }

void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads)
    throw InvalidArgument(detail::concat("set_num_threads: n = ", n, " must be in [1, ", kMaxThreads, "]"));
  g_threads.store(n, std::memory_order_release);
}

}  // namespace trnsparse
