/*
 * teardown_lock.c -- the teardown-lock experiment as first documented on Windows: start
 * 1,000 descendants (40 children x 24 grandchildren, each a copy of this program), wait
 * until all of them are up, then let them all exit together, while a monitor thread in
 * this process times GetDesktopWindow + PeekMessage(PM_NOREMOVE) every 10 ms. On affected
 * Windows versions destroying a process that loaded user32.dll takes a system-wide lock
 * in win32k one process at a time, and anything else that needs that lock (the monitor,
 * the mouse, the UI) stalls. The control is the same tree without user32.dll.
 *
 * As the article's ProcessCreateTests program, it prints "Main process pid is N.",
 * "Testing with 1000 descendant processes[ with user32.dll loaded].", monitors creation
 * and destruction separately and prints per phase "Process creation/destruction took
 * ...", "Lock blocked for X s total, maximum was Y s." and "Average block time was Z s.",
 * pauses 500 ms and prints "Process termination starts now." before the destruction,
 * and ends with the system uptime (lock contention grows with uptime). It also counts
 * the descendants that have user32.dll or gdi32.dll loaded, to check that the plain
 * variant's have none.
 *
 * Synchronisation uses named objects: a semaphore every descendant releases once it is
 * up, and an event that tells them all to exit. Descendants also watch their parent
 * process and exit if it dies, so nothing is left behind when this program fails or is
 * interrupted. This program loads user32.dll dynamically, so descendants only load it
 * with -user32. With --json FILE it appends one ScenarioResult line;
 * affected = the monitor's maximum stall during destruction with user32.dll is at least
 * 20x the control's (control floored at 1 ms). Under Wine it runs, but says nothing
 * about win32k.
 */
#include "probe_common.h"

#include <stdlib.h>
#include <string.h>

#define AFFECTED_RATIO 20.0
#define STALL_FLOOR_S 0.001
#define MONITOR_PERIOD_MS 10
#define MAX_CHILDREN 256
#define MAX_GRANDCHILDREN 256

static void print_help(void)
{
    printf("usage: teardown_lock [-user32] [--variant both|plain|user32] [--children C]\n"
           "                     [--grandchildren G] [--quick] [--json FILE]\n"
           "\n"
           "Creates C children that each create G grandchildren (all copies of this\n"
           "program), waits until all are up, lets them exit together, and times a\n"
           "monitor call (GetDesktopWindow + PeekMessage) every 10 ms meanwhile.\n"
           "\n"
           "  -user32          only the variant where every process loads user32.dll\n"
           "  --variant V      both (default: plain first, then user32), plain, user32\n"
           "  --children C     children of this process (default 40)\n"
           "  --grandchildren G  grandchildren per child (default 24: 40 + 40 x 24 = 1000)\n"
           "  --quick          3 children x 3 grandchildren\n"
           "  --json FILE      append one JSON result line to FILE\n"
           "\n"
           "Affected: with user32.dll the monitor's maximum stall while the processes are\n"
           "destroyed is at least 20x the maximum without it (counted as at least 1 ms).\n");
}

/* ---- object names ---------------------------------------------------------------- */

static void object_name(wchar_t *name, size_t chars, const char *tag, const wchar_t *what)
{
    swprintf(name, chars, L"Local\\slowlab-teardown-%hs-%ls", tag, what);
}

/* ---- descendants ----------------------------------------------------------------- */

/* Wait until the exit event is set (returns TRUE) or the parent process is gone
 * (returns FALSE: orphaned, the run was abandoned). */
static BOOL wait_for_exit_or_orphaned(HANDLE exit_event, HANDLE parent)
{
    HANDLE waits[2];
    waits[0] = exit_event;
    waits[1] = parent;
    return WaitForMultipleObjects(2, waits, FALSE, INFINITE) == WAIT_OBJECT_0;
}

