/// @file cli.hpp
/// What the subcommands of the `trnsparse` tool share: how a subcommand plugs into
/// main, the exit statuses, the `--json` flag and a one-line JSON object writer.
///
/// Conventions for every subcommand:
/// - `--json` prints machine-readable output, one JSON object per line, on stdout;
/// - exit status 0 on success, 1 for bad usage or bad input (one message on stderr,
///   naming the file and line of a parse error), 2 for an internal error;
/// - an output file is either complete or absent.
#pragma once

#include <CLI/CLI.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "trnsparse/error.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/types.hpp"

namespace trnsparse::cli {

/// The process exit statuses.
enum ExitStatus : int { exit_ok = 0, exit_bad_input = 1, exit_internal_error = 2 };

/// How a tool reports an exception that reached its main: the exit status, and the
/// message's prefix and text. Bad input (exit 1) is what the user can fix: unreadable or
/// malformed files, unsupported content, argument values or shapes the library refuses,
/// sizes beyond its limits, and problems larger than the memory the process may have
/// (an allocation that fails: "out of memory", exit 1, a smaller problem or more memory
/// fixes it). Anything else is an internal error (exit 2).
struct Failure {
  ExitStatus status;
  const char* kind;  ///< "" for bad input, "internal error: " otherwise
  std::string what;
};
inline Failure failure_of(const std::exception_ptr& error) {
  const auto bad_input = [](const std::exception& e) { return Failure{exit_bad_input, "", e.what()}; };
  try {
    std::rethrow_exception(error);
  } catch (const ParseError& e) {
    return bad_input(e);
  } catch (const IoError& e) {
    return bad_input(e);
  } catch (const NotSupported& e) {
    return bad_input(e);
  } catch (const InvalidArgument& e) {
    return bad_input(e);
  } catch (const DimensionMismatch& e) {
    return bad_input(e);
  } catch (const OverflowError& e) {
    return bad_input(e);
  } catch (const std::bad_alloc&) {
    return {exit_bad_input, "", "out of memory"};
  } catch (const std::exception& e) {
    return {exit_internal_error, "internal error: ", e.what()};
  } catch (...) {
    return {exit_internal_error, "internal error: ", "unknown exception"};
  }
}

/// A subcommand: its parser (owned by the parent app) and what runs once the command
/// line parsed. `run` reports failure by throwing; main maps the exception to an
/// exit status and a message.
struct Subcommand {
  CLI::App* parser;
  std::function<void()> run;
};

Subcommand add_info(CLI::App& app);
Subcommand add_convert(CLI::App& app);
Subcommand add_demo(CLI::App& app);
Subcommand add_solve(CLI::App& app);
Subcommand add_advise(CLI::App& app);
#ifdef TRNSPARSE_WITH_BENCH
Subcommand add_bench(CLI::App& app);
/// `/proc/self/exe`: the benchmark reruns itself for the OpenBLAS child baseline.
std::string self_path();
/// Re-executes this process with OMP_WAIT_POLICY=passive and OPENBLAS_THREAD_TIMEOUT=4
/// (OpenBLAS's shortest spin) where the caller did not set them, so that one library's
/// idle threads do not spin beside the next one timed. Returns only when nothing was done.
void ensure_passive_wait_policy(const std::string& self);
#endif
#ifdef TRNSPARSE_WITH_HF
Subcommand add_hf(CLI::App& app);
#endif

/// "coordinate real symmetric": the banner words of a Matrix Market header.
inline std::string banner_words(const MmHeader& h) {
  return std::string(to_string(h.format)) + " " + std::string(to_string(h.field)) + " " +
         std::string(to_string(h.symmetry));
}

/// The `--json` flag, spelled and described alike in every subcommand.
inline void add_json_flag(CLI::App& command, bool& json) {
  command.add_flag("--json", json, "Print machine-readable output: one JSON object per line");
}

/// One JSON object, built member by member and printed on one line. Non-finite
/// numbers become null (JSON has no NaN).
///
///     JsonObject o;
///     o.string("file", path).integer("rows", 3);
///     print_line(o.str());   // {"file":"a.mtx","rows":3}
class JsonObject {
public:
  JsonObject& string(std::string_view key, std::string_view value) {
    add_key(key);
    add_quoted(value);
    return *this;
  }
  JsonObject& integer(std::string_view key, index_t value) {
    add_key(key);
    body_ += std::to_string(value);
    return *this;
  }
  JsonObject& number(std::string_view key, double value) {
    add_key(key);
    if (!std::isfinite(value)) {
      body_ += "null";
      return *this;
    }
    std::array<char, 32> text{};
    body_.append(text.data(), std::to_chars(text.data(), text.data() + text.size(), value).ptr);
    return *this;
  }
  JsonObject& boolean(std::string_view key, bool value) {
    add_key(key);
    body_ += value ? "true" : "false";
    return *this;
  }
  JsonObject& object(std::string_view key, const JsonObject& value) {
    add_key(key);
    body_ += value.str();
    return *this;
  }

  JsonObject& array(std::string_view key, const std::vector<JsonObject>& items) {
    add_key(key);
    body_ += '[';
    for (std::size_t i = 0; i < items.size(); ++i) body_ += (i ? "," : "") + items[i].str();
    body_ += ']';
    return *this;
  }

  [[nodiscard]] std::string str() const { return "{" + body_ + "}"; }

private:
  void add_key(std::string_view key) {
    if (!body_.empty()) body_ += ',';
    add_quoted(key);
    body_ += ':';
  }
  /// `text` as a JSON string: quotes, backslashes and control characters escaped.
  void add_quoted(std::string_view text) {
    body_ += '"';
    for (const char c : text) {
      if (c == '"' || c == '\\') {
        body_ += '\\';
        body_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        std::array<char, 8> escape{};
        std::snprintf(escape.data(), escape.size(), "\\u%04x", static_cast<unsigned>(c));
        body_ += escape.data();
      } else {
        body_ += c;
      }
    }
    body_ += '"';
  }

  std::string body_;
};

/// Entries [first, first + n) of a fixed xorshift64 stream of values in [-1, 1): the
/// same vector in every run and on every machine (the `--rhs random` of the solve
/// commands; a process of a distributed solve draws its own rows, skipping `first`).
inline std::vector<double> fixed_random_vector(index_t n, index_t first = 0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  std::uint64_t state = 0x243f6a8885a308d3ull;
  const auto draw = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<double>(state >> 11) * 0x1p-52 - 1.0;
  };
  for (index_t i = 0; i < first; ++i) (void)draw();
  for (double& x : v) x = draw();
  return v;
}

/// Writes `line` and a newline to stdout (main checks stdout once at the end).
inline void print_line(std::string_view line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace trnsparse::cli
