/* A context-switch-heavy workload for bench/record/sched_overhead.sh: two
 * processes bounce one byte over a pair of pipes ROUNDS times (default
 * 100000). Every bounce is a wake-up of the other process and a switch out
 * of this one: on a 2-core VM about 180,000 context switches a second,
 * whether the two share a CPU or not.
 *
 *   cc -O2 -fno-omit-frame-pointer -o pipe_pingpong pipe_pingpong.c
 *   ./pipe_pingpong [ROUNDS]
 *
 * Prints the number of bounces so that a short count is seen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    int ab[2], ba[2];
    if (pipe(ab) || pipe(ba)) {
        perror("pipe");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    char c = 0;
    long done = 0;
    if (child == 0) {
        /* The echo: returns every byte until the other end closes. */
        close(ab[1]);
        close(ba[0]);
        while (read(ab[0], &c, 1) == 1)
            if (write(ba[1], &c, 1) != 1) return 1;
        return 0;
    }
    close(ab[0]);
    close(ba[1]);
    for (; done < rounds; done++)
        if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1) break;
    close(ab[1]);
    int st = 0;
    waitpid(child, &st, 0);
    printf("%ld bounces\n", done);
    return done == rounds && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