static int open_sync_objects(const char *tag, HANDLE *ready, HANDLE *exit_event)
{
    wchar_t name[128];
    object_name(name, sizeof name / sizeof name[0], tag, L"ready");
    *ready = OpenSemaphoreW(SEMAPHORE_MODIFY_STATE, FALSE, name);
    object_name(name, sizeof name / sizeof name[0], tag, L"exit");
    *exit_event = OpenEventW(SYNCHRONIZE, FALSE, name);
    return *ready != NULL && *exit_event != NULL;
}

/* Tell the parent (through the "gui" semaphore) whether this process has user32.dll or
 * gdi32.dll loaded: the plain variant's processes must have neither. */
static void report_gui_modules(const char *tag)
{
    wchar_t name[128];
    HANDLE gui;
    if (GetModuleHandleW(L"user32.dll") == NULL && GetModuleHandleW(L"gdi32.dll") == NULL) {
        return;
    }
    object_name(name, sizeof name / sizeof name[0], tag, L"gui");
    gui = OpenSemaphoreW(SEMAPHORE_MODIFY_STATE, FALSE, name);
    if (gui != NULL) {
        ReleaseSemaphore(gui, 1, NULL);
        CloseHandle(gui);
    }
}

/* A grandchild: optionally load user32.dll, report ready, wait to be told to exit. */
static int run_leaf(DWORD parent_pid, const char *tag, int load_user32)
{
    HANDLE ready, exit_event;
    HANDLE parent = OpenProcess(SYNCHRONIZE, FALSE, parent_pid);
    if (parent == NULL || !open_sync_objects(tag, &ready, &exit_event)) {
        return 3; /* the parent is gone, or the run is over */
    }
    if (load_user32 && LoadLibraryW(L"user32.dll") == NULL) {
        return 4;
    }
    report_gui_modules(tag);
    ReleaseSemaphore(ready, 1, NULL);
    wait_for_exit_or_orphaned(exit_event, parent);
    return 0;
}

/* A child: start its grandchildren, report ready, wait, then wait for them to exit. */
static int run_tree(DWORD parent_pid, unsigned grandchildren, const char *tag, int load_user32)
{
    static HANDLE leaves[MAX_GRANDCHILDREN];
    wchar_t arguments[160];
    HANDLE ready, exit_event;
    HANDLE parent = OpenProcess(SYNCHRONIZE, FALSE, parent_pid);
    unsigned i, started, done;
    if (parent == NULL || !open_sync_objects(tag, &ready, &exit_event)) {
        return 3; /* the parent is gone, or the run is over */
    }
    if (load_user32 && LoadLibraryW(L"user32.dll") == NULL) {
        return 4;
    }
    swprintf(arguments, sizeof arguments / sizeof arguments[0], L"--child-leaf %lu %hs%ls",
             (unsigned long)GetCurrentProcessId(), tag, load_user32 ? L" -user32" : L"");
    for (started = 0; started < grandchildren; started++) {
        if (WaitForSingleObject(parent, 0) == WAIT_OBJECT_0) {
            return 5; /* orphaned: exit now; the grandchildren see it and exit too */
        }
        leaves[started] = probe_spawn_self(arguments, NULL);
    }
    report_gui_modules(tag);
    ReleaseSemaphore(ready, 1, NULL);
    if (!wait_for_exit_or_orphaned(exit_event, parent)) {
        return 5; /* orphaned, as above (waiting for the grandchildren would deadlock) */
    }
    for (done = 0; done < started; done += MAXIMUM_WAIT_OBJECTS) {
        DWORD chunk = started - done;
        if (chunk > MAXIMUM_WAIT_OBJECTS) {
            chunk = MAXIMUM_WAIT_OBJECTS;
        }
        WaitForMultipleObjects(chunk, leaves + done, TRUE, INFINITE);
    }
    for (i = 0; i < started; i++) {
        CloseHandle(leaves[i]);
    }
    return 0;
}

/* ---- the monitor thread ---------------------------------------------------------- */

