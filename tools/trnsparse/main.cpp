/// @file main.cpp
/// The `trnsparse` command-line tool: parses the command line with CLI11, runs the
/// chosen subcommand and turns every outcome into an exit status (see cli.hpp).
///
///     trnsparse info tests/data/1138_bus.mtx --json
///     trnsparse convert in.mtx out.mtx --format array
///     trnsparse demo

#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/version.hpp"

namespace {

using namespace trnsparse::cli;

int report(const char* kind, const char* what, int status) noexcept {
  std::fprintf(stderr, "trnsparse: %s%s\n", kind, what);
  return status;
}

/// Checks that everything printed reached stdout (a closed pipe, a full disk).
void finish_output() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)
    throw trnsparse::IoError("cannot write to standard output");
}

/// Parses the command line and runs the subcommand; throws on failure.
int run(int argc, char** argv) {
  CLI::App app{"Block-sparse matrices from the command line.", "trnsparse"};
  app.set_version_flag("--version", std::string("trnsparse ") + trnsparse::version_string);
  app.require_subcommand(1);
  std::vector<Subcommand> commands{add_info(app), add_convert(app), add_demo(app), add_solve(app), add_advise(app)};
#ifdef TRNSPARSE_WITH_BENCH
  commands.push_back(add_bench(app));
#endif
#ifdef TRNSPARSE_WITH_HF
  commands.push_back(add_hf(app));
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 1 (not CLI11's own codes).
    return app.exit(e) == 0 ? exit_ok : exit_bad_input;
  }
  for (const Subcommand& command : commands) {
    if (!command.parser->parsed()) continue;
    command.run();
    finish_output();
    return exit_ok;
  }
  return exit_bad_input;  // not reached: require_subcommand(1) rejects the rest
}

}  // namespace

/// Every outcome becomes an exit status (cli.hpp: failure_of). No exception escapes, and
/// SIGPIPE is ignored so that a closed pipe is an error message, not a death by signal.
int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (...) {
    const Failure f = failure_of(std::current_exception());
    return report(f.kind, f.what.c_str(), f.status);
  }
}
