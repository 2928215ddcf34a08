/* Scripted hangs for slowlab hang's tests: `hangs MODE [COUNTER_FILE]`.
 *
 * Each mode sets up one kind of hang and prints "ready" once its threads
 * and processes are about to block; the tests kill the whole process group
 * afterwards. Built by the tests with `gcc -O1 -g -pthread
 * -fno-omit-frame-pointer`.
 *
 *   abba     main and worker lock two mutexes in opposite orders: deadlock
 *   sleeper  holder locks a mutex and sleeps; main waits for it; ticker
 *            counts in COUNTER_FILE meanwhile (the walk must not stop it)
 *   pipe     main reads a pipe whose only writer, the child, stops itself
 *   flock    the child takes a flock and sleeps; main waits for the lock
 *   fifo     main waits for its child, which opens a FIFO nobody writes
 *   unix     main (client) reads a Unix socket; the server process's handler
 *            waits on a mutex that its holder thread keeps while sleeping
 *   tcp      the child (the one that says ready) reads a loopback TCP
 *            connection whose server, the parent, sleeps
 *   threads  N threads (COUNTER_FILE is N here) wait on one condition
 *            variable; main sleeps (the benchmark's target)
 *   crowd    N threads (COUNTER_FILE is N) wait on a mutex that holder keeps
 *            while sleeping (the benchmark's other target)
 *   userfault  writer writes a pipe from a page that userfaultfd leaves
 *            unfilled, holding the pipe's mutex; main reads the pipe
 *   jobserver  make holds both ends of a token pipe and waits for its two
 *            children: job reads a token (it says ready), sleeper sleeps
 *   kind K   sleeper, with the mutex made K: normal, recursive, errorcheck,
 *            robust or pi (priority inheritance)
 *   rwlock   writer holds a rwlock for writing and sleeps; main wants to read
 *   join     main joins worker, which waits on a mutex held by holder
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static const char *counter_file;

static void ready(void) {
    printf("ready %d\n", getpid());
    fflush(stdout);
}

static void name(const char *n) { prctl(PR_SET_NAME, n, 0, 0, 0); }

__attribute__((noinline)) static void transfer(pthread_mutex_t *first, pthread_mutex_t *second) {
    pthread_mutex_lock(first);
    usleep(200 * 1000);
    pthread_mutex_lock(second);
}

static void *abba_worker(void *arg) {
    (void)arg;
    name("worker");
    transfer(&b, &a);
    return NULL;
}

__attribute__((noinline)) static void hold_and_sleep(pthread_mutex_t *l) {
    pthread_mutex_lock(l);
    sleep(100000);
}

static void *holder(void *arg) {
    (void)arg;
    name("holder");
    hold_and_sleep(&m);
    return NULL;
}

static void *ticker(void *arg) {
    (void)arg;
    name("ticker");
    for (long n = 1;; n++) {
        if (counter_file) {
            FILE *f = fopen(counter_file, "w");
            if (f) {
                fprintf(f, "%ld\n", n);
                fclose(f);
            }
        }
        usleep(10 * 1000);
    }
    return NULL;
}

__attribute__((noinline)) static void wait_for_lock(pthread_mutex_t *l) {
    pthread_mutex_lock(l);
    pthread_mutex_unlock(l);
}

static void *handler(void *arg) {
    (void)arg;
    name("handler");
    usleep(100 * 1000);
    wait_for_lock(&m);
    return NULL;
}

static void *cond_waiter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&m);
    for (;;) pthread_cond_wait(&cv, &m);
    return NULL;
}

static void *crowd_member(void *arg) {
    (void)arg;
    usleep(100 * 1000);
    wait_for_lock(&m);
    return NULL;
}

static int uf_pipe[2];
static char *uf_page;

static void *uf_writer(void *arg) {
    (void)arg;
    name("writer");
    (void)!write(uf_pipe[1], uf_page, 4096);
    return NULL;
}

static void *rw_writer(void *arg) {
    (void)arg;
    name("writer");
    pthread_rwlock_wrlock(&rw);
    sleep(100000);
    return NULL;
}

static void *join_worker(void *arg) {
    (void)arg;
    name("worker");
    usleep(100 * 1000);
    wait_for_lock(&m);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: hangs MODE [COUNTER_FILE]\n");
        return 2;
    }
    const char *mode = argv[1];
    counter_file = argc > 2 ? argv[2] : NULL;
    pthread_t t, u;
    if (!strcmp(mode, "abba")) {
        name("main");
        pthread_create(&t, NULL, abba_worker, NULL);
        ready();
        transfer(&a, &b);
    } else if (!strcmp(mode, "sleeper")) {
        name("main");
        pthread_create(&t, NULL, holder, NULL);
        pthread_create(&u, NULL, ticker, NULL);
        usleep(100 * 1000);
        ready();
        wait_for_lock(&m);
    } else if (!strcmp(mode, "pipe")) {
        int p[2];
        if (pipe(p)) return 1;
        pid_t c = fork();
        if (c == 0) {
            name("writer");
            close(p[0]);
            raise(SIGSTOP);
            (void)!write(p[1], "x", 1);
            _exit(0);
        }
        name("reader");
        close(p[1]);
        ready();
        char x;
        (void)!read(p[0], &x, 1);
    } else if (!strcmp(mode, "flock")) {
        const char *path = argv[2];
        int sync[2];
        if (pipe(sync)) return 1;
        pid_t c = fork();
        if (c == 0) {
            name("locker");
            int fd = open(path, O_RDWR | O_CREAT, 0600);
            flock(fd, LOCK_EX);
            (void)!write(sync[1], "x", 1);
            sleep(100000);
            _exit(0);
        }
        name("waiter");
        char x;
        (void)!read(sync[0], &x, 1);
        int fd = open(path, O_RDWR);
        ready();
        flock(fd, LOCK_EX);
    } else if (!strcmp(mode, "fifo")) {
        const char *path = argv[2];
        unlink(path);
        if (mkfifo(path, 0600)) return 1;
        pid_t c = fork();
        if (c == 0) {
            name("opener");
            open(path, O_RDONLY);
            _exit(0);
        }
        name("parent");
        ready();
        waitpid(c, NULL, 0);
    } else if (!strcmp(mode, "unix")) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
        pid_t c = fork();
        if (c == 0) {
            name("server");
            close(sv[0]);
            pthread_create(&t, NULL, holder, NULL);
            pthread_create(&u, NULL, handler, NULL);
            pthread_join(u, NULL);
            (void)!write(sv[1], "x", 1);
            _exit(0);
        }
        name("client");
        close(sv[1]);
        usleep(200 * 1000);
        ready();
        char x;
        (void)!read(sv[0], &x, 1);
    } else if (!strcmp(mode, "tcp")) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof addr;
        if (bind(l, (struct sockaddr *)&addr, len) || listen(l, 1) ||
            getsockname(l, (struct sockaddr *)&addr, &len))
            return 1;
        pid_t c = fork();
        if (c == 0) {
            name("client");
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(s, (struct sockaddr *)&addr, len)) _exit(1);
            ready();
            char x;
            (void)!read(s, &x, 1);
            _exit(0);
        }
        name("server");
        int s = accept(l, NULL, NULL);
        (void)s;
        sleep(100000);
    } else if (!strcmp(mode, "threads")) {
        int n = argc > 2 ? atoi(argv[2]) : 1000;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        for (int i = 0; i < n; i++) pthread_create(&t, &attr, cond_waiter, NULL);
        ready();
        sleep(100000);
    } else if (!strcmp(mode, "crowd")) {
        int n = argc > 2 ? atoi(argv[2]) : 1000;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        pthread_create(&t, NULL, holder, NULL);
        usleep(50 * 1000);
        for (int i = 0; i < n; i++) pthread_create(&u, &attr, crowd_member, NULL);
        usleep(200 * 1000);
        ready();
        sleep(100000);
    } else if (!strcmp(mode, "userfault")) {
        name("main");
        int uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
        struct uffdio_api api = {.api = UFFD_API};
        if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api)) {
            perror("userfaultfd");
            return 3;
        }
        uf_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        struct uffdio_register reg = {
            .range = {.start = (unsigned long)uf_page, .len = 4096},
            .mode = UFFDIO_REGISTER_MODE_MISSING};
        if (ioctl(uffd, UFFDIO_REGISTER, &reg) || pipe(uf_pipe)) return 1;
        pthread_create(&t, NULL, uf_writer, NULL);
        usleep(100 * 1000);
        ready();
        char x[16];
        (void)!read(uf_pipe[0], x, sizeof x);
    } else if (!strcmp(mode, "jobserver")) {
        int js[2];
        if (pipe(js)) return 1;
        if (fork() == 0) {
            name("sleeper");
            sleep(100000);
            _exit(0);
        }
        pid_t job = fork();
        if (job == 0) {
            name("job");
            usleep(100 * 1000);
            char x;
            (void)!read(js[0], &x, 1);
            _exit(0);
        }
        name("make");
        printf("ready %d\n", job);
        fflush(stdout);
        while (wait(NULL) > 0) {
        }
    } else if (!strcmp(mode, "kind")) {
        const char *kind = argv[2];
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        if (!strcmp(kind, "recursive")) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
        else if (!strcmp(kind, "errorcheck")) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
        else if (!strcmp(kind, "robust")) pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        else if (!strcmp(kind, "pi")) pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
        else if (strcmp(kind, "normal")) return 2;
        pthread_mutex_init(&m, &attr);
        name("main");
        pthread_create(&t, NULL, holder, NULL);
        usleep(100 * 1000);
        ready();
        wait_for_lock(&m);
    } else if (!strcmp(mode, "rwlock")) {
        name("main");
        pthread_create(&t, NULL, rw_writer, NULL);
        usleep(100 * 1000);
        ready();
        pthread_rwlock_rdlock(&rw);
    } else if (!strcmp(mode, "join")) {
        name("main");
        pthread_create(&u, NULL, holder, NULL);
        pthread_create(&t, NULL, join_worker, NULL);
        ready();
        pthread_join(t, NULL);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    sleep(100000);
    return 0;
}
