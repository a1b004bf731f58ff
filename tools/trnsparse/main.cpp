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
#include <new>
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
  std::vector<Subcommand> commands{add_info(app), add_convert(app), add_demo(app), add_solve(app)};
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

/// Bad input (exit 1) is what the user can fix: unreadable or malformed files,
/// unsupported content, argument values the library refuses. Anything else is an
/// internal error (exit 2). No exception escapes, and SIGPIPE is ignored so that a
/// closed pipe is an error message, not a death by signal.
int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const trnsparse::ParseError& e) {
    return report("", e.what(), exit_bad_input);
  } catch (const trnsparse::IoError& e) {
    return report("", e.what(), exit_bad_input);
  } catch (const trnsparse::NotSupported& e) {
    return report("", e.what(), exit_bad_input);
  } catch (const trnsparse::InvalidArgument& e) {
    return report("", e.what(), exit_bad_input);
  } catch (const trnsparse::OverflowError& e) {
    return report("", e.what(), exit_bad_input);
  } catch (const std::bad_alloc&) {
    return report("internal error: ", "out of memory", exit_internal_error);
  } catch (const std::exception& e) {
    return report("internal error: ", e.what(), exit_internal_error);
  } catch (...) {
    return report("internal error: ", "unknown exception", exit_internal_error);
  }
}
