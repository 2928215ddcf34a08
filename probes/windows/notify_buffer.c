/*
 * notify_buffer.c -- the notify-buffer experiment as the article's FileStress.py ran it:
 * create 1,000 files testfile000000.txt ... in Trackedfiles\TestFiles, writing
 * "Hello world!" into each, delete them, pause 0.5 s, do the same in
 * Untrackedfiles\TestFiles, and print how much longer the tracked files took. Tracked
 * means a ReadDirectoryChangesW read is pending on the directory with a buffer of a
 * given size (none, 16 KiB, 2 MiB by default), as the article's FileSystemWatcher with
 * a large InternalBufferSize had. On affected Windows versions the kernel handles the
 * whole notification buffer for every change, so a 2 MiB buffer makes every file
 * operation in the watched tree several times slower than a 16 KiB one.
 *
 * The watcher runs on a thread of this process, or (--watcher process) in a separate
 * process as the original's (.NET, in another program) did; --recursive watches the
 * whole Trackedfiles tree instead of the TestFiles directory itself, as that watcher
 * did. It prints the original's four lines per round ("%.3f seconds to create %d files
 * in %s." / "... to delete ...", tracked and untracked) and "Tracked files take %1.2f
 * times as long."; with --json FILE it appends one ScenarioResult line. affected = the
 * 2 MiB buffer's slowdown (tracked time / untracked time) is at least 2x the 16 KiB
 * buffer's. Under Wine the watcher works (on inotify) but the timing says nothing about
 * Windows.
 */
#include "probe_common.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CONFIGS 8
#define AFFECTED_RATIO 2.0
#define PAUSE_MS 500 /* the original's pause between the two directories */
static const char k_file_text[] = "Hello world!";

static void print_help(void)
{
    printf("usage: notify_buffer [--files N] [--buffers-kb LIST] [--reps R]\n"
           "                     [--watcher thread|process] [--recursive] [--quick]\n"
           "                     [--json FILE]\n"
           "\n"
           "Like the article's FileStress.py: creates N files holding \"Hello world!\" in\n"
           "Trackedfiles\\TestFiles and deletes them, pauses 0.5 s, does the same in\n"
           "Untrackedfiles\\TestFiles, and prints how much longer the tracked files took,\n"
           "for each size of the buffer of a ReadDirectoryChangesW watcher on the tracked\n"
           "directory.\n"
           "\n"
           "  --files N          files to create and delete per directory (default 1000)\n"
           "  --buffers-kb LIST  watcher buffer sizes in KiB, 0 = no watcher\n"
           "                     (default 0,16,2048)\n"
           "  --reps R           rounds per buffer size; the medians count (default 3)\n"
           "  --watcher W        thread: a thread of this program (default); process: a\n"
           "                     separate process, like the article's watcher\n"
           "  --recursive        watch the whole Trackedfiles tree (subtree), not only\n"
           "                     Trackedfiles\\TestFiles\n"
           "  --quick            200 files, 1 round\n"
           "  --json FILE        append one JSON result line to FILE\n"
           "\n"
           "Affected: with the 2048 KiB buffer tracked files take at least 2x as long\n"
           "(relative to the untracked directory) as with the 16 KiB buffer.\n");
}

/* ---- the watcher thread ---------------------------------------------------------- */

typedef struct {
    HANDLE directory;
    HANDLE stop;   /* set by the main thread to end the watcher */
    HANDLE ready;  /* set by the watcher once its first read is pending */
    HANDLE thread;
    void *buffer;
    DWORD buffer_bytes;
    BOOL subtree;                /* watch the whole tree under the directory */
    volatile LONG notifications; /* records received */
    volatile LONG overflows;     /* completions with no records (buffer overflowed) */
    DWORD error;                 /* non-zero when ReadDirectoryChangesW failed */
} Watcher;

static Watcher g_watcher;

static DWORD count_records(const void *buffer, DWORD bytes)
{
    const BYTE *at = (const BYTE *)buffer;
    DWORD records = 0;
    if (bytes == 0) {
        return 0;
    }
    for (;;) {
        const FILE_NOTIFY_INFORMATION *info = (const FILE_NOTIFY_INFORMATION *)at;
        records++;
        if (info->NextEntryOffset == 0) {
            return records;
        }
        at += info->NextEntryOffset;
    }
}

