/*
 * probe_common.c -- the shared plumbing of the Windows probes: clocks, printed lines,
 * the JSON-lines writer with its string escaper, argument parsing, temp directories,
 * re-executing this program as a child, and cleanup on failure or Ctrl-C.
 *
 * It does not decide anything about a scenario; each probe fills in a ProbeResult.
 */
#include "probe_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- state --------------------------------------------------------------------- */

#define MAX_CLEANUPS 8
#define MAX_LINES 1024

static const char *g_scenario_id = "unknown";
static const char *g_program = "probe";
static void (*g_cleanups[MAX_CLEANUPS])(void);
static int g_cleanup_count;
static volatile LONG g_cleaning;
static char *g_lines[MAX_LINES];
static int g_line_count;
static LARGE_INTEGER g_qpc_frequency;

/* ---- timing --------------------------------------------------------------------- */

double probe_now_s(void)
{
    LARGE_INTEGER now;
    if (g_qpc_frequency.QuadPart == 0) {
        QueryPerformanceFrequency(&g_qpc_frequency);
    }
    QueryPerformanceCounter(&now);
    return (double)now.QuadPart / (double)g_qpc_frequency.QuadPart;
}

static double filetime_s(FILETIME ft)
{
    ULARGE_INTEGER value;
    value.LowPart = ft.dwLowDateTime;
    value.HighPart = ft.dwHighDateTime;
    return (double)value.QuadPart * 1e-7; /* 100 ns units */
}

double probe_process_cpu_s(HANDLE process)
{
    FILETIME creation, exit_time, kernel, user;
    if (!GetProcessTimes(process, &creation, &exit_time, &kernel, &user)) {
        probe_fail_win32("GetProcessTimes failed");
    }
    return filetime_s(kernel) + filetime_s(user);
}

double probe_thread_cpu_s(HANDLE thread)
{
    FILETIME creation, exit_time, kernel, user;
    if (!GetThreadTimes(thread, &creation, &exit_time, &kernel, &user)) {
        probe_fail_win32("GetThreadTimes failed");
    }
    return filetime_s(kernel) + filetime_s(user);
}

/* ---- cleanup and Ctrl-C ---------------------------------------------------------- */

void probe_on_cleanup(void (*cleanup)(void))
{
    if (g_cleanup_count < MAX_CLEANUPS) {
        g_cleanups[g_cleanup_count++] = cleanup;
    }
}

void probe_run_cleanups(void)
{
    int i;
    if (InterlockedExchange(&g_cleaning, 1) != 0) {
        return; /* already running (e.g. Ctrl-C during a failure) */
    }
    for (i = g_cleanup_count - 1; i >= 0; i--) {
        g_cleanups[i]();
    }
    g_cleanup_count = 0;
    InterlockedExchange(&g_cleaning, 0);
}

static volatile LONG g_interrupted;

void probe_check_interrupt(void)
{
    if (g_interrupted) {
        fprintf(stderr, "%s: interrupted, cleaning up\n", g_program);
        probe_run_cleanups();
        exit(130);
    }
}

/* Runs on its own thread. Ask the main thread to stop at its next check, so that the
 * cleanup does not race with the work (deleting files still being created); clean up
 * here only if the main thread does not come by in time. */
static BOOL WINAPI on_console_event(DWORD event)
{
    int waited;
    (void)event;
    InterlockedExchange(&g_interrupted, 1);
    for (waited = 0; waited < 50; waited++) {
        Sleep(100); /* the main thread's exit(130) ends this thread */
    }
    fprintf(stderr, "%s: interrupted, cleaning up\n", g_program);
    probe_run_cleanups();
    ExitProcess(130);
}

/* ---- output ---------------------------------------------------------------------- */

void probe_init(const char *scenario_id)
{
    g_scenario_id = scenario_id;
    g_program = scenario_id;
    QueryPerformanceFrequency(&g_qpc_frequency);
    SetConsoleCtrlHandler(on_console_event, TRUE);
    setvbuf(stdout, NULL, _IONBF, 0); /* lines appear as they are measured */
}

void probe_say(const char *fmt, ...)
{
    char line[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    printf("%s\n", line);
    if (g_line_count < MAX_LINES) {
        size_t size = strlen(line) + 1;
        char *copy = (char *)malloc(size);
        if (copy != NULL) {
            memcpy(copy, line, size);
            g_lines[g_line_count++] = copy;
        }
    }
}

void probe_say_blank(void)
{
    printf("\n");
}

void probe_progress(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
}

void probe_fail(const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "%s: error: ", g_program);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    probe_run_cleanups();
    exit(PROBE_EXIT_FAILED);
}

