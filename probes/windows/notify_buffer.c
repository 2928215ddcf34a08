/*
 * notify_buffer.c -- the notify-buffer experiment as first documented on Windows: a
 * watcher thread keeps a ReadDirectoryChangesW read pending on one directory with a
 * buffer of a given size (none, 16 KiB, 2 MiB by default); the main thread creates and
 * deletes N files in that watched directory and in an unwatched sibling, and prints how
 * much longer the tracked files take. On affected Windows versions the kernel handles
 * the whole notification buffer for every change, so a 2 MiB buffer makes every file
 * create/delete in the watched tree several times slower than a 16 KiB one.
 *
 * It prints "Tracked files take X times as long." per buffer size and, with --json FILE,
 * appends one ScenarioResult line. affected = the 2 MiB buffer's slowdown (watched time /
 * unwatched time) is at least 2x the 16 KiB buffer's. It does not watch subtrees, other
 * directories or other programs' watchers. Under Wine the watcher works (on inotify) but
 * the timing says nothing about Windows.
 */
#include "probe_common.h"

#include <stdlib.h>
#include <string.h>

#define MAX_CONFIGS 8
#define AFFECTED_RATIO 2.0

static void print_help(void)
{
    printf("usage: notify_buffer [--files N] [--buffers-kb LIST] [--reps R] [--quick]\n"
           "                     [--json FILE]\n"
           "\n"
           "Creates and deletes N files in a directory watched by ReadDirectoryChangesW and\n"
           "in an unwatched one, for each watcher buffer size, and prints how much longer\n"
           "the watched (tracked) files take.\n"
           "\n"
           "  --files N         files to create and delete per pass (default 1000)\n"
           "  --buffers-kb LIST watcher buffer sizes in KiB, 0 = no watcher\n"
           "                    (default 0,16,2048)\n"
           "  --reps R          passes per directory and size; the median counts (default 3)\n"
           "  --quick           200 files, 1 pass\n"
           "  --json FILE       append one JSON result line to FILE\n"
           "\n"
           "Affected: with the 2048 KiB buffer tracked files take at least 2x as long\n"
           "(relative to the unwatched directory) as with the 16 KiB buffer.\n");
}

/* ---- the watcher thread ---------------------------------------------------------- */

typedef struct {
    HANDLE directory;
    HANDLE stop;   /* set by the main thread to end the watcher */
    HANDLE ready;  /* set by the watcher once its first read is pending */
    HANDLE thread;
    void *buffer;
    DWORD buffer_bytes;
    volatile LONG notifications; /* records received */
    volatile LONG overflows;     /* completions with no records (buffer overflowed) */
    DWORD error;                 /* non-zero when ReadDirectoryChangesW failed */
} Watcher;

