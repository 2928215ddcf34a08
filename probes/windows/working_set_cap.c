/*
 * working_set_cap.c -- the working-set-cap experiment as the article's BackgroundBegin
 * program ran it: a 64 MiB buffer is reset (memset) before every pass, then written one
 * byte per page, over and over, for about 1 s per pass, timed with timeGetTime after
 * timeBeginPeriod(1). Passes alternate: normal mode, then background mode
 * (SetPriorityClass(PROCESS_MODE_BACKGROUND_BEGIN)), ten pairs, and each background
 * pass is compared with the normal pass just before it. On affected Windows versions
 * background mode caps the working set at 32 MiB, so every scan of 64 MiB faults on
 * every page and runs hundreds of times slower.
 *
 * Lines: the original's "%u ticks to scan memory %d times in normal mode." and "... in
 * background mode. %1.1f times as long.", each followed by the working-set size at the
 * end of the pass (the article watches it stay near 32 MiB). --empty-working-set adds
 * pairs whose second pass calls EmptyWorkingSet (psapi) before every scan instead, in the
 * same wording ("... in EmptyWorkingSet mode. ..."). With --json FILE it appends one
 * ScenarioResult line with scans/s per variant; affected = background mode is at least
 * 10x slower than normal mode. Under Wine background mode is refused (error 87), so it
 * shows nothing about Windows.
 */
#include "probe_common.h"

#include <mmsystem.h>
#include <psapi.h>
#include <stdlib.h>
#include <string.h>

#if defined(_MSC_VER)
#pragma comment(lib, "psapi.lib")
#pragma comment(lib, "winmm.lib")
#endif

#define AFFECTED_RATIO 10.0

static void print_help(void)
{
    printf("usage: working_set_cap [--mb M] [--seconds S] [--pairs P] [--empty-working-set]\n"
           "                       [--quick] [--json FILE]\n"
           "\n"
           "Like the article's BackgroundBegin program: resets a buffer, then writes one\n"
           "byte per page of it over and over for about S seconds per pass, alternating a\n"
           "normal pass and a pass in background mode (PROCESS_MODE_BACKGROUND_BEGIN),\n"
           "P pairs, timed with timeGetTime at 1 ms resolution (timeBeginPeriod(1)).\n"
           "\n"
           "  --mb M               buffer size in MiB (default 64; the cap is 32 MiB)\n"
           "  --seconds S          length of one pass (default 1.0)\n"
           "  --pairs P            normal/background pairs (default 10, as the original)\n"
           "  --empty-working-set  then P more pairs whose second pass calls\n"
           "                       EmptyWorkingSet before every scan (not in the original)\n"
           "  --quick              0.25 s passes, 2 pairs\n"
           "  --json FILE          append one JSON result line to FILE\n"
           "\n"
           "Affected: scanning in background mode takes at least 10 times as long as in\n"
           "normal mode (on affected Windows versions: hundreds of times).\n");
}

/* What several passes of one kind added up to. */
typedef struct {
    unsigned long long ticks; /* timeGetTime milliseconds */
    unsigned long long scans;
    double min_working_set_mb; /* at the end of a pass; 0 = none yet */
    double max_working_set_mb;
} Tally;

typedef enum { PASS_NORMAL, PASS_BACKGROUND, PASS_EMPTY } PassKind;

static int g_background;
static int g_timer_period_set;

static void end_background_mode(void)
{
    if (g_background) {
        SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_END);
        g_background = 0;
    }
}

