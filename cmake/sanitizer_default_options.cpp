// Sanitizer runtime defaults for the TRNSPARSE_SANITIZE builds (added to every executable
// that links trnsparse by the root CMakeLists.txt). The runtimes read these before
// ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS, so the environment still has the last word.
//
// detect_leaks=1: LeakSanitizer works here as root; it refuses to run under ptrace (a
// debugger or strace attached), where ASAN_OPTIONS=detect_leaks=0 turns it off.

extern "C" const char* __asan_default_options() {
  return "detect_leaks=1:halt_on_error=1:check_initialization_order=1:strict_init_order=1:"
         "detect_stack_use_after_return=1";
}

extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

// ignore_noninstrumented_modules: the OpenMP runtime is not instrumented; its internal
// locking would be reported (Archer asks for this too). second_deadlock_stack: both stacks
// of a lock-order report.
extern "C" const char* __tsan_default_options() {
  return "halt_on_error=1:ignore_noninstrumented_modules=1:second_deadlock_stack=1";
}