void probe_fail_win32(const char *fmt, ...)
{
    DWORD error = GetLastError();
    char message[512] = "";
    char text[512];
    size_t length;
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, NULL, error, 0,
                   message, (DWORD)sizeof message, NULL);
    length = strlen(message);
    while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r' ||
                          message[length - 1] == ' ' || message[length - 1] == '.')) {
        message[--length] = '\0';
    }
    probe_fail("%s: %s (error %lu)", text, length ? message : "unknown error",
               (unsigned long)error);
}

void probe_usage_error(const char *fmt, ...)
{
    va_list args;
    fprintf(stderr, "%s: ", g_program);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fprintf(stderr, " (try --help)\n");
    exit(PROBE_EXIT_USAGE);
}

/* ---- arguments ------------------------------------------------------------------- */

unsigned long long probe_parse_count(const char *option, const char *text,
                                     unsigned long long min, unsigned long long max)
{
    char *end = NULL;
    unsigned long long value;
    if (text[0] < '0' || text[0] > '9') {
        probe_usage_error("%s needs a whole number, got '%s'", option, text);
    }
    errno = 0;
    value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0') {
        probe_usage_error("%s needs a whole number, got '%s'", option, text);
    }
    if (value < min || value > max) {
        probe_usage_error("%s must be between %llu and %llu, got %llu", option, min, max, value);
    }
    return value;
}

double probe_parse_seconds(const char *option, const char *text, double min, double max)
{
    char *end = NULL;
    double value;
    errno = 0;
    value = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(value >= min && value <= max)) {
        probe_usage_error("%s needs a number between %g and %g, got '%s'", option, min, max,
                          text);
    }
    return value;
}

const char *probe_option_value(int argc, char **argv, int *index)
{
    if (*index + 1 >= argc) {
        probe_usage_error("%s needs a value", argv[*index]);
    }
    *index += 1;
    return argv[*index];
}

/* ---- files and processes --------------------------------------------------------- */

void probe_make_temp_dir(const char *tag, wchar_t *path, size_t path_chars)
{
    wchar_t base[MAX_PATH + 1];
    wchar_t wide_tag[64];
    DWORD length = GetTempPathW(MAX_PATH + 1, base);
    unsigned attempt;
    size_t i;
    for (i = 0; tag[i] != '\0' && i + 1 < sizeof wide_tag / sizeof wide_tag[0]; i++) {
        wide_tag[i] = (wchar_t)(unsigned char)tag[i]; /* tags are ASCII */
    }
    wide_tag[i] = L'\0';
    if (length == 0 || length > MAX_PATH) {
        probe_fail_win32("GetTempPath failed");
    }
    for (attempt = 0; attempt < 1000; attempt++) {
        swprintf(path, path_chars, L"%lsslowlab-%ls-%lu-%u", base, wide_tag,
                 (unsigned long)GetCurrentProcessId(), attempt);
        if (CreateDirectoryW(path, NULL)) {
            return;
        }
        if (GetLastError() != ERROR_ALREADY_EXISTS) {
            probe_fail_win32("cannot create a temporary directory under %ls", base);
        }
    }
    probe_fail("cannot create a temporary directory under %ls: all names taken", base);
}

BOOL probe_remove_tree(const wchar_t *path)
{
    wchar_t pattern[MAX_PATH * 2];
    wchar_t child[MAX_PATH * 2];
    WIN32_FIND_DATAW found;
    HANDLE search;
    BOOL ok = TRUE;
    swprintf(pattern, sizeof pattern / sizeof pattern[0], L"%ls\\*", path);
    search = FindFirstFileW(pattern, &found);
    if (search != INVALID_HANDLE_VALUE) {
        do {
            if (wcscmp(found.cFileName, L".") == 0 || wcscmp(found.cFileName, L"..") == 0) {
                continue;
            }
            swprintf(child, sizeof child / sizeof child[0], L"%ls\\%ls", path, found.cFileName);
            if (found.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
                ok = probe_remove_tree(child) && ok;
            } else {
                if (found.dwFileAttributes & FILE_ATTRIBUTE_READONLY) {
                    SetFileAttributesW(child, FILE_ATTRIBUTE_NORMAL);
                }
                ok = DeleteFileW(child) && ok;
            }
        } while (FindNextFileW(search, &found));
        FindClose(search);
    }
    return RemoveDirectoryW(path) && ok;
}

void probe_self_path(wchar_t *path, size_t path_chars)
{
    DWORD length = GetModuleFileNameW(NULL, path, (DWORD)path_chars);
    if (length == 0 || length >= path_chars) {
        probe_fail_win32("GetModuleFileName failed");
    }
}