static void end_timer_period(void)
{
    if (g_timer_period_set) {
        timeEndPeriod(1);
        g_timer_period_set = 0;
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

/* Write one byte per page, as the original does (a write fault, not a read fault). */
static void scan(unsigned char *buffer, size_t bytes, size_t page)
{
    volatile unsigned char *p = buffer;
    size_t offset;
    for (offset = 0; offset < bytes; offset += page) {
        p[offset] = 2;
    }
}

typedef struct {
    DWORD ticks;
    unsigned long scans;
    double working_set_mb; /* at the end of the pass, before leaving background mode */
} Pass;

/* One pass: reset the buffer, enter the mode, scan until more than `milliseconds` have
 * passed on timeGetTime (the original's loop), leave the mode. */
static Pass run_pass(PassKind kind, unsigned char *buffer, size_t bytes, size_t page,
                     DWORD milliseconds)
{
    Pass pass;
    DWORD start;
    memset(buffer, 1, bytes); /* every page in the working set before the pass */
    if (kind == PASS_BACKGROUND) {
        g_background = 1; /* SetPriorityClass succeeded once already */
        SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_BEGIN);
    }
    pass.scans = 0;
    start = timeGetTime();
    for (;;) {
        pass.ticks = timeGetTime() - start;
        if (pass.ticks > milliseconds) {
            break;
        }
        probe_check_interrupt();
        if (kind == PASS_EMPTY && !EmptyWorkingSet(GetCurrentProcess())) {
            probe_fail_win32("EmptyWorkingSet failed");
        }
        pass.scans++;
        scan(buffer, bytes, page);
    }
    pass.working_set_mb = working_set_mb();
    end_background_mode();
    return pass;
}

static double scans_per_second(unsigned long long scans, unsigned long long ticks)
{
    return ticks > 0 ? (double)scans * 1000.0 / (double)ticks : 0.0;
}

static void add_pass(Tally *tally, const Pass *pass)
{
    tally->ticks += pass->ticks;
    tally->scans += pass->scans;
    if (tally->min_working_set_mb == 0.0 || pass->working_set_mb < tally->min_working_set_mb) {
        tally->min_working_set_mb = pass->working_set_mb;
    }
    if (pass->working_set_mb > tally->max_working_set_mb) {
        tally->max_working_set_mb = pass->working_set_mb;
    }
}

static void say_working_set(const Pass *pass)
{
    probe_say("Working set was %.1f MiB at the end of the pass.", pass->working_set_mb);
}

/* P pairs: a normal pass, then a `kind` pass compared with that normal pass. */
static void run_pairs(PassKind kind, unsigned long long pairs, unsigned char *buffer,
                      size_t bytes, size_t page, DWORD pass_ms, Tally *normal, Tally *other)
{
    const char *mode = kind == PASS_BACKGROUND ? "background" : "EmptyWorkingSet";
    unsigned long long pair;
    for (pair = 0; pair < pairs; pair++) {
        Pass before, pass;
        double last_rate, rate;
        before = run_pass(PASS_NORMAL, buffer, bytes, page, pass_ms);
        probe_say("%u ticks to scan memory %d times in normal mode.", (unsigned)before.ticks,
                  (int)before.scans);
        say_working_set(&before);
        pass = run_pass(kind, buffer, bytes, page, pass_ms);
        last_rate = scans_per_second(before.scans, before.ticks);
        rate = scans_per_second(pass.scans, pass.ticks);
        probe_say("%u ticks to scan memory %d times in %s mode. %1.1f times as long.",
                  (unsigned)pass.ticks, (int)pass.scans, mode, probe_ratio(last_rate, rate));
        say_working_set(&pass);
        add_pass(normal, &before);
        add_pass(other, &pass);
    }
}

static void describe(ProbeVariant *variant, const char *name, const char *role,
                     const Tally *tally, const char *what)
{
    variant->name = name;
    variant->role = role;
    variant->has_value = 1;
    variant->value = scans_per_second(tally->scans, tally->ticks);
    variant->unit = "scans/s";
    snprintf(variant->note, sizeof variant->note,
             "%llu scans in %llu ticks (ms); working set %.1f to %.1f MiB at the end of a "
             "pass; %s",
             tally->scans, tally->ticks, tally->min_working_set_mb, tally->max_working_set_mb,
             what);
}

int main(int argc, char **argv)
{
    unsigned long long megabytes = 64, pairs = 10;
    double seconds = 1.0;
    int seconds_given = 0, pairs_given = 0, quick = 0, with_empty = 0;
    unsigned char *buffer;
    size_t bytes, page;
    SYSTEM_INFO system;
    Tally normal, background, emptied;
    DWORD pass_ms;
    DWORD background_error = 0;
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
        } else if (strcmp(argv[i], "--empty-working-set") == 0) {
            with_empty = 1;
        } else {
            probe_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (quick) {
        seconds = seconds_given ? seconds : 0.25;
        pairs = pairs_given ? pairs : 2;
    }
    pass_ms = (DWORD)(seconds * 1000.0 + 0.5);

    GetSystemInfo(&system);
    page = system.dwPageSize;
    bytes = (size_t)megabytes * 1024 * 1024;
    buffer = (unsigned char *)VirtualAlloc(NULL, bytes, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    if (buffer == NULL) {
        probe_fail_win32("cannot allocate %llu MiB", megabytes);
    }
    /* A 1 ms timer for timeGetTime, as the original requests. */
    if (timeBeginPeriod(1) == TIMERR_NOERROR) {
        g_timer_period_set = 1;
    }
    probe_on_cleanup(end_timer_period);
    probe_on_cleanup(end_background_mode);

    ZeroMemory(&normal, sizeof normal);
    ZeroMemory(&background, sizeof background);
    ZeroMemory(&emptied, sizeof emptied);
    /* The original ignores a refusal and would time a normal pass as "background":
     * check once, and say so instead. */
    if (SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_BEGIN)) {
        SetPriorityClass(GetCurrentProcess(), PROCESS_MODE_BACKGROUND_END);
        run_pairs(PASS_BACKGROUND, pairs, buffer, bytes, page, pass_ms, &normal, &background);
    } else {
        background_error = GetLastError();
        probe_say("SetPriorityClass(PROCESS_MODE_BACKGROUND_BEGIN) failed (error %lu); "
                  "no background passes.",
                  (unsigned long)background_error);
    }
    if (with_empty) {
        run_pairs(PASS_EMPTY, pairs, buffer, bytes, page, pass_ms, &normal, &emptied);
    }
    if (normal.scans == 0) {
        /* Neither kind ran: still measure normal mode, so the result has a control. */
        Pass pass = run_pass(PASS_NORMAL, buffer, bytes, page, pass_ms);
        probe_say("%u ticks to scan memory %d times in normal mode.", (unsigned)pass.ticks,
                  (int)pass.scans);
        say_working_set(&pass);
        add_pass(&normal, &pass);
    }
    VirtualFree(buffer, 0, MEM_RELEASE);

    memset(variants, 0, sizeof variants);
    describe(&variants[variant_count++], "normal mode", "control", &normal,
             "the pass before each background or EmptyWorkingSet pass");
    if (background.scans > 0) {
        describe(&variants[variant_count++], "background mode (PROCESS_MODE_BACKGROUND_BEGIN)",
                 "pathological", &background,
                 "the working set is capped at 32 MiB on affected Windows versions");
    }
    if (emptied.scans > 0) {
        describe(&variants[variant_count++], "EmptyWorkingSet before every scan", "pathological",
                 &emptied, "the working set trimmed by hand, for comparison");
    }

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN;
    if (background.scans > 0) {
        result.has_headline = 1;
        result.metric = "scans of the buffer per second";
        result.unit = "scans/s";
        result.pathological = scans_per_second(background.scans, background.ticks);
        result.control = scans_per_second(normal.scans, normal.ticks);
        result.ratio = probe_ratio(result.control, result.pathological);
        result.affected = result.ratio >= AFFECTED_RATIO;
        snprintf(result.explanation, sizeof result.explanation,
                 "a %llu MiB scan takes %.1fx as long in background mode (%.0f vs %.0f "
                 "scans/s; working set %.1f MiB; threshold %.0fx): %s",
                 megabytes, result.ratio, result.pathological, result.control,
                 background.max_working_set_mb, AFFECTED_RATIO,
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
