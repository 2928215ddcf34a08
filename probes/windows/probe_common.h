/*
 * probe_common.h -- what the five Windows probes share: timing (QueryPerformanceCounter,
 * GetProcessTimes), the human lines they print, the JSON line they append to --json FILE
 * (the ScenarioResult schema of `slowlab lab --json`, see crates/model/src/results.rs),
 * argument parsing helpers, temporary directories and cleanup on failure or Ctrl-C.
 *
 * It does not measure anything itself and knows nothing about a particular scenario.
 * Plain C99 + Win32; builds with mingw-w64 gcc and with MSVC.
 */
#ifndef SLOWLAB_PROBE_COMMON_H
#define SLOWLAB_PROBE_COMMON_H

#ifndef _CRT_SECURE_NO_WARNINGS
#define _CRT_SECURE_NO_WARNINGS /* MSVC: fopen, strncpy are fine here */
#endif
#ifndef __USE_MINGW_ANSI_STDIO
#define __USE_MINGW_ANSI_STDIO 1 /* mingw: C99 printf (%lld, %zu) */
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0601 /* Windows 7: CancelIoEx, K32EmptyWorkingSet, jobs */
#endif

#include <windows.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__GNUC__) || defined(__clang__)
#define PROBE_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define PROBE_NORETURN __attribute__((noreturn))
#elif defined(_MSC_VER)
#define PROBE_PRINTF(fmt_index, first_arg)
#define PROBE_NORETURN __declspec(noreturn)
#else
#define PROBE_PRINTF(fmt_index, first_arg)
#define PROBE_NORETURN
#endif

/* Exit codes: 0 ran, 1 failed while running, 2 bad command line. */
#define PROBE_EXIT_FAILED 1
#define PROBE_EXIT_USAGE 2

/* ---- timing ---------------------------------------------------------------------- */

/* Seconds from QueryPerformanceCounter (monotonic, sub-microsecond). */
double probe_now_s(void);
/* user + kernel seconds of a process or thread handle (GetProcessTimes/GetThreadTimes;
 * Windows accounts CPU time in clock ticks, typically 15.6 ms, so short spans read 0). */
double probe_process_cpu_s(HANDLE process);
double probe_thread_cpu_s(HANDLE thread);

/* ---- output ---------------------------------------------------------------------- */

/* Start a probe: remember its scenario id, set up Ctrl-C cleanup. Call first in main. */
void probe_init(const char *scenario_id);
/* Print one human line to stdout (a newline is added) and keep it for the JSON "lines". */
void probe_say(const char *fmt, ...) PROBE_PRINTF(1, 2);
/* Print an empty line to stdout, as the original programs do between phases; not kept
 * for the JSON "lines" (which hold only non-empty lines). */
void probe_say_blank(void);
/* Progress and diagnostics on stderr; never recorded in JSON. */
void probe_progress(const char *fmt, ...) PROBE_PRINTF(1, 2);
/* One-line error on stderr, run the cleanups, exit PROBE_EXIT_FAILED. */
PROBE_NORETURN void probe_fail(const char *fmt, ...) PROBE_PRINTF(1, 2);
/* Like probe_fail but appends ": <GetLastError() text> (error N)". */
PROBE_NORETURN void probe_fail_win32(const char *fmt, ...) PROBE_PRINTF(1, 2);
/* One-line usage error on stderr ("PROG: MESSAGE (try --help)"), exit PROBE_EXIT_USAGE. */
PROBE_NORETURN void probe_usage_error(const char *fmt, ...) PROBE_PRINTF(1, 2);

/* ---- cleanup --------------------------------------------------------------------- */

/* Register a function run (last registered first) by probe_fail, on Ctrl-C / console
 * close, and by probe_run_cleanups. It must be safe to call more than once. */
void probe_on_cleanup(void (*cleanup)(void));
/* Run all registered cleanups now (the normal end of a probe). */
void probe_run_cleanups(void);
/* Call often from measuring loops: after Ctrl-C it runs the cleanups and exits 130.
 * (If the main thread does not get here within 5 s, the Ctrl-C handler cleans up.) */
void probe_check_interrupt(void);

/* ---- arguments ------------------------------------------------------------------- */

/* Parse a whole decimal number in [min, max]; exits with a usage error otherwise. */
unsigned long long probe_parse_count(const char *option, const char *text,
                                     unsigned long long min, unsigned long long max);
/* Parse a decimal number (e.g. "0.5") in [min, max]; exits with a usage error otherwise. */
double probe_parse_seconds(const char *option, const char *text, double min, double max);
/* The value after option argv[*index]; exits with a usage error when it is missing. */
const char *probe_option_value(int argc, char **argv, int *index);

/* ---- files and processes --------------------------------------------------------- */

/* Create a fresh directory %TEMP%\slowlab-TAG-PID-N and return its path (wide). */
void probe_make_temp_dir(const char *tag, wchar_t *path, size_t path_chars);
/* Delete a directory tree; returns FALSE when something could not be removed. */
BOOL probe_remove_tree(const wchar_t *path);
/* Full path of this executable (for re-executing itself as a child). */
void probe_self_path(wchar_t *path, size_t path_chars);
/* Start this executable again with the given wide arguments (after argv[0]) in the
 * given working directory (NULL: inherit). Returns the process handle; the primary
 * thread handle is closed. Fails the probe when CreateProcess fails. */
HANDLE probe_spawn_self(const wchar_t *arguments, const wchar_t *working_dir);

/* ---- the JSON result (one line per scenario run) --------------------------------- */

#define PROBE_MAX_REPS 16
#define PROBE_AFFECTED_UNKNOWN (-1)

/* Every repetition at one size n: cpu_s[i] and wall_s[i] belong to the same run. */
typedef struct {
    unsigned long long n;
    int reps;
    double cpu_s[PROBE_MAX_REPS];
    double wall_s[PROBE_MAX_REPS];
} ProbePoint;

/* A sweep variant (points != NULL) or a single measured value (has_value). */
typedef struct {
    const char *name;
    const char *role; /* "pathological" or "control" */
    const ProbePoint *points;
    size_t point_count;
    int has_value;
    double value;
    const char *unit; /* NULL: omitted */
    char note[512];   /* empty: omitted */
} ProbeVariant;

typedef struct {
    int affected;        /* 1, 0 or PROBE_AFFECTED_UNKNOWN (null) */
    const char *reason;  /* NULL: null; what limited the run, one line */
    int has_headline;
    const char *metric;  /* headline */
    const char *unit;
    double pathological;
    double control;
    double ratio;
    const ProbeVariant *variants;
    size_t variant_count;
    char explanation[512];
} ProbeResult;

/* How many times worse `bad` is than `good` when a larger number is worse (times),
 * guarded so that the result is finite and >= 0. */
double probe_ratio(double bad, double good);

/* Remember the --json FILE and check now that it can be appended to, so that a bad
 * path fails before the measurement rather than after it. */
void probe_set_json_path(const char *path);

/* Append the result as one JSON line to the --json FILE (nothing without --json).
 * The "lines" are every probe_say line so far; platform is "windows". */
void probe_write_result(const ProbeResult *result);

#endif