typedef HWND(WINAPI *GetDesktopWindowFn)(void);
typedef BOOL(WINAPI *PeekMessageWFn)(MSG *, HWND, UINT, UINT, UINT);

/* What the monitor saw during one phase. */
typedef struct {
    double total_s; /* sum of all monitor call durations */
    double max_s;
    long calls;
} Stalls;

static GetDesktopWindowFn g_get_desktop_window;
static PeekMessageWFn g_peek_message;
static volatile LONG g_monitor_stop;
static HANDLE g_monitor_ready;
static Stalls g_stalls;

static DWORD WINAPI monitor_main(void *unused)
{
    MSG message;
    (void)unused;
    /* The first calls set up this thread's window-system state: not measured. */
    g_get_desktop_window();
    g_peek_message(&message, NULL, 0, 0, PM_NOREMOVE);
    SetEvent(g_monitor_ready);
    while (!g_monitor_stop) {
        double start = probe_now_s(), elapsed;
        /* As the original: PeekMessage on the desktop window needs the lock that
         * process teardown holds. */
        HWND desktop = g_get_desktop_window();
        g_peek_message(&message, desktop, 0, 0, PM_NOREMOVE);
        elapsed = probe_now_s() - start;
        g_stalls.total_s += elapsed;
        if (elapsed > g_stalls.max_s) {
            g_stalls.max_s = elapsed;
        }
        g_stalls.calls++;
        Sleep(MONITOR_PERIOD_MS);
    }
    return 0;
}

/* ---- the parent ------------------------------------------------------------------ */

static HANDLE g_children[MAX_CHILDREN];
static unsigned g_child_count;
static HANDLE g_ready, g_gui, g_exit_event, g_monitor;

/* Start the monitor thread for one phase (the original starts one per phase, too). */
static void start_monitor(void)
{
    ZeroMemory(&g_stalls, sizeof g_stalls);
    InterlockedExchange(&g_monitor_stop, 0);
    g_monitor_ready = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (g_monitor_ready == NULL) {
        probe_fail_win32("CreateEvent failed");
    }
    g_monitor = CreateThread(NULL, 0, monitor_main, NULL, 0, NULL);
    if (g_monitor == NULL) {
        probe_fail_win32("cannot start the monitor thread");
    }
    if (WaitForSingleObject(g_monitor_ready, 30000) != WAIT_OBJECT_0) {
        probe_fail("the monitor's first GetDesktopWindow/PeekMessage did not return in 30 s");
    }
    CloseHandle(g_monitor_ready);
    g_monitor_ready = NULL;
}

static void stop_monitor(void)
{
    if (g_monitor != NULL) {
        InterlockedExchange(&g_monitor_stop, 1);
        WaitForSingleObject(g_monitor, 5000);
        CloseHandle(g_monitor);
        g_monitor = NULL;
    }
}

/* Stop the monitor and print the original's two lines for the phase. */
static Stalls finish_monitor(void)
{
    stop_monitor();
    probe_say("Lock blocked for %1.3f s total, maximum was %1.3f s.", g_stalls.total_s,
              g_stalls.max_s);
    probe_say("Average block time was %1.3f s.",
              g_stalls.calls > 0 ? g_stalls.total_s / (double)g_stalls.calls : 0.0);
    return g_stalls;
}

static void close_handle(HANDLE *handle)
{
    if (*handle != NULL) {
        CloseHandle(*handle);
        *handle = NULL;
    }
}

/* Tell every descendant to exit, and make sure the children are gone. */
static void end_descendants(void)
{
    unsigned i;
    stop_monitor();
    if (g_exit_event != NULL) {
        SetEvent(g_exit_event);
    }
    for (i = 0; i < g_child_count; i++) {
        if (WaitForSingleObject(g_children[i], 10000) != WAIT_OBJECT_0) {
            TerminateProcess(g_children[i], 1); /* its grandchildren see it die and exit */
        }
        CloseHandle(g_children[i]);
    }
    g_child_count = 0;
    close_handle(&g_exit_event);
    close_handle(&g_ready);
    close_handle(&g_gui);
}