static Watcher g_watcher;
static wchar_t g_root[MAX_PATH * 2];

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
                                   FALSE, filter, NULL, &overlapped, NULL)) {
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

static void start_watcher(const wchar_t *directory, DWORD buffer_bytes)
{
    Watcher *watcher = &g_watcher;
    ZeroMemory(watcher, sizeof *watcher);
    watcher->buffer_bytes = buffer_bytes;
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

/* ---- the measured work ----------------------------------------------------------- */

typedef struct {
    double wall_s;
    double cpu_s; /* of the thread that creates and deletes (not the watcher) */
} Pass;

static Pass create_and_delete(const wchar_t *directory, unsigned long long files)
{
    wchar_t path[MAX_PATH * 2];
    HANDLE thread = GetCurrentThread();
    double cpu_start = probe_thread_cpu_s(thread);
    double start = probe_now_s();
    unsigned long long i;
    Pass pass;
    for (i = 0; i < files; i++) {
        HANDLE file;
        probe_check_interrupt();
        swprintf(path, sizeof path / sizeof path[0], L"%ls\\file%06llu.tmp", directory, i);
        file = CreateFileW(path, GENERIC_WRITE, 0, NULL, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, NULL);
        if (file == INVALID_HANDLE_VALUE) {
            probe_fail_win32("cannot create %ls", path);
        }
        CloseHandle(file);
    }
    for (i = 0; i < files; i++) {
        probe_check_interrupt();
        swprintf(path, sizeof path / sizeof path[0], L"%ls\\file%06llu.tmp", directory, i);
        if (!DeleteFileW(path)) {
            probe_fail_win32("cannot delete %ls", path);
        }
    }
    pass.wall_s = probe_now_s() - start;
    pass.cpu_s = probe_thread_cpu_s(thread) - cpu_start;
    return pass;
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
    double watched_s, unwatched_s, watched_cpu_s, unwatched_cpu_s, slowdown;
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

int main(int argc, char **argv)
{
    unsigned long long files = 1000, reps = 3;
    int files_given = 0, reps_given = 0, quick = 0;
    Config configs[MAX_CONFIGS];
    int config_count = 0, c, i;
    wchar_t watched[MAX_PATH * 2], unwatched[MAX_PATH * 2];
    const Config *small = NULL, *large = NULL;
    ProbeVariant variants[MAX_CONFIGS];
    ProbeResult result;
    char names[MAX_CONFIGS][64];

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
    probe_on_cleanup(stop_watcher); /* runs first: the watcher holds the directory open */
    swprintf(watched, sizeof watched / sizeof watched[0], L"%ls\\watched", g_root);
    swprintf(unwatched, sizeof unwatched / sizeof unwatched[0], L"%ls\\unwatched", g_root);
    if (!CreateDirectoryW(watched, NULL) || !CreateDirectoryW(unwatched, NULL)) {
        probe_fail_win32("cannot create directories under %ls", g_root);
    }

    for (c = 0; c < config_count; c++) {
        Config *config = &configs[c];
        double watched_s[PROBE_MAX_REPS], unwatched_s[PROBE_MAX_REPS];
        double watched_cpu[PROBE_MAX_REPS], unwatched_cpu[PROBE_MAX_REPS];
        unsigned long long rep;
        if (config->buffer_kb > 0) {
            start_watcher(watched, (DWORD)(config->buffer_kb * 1024));
        }
        for (rep = 0; rep < reps; rep++) {
            Pass tracked = create_and_delete(watched, files);
            Pass untracked = create_and_delete(unwatched, files);
            watched_s[rep] = tracked.wall_s;
            watched_cpu[rep] = tracked.cpu_s;
            unwatched_s[rep] = untracked.wall_s;
            unwatched_cpu[rep] = untracked.cpu_s;
        }
        if (config->buffer_kb > 0) {
            Sleep(100); /* let the watcher drain its last notifications */
            config->notifications = g_watcher.notifications;
            config->overflows = g_watcher.overflows;
            stop_watcher();
        }
        config->watched_s = median(watched_s, (int)reps);
        config->unwatched_s = median(unwatched_s, (int)reps);
        config->watched_cpu_s = median(watched_cpu, (int)reps);
        config->unwatched_cpu_s = median(unwatched_cpu, (int)reps);
        config->slowdown = probe_ratio(config->watched_s, config->unwatched_s);
        if (config->buffer_kb > 0) {
            probe_say("Watcher buffer %llu KiB: %llu files created and deleted in %.3f s "
                      "(watched) and %.3f s (unwatched).",
                      config->buffer_kb, files, config->watched_s, config->unwatched_s);
        } else {
            probe_say("No watcher: %llu files created and deleted in %.3f s and %.3f s.", files,
                      config->watched_s, config->unwatched_s);
        }
        probe_say("Tracked files take %.2f times as long.", config->slowdown);
        if (config->buffer_kb == 16) {
            small = config;
        } else if (config->buffer_kb == 2048) {
            large = config;
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
                 "%llu files created+deleted: %.4f s watched (%.3f s CPU), %.4f s unwatched "
                 "(%.3f s CPU); %ld notifications, %ld overflows",
                 files, config->watched_s, config->watched_cpu_s, config->unwatched_s,
                 config->unwatched_cpu_s, config->notifications, config->overflows);
    }

    memset(&result, 0, sizeof result);
    result.affected = PROBE_AFFECTED_UNKNOWN;
    if (small != NULL && large != NULL) {
        result.has_headline = 1;
        result.metric = "tracked files: times as long as in an unwatched directory";
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
