// Issue 40 (bench/record/raw_syscalls.sh): the thread CPU time of N getpid() (not recorded)
// and of N stat() of a missing path (recorded), each in its own loop.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
static long long cpu_ns(void){ struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t); return t.tv_sec*1000000000LL+t.tv_nsec; }
int main(int argc,char**argv){ int n=atoi(argv[1]); struct stat st;
 long long a=cpu_ns(); for(int i=0;i<n;i++) syscall(SYS_getpid); long long b=cpu_ns();
 for(int i=0;i<n;i++) stat("/nonexistent/sysmix/x",&st); long long c=cpu_ns();
 printf("getpid %.1f ns  stat %.1f ns\n",(double)(b-a)/n,(double)(c-b)/n); return 0; }