typedef struct {
    int load_user32;
    double create_s, destroy_s;
    unsigned processes;
    unsigned with_gui; /* descendants that had user32.dll or gdi32.dll loaded */
    Stalls creation, destruction;
} Run;

static void fail_if_a_child_died(void)
{
    unsigned i;
    for (i = 0; i < g_child_count; i++) {
        DWORD code = 0;
        if (WaitForSingleObject(g_children[i], 0) == WAIT_OBJECT_0) {
            GetExitCodeProcess(g_children[i], &code);
            probe_fail("child %u exited early (exit code %lu)", i + 1, (unsigned long)code);
        }
    }
}

static void create_sync_objects(const char *tag, unsigned total)
{
    wchar_t name[128];
    object_name(name, sizeof name / sizeof name[0], tag, L"ready");
    g_ready = CreateSemaphoreW(NULL, 0, (LONG)total, name);
    object_name(name, sizeof name / sizeof name[0], tag, L"gui");
    g_gui = CreateSemaphoreW(NULL, 0, (LONG)total, name);
    object_name(name, sizeof name / sizeof name[0], tag, L"exit");
    g_exit_event = CreateEventW(NULL, TRUE, FALSE, name);
    if (g_ready == NULL || g_gui == NULL || g_exit_event == NULL) {
        probe_fail_win32("cannot create the named semaphores and event");
    }
}

/* Start the tree and wait until every descendant is up. */
static void create_tree(Run *run, unsigned children, unsigned grandchildren, const char *tag)
{
    const unsigned total = children * (grandchildren + 1);
    wchar_t arguments[160];
    double start, deadline;
    unsigned up = 0, i;
    swprintf(arguments, sizeof arguments / sizeof arguments[0], L"--child-tree %lu %u %hs%ls",
             (unsigned long)GetCurrentProcessId(), grandchildren, tag,
             run->load_user32 ? L" -user32" : L"");
    start = probe_now_s();
    deadline = start + 60.0 + 0.5 * total;
    for (i = 0; i < children; i++) {
        g_children[g_child_count++] = probe_spawn_self(arguments, NULL);
    }
    while (up < total) {
        DWORD waited = WaitForSingleObject(g_ready, 1000);
        if (waited == WAIT_OBJECT_0) {
            up++;
            continue;
        }
        probe_check_interrupt();
        fail_if_a_child_died();
        if (probe_now_s() > deadline) {
            probe_fail("only %u of %u processes came up in %.0f s", up, total,
                       probe_now_s() - start);
        }
    }
    run->create_s = probe_now_s() - start;
    while (WaitForSingleObject(g_gui, 0) == WAIT_OBJECT_0) {
        run->with_gui++;
    }
}

/* Let every descendant exit and wait for the children (each waits for its own). */
static void destroy_tree(Run *run)
{
    double start = probe_now_s();
    unsigned done;
    SetEvent(g_exit_event);
    for (done = 0; done < g_child_count; done += MAXIMUM_WAIT_OBJECTS) {
        DWORD chunk = g_child_count - done;
        if (chunk > MAXIMUM_WAIT_OBJECTS) {
            chunk = MAXIMUM_WAIT_OBJECTS;
        }
        if (WaitForMultipleObjects(chunk, g_children + done, TRUE, 120000) == WAIT_TIMEOUT) {
            probe_fail("the processes did not exit within 120 s");
        }
    }
    run->destroy_s = probe_now_s() - start;
}

