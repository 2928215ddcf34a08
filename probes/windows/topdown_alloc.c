/*
 * topdown_alloc.c -- the topdown-alloc experiment as first documented on Windows:
 * VirtualAlloc n blocks of 64 KiB with MEM_COMMIT|MEM_RESERVE, once with MEM_TOP_DOWN
 * and once without, for n = 0, step, 2*step ... max, freeing everything between points.
 * With MEM_TOP_DOWN each allocation searches the process's reserved ranges from the
 * top for the highest hole, so n allocations cost O(n^2) on affected Windows versions;
 * normal allocations stay linear.
 *
 * It prints the original lines ("Topdown allocs took ..."), and with --json FILE appends
 * one ScenarioResult line whose points carry CPU (GetProcessTimes) and wall
 * (QueryPerformanceCounter) seconds per variant. It does not fit the growth exponent:
 * `slowlab import` does that. A 32-bit build refuses to run (the article's test needs
 * the 4 GB of a 64-bit address space). Under Wine this runs, but shows Wine's allocator.
 */
#include "probe_common.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_KB 64ULL

/* The article's test is a 64-bit program: 64,000 blocks of 64 KiB are 4 GB of address
 * space, more than a 32-bit process has. */
#if defined(_WIN64)
#define BUILT_64_BIT 1
#else
#define BUILT_64_BIT 0
#endif

static void print_help(void)
{
    printf("usage: topdown_alloc [--max N] [--step S] [--reps R] [--quick] [--json FILE]\n"
           "\n"
           "Times VirtualAlloc of N blocks of 64 KiB (MEM_COMMIT|MEM_RESERVE) with and\n"
           "without MEM_TOP_DOWN for N = 0, S, 2S ... max, freeing between points.\n"
           "\n"
           "  --max N      largest number of blocks (default 64000)\n"
           "  --step S     step between sizes (default 1000)\n"
           "  --reps R     repetitions per size, alternating variants (default 1)\n"
           "  --quick      max 4000, step 1000 (a few seconds)\n"
           "  --json FILE  append one JSON result line to FILE\n"
           "\n"
           "Affected: the Topdown time grows about with N^2 (4x per doubling) while the\n"
           "Normal time grows linearly; `slowlab import FILE` computes the exponents.\n");
}

static void **g_blocks;
static size_t g_block_count;

static void free_blocks(void)
{
    size_t i;
    for (i = 0; i < g_block_count; i++) {
        VirtualFree(g_blocks[i], 0, MEM_RELEASE);
    }
    g_block_count = 0;
}

/* Allocate n blocks with the given extra flags; returns wall seconds, sets *cpu_s. */
static double time_allocs(size_t n, DWORD extra_flags, double *cpu_s)
{
    const SIZE_T block_bytes = (SIZE_T)(BLOCK_KB * 1024);
    HANDLE self = GetCurrentProcess();
    double cpu_start = probe_process_cpu_s(self);
    double start = probe_now_s();
    double elapsed;
    size_t i;
    for (i = 0; i < n; i++) {
        void *block = VirtualAlloc(NULL, block_bytes, MEM_COMMIT | MEM_RESERVE | extra_flags,
                                   PAGE_READWRITE);
        if (block == NULL) {
            probe_fail_win32("VirtualAlloc of block %llu of %llu failed",
                             (unsigned long long)i + 1, (unsigned long long)n);
        }
        g_blocks[g_block_count++] = block;
    }
    elapsed = probe_now_s() - start;
    *cpu_s = probe_process_cpu_s(self) - cpu_start;
    free_blocks();
    return elapsed;
}

static double median(const double *values, int count)
{
    double sorted[PROBE_MAX_REPS];
    int i, j;
    for (i = 0; i < count; i++) {
        sorted[i] = values[i];
        for (j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            double swap = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = swap;
        }
    }
    if (count == 0) {
        return 0.0;
    }
    return count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2.0;
}

