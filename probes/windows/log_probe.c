/*
 * log_probe.c -- the log-probe experiment as first documented on Windows: a verifier gave
 * each process a log file named by probing name.0.dat, name.1.dat, ... (an existence
 * check each, GetFileAttributes) until one was free, so the k-th launch does k checks and
 * N sequential launches cost O(N^2) checks. This program launches itself N times as such
 * a child, one after the other, and then N times as a control child that creates a unique
 * name directly, and finally measures what one existence check costs here.
 *
 * It imitates Application Verifier's log naming; it does not run Application Verifier
 * (see README.md for reproducing with the real one), and says so in its first line.
 *
 * Lines: the original batch file's "%1.2f seconds elapsed time for 10 invocations of
 * PROGRAM (N total, at TIME)" per batch of 10 launches (TIME as cmd's %time%), and the
 * per-check cost. The default is the article's ~7,000 launches per mode; --quick is 40.
 * With --json FILE it appends one ScenarioResult line whose points are the cumulative
 * children's CPU (user+kernel from GetProcessTimes) and wall time after n launches, at
 * doubling n; `slowlab import` fits the growth. Under Wine it runs, but
 * process launch and file checks are Wine's.
 */
#include "probe_common.h"

#include <stdlib.h>
#include <string.h>

#define BATCH 10
#define CHILD_TIMEOUT_MS 60000
#define MAX_CHECKPOINTS 32

static void print_help(void)
{
    printf("usage: log_probe [--launches N] [--mode both|probe|unique] [--quick] [--json FILE]\n"
           "\n"
           "Imitates Application Verifier's log naming (it does not run App Verifier):\n"
           "launches this program N times in a row as a child that finds a free log name by\n"
           "probing name.0.dat, name.1.dat, ... (GetFileAttributes) and creates it, then N\n"
           "times as a control child that creates a unique name, and prints the time per\n"
           "batch of 10 launches and the cost of one existence check.\n"
           "\n"
           "  --launches N  launches per mode (default 7000, as the article)\n"
           "  --mode M      both (default), probe (pathological only), unique (control only)\n"
           "  --quick       40 launches per mode\n"
           "  --json FILE   append one JSON result line to FILE\n"
           "\n"
           "Affected: the probing batches get slower as the total grows (quadratic) while\n"
           "the unique-name batches stay flat; `slowlab import FILE` computes the exponents.\n");
}

/* ---- children -------------------------------------------------------------------- */