static DWORD WINAPI watcher_main(void *argument)
{
    Watcher *watcher = (Watcher *)argument;
    const DWORD filter = FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME |
                         FILE_NOTIFY_CHANGE_SIZE | FILE_NOTIFY_CHANGE_LAST_WRITE;
    OVERLAPPED overlapped;
    BOOL signalled_ready = FALSE;
    ZeroMemory(&overlapped, sizeof overlapped);
    overlapped.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (overlapped.hEvent == NULL) {
        watcher->error = GetLastError();
        SetEvent(watcher->ready);
        return 1;
    }
    for (;;) {
        HANDLE waits[2];
        DWORD bytes = 0, woke;
        ResetEvent(overlapped.hEvent);
        if (!ReadDirectoryChangesW(watcher->directory, watcher->buffer, watcher->buffer_bytes,
                                   watcher->subtree, filter, NULL, &overlapped, NULL)) {
            watcher->error = GetLastError();
            break;
        }
        if (!signalled_ready) {
            SetEvent(watcher->ready);
            signalled_ready = TRUE;
        }
        waits[0] = overlapped.hEvent;
        waits[1] = watcher->stop;
        woke = WaitForMultipleObjects(2, waits, FALSE, INFINITE);
        if (woke == WAIT_OBJECT_0) {
            if (GetOverlappedResult(watcher->directory, &overlapped, &bytes, FALSE)) {
                if (bytes == 0) {
                    InterlockedIncrement(&watcher->overflows);
                } else {
                    InterlockedExchangeAdd(&watcher->notifications,
                                           (LONG)count_records(watcher->buffer, bytes));
                }
            } else if (GetLastError() != ERROR_NOTIFY_ENUM_DIR) {
                watcher->error = GetLastError();
                break;
            } else {
                InterlockedIncrement(&watcher->overflows);
            }
        } else {
            CancelIoEx(watcher->directory, &overlapped);
            GetOverlappedResult(watcher->directory, &overlapped, &bytes, TRUE);
            break;
        }
    }
    if (!signalled_ready) {
        SetEvent(watcher->ready);
    }
    CloseHandle(overlapped.hEvent);
    return 0;
}

static void stop_watcher(void)
{
    Watcher *watcher = &g_watcher;
    if (watcher->thread != NULL) {
        SetEvent(watcher->stop);
        WaitForSingleObject(watcher->thread, 10000);
        CloseHandle(watcher->thread);
        watcher->thread = NULL;
    }
    if (watcher->directory != NULL && watcher->directory != INVALID_HANDLE_VALUE) {
        CloseHandle(watcher->directory);
    }
    watcher->directory = NULL;
    if (watcher->stop != NULL) {
        CloseHandle(watcher->stop);
        watcher->stop = NULL;
    }
    if (watcher->ready != NULL) {
        CloseHandle(watcher->ready);
        watcher->ready = NULL;
    }
    if (watcher->buffer != NULL) {
        VirtualFree(watcher->buffer, 0, MEM_RELEASE);
        watcher->buffer = NULL;
    }
}

