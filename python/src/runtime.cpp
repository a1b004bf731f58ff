// The runtime: instruction set and thread count of the C++ kernels, and the timing
// harness (trnsparse/timing.hpp) for Python callables.

#include "bindings.hpp"
#include "common.hpp"

namespace trnsparse::python {
namespace {

TimingOptions timing_options(int reps, int chunk, double max_spread, int retries, double warmup_ms, int max_warmup) {
  return {.reps = reps, .chunk = chunk, .max_spread = max_spread, .retries = retries, .warmup_ms = warmup_ms,
          .max_warmup = max_warmup};
}

py::dict timing_dict(const Timing& t) {
  py::dict d;
  d["median_ms"] = t.median_ms;
  d["min_ms"] = t.min_ms;
  d["spread"] = t.spread;
  d["runs"] = t.runs;
  d["attempts"] = t.attempts;
  d["stalled_teams"] = t.stalled_teams;
  d["stable"] = t.stable;
  return d;
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def("set_isa", [](const std::string& name) { set_isa(isa_named(name)); });
  m.def("active_isa", [] { return std::string(to_string(active_isa())); });
  m.def("best_isa", [] { return std::string(to_string(best_isa())); });
  m.def("set_num_threads", &set_num_threads);
  m.def("num_threads", &num_threads);
  // The callables run with the GIL held, on this thread, as the harness calls them.
  m.def("measure", [](const py::function& f, int reps, int chunk, double max_spread, int retries, double warmup_ms,
                      int max_warmup) {
    return timing_dict(measure([&] { f(); }, timing_options(reps, chunk, max_spread, retries, warmup_ms, max_warmup)));
  });
  m.def("measure_pair", [](const py::function& f, const py::function& g, int reps, int chunk, double max_spread,
                           int retries, double warmup_ms, int max_warmup) {
    const auto [tf, tg] = measure_pair([&] { f(); }, [&] { g(); },
                                       timing_options(reps, chunk, max_spread, retries, warmup_ms, max_warmup));
    return py::make_tuple(timing_dict(tf), timing_dict(tg));
  });
}

}  // namespace trnsparse::python