/* Find the first free name.N.dat in the current directory and create it. */
static int child_probe(void)
{
    wchar_t name[64];
    unsigned long index;
    for (index = 0; index < 100000000UL; index++) {
        HANDLE file;
        swprintf(name, sizeof name / sizeof name[0], L"name.%lu.dat", index);
        if (GetFileAttributesW(name) != INVALID_FILE_ATTRIBUTES) {
            continue; /* taken: probe the next one */
        }
        file = CreateFileW(name, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
        if (file != INVALID_HANDLE_VALUE) {
            CloseHandle(file);
            return 0;
        }
        if (GetLastError() != ERROR_FILE_EXISTS) {
            return 3;
        }
    }
    return 4;
}

/* Create unique.K.dat in the current directory without looking at other names. */
static int child_unique(const char *index_text)
{
    wchar_t name[64];
    HANDLE file;
    swprintf(name, sizeof name / sizeof name[0], L"unique.%hs.dat", index_text);
    file = CreateFileW(name, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
    if (file == INVALID_HANDLE_VALUE) {
        return 3;
    }
    CloseHandle(file);
    return 0;
}

/* ---- the parent ------------------------------------------------------------------ */

/* The time of day as cmd's %time% prints it ("15:19:30.32", hours space-padded). */
static void time_of_day(char *text, size_t size)
{
    SYSTEMTIME now;
    GetLocalTime(&now);
    snprintf(text, size, "%2u:%02u:%02u.%02u", (unsigned)now.wHour, (unsigned)now.wMinute,
             (unsigned)now.wSecond, (unsigned)(now.wMilliseconds / 10));
}

static wchar_t g_root[MAX_PATH * 2];
static HANDLE g_child; /* the child running right now, if any */

static void stop_child_and_remove_root(void)
{
    if (g_child != NULL) {
        TerminateProcess(g_child, 1);
        WaitForSingleObject(g_child, 5000);
        CloseHandle(g_child);
        g_child = NULL;
    }
    if (g_root[0] != L'\0') {
        if (!probe_remove_tree(g_root)) {
            probe_progress("log-probe: could not remove all of %ls", g_root);
        }
        g_root[0] = L'\0';
    }
}

typedef struct {
    const char *name;
    const char *role;
    int probing; /* 1: name.N.dat probing child, 0: unique-name child */
    wchar_t directory[MAX_PATH * 2];
    ProbePoint points[MAX_CHECKPOINTS];
    size_t point_count;
    double total_wall_s, total_cpu_s;
} Mode;

/* Doubling sizes N, N/2, N/4 ... down to one batch, ascending. */
static size_t checkpoints(unsigned long long launches, unsigned long long *sizes)
{
    unsigned long long reversed[MAX_CHECKPOINTS];
    size_t count = 0, i;
    unsigned long long n;
    for (n = launches; n >= BATCH && count < MAX_CHECKPOINTS; n /= 2) {
        reversed[count++] = n;
    }
    if (count == 0) {
        reversed[count++] = launches;
    }
    for (i = 0; i < count; i++) {
        sizes[i] = reversed[count - 1 - i];
    }
    return count;
}

static void run_mode(Mode *mode, unsigned long long launches)
{
    unsigned long long sizes[MAX_CHECKPOINTS];
    size_t size_count = checkpoints(launches, sizes), next_size = 0;
    unsigned long long k;
    double start = probe_now_s(), batch_start = start, cpu_s = 0.0;
    if (!CreateDirectoryW(mode->directory, NULL)) {
        probe_fail_win32("cannot create %ls", mode->directory);
    }
    probe_say("%s:", mode->probing ? "Launches that probe name.N.dat for a free log name"
                                    : "Launches that use a unique log name (control)");
    for (k = 1; k <= launches; k++) {
        wchar_t arguments[64];
        DWORD exit_code = 0, waited;
        probe_check_interrupt();
        if (mode->probing) {
            swprintf(arguments, sizeof arguments / sizeof arguments[0], L"--child-probe");
        } else {
            swprintf(arguments, sizeof arguments / sizeof arguments[0], L"--child-unique %llu", k);
        }
        g_child = probe_spawn_self(arguments, mode->directory);
        waited = WaitForSingleObject(g_child, CHILD_TIMEOUT_MS);
        if (waited != WAIT_OBJECT_0) {
            probe_fail("child %llu did not finish within %d s", k, CHILD_TIMEOUT_MS / 1000);
        }
        probe_check_interrupt(); /* Ctrl-C also ends the child: not a child failure */
        if (!GetExitCodeProcess(g_child, &exit_code) || exit_code != 0) {
            probe_fail("child %llu failed (exit code %lu)", k, (unsigned long)exit_code);
        }
        cpu_s += probe_process_cpu_s(g_child); /* before the handle is closed */
        CloseHandle(g_child);
        g_child = NULL;
        if (k % BATCH == 0) {
            double now = probe_now_s();
            char clock[32];
            time_of_day(clock, sizeof clock);
            probe_say("%1.2f seconds elapsed time for %d invocations of %s (%d total, at %s)",
                      now - batch_start, BATCH,
                      mode->probing ? "log_probe.exe --child-probe"
                                    : "log_probe.exe --child-unique",
                      (int)k, clock);
            batch_start = now;
        }
        if (next_size < size_count && k == sizes[next_size]) {
            ProbePoint *point = &mode->points[mode->point_count++];
            point->n = k;
            point->reps = 1;
            point->cpu_s[0] = cpu_s;
            point->wall_s[0] = probe_now_s() - start;
            next_size++;
        }
    }
    mode->total_wall_s = probe_now_s() - start;
    mode->total_cpu_s = cpu_s;
    probe_say("%llu launches took %.2f s (%.2f s CPU in the children).", launches,
              mode->total_wall_s, mode->total_cpu_s);
}

/* Time GetFileAttributes on the existing name.N.dat files; returns seconds per check. */
static double time_one_check(const wchar_t *directory, unsigned long long files,
                             unsigned long long *checks_done)
{
    wchar_t path[MAX_PATH * 2];
    unsigned long long checks = 0, i;
    double start = probe_now_s(), elapsed;
    do {
        probe_check_interrupt();
        for (i = 0; i < files; i++) {
            swprintf(path, sizeof path / sizeof path[0], L"%ls\\name.%llu.dat", directory, i);
            if (GetFileAttributesW(path) == INVALID_FILE_ATTRIBUTES) {
                probe_fail_win32("expected %ls to exist", path);
            }
            checks++;
        }
        elapsed = probe_now_s() - start;
    } while (elapsed < 0.2);
    *checks_done = checks;
    return elapsed / (double)checks;
}

int main(int argc, char **argv)
{
    unsigned long long launches = 7000;
    int launches_given = 0, quick = 0, run_probe = 1, run_unique = 1;
    Mode modes[2];
    ProbeVariant variants[2];
    ProbeResult result;
    size_t variant_count = 0;
    double check_s = 0.0;
    int i;

    /* Internal child modes first: they must stay cheap and print nothing. */
    if (argc >= 2 && strcmp(argv[1], "--child-probe") == 0) {
        return child_probe();
    }
    if (argc >= 3 && strcmp(argv[1], "--child-unique") == 0) {
        return child_unique(argv[2]);
    }

    probe_init("log-probe");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            probe_set_json_path(probe_option_value(argc, argv, &i));
        } else if (strcmp(argv[i], "--launches") == 0) {
            launches = probe_parse_count("--launches", probe_option_value(argc, argv, &i), 1,
                                         1000000);
            launches_given = 1;
        } else if (strcmp(argv[i], "--mode") == 0) {
            const char *mode = probe_option_value(argc, argv, &i);
            if (strcmp(mode, "both") == 0) {
                run_probe = run_unique = 1;
            } else if (strcmp(mode, "probe") == 0) {
                run_probe = 1;
                run_unique = 0;
            } else if (strcmp(mode, "unique") == 0) {
                run_probe = 0;
                run_unique = 1;
            } else {
                probe_usage_error("--mode must be both, probe or unique, got '%s'", mode);
            }
        } else {
            probe_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (quick && !launches_given) {
        launches = 40;
    }

    probe_say("This imitates Application Verifier's log naming (each launch probes "
              "name.0.dat, name.1.dat, ... for a free name); it does not run Application "
              "Verifier.");
    probe_make_temp_dir("logprobe", g_root, sizeof g_root / sizeof g_root[0]);
    probe_on_cleanup(stop_child_and_remove_root);

    memset(modes, 0, sizeof modes);
    modes[0].name = "probe name.N.dat for a free name";
    modes[0].role = "pathological";
    modes[0].probing = 1;
    swprintf(modes[0].directory, MAX_PATH * 2, L"%ls\\probe", g_root);
    modes[1].name = "unique name";
    modes[1].role = "control";
    modes[1].probing = 0;
    swprintf(modes[1].directory, MAX_PATH * 2, L"%ls\\unique", g_root);

    if (run_probe) {
        unsigned long long checks = 0;
        run_mode(&modes[0], launches);
        check_s = time_one_check(modes[0].directory, launches, &checks);
        probe_say("One existence check takes %.1f us (%llu checks over %llu files); the %llu "
                  "launches did %llu checks.",
                  check_s * 1e6, checks, launches, launches, launches * (launches + 1) / 2);
    }
    if (run_unique) {
        run_mode(&modes[1], launches);
    }

    memset(variants, 0, sizeof variants);
    for (i = 0; i < 2; i++) {
        if ((i == 0 && !run_probe) || (i == 1 && !run_unique)) {
            continue;
        }
        variants[variant_count].name = modes[i].name;
        variants[variant_count].role = modes[i].role;
        variants[variant_count].points = modes[i].points;
        variants[variant_count].point_count = modes[i].point_count;
        if (i == 0) {
            snprintf(variants[variant_count].note, sizeof variants[variant_count].note,
                     "one existence check (GetFileAttributes) takes %.1f us here",
                     check_s * 1e6);
        }
        variant_count++;
    }

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN; /* a sweep: `slowlab import` decides */
    if (run_probe && run_unique) {
        static char metric[96];
        snprintf(metric, sizeof metric, "wall time of %llu sequential launches", launches);
        result.has_headline = 1;
        result.metric = metric;
        result.unit = "s";
        result.pathological = modes[0].total_wall_s;
        result.control = modes[1].total_wall_s;
        result.ratio = probe_ratio(result.pathological, result.control);
        snprintf(result.explanation, sizeof result.explanation,
                 "%llu launches that probe for a free log name took %.1fx as long as with "
                 "unique names; one check costs %.1f us; quadratic growth means affected",
                 launches, result.ratio, check_s * 1e6);
    } else {
        result.reason = "only one mode ran (--mode), so there is no comparison";
        snprintf(result.explanation, sizeof result.explanation, "ran one mode only");
    }
    result.variants = variants;
    result.variant_count = variant_count;
    probe_write_result(&result);
    probe_run_cleanups();
    return 0;
}
