/*
 * working_set_cap.c -- the working-set-cap experiment as first documented on Windows: a
 * 64 MiB buffer is scanned, one byte per page, as many times as fit in about 1 s, in
 * normal mode and after SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_
 * BEGIN). On affected Windows versions background mode caps the working set at 32 MiB,
 * so every scan of 64 MiB faults on every page and runs hundreds of times slower.
 * A third variant calls EmptyWorkingSet (psapi) before every scan in normal mode: the
 * working set trimmed by hand, for comparison.
 *
 * Lines: "%u ticks to scan memory %d times in normal mode." and "... in background mode.
 * %1.1f times as long." (GetTickCount ticks, as in the original). With --json FILE it
 * appends one ScenarioResult line with scans/s per variant; affected = background mode
 * is at least 10x slower than normal mode. Under Wine background mode is accepted but
 * does not cap the working set, so it shows nothing about Windows.
 */
#include "probe_common.h"

#include <psapi.h>
#include <stdlib.h>
#include <string.h>

#if defined(_MSC_VER)
#pragma comment(lib, "psapi.lib")
#endif

#define AFFECTED_RATIO 10.0

static void print_help(void)
{
    printf("usage: working_set_cap [--mb M] [--seconds S] [--pairs P] [--no-empty] [--quick]\n"
           "                       [--json FILE]\n"
           "\n"
           "Scans a buffer one byte per page for about S seconds per pass, alternating\n"
           "normal passes and passes in background mode (PROCESS_MODE_BACKGROUND_BEGIN),\n"
           "then passes that call EmptyWorkingSet before every scan.\n"
           "\n"
           "  --mb M       buffer size in MiB (default 64)\n"
           "  --seconds S  length of one pass (default 1.0)\n"
           "  --pairs P    normal/background pairs (default 2)\n"
           "  --no-empty   skip the EmptyWorkingSet passes\n"
           "  --quick      0.25 s passes, 1 pair\n"
           "  --json FILE  append one JSON result line to FILE\n"
           "\n"
           "Affected: scanning in background mode takes at least 10 times as long as in\n"
           "normal mode (on affected Windows versions: hundreds of times).\n");
}

typedef struct {
    unsigned long long ticks;
    unsigned long long scans;
    double peak_working_set_mb; /* largest working set seen at the end of a pass */
} Tally;

static volatile unsigned char g_sink;
static int g_background;

static void end_background_mode(void)
{
    if (g_background) {
        SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_END);
        g_background = 0;
    }
}

static double working_set_mb(void)
{
    PROCESS_MEMORY_COUNTERS counters;
    ZeroMemory(&counters, sizeof counters);
    counters.cb = sizeof counters;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof counters)) {
        return 0.0;
    }
    return (double)counters.WorkingSetSize / (1024.0 * 1024.0);
}

/* Read one byte per page of the buffer. */
static void scan(const unsigned char *buffer, size_t bytes, size_t page)
{
    unsigned char sum = 0;
    size_t offset;
    for (offset = 0; offset < bytes; offset += page) {
        sum = (unsigned char)(sum + ((const volatile unsigned char *)buffer)[offset]);
    }
    g_sink = sum;
}

/* Scan until `milliseconds` ticks have passed; add ticks and scans to the tally. */
static void run_pass(Tally *tally, const unsigned char *buffer, size_t bytes, size_t page,
                     DWORD milliseconds, int empty_first)
{
    DWORD start = GetTickCount(), elapsed;
    unsigned long long scans = 0;
    double set_mb;
    do {
        probe_check_interrupt();
        if (empty_first && !EmptyWorkingSet(GetCurrentProcess())) {
            probe_fail_win32("EmptyWorkingSet failed");
        }
        scan(buffer, bytes, page);
        scans++;
        elapsed = GetTickCount() - start;
    } while (elapsed < milliseconds);
    tally->ticks += elapsed;
    tally->scans += scans;
    set_mb = working_set_mb();
    if (set_mb > tally->peak_working_set_mb) {
        tally->peak_working_set_mb = set_mb;
    }
}

static double scans_per_second(const Tally *tally)
{
    return tally->ticks > 0 ? (double)tally->scans * 1000.0 / (double)tally->ticks : 0.0;
}

/* How many times as long one scan takes in `slow` as in `fast`. */
static double times_as_long(const Tally *slow, const Tally *fast)
{
    return probe_ratio(scans_per_second(fast), scans_per_second(slow));
}

