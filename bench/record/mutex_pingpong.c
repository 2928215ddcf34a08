/* A futex-heavy workload for bench/record/futex_overhead.sh: THREADS threads
 * (4) contend on one pthread mutex in a tight loop, ITERS (default 1500000)
 * lock/unlock pairs each, so the contended lock and unlock go through
 * futex(FUTEX_WAIT/FUTEX_WAKE): ~1.4 million futex calls in ~0.75 s on a
 * 2-core VM (WORK, default 20, is the busy loop inside and outside the lock).
 *
 *   cc -O2 -pthread -o mutex_pingpong mutex_pingpong.c
 *   ./mutex_pingpong [ITERS [THREADS [yield]]]
 *
 * How often the lock is found held depends on the threads running at once,
 * so on a shared machine on how busy the other CPU is. With `yield` the
 * holder calls sched_yield() inside the lock: run on one CPU
 * (`taskset -c 0 ./mutex_pingpong 20000 4 yield`) every iteration is one
 * futex wait and one futex wake whatever the load, at the price of a context
 * switch per iteration.
 *
 * Prints the shared counter (ITERS * THREADS) so the work cannot be elided.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long counter;
static __thread volatile unsigned long spin;
#ifndef WORK
#define WORK 20
#endif
static long iters = 1500000;
static int yield_in_lock;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        pthread_mutex_lock(&lock);
        /* As much work inside the lock as outside: the thread on the other
         * CPU mostly finds it held and sleeps in futex_wait. */
        for (int k = 0; k < WORK; k++)
            counter++;
        counter -= WORK - 1;
        if (yield_in_lock)
            sched_yield();
        pthread_mutex_unlock(&lock);
        for (int k = 0; k < WORK; k++)
            spin++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 4;
    if (argc > 1)
        iters = atol(argv[1]);
    if (argc > 2)
        threads = atoi(argv[2]);
    if (argc > 3)
        yield_in_lock = argv[3][0] == 'y';
    if (iters <= 0 || threads <= 0 || threads > 64) {
        fprintf(stderr, "usage: %s [ITERS [THREADS (1-64) [yield]]]\n", argv[0]);
        return 2;
    }
    pthread_t t[64];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("%lu\n", counter);
    return counter == (unsigned long)iters * threads ? 0 : 1;
}