int main(int argc, char **argv)
{
    unsigned long long max = 64000, step = 1000, reps = 1;
    int max_given = 0, step_given = 0, quick = 0;
    ProbePoint *topdown_points, *normal_points;
    size_t point_count = 0;
    unsigned long long n;
    ProbeVariant variants[2];
    ProbeResult result;
    int i;

    probe_init("topdown-alloc");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            probe_set_json_path(probe_option_value(argc, argv, &i));
        } else if (strcmp(argv[i], "--max") == 0) {
            max = probe_parse_count("--max", probe_option_value(argc, argv, &i), 1, 10000000);
            max_given = 1;
        } else if (strcmp(argv[i], "--step") == 0) {
            step = probe_parse_count("--step", probe_option_value(argc, argv, &i), 1, 10000000);
            step_given = 1;
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = probe_parse_count("--reps", probe_option_value(argc, argv, &i), 1,
                                     PROBE_MAX_REPS);
        } else {
            probe_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (quick) {
        max = max_given ? max : 4000;
        step = step_given ? step : 1000;
    }
    if (!BUILT_64_BIT) {
        probe_fail("this is a 32-bit build, and the test needs a 64-bit address space (4 GB "
                   "of blocks); build it with x86_64-w64-mingw32-gcc or from an x64 prompt");
    }
    if (step > max) {
        probe_usage_error("--step (%llu) is larger than --max (%llu)", step, max);
    }

    g_blocks = (void **)malloc((size_t)max * sizeof *g_blocks);
    topdown_points = (ProbePoint *)calloc((size_t)(max / step) + 1, sizeof *topdown_points);
    normal_points = (ProbePoint *)calloc((size_t)(max / step) + 1, sizeof *normal_points);
    if (g_blocks == NULL || topdown_points == NULL || normal_points == NULL) {
        probe_fail("out of memory for %llu block pointers", max);
    }
    probe_on_cleanup(free_blocks);

    for (n = 0; n <= max; n += step) {
        /* n = 0 is printed like the original but not kept: a sweep point needs n > 0. */
        ProbePoint scratch[2];
        ProbePoint *topdown = n > 0 ? &topdown_points[point_count] : &scratch[0];
        ProbePoint *normal = n > 0 ? &normal_points[point_count] : &scratch[1];
        unsigned long long rep;
        probe_check_interrupt();
        memset(scratch, 0, sizeof scratch);
        topdown->n = normal->n = n;
        for (rep = 0; rep < reps; rep++) {
            double cpu_s;
            double wall_s = time_allocs((size_t)n, MEM_TOP_DOWN, &cpu_s);
            probe_say("Topdown allocs took %7.4f s for %5lld allocs of %lld KB blocks "
                      "(total is %lld MB).",
                      wall_s, (long long)n, (long long)BLOCK_KB, (long long)(n * BLOCK_KB / 1024));
            topdown->cpu_s[topdown->reps] = cpu_s;
            topdown->wall_s[topdown->reps++] = wall_s;

            wall_s = time_allocs((size_t)n, 0, &cpu_s);
            probe_say("Normal  allocs took %7.4f s for %5lld allocs of %lld KB blocks "
                      "(total is %lld MB).",
                      wall_s, (long long)n, (long long)BLOCK_KB, (long long)(n * BLOCK_KB / 1024));
            normal->cpu_s[normal->reps] = cpu_s;
            normal->wall_s[normal->reps++] = wall_s;
        }
        if (n > 0) {
            point_count++;
        }
    }

    memset(variants, 0, sizeof variants);
    variants[0].name = "MEM_TOP_DOWN";
    variants[0].role = "pathological";
    variants[0].points = topdown_points;
    variants[0].point_count = point_count;
    variants[1].name = "normal";
    variants[1].role = "control";
    variants[1].points = normal_points;
    variants[1].point_count = point_count;

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN; /* a sweep: `slowlab import` decides */
    if (point_count > 0) {
        const ProbePoint *top = &topdown_points[point_count - 1];
        const ProbePoint *low = &normal_points[point_count - 1];
        static char metric[128];
        snprintf(metric, sizeof metric, "wall time of %llu allocations", top->n);
        result.has_headline = 1;
        result.metric = metric;
        result.unit = "s";
        result.pathological = median(top->wall_s, top->reps);
        result.control = median(low->wall_s, low->reps);
        result.ratio = probe_ratio(result.pathological, result.control);
        snprintf(result.explanation, sizeof result.explanation,
                 "%llu MEM_TOP_DOWN allocations of 64 KiB took %.1fx as long as normal ones; "
                 "quadratic growth of the top-down time means affected",
                 top->n, result.ratio);
    } else {
        result.reason = "no size above 0 was measured";
    }
    result.variants = variants;
    result.variant_count = 2;
    probe_write_result(&result);
    probe_run_cleanups();
    return 0;
}