static void run_variant(Run *run, unsigned children, unsigned grandchildren)
{
    const unsigned total = children * (grandchildren + 1);
    char tag[64];

    snprintf(tag, sizeof tag, "%lu-%s", (unsigned long)GetCurrentProcessId(),
             run->load_user32 ? "user32" : "plain");
    create_sync_objects(tag, total);
    run->processes = total;

    start_monitor();
    probe_say("Testing with %u descendant processes%s.", total,
              run->load_user32 ? " with user32.dll loaded" : "");
    create_tree(run, children, grandchildren, tag);
    probe_say("Process creation took %1.3f s (%1.3f ms per process).", run->create_s,
              run->create_s * 1000.0 / total);
    run->creation = finish_monitor();

    Sleep(500); /* as the original: a visible gap in CPU usage between the phases */
    start_monitor();
    probe_say_blank();
    probe_say("Process termination starts now.");
    destroy_tree(run);
    probe_say("Process destruction took %1.3f s (%1.3f ms per process).", run->destroy_s,
              run->destroy_s * 1000.0 / total);
    run->destruction = finish_monitor();
    end_descendants();

    probe_say("%u of %u descendant processes had user32.dll or gdi32.dll loaded%s.",
              run->with_gui, total,
              !run->load_user32 && run->with_gui > 0 ? ": this control is not valid" : "");
    probe_say_blank();
}

static void load_user32_functions(void)
{
    HMODULE user32 = LoadLibraryW(L"user32.dll");
    if (user32 == NULL) {
        probe_fail_win32("cannot load user32.dll for the monitor");
    }
    g_get_desktop_window = (GetDesktopWindowFn)(void (*)(void))GetProcAddress(user32,
                                                                              "GetDesktopWindow");
    g_peek_message = (PeekMessageWFn)(void (*)(void))GetProcAddress(user32, "PeekMessageW");
    if (g_get_desktop_window == NULL || g_peek_message == NULL) {
        probe_fail_win32("user32.dll lacks GetDesktopWindow or PeekMessageW");
    }
}

/* The original's last lines: contention grows with uptime, so a freshly booted machine
 * can seem fixed. */
static double say_uptime(void)
{
    ULONGLONG awake = 0;
    double days = (double)GetTickCount64() / (1000.0 * 86400.0);
    QueryUnbiasedInterruptTime(&awake);
    probe_say("Elapsed uptime is %1.2f days.", days);
    probe_say("Awake uptime is %1.2f days.", (double)awake / (1e7 * 86400.0));
    return days;
}

static void describe(const Run *run, ProbeVariant *variant)
{
    variant->name = run->load_user32 ? "processes that loaded user32.dll" : "plain processes";
    variant->role = run->load_user32 ? "pathological" : "control";
    variant->has_value = 1;
    variant->value = run->destruction.max_s;
    variant->unit = "s";
    snprintf(variant->note, sizeof variant->note,
             "maximum monitor stall during destruction; %u processes (%u with user32/gdi32 "
             "loaded): creation %.3f s, monitor max %.3f s, total %.3f s over %ld calls; "
             "destruction %.3f s (%.3f ms per process), monitor total %.3f s over %ld calls",
             run->processes, run->with_gui, run->create_s, run->creation.max_s,
             run->creation.total_s, run->creation.calls, run->destroy_s,
             run->destroy_s * 1000.0 / run->processes, run->destruction.total_s,
             run->destruction.calls);
}