HANDLE probe_spawn_self(const wchar_t *arguments, const wchar_t *working_dir)
{
    static wchar_t self[MAX_PATH * 2];
    wchar_t command_line[1024];
    STARTUPINFOW startup;
    PROCESS_INFORMATION info;
    if (self[0] == L'\0') {
        probe_self_path(self, sizeof self / sizeof self[0]);
    }
    /* argv[0] is only a label: lpApplicationName says which program runs. */
    swprintf(command_line, sizeof command_line / sizeof command_line[0], L"probe %ls",
             arguments);
    ZeroMemory(&startup, sizeof startup);
    startup.cb = sizeof startup;
    ZeroMemory(&info, sizeof info);
    if (!CreateProcessW(self, command_line, NULL, NULL, FALSE, 0, NULL, working_dir, &startup,
                        &info)) {
        probe_fail_win32("CreateProcess of a child failed");
    }
    CloseHandle(info.hThread);
    return info.hProcess;
}

/* ---- JSON ------------------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t length;
    size_t capacity;
} JsonBuffer;

static void json_raw(JsonBuffer *buffer, const char *text, size_t length)
{
    if (buffer->length + length + 1 > buffer->capacity) {
        size_t capacity = buffer->capacity ? buffer->capacity : 4096;
        char *grown;
        while (buffer->length + length + 1 > capacity) {
            capacity *= 2;
        }
        grown = (char *)realloc(buffer->data, capacity);
        if (grown == NULL) {
            probe_fail("out of memory writing JSON");
        }
        buffer->data = grown;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->length, text, length);
    buffer->length += length;
    buffer->data[buffer->length] = '\0';
}

static void json_text(JsonBuffer *buffer, const char *text)
{
    json_raw(buffer, text, strlen(text));
}

/* Length of the valid UTF-8 sequence at text, or 0 when it is not valid UTF-8. */
static size_t utf8_sequence_length(const unsigned char *text)
{
    size_t length, i;
    if (text[0] < 0x80) {
        return 1;
    } else if (text[0] >= 0xC2 && text[0] <= 0xDF) {
        length = 2;
    } else if (text[0] >= 0xE0 && text[0] <= 0xEF) {
        length = 3;
    } else if (text[0] >= 0xF0 && text[0] <= 0xF4) {
        length = 4;
    } else {
        return 0;
    }
    for (i = 1; i < length; i++) {
        if ((text[i] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return length;
}

/* A JSON string: quotes, backslashes and control characters escaped; bytes that are
 * not valid UTF-8 (an ANSI code page message, say) become '?'. NULL becomes null. */
static void json_string(JsonBuffer *buffer, const char *text)
{
    const unsigned char *p = (const unsigned char *)text;
    if (text == NULL) {
        json_text(buffer, "null");
        return;
    }
    json_raw(buffer, "\"", 1);
    while (*p != '\0') {
        char escaped[8];
        size_t length;
        switch (*p) {
        case '"': json_raw(buffer, "\\\"", 2); p++; continue;
        case '\\': json_raw(buffer, "\\\\", 2); p++; continue;
        case '\n': json_raw(buffer, "\\n", 2); p++; continue;
        case '\r': json_raw(buffer, "\\r", 2); p++; continue;
        case '\t': json_raw(buffer, "\\t", 2); p++; continue;
        default: break;
        }
        if (*p < 0x20) {
            snprintf(escaped, sizeof escaped, "\\u%04x", (unsigned)*p);
            json_text(buffer, escaped);
            p++;
            continue;
        }
        length = utf8_sequence_length(p);
        if (length == 0) {
            json_raw(buffer, "?", 1);
            p++;
        } else {
            json_raw(buffer, (const char *)p, length);
            p += length;
        }
    }
    json_raw(buffer, "\"", 1);
}

/* A JSON number with 9 significant digits; JSON has no NaN or infinity, so a
 * non-finite value (which a correct measurement never produces) is written as 0. */
static void json_number(JsonBuffer *buffer, double value)
{
    char text[64];
    if (!isfinite(value)) {
        value = 0.0;
    }
    snprintf(text, sizeof text, "%.9g", value);
    json_text(buffer, text);
}

static void json_key(JsonBuffer *buffer, const char *key)
{
    json_string(buffer, key);
    json_raw(buffer, ":", 1);
}

double probe_ratio(double bad, double good)
{
    const double tiny = 1e-9;
    double ratio;
    if (!isfinite(bad) || !isfinite(good) || bad < 0.0) {
        return 0.0;
    }
    ratio = bad / (good > tiny ? good : tiny);
    return isfinite(ratio) ? ratio : 0.0;
}

static void json_points(JsonBuffer *buffer, const ProbePoint *points, size_t count)
{
    size_t i;
    int rep;
    json_raw(buffer, "[", 1);
    for (i = 0; i < count; i++) {
        char n[32];
        if (i > 0) {
            json_raw(buffer, ",", 1);
        }
        snprintf(n, sizeof n, "%llu", points[i].n);
        json_text(buffer, "{\"n\":");
        json_text(buffer, n);
        json_text(buffer, ",\"cpu_s\":[");
        for (rep = 0; rep < points[i].reps; rep++) {
            if (rep > 0) {
                json_raw(buffer, ",", 1);
            }
            json_number(buffer, points[i].cpu_s[rep]);
        }
        json_text(buffer, "],\"wall_s\":[");
        for (rep = 0; rep < points[i].reps; rep++) {
            if (rep > 0) {
                json_raw(buffer, ",", 1);
            }
            json_number(buffer, points[i].wall_s[rep]);
        }
        json_text(buffer, "]}");
    }
    json_raw(buffer, "]", 1);
}

static void json_variant(JsonBuffer *buffer, const ProbeVariant *variant)
{
    json_raw(buffer, "{", 1);
    json_key(buffer, "name");
    json_string(buffer, variant->name);
    json_raw(buffer, ",", 1);
    json_key(buffer, "role");
    json_string(buffer, variant->role);
    if (variant->points != NULL) {
        json_raw(buffer, ",", 1);
        json_key(buffer, "points");
        json_points(buffer, variant->points, variant->point_count);
    }
    if (variant->has_value) {
        json_raw(buffer, ",", 1);
        json_key(buffer, "value");
        json_number(buffer, variant->value);
    }
    if (variant->unit != NULL) {
        json_raw(buffer, ",", 1);
        json_key(buffer, "unit");
        json_string(buffer, variant->unit);
    }
    /* The statistics are left to `slowlab import`. */
    json_text(buffer, ",\"exponent\":null,\"exponent_ci\":null,\"verdict\":null");
    if (variant->note[0] != '\0') {
        json_raw(buffer, ",", 1);
        json_key(buffer, "note");
        json_string(buffer, variant->note);
    }
    json_raw(buffer, "}", 1);
}

static const char *g_json_path;

void probe_set_json_path(const char *path)
{
    FILE *file = fopen(path, "ab");
    if (file == NULL) {
        probe_fail("cannot open %s for appending: %s", path, strerror(errno));
    }
    fclose(file);
    g_json_path = path;
}

void probe_write_result(const ProbeResult *result)
{
    const char *path = g_json_path;
    JsonBuffer buffer = {NULL, 0, 0};
    FILE *file;
    size_t i;
    int line;
    if (path == NULL) {
        return;
    }
    json_raw(&buffer, "{", 1);
    json_key(&buffer, "id");
    json_string(&buffer, g_scenario_id);
    json_text(&buffer, ",\"status\":\"ran\",");
    json_key(&buffer, "reason");
    json_string(&buffer, result->reason);
    json_raw(&buffer, ",", 1);
    json_key(&buffer, "affected");
    json_text(&buffer, result->affected == PROBE_AFFECTED_UNKNOWN ? "null"
                       : result->affected                      ? "true"
                                                               : "false");
    json_raw(&buffer, ",", 1);
    json_key(&buffer, "headline");
    if (result->has_headline) {
        json_raw(&buffer, "{", 1);
        json_key(&buffer, "metric");
        json_string(&buffer, result->metric);
        json_raw(&buffer, ",", 1);
        json_key(&buffer, "unit");
        json_string(&buffer, result->unit);
        json_raw(&buffer, ",", 1);
        json_key(&buffer, "pathological");
        json_number(&buffer, result->pathological);
        json_raw(&buffer, ",", 1);
        json_key(&buffer, "control");
        json_number(&buffer, result->control);
        json_raw(&buffer, ",", 1);
        json_key(&buffer, "ratio");
        json_number(&buffer, result->ratio);
        json_raw(&buffer, "}", 1);
    } else {
        json_text(&buffer, "null");
    }
    json_raw(&buffer, ",", 1);
    json_key(&buffer, "variants");
    json_raw(&buffer, "[", 1);
    for (i = 0; i < result->variant_count; i++) {
        if (i > 0) {
            json_raw(&buffer, ",", 1);
        }
        json_variant(&buffer, &result->variants[i]);
    }
    json_raw(&buffer, "],", 2);
    json_key(&buffer, "explanation");
    json_string(&buffer, result->explanation);
    json_raw(&buffer, ",", 1);
    json_key(&buffer, "lines");
    json_raw(&buffer, "[", 1);
    for (line = 0; line < g_line_count; line++) {
        if (line > 0) {
            json_raw(&buffer, ",", 1);
        }
        json_string(&buffer, g_lines[line]);
    }
    json_text(&buffer, "],\"platform\":\"windows\"}\n");

    file = fopen(path, "ab"); /* binary: one '\n' per line on every platform */
    if (file == NULL) {
        free(buffer.data);
        probe_fail("cannot open %s for appending: %s", path, strerror(errno));
    }
    if (fwrite(buffer.data, 1, buffer.length, file) != buffer.length || fclose(file) != 0) {
        free(buffer.data);
        probe_fail("cannot write %s", path);
    }
    free(buffer.data);
}