int main(int argc, char **argv)
{
    unsigned long long megabytes = 64, pairs = 2;
    double seconds = 1.0;
    int seconds_given = 0, pairs_given = 0, quick = 0, with_empty = 1;
    unsigned char *buffer;
    size_t bytes, page;
    SYSTEM_INFO system;
    Tally normal, background, emptied;
    DWORD pass_ms;
    DWORD background_error = 0;
    unsigned long long pair;
    ProbeVariant variants[3];
    ProbeResult result;
    size_t variant_count = 0;
    int i;

    probe_init("working-set-cap");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            probe_set_json_path(probe_option_value(argc, argv, &i));
        } else if (strcmp(argv[i], "--mb") == 0) {
            megabytes = probe_parse_count("--mb", probe_option_value(argc, argv, &i), 1, 65536);
        } else if (strcmp(argv[i], "--seconds") == 0) {
            seconds = probe_parse_seconds("--seconds", probe_option_value(argc, argv, &i), 0.05,
                                          600.0);
            seconds_given = 1;
        } else if (strcmp(argv[i], "--pairs") == 0) {
            pairs = probe_parse_count("--pairs", probe_option_value(argc, argv, &i), 1, 100);
            pairs_given = 1;
        } else if (strcmp(argv[i], "--no-empty") == 0) {
            with_empty = 0;
        } else {
            probe_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (quick) {
        seconds = seconds_given ? seconds : 0.25;
        pairs = pairs_given ? pairs : 1;
    }
    pass_ms = (DWORD)(seconds * 1000.0 + 0.5);

    GetSystemInfo(&system);
    page = system.dwPageSize;
    bytes = (size_t)megabytes * 1024 * 1024;
    buffer = (unsigned char *)VirtualAlloc(NULL, bytes, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    if (buffer == NULL) {
        probe_fail_win32("cannot allocate %llu MiB", megabytes);
    }
    memset(buffer, 1, bytes); /* every page present before the first pass */
    probe_on_cleanup(end_background_mode);

    ZeroMemory(&normal, sizeof normal);
    ZeroMemory(&background, sizeof background);
    ZeroMemory(&emptied, sizeof emptied);
    for (pair = 0; pair < pairs; pair++) {
        Tally pass;
        ZeroMemory(&pass, sizeof pass);
        run_pass(&pass, buffer, bytes, page, pass_ms, 0);
        probe_say("%u ticks to scan memory %d times in normal mode.", (unsigned)pass.ticks,
                  (int)pass.scans);
        normal.ticks += pass.ticks;
        normal.scans += pass.scans;
        if (pass.peak_working_set_mb > normal.peak_working_set_mb) {
            normal.peak_working_set_mb = pass.peak_working_set_mb;
        }

        if (!SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_BEGIN)) {
            background_error = GetLastError();
            probe_say("SetPriorityClass(PROCESS_MODE_BACKGROUND_BEGIN) failed (error %lu); "
                      "no background pass.",
                      (unsigned long)background_error);
            continue;
        }
        g_background = 1;
        ZeroMemory(&pass, sizeof pass);
        run_pass(&pass, buffer, bytes, page, pass_ms, 0);
        end_background_mode();
        background.ticks += pass.ticks;
        background.scans += pass.scans;
        if (pass.peak_working_set_mb > background.peak_working_set_mb) {
            background.peak_working_set_mb = pass.peak_working_set_mb;
        }
        probe_say("%u ticks to scan memory %d times in background mode. %1.1f times as long.",
                  (unsigned)pass.ticks, (int)pass.scans, times_as_long(&pass, &normal));
    }
    if (with_empty) {
        for (pair = 0; pair < pairs; pair++) {
            Tally pass;
            ZeroMemory(&pass, sizeof pass);
            run_pass(&pass, buffer, bytes, page, pass_ms, 1);
            emptied.ticks += pass.ticks;
            emptied.scans += pass.scans;
            probe_say("%u ticks to scan memory %d times with EmptyWorkingSet before each scan. "
                      "%1.1f times as long.",
                      (unsigned)pass.ticks, (int)pass.scans, times_as_long(&pass, &normal));
        }
    }
    VirtualFree(buffer, 0, MEM_RELEASE);

    memset(variants, 0, sizeof variants);
    variants[variant_count].name = "normal mode";
    variants[variant_count].role = "control";
    variants[variant_count].has_value = 1;
    variants[variant_count].value = scans_per_second(&normal);
    variants[variant_count].unit = "scans/s";
    snprintf(variants[variant_count].note, sizeof variants[variant_count].note,
             "%llu scans of %llu MiB in %llu ticks; working set %.1f MiB", normal.scans,
             megabytes, normal.ticks, normal.peak_working_set_mb);
    variant_count++;
    if (background.scans > 0) {
        variants[variant_count].name = "background mode (PROCESS_MODE_BACKGROUND_BEGIN)";
        variants[variant_count].role = "pathological";
        variants[variant_count].has_value = 1;
        variants[variant_count].value = scans_per_second(&background);
        variants[variant_count].unit = "scans/s";
        snprintf(variants[variant_count].note, sizeof variants[variant_count].note,
                 "%llu scans in %llu ticks; working set %.1f MiB at the end of a pass",
                 background.scans, background.ticks, background.peak_working_set_mb);
        variant_count++;
    }
    if (emptied.scans > 0) {
        variants[variant_count].name = "EmptyWorkingSet before every scan";
        variants[variant_count].role = "pathological";
        variants[variant_count].has_value = 1;
        variants[variant_count].value = scans_per_second(&emptied);
        variants[variant_count].unit = "scans/s";
        snprintf(variants[variant_count].note, sizeof variants[variant_count].note,
                 "%llu scans in %llu ticks; the working set trimmed by hand, for comparison",
                 emptied.scans, emptied.ticks);
        variant_count++;
    }

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN;
    if (background.scans > 0) {
        result.has_headline = 1;
        result.metric = "scans of the buffer per second";
        result.unit = "scans/s";
        result.pathological = scans_per_second(&background);
        result.control = scans_per_second(&normal);
        result.ratio = times_as_long(&background, &normal);
        result.affected = result.ratio >= AFFECTED_RATIO;
        snprintf(result.explanation, sizeof result.explanation,
                 "a %llu MiB scan takes %.1fx as long in background mode (%.0f vs %.0f "
                 "scans/s; threshold %.0fx): %s",
                 megabytes, result.ratio, result.pathological, result.control, AFFECTED_RATIO,
                 result.affected ? "the working set is capped, affected" : "not affected");
    } else {
        static char reason[128];
        snprintf(reason, sizeof reason,
                 "SetPriorityClass(PROCESS_MODE_BACKGROUND_BEGIN) failed with error %lu",
                 (unsigned long)background_error);
        result.reason = reason;
        snprintf(result.explanation, sizeof result.explanation,
                 "background mode could not be entered, so there is no verdict");
    }
    result.variants = variants;
    result.variant_count = variant_count;
    probe_write_result(&result);
    probe_run_cleanups();
    return 0;
}