int main(int argc, char **argv)
{
    unsigned long long children = 40, grandchildren = 24;
    int children_given = 0, grandchildren_given = 0, quick = 0, want_plain = 1, want_user32 = 1;
    Run runs[2];
    ProbeVariant variants[2];
    ProbeResult result;
    size_t variant_count = 0;
    double uptime_days;
    int i;

    /* Internal descendant modes: --child-tree PPID G TAG [-user32], --child-leaf PPID TAG
     * [-user32]. They print nothing. */
    if (argc >= 5 && strcmp(argv[1], "--child-tree") == 0) {
        unsigned g = (unsigned)strtoul(argv[3], NULL, 10);
        if (g > MAX_GRANDCHILDREN) {
            return 2;
        }
        return run_tree((DWORD)strtoul(argv[2], NULL, 10), g, argv[4],
                        argc >= 6 && strcmp(argv[5], "-user32") == 0);
    }
    if (argc >= 4 && strcmp(argv[1], "--child-leaf") == 0) {
        return run_leaf((DWORD)strtoul(argv[2], NULL, 10), argv[3],
                        argc >= 5 && strcmp(argv[4], "-user32") == 0);
    }

    probe_init("teardown-lock");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            probe_set_json_path(probe_option_value(argc, argv, &i));
        } else if (strcmp(argv[i], "-user32") == 0) {
            want_plain = 0;
            want_user32 = 1;
        } else if (strcmp(argv[i], "--variant") == 0) {
            const char *variant = probe_option_value(argc, argv, &i);
            if (strcmp(variant, "both") == 0) {
                want_plain = want_user32 = 1;
            } else if (strcmp(variant, "plain") == 0) {
                want_plain = 1;
                want_user32 = 0;
            } else if (strcmp(variant, "user32") == 0) {
                want_plain = 0;
                want_user32 = 1;
            } else {
                probe_usage_error("--variant must be both, plain or user32, got '%s'", variant);
            }
        } else if (strcmp(argv[i], "--children") == 0) {
            children = probe_parse_count("--children", probe_option_value(argc, argv, &i), 1,
                                         MAX_CHILDREN);
            children_given = 1;
        } else if (strcmp(argv[i], "--grandchildren") == 0) {
            grandchildren = probe_parse_count("--grandchildren", probe_option_value(argc, argv, &i),
                                              0, MAX_GRANDCHILDREN);
            grandchildren_given = 1;
        } else {
            probe_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (quick) {
        children = children_given ? children : 3;
        grandchildren = grandchildren_given ? grandchildren : 3;
    }

    load_user32_functions();
    probe_on_cleanup(end_descendants);

    /* Printed for ease of ETW profiling, as the original does. */
    probe_say("Main process pid is %lu.", (unsigned long)GetCurrentProcessId());
    memset(runs, 0, sizeof runs);
    runs[0].load_user32 = 0;
    runs[1].load_user32 = 1;
    memset(variants, 0, sizeof variants);
    for (i = 0; i < 2; i++) {
        if ((i == 0 && !want_plain) || (i == 1 && !want_user32)) {
            continue;
        }
        run_variant(&runs[i], (unsigned)children, (unsigned)grandchildren);
        describe(&runs[i], &variants[variant_count++]);
    }
    uptime_days = say_uptime();

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN;
    if (want_plain && want_user32) {
        double control = runs[0].destruction.max_s;
        result.has_headline = 1;
        result.metric = "maximum monitor stall during process destruction (GetDesktopWindow + "
                        "PeekMessage)";
        result.unit = "s";
        result.pathological = runs[1].destruction.max_s;
        result.control = control;
        result.ratio = probe_ratio(runs[1].destruction.max_s,
                                   control > STALL_FLOOR_S ? control : STALL_FLOOR_S);
        result.affected = result.ratio >= AFFECTED_RATIO;
        if (runs[0].with_gui > 0) {
            result.affected = PROBE_AFFECTED_UNKNOWN;
            result.reason = "the plain processes had user32.dll or gdi32.dll loaded";
        }
        snprintf(result.explanation, sizeof result.explanation,
                 "tearing down %u processes that loaded user32.dll stalled the monitor up to "
                 "%.3f s vs %.3f s without (%.1fx, threshold %.0fx): %s; uptime %.2f days "
                 "(contention grows with uptime)%s",
                 runs[1].processes, runs[1].destruction.max_s, control, result.ratio,
                 AFFECTED_RATIO, result.affected ? "affected" : "not affected", uptime_days,
                 runs[0].with_gui > 0 ? "; the control had user32/gdi32 loaded, not valid"
                                      : "");
    } else {
        result.reason = "only one variant ran, so there is no comparison";
        snprintf(result.explanation, sizeof result.explanation, "ran one variant only");
    }
    result.variants = variants;
    result.variant_count = variant_count;
    probe_write_result(&result);
    probe_run_cleanups();
    return 0;
}