static void start_watcher(const wchar_t *directory, DWORD buffer_bytes, BOOL subtree)
{
    Watcher *watcher = &g_watcher;
    ZeroMemory(watcher, sizeof *watcher);
    watcher->buffer_bytes = buffer_bytes;
    watcher->subtree = subtree;
    watcher->buffer = VirtualAlloc(NULL, buffer_bytes, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    if (watcher->buffer == NULL) {
        probe_fail_win32("cannot allocate a %lu byte watcher buffer", (unsigned long)buffer_bytes);
    }
    watcher->directory = CreateFileW(directory, FILE_LIST_DIRECTORY,
                                     FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                                     OPEN_EXISTING,
                                     FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OVERLAPPED, NULL);
    if (watcher->directory == INVALID_HANDLE_VALUE) {
        probe_fail_win32("cannot open %ls to watch it", directory);
    }
    watcher->stop = CreateEventW(NULL, TRUE, FALSE, NULL);
    watcher->ready = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (watcher->stop == NULL || watcher->ready == NULL) {
        probe_fail_win32("CreateEvent failed");
    }
    watcher->thread = CreateThread(NULL, 0, watcher_main, watcher, 0, NULL);
    if (watcher->thread == NULL) {
        probe_fail_win32("cannot start the watcher thread");
    }
    WaitForSingleObject(watcher->ready, INFINITE);
    if (watcher->error != 0) {
        SetLastError(watcher->error);
        probe_fail_win32("ReadDirectoryChangesW with a %lu KiB buffer failed",
                         (unsigned long)(buffer_bytes / 1024));
    }
}

/* ---- a watcher in a separate process --------------------------------------------- */

/* Named events shared with the watcher process. */
static void event_name(wchar_t *name, size_t chars, const char *tag, const wchar_t *what)
{
    swprintf(name, chars, L"Local\\slowlab-notify-%hs-%ls", tag, what);
}

/* The exit code of a watcher process: notification records (low 24 bits) and
 * overflowed reads (high bits, at most 127). */
static DWORD pack_counts(LONG notifications, LONG overflows)
{
    DWORD n = notifications > 0xFFFFFF ? 0xFFFFFF : (DWORD)notifications;
    DWORD o = overflows > 0x7F ? 0x7F : (DWORD)overflows;
    return (o << 24) | n;
}

/* --child-watcher PPID BUFFER_BYTES SUBTREE TAG, started in the directory to watch:
 * watch it until the stop event is set or the parent dies; exit with the counts. */
static int run_child_watcher(DWORD parent_pid, DWORD buffer_bytes, BOOL subtree,
                             const char *tag)
{
    wchar_t name[128], directory[MAX_PATH * 2];
    HANDLE waits[2], ready, stop;
    DWORD code;
    waits[1] = OpenProcess(SYNCHRONIZE, FALSE, parent_pid);
    event_name(name, sizeof name / sizeof name[0], tag, L"ready");
    ready = OpenEventW(EVENT_MODIFY_STATE, FALSE, name);
    event_name(name, sizeof name / sizeof name[0], tag, L"stop");
    stop = OpenEventW(SYNCHRONIZE, FALSE, name);
    if (waits[1] == NULL || ready == NULL || stop == NULL ||
        GetCurrentDirectoryW(MAX_PATH * 2, directory) == 0) {
        return 3;
    }
    start_watcher(directory, buffer_bytes, subtree); /* fails with exit code 1 */
    SetEvent(ready);
    waits[0] = stop;
    WaitForMultipleObjects(2, waits, FALSE, INFINITE);
    Sleep(100); /* let the watcher drain its last notifications */
    code = pack_counts(g_watcher.notifications, g_watcher.overflows);
    stop_watcher();
    return (int)code;
}

static HANDLE g_watcher_process, g_watcher_stop;

static void stop_watcher_process(void)
{
    if (g_watcher_stop != NULL) {
        SetEvent(g_watcher_stop);
    }
    if (g_watcher_process != NULL) {
        if (WaitForSingleObject(g_watcher_process, 10000) != WAIT_OBJECT_0) {
            TerminateProcess(g_watcher_process, 1);
        }
        CloseHandle(g_watcher_process);
        g_watcher_process = NULL;
    }
    if (g_watcher_stop != NULL) {
        CloseHandle(g_watcher_stop);
        g_watcher_stop = NULL;
    }
}

static void start_watcher_process(const wchar_t *directory, DWORD buffer_bytes, BOOL subtree)
{
    static unsigned serial;
    char tag[48];
    wchar_t name[128], arguments[160];
    HANDLE ready, waits[2];
    DWORD woke, code = 0;
    snprintf(tag, sizeof tag, "%lu-%u", (unsigned long)GetCurrentProcessId(), serial++);
    event_name(name, sizeof name / sizeof name[0], tag, L"ready");
    ready = CreateEventW(NULL, TRUE, FALSE, name);
    event_name(name, sizeof name / sizeof name[0], tag, L"stop");
    g_watcher_stop = CreateEventW(NULL, TRUE, FALSE, name);
    if (ready == NULL || g_watcher_stop == NULL) {
        probe_fail_win32("cannot create the watcher process's events");
    }
    swprintf(arguments, sizeof arguments / sizeof arguments[0],
             L"--child-watcher %lu %lu %d %hs", (unsigned long)GetCurrentProcessId(),
             (unsigned long)buffer_bytes, subtree ? 1 : 0, tag);
    g_watcher_process = probe_spawn_self(arguments, directory);
    waits[0] = ready;
    waits[1] = g_watcher_process;
    woke = WaitForMultipleObjects(2, waits, FALSE, 60000);
    CloseHandle(ready);
    if (woke != WAIT_OBJECT_0) {
        GetExitCodeProcess(g_watcher_process, &code);
        probe_fail("the watcher process did not start watching (exit code %lu)",
                   (unsigned long)code);
    }
}

/* Stop the watcher process and return its counts. */
static void finish_watcher_process(long *notifications, long *overflows)
{
    DWORD code = 0;
    SetEvent(g_watcher_stop);
    if (WaitForSingleObject(g_watcher_process, 30000) != WAIT_OBJECT_0 ||
        !GetExitCodeProcess(g_watcher_process, &code)) {
        probe_fail("the watcher process did not stop within 30 s");
    }
    *notifications = (long)(code & 0xFFFFFF);
    *overflows = (long)(code >> 24);
    stop_watcher_process();
}

/* ---- the measured work (FileStress) ---------------------------------------------- */

typedef struct {
    double create_s, delete_s;
    double cpu_s; /* of this thread (not the watcher) */
} Stress;

/* Create `files` files holding "Hello world!" in directory, then delete them; print the
 * original's two lines. */
static Stress file_stress(const wchar_t *directory, unsigned long long files)
{
    wchar_t path[MAX_PATH * 2];
    HANDLE thread = GetCurrentThread();
    double cpu_start = probe_thread_cpu_s(thread);
    double start = probe_now_s();
    unsigned long long i;
    Stress stress;
    for (i = 0; i < files; i++) {
        HANDLE file;
        DWORD written = 0;
        probe_check_interrupt();
        swprintf(path, sizeof path / sizeof path[0], L"%ls\\testfile%06llu.txt", directory, i);
        file = CreateFileW(path, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL,
                           NULL);
        if (file == INVALID_HANDLE_VALUE) {
            probe_fail_win32("cannot create %ls", path);
        }
        if (!WriteFile(file, k_file_text, (DWORD)strlen(k_file_text), &written, NULL)) {
            probe_fail_win32("cannot write %ls", path);
        }
        CloseHandle(file);
    }
    stress.create_s = probe_now_s() - start;
    probe_say("%.3f seconds to create %d files in %ls.", stress.create_s, (int)files, directory);
    start = probe_now_s();
    for (i = 0; i < files; i++) {
        probe_check_interrupt();
        swprintf(path, sizeof path / sizeof path[0], L"%ls\\testfile%06llu.txt", directory, i);
        if (!DeleteFileW(path)) {
            probe_fail_win32("cannot delete %ls", path);
        }
    }
    stress.delete_s = probe_now_s() - start;
    probe_say("%.3f seconds to delete %d files in %ls.", stress.delete_s, (int)files, directory);
    stress.cpu_s = probe_thread_cpu_s(thread) - cpu_start;
    return stress;
}

static double median(double *values, int count)
{
    int i, j;
    for (i = 1; i < count; i++) {
        for (j = i; j > 0 && values[j - 1] > values[j]; j--) {
            double swap = values[j];
            values[j] = values[j - 1];
            values[j - 1] = swap;
        }
    }
    if (count == 0) {
        return 0.0;
    }
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2.0;
}

static wchar_t g_root[MAX_PATH * 2];

static void remove_root(void)
{
    if (g_root[0] != L'\0') {
        if (!probe_remove_tree(g_root)) {
            probe_progress("notify-buffer: could not remove all of %ls", g_root);
        }
        g_root[0] = L'\0';
    }
}

typedef struct {
    unsigned long long buffer_kb; /* 0: no watcher */
    double tracked_s, untracked_s, tracked_cpu_s, untracked_cpu_s, slowdown;
    long notifications, overflows;
} Config;

static int parse_buffer_list(const char *text, Config *configs)
{
    char copy[256];
    char *token, *next;
    int count = 0;
    if (strlen(text) >= sizeof copy) {
        probe_usage_error("--buffers-kb list is too long");
    }
    strcpy(copy, text);
    for (token = copy; token != NULL; token = next) {
        next = strchr(token, ',');
        if (next != NULL) {
            *next++ = '\0';
        }
        if (count == MAX_CONFIGS) {
            probe_usage_error("--buffers-kb takes at most %d sizes", MAX_CONFIGS);
        }
        memset(&configs[count], 0, sizeof configs[count]);
        configs[count++].buffer_kb = probe_parse_count("--buffers-kb", token, 0, 65536);
    }
    return count;
}

static void make_dirs(const wchar_t *top, wchar_t *test_files)
{
    swprintf(test_files, MAX_PATH * 2, L"%ls\\TestFiles", top);
    if (!CreateDirectoryW(top, NULL) || !CreateDirectoryW(test_files, NULL)) {
        probe_fail_win32("cannot create %ls", test_files);
    }
}

/* Run every round for one buffer size and fill in its medians. */
static void run_config(Config *config, unsigned long long files, unsigned long long reps,
                       int in_process, BOOL subtree, const wchar_t *tracked_top,
                       const wchar_t *tracked, const wchar_t *untracked)
{
    const wchar_t *watched = subtree ? tracked_top : tracked;
    double tracked_s[PROBE_MAX_REPS], untracked_s[PROBE_MAX_REPS];
    double tracked_cpu[PROBE_MAX_REPS], untracked_cpu[PROBE_MAX_REPS];
    DWORD bytes = (DWORD)(config->buffer_kb * 1024);
    unsigned long long rep;
    if (config->buffer_kb == 0) {
        probe_say("No watcher: Trackedfiles is not tracked, a control.");
    } else {
        probe_say("Watcher: ReadDirectoryChangesW with a %llu KiB buffer on %ls%s, in %s.",
                  config->buffer_kb, watched, subtree ? " and its subtree" : "",
                  in_process ? "a thread of this process" : "a separate process");
        if (in_process) {
            start_watcher(watched, bytes, subtree);
        } else {
            start_watcher_process(watched, bytes, subtree);
        }
    }
    for (rep = 0; rep < reps; rep++) {
        Stress a = file_stress(tracked, files);
        Stress b;
        Sleep(PAUSE_MS); /* as the original: a visible gap between the two in a trace */
        b = file_stress(untracked, files);
        tracked_s[rep] = a.create_s + a.delete_s;
        untracked_s[rep] = b.create_s + b.delete_s;
        tracked_cpu[rep] = a.cpu_s;
        untracked_cpu[rep] = b.cpu_s;
        probe_say("Tracked files take %1.2f times as long.",
                  probe_ratio(tracked_s[rep], untracked_s[rep]));
    }
    if (config->buffer_kb > 0 && in_process) {
        Sleep(100); /* let the watcher drain its last notifications */
        config->notifications = g_watcher.notifications;
        config->overflows = g_watcher.overflows;
        stop_watcher();
    } else if (config->buffer_kb > 0) {
        finish_watcher_process(&config->notifications, &config->overflows);
    }
    config->tracked_s = median(tracked_s, (int)reps);
    config->untracked_s = median(untracked_s, (int)reps);
    config->tracked_cpu_s = median(tracked_cpu, (int)reps);
    config->untracked_cpu_s = median(untracked_cpu, (int)reps);
    config->slowdown = probe_ratio(config->tracked_s, config->untracked_s);
    if (config->buffer_kb > 0) {
        probe_say("The watcher received %ld notifications (%ld overflowed reads).",
                  config->notifications, config->overflows);
    }
}

int main(int argc, char **argv)
{
    unsigned long long files = 1000, reps = 3;
    int files_given = 0, reps_given = 0, quick = 0, in_process = 1;
    BOOL subtree = FALSE;
    Config configs[MAX_CONFIGS];
    int config_count = 0, c, i;
    wchar_t tracked_top[MAX_PATH * 2], untracked_top[MAX_PATH * 2];
    wchar_t tracked[MAX_PATH * 2], untracked[MAX_PATH * 2];
    const Config *small = NULL, *large = NULL;
    ProbeVariant variants[MAX_CONFIGS];
    ProbeResult result;
    char names[MAX_CONFIGS][64];

    /* Internal: the watcher process (prints nothing). */
    if (argc >= 6 && strcmp(argv[1], "--child-watcher") == 0) {
        return run_child_watcher((DWORD)strtoul(argv[2], NULL, 10),
                                 (DWORD)strtoul(argv[3], NULL, 10), strcmp(argv[4], "1") == 0,
                                 argv[5]);
    }

    probe_init("notify-buffer");
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return 0;
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            probe_set_json_path(probe_option_value(argc, argv, &i));
        } else if (strcmp(argv[i], "--files") == 0) {
            files = probe_parse_count("--files", probe_option_value(argc, argv, &i), 1, 999999);
            files_given = 1;
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = probe_parse_count("--reps", probe_option_value(argc, argv, &i), 1,
                                     PROBE_MAX_REPS);
            reps_given = 1;
        } else if (strcmp(argv[i], "--buffers-kb") == 0) {
            config_count = parse_buffer_list(probe_option_value(argc, argv, &i), configs);
        } else if (strcmp(argv[i], "--watcher") == 0) {
            const char *where = probe_option_value(argc, argv, &i);
            if (strcmp(where, "thread") == 0) {
                in_process = 1;
            } else if (strcmp(where, "process") == 0) {
                in_process = 0;
            } else {
                probe_usage_error("--watcher must be thread or process, got '%s'", where);
            }
        } else if (strcmp(argv[i], "--recursive") == 0) {
            subtree = TRUE;
        } else {
            probe_usage_error("unknown argument '%s'", argv[i]);
        }
    }
    if (quick) {
        files = files_given ? files : 200;
        reps = reps_given ? reps : 1;
    }
    if (config_count == 0) {
        config_count = parse_buffer_list("0,16,2048", configs);
    }

    probe_make_temp_dir("notify", g_root, sizeof g_root / sizeof g_root[0]);
    probe_on_cleanup(remove_root);
    probe_on_cleanup(stop_watcher); /* these run first: a watcher holds the directory open */
    probe_on_cleanup(stop_watcher_process);
    swprintf(tracked_top, MAX_PATH * 2, L"%ls\\Trackedfiles", g_root);
    swprintf(untracked_top, MAX_PATH * 2, L"%ls\\Untrackedfiles", g_root);
    make_dirs(tracked_top, tracked);
    make_dirs(untracked_top, untracked);

    for (c = 0; c < config_count; c++) {
        run_config(&configs[c], files, reps, in_process, subtree, tracked_top, tracked,
                   untracked);
        if (configs[c].buffer_kb == 16) {
            small = &configs[c];
        } else if (configs[c].buffer_kb == 2048) {
            large = &configs[c];
        }
    }

    memset(variants, 0, sizeof variants);
    for (c = 0; c < config_count; c++) {
        const Config *config = &configs[c];
        ProbeVariant *variant = &variants[c];
        if (config->buffer_kb == 0) {
            snprintf(names[c], sizeof names[c], "no watcher");
        } else {
            snprintf(names[c], sizeof names[c], "watcher with %llu KiB buffer", config->buffer_kb);
        }
        variant->name = names[c];
        variant->role = config->buffer_kb > 64 ? "pathological" : "control";
        variant->has_value = 1;
        variant->value = config->slowdown;
        variant->unit = "x";
        snprintf(variant->note, sizeof variant->note,
                 "%llu files created (\"%s\") and deleted: %.4f s tracked (%.3f s CPU), %.4f s "
                 "untracked (%.3f s CPU); watcher %s%s; %ld notifications, %ld overflows",
                 files, k_file_text, config->tracked_s, config->tracked_cpu_s,
                 config->untracked_s, config->untracked_cpu_s,
                 in_process ? "in this process" : "in a separate process",
                 subtree ? ", recursive" : "", config->notifications, config->overflows);
    }

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN;
    if (small != NULL && large != NULL) {
        result.has_headline = 1;
        result.metric = "tracked files: times as long as in an untracked directory";
        result.unit = "x";
        result.pathological = large->slowdown;
        result.control = small->slowdown;
        result.ratio = probe_ratio(large->slowdown, small->slowdown);
        result.affected = result.ratio >= AFFECTED_RATIO;
        snprintf(result.explanation, sizeof result.explanation,
                 "with a 2 MiB watcher buffer tracked files take %.2fx as long, with 16 KiB "
                 "%.2fx: %s (threshold %.0fx)",
                 large->slowdown, small->slowdown,
                 result.affected ? "the buffer size matters, affected"
                                 : "the buffer size does not matter, not affected",
                 AFFECTED_RATIO);
    } else {
        result.reason = "the verdict needs both a 16 and a 2048 KiB buffer in --buffers-kb";
        snprintf(result.explanation, sizeof result.explanation,
                 "ran without the 16 KiB / 2 MiB comparison");
    }
    result.variants = variants;
    result.variant_count = (size_t)config_count;
    probe_write_result(&result);
    probe_run_cleanups();
    return 0;
}
