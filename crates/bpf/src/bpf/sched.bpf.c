// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// sched.bpf.c: the scheduler flight recorder. Records every context switch and wake-up
// (with the kernel and user stack of the thread switched out or of the waker, on the
// events `stack_mode` says: by default only switches where the thread blocks and
// wake-ups by a task), the CPU
// samples of a perf event, and process and thread lifetimes (fork, exec, exit, rename),
// the syscalls that say what a wait waits for (futex, wait4, waitid, flock: their
// entry with the arguments the analysis reads, and their return value), disk requests,
// page faults and major faults, as fixed-size records (32 bytes; 40 or 48 for faults and
// names) in one BPF ring buffer. Stacks are not copied into the
// records: `bpf_get_stack` walks a stack into a per-CPU scratch buffer, the stack's
// 64-bit hash is its key in the `stacks` hash map, which keeps each distinct stack once
// with a small id numbered here, and a record carries that id; user space reads the map at
// the end. (Not `bpf_get_stackid`: its map keeps one stack per bucket of a 32-bit hash
// and fails a stack whose bucket another holds, which lost a hot stack on every event.)
// A walk costs ~2 us however deep (a kernel one) or ~1 us (a user one) here, most of what
// a record costs, so a thread that blocks, or wakes another, where it did the last time
// reuses that time's stack ids (take_stacks; `reuse_sites`), which costs a few hundred ns.
//
// Programs: `tp_btf/sched_switch`, `tp_btf/sched_waking`, `tp_btf/sched_process_fork`,
// `tp_btf/sched_process_exec`, `tp_btf/sched_process_exit`, `tp_btf/task_rename`,
// `on_sample` (a `perf_event` program user space attaches to one PERF_COUNT_SW_CPU_CLOCK
// event per CPU) or, for samples on the scheduler's tick, `on_tick`
// (`tp_btf/hrtimer_expire_entry`), `on_block_issue`/`on_block_complete`
// (`block:block_rq_*`), `on_page_fault_user`/`_kernel` (`tp_btf/page_fault_*`) and
// `on_major_fault` (a `perf_event` program on one `major-faults` software event per CPU),
// and the syscalls: the four waiting ones (entry and exit) and the detectors' (their
// entry with arguments and user stack, and, for those that take a path, a PATH record
// with it; their exit), from `enter_NAME`/`exit_NAME` and `call_NAME`/`ret_NAME` on each
// syscall's own tracepoints or, if asked, from `on_raw_sys_enter`/`on_raw_sys_exit`
// (`tp_btf/sys_enter`, `sys_exit`: x86-64, by number). Records lost because the
// ring was full are counted in `counters[COUNTER_DROPS]`, stacks neither the stack map
// nor the ring could take in `counters[COUNTER_STACK_LOST]`.
//
// It filters no process but the recorder's own (recorder_tgid; or only its draining
// thread, recorder_tid), reads no /proc and names
// nothing: user space does that. Keep
// the record layout in sync with src/schedrec/format.rs.
//
// No vmlinux.h: the few task_struct fields read are declared below with
// preserve_access_index, and libbpf relocates them against the running kernel's BTF
// (/sys/kernel/btf/vmlinux), which tp_btf programs need anyway.

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

#include <bpf/bpf_helpers.h>

// From include/uapi/linux/bpf.h (stable UAPI values).
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_MAP_TYPE_TASK_STORAGE 29
#define BPF_F_NO_PREALLOC 1
#define BPF_LOCAL_STORAGE_GET_F_CREATE 1
#define BPF_F_USER_STACK (1ULL << 8)
#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0
#define EEXIST 17
#define E2BIG 7

// The kernel's PERF_MAX_STACK_DEPTH: frames kept of one stack.
#define STACK_DEPTH 127

// Record kinds; keep in sync with src/schedrec/format.rs.
#define KIND_SWITCH 1
#define KIND_WAKING 2
#define KIND_SAMPLE 3
#define KIND_FORK 4
#define KIND_EXEC 5
#define KIND_EXIT 6
#define KIND_RENAME 7
#define KIND_SYS_ENTER 8
#define KIND_SYS_EXIT 9
#define KIND_BLOCK 10
#define KIND_MAJOR_FAULT 11
#define KIND_PAGE_FAULT 12
#define KIND_SYS_CALL 13
#define KIND_PATH 14
#define KIND_STACK 15

// The `c` of a BLOCK record: its bits.
#define BLOCK_COMPLETE 1
#define BLOCK_WRITE 2

// The syscalls recorded, as the `c` of their records; keep in sync with
// src/sched/format.rs (RecordedSyscall).
#define SYS_FUTEX 1
#define SYS_WAIT4 2
#define SYS_WAITID 3
#define SYS_FLOCK 4
// 5 to 23: the detectors' syscalls (CALL_PROBES below), in the order of
// RecordedSyscall::ALL.

#define COUNTER_DROPS 0
#define COUNTER_STACK_LOST 1
#define COUNTER_REUSED 2
#define COUNTER_N 3

// PF_KTHREAD of task_struct.flags: a kernel thread has no user stack or user registers.
#define PF_KTHREAD 0x00200000
// PF_USER_WORKER: a kernel-made thread of a process (io_uring's, vhost's), no user stack
// of its own either.
#define PF_USER_WORKER 0x00004000

// The task_struct fields read, relocated by libbpf (CO-RE). The CPU is in thread_info
// (CONFIG_THREAD_INFO_IN_TASK, as on x86-64 and arm64).
struct thread_info {
	unsigned int cpu;
	unsigned int status;  // x86-64: TS_COMPAT while a 32-bit syscall runs (read by the raw
			      // syscall programs only, which load on x86-64 only)
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	void *stack;
	void *mm;
	unsigned int flags;
	int pid;
	int tgid;
	int prio;
	int exit_state;
	char comm[16];
} __attribute__((preserve_access_index));

// A high-resolution timer: only the function it runs is read (on_tick).
struct hrtimer {
	void *function;
} __attribute__((preserve_access_index));

// The user registers saved at the kernel's entry (x86-64 names), from bpf_task_pt_regs.
struct pt_regs {
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long bp;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
	unsigned long ip;
	unsigned long sp;
} __attribute__((preserve_access_index));

// One record, 32 bytes. `a`, `b` and `c` mean what the kind says:
//   SWITCH  tid = prev, a = next tid, b = next prio, c = prev state (see state_index)
//   WAKING  tid = waker (current), a = woken tid, b = the woken task's cpu
//   SAMPLE  tid = current, a = its pid (tgid)
//   FORK    tid = parent thread, a = child tid, b = child pid
//   EXEC    tid, a = pid, b = old tid; followed by comm[16]
//   EXIT    tid, a = pid
//   RENAME  tid, a = pid; followed by the new comm[16]
//   SYS_ENTER  tid, c = which syscall (SYS_*), a = the low 32 bits of its second argument,
//              b = of its third, and the 8 bytes of kstack and ustack its first argument
//              (struct rec_sys): what the analysis reads of a futex (uaddr, op, val), a
//              wait4 (pid), a waitid (which, id) and a flock (fd, operation)
//   SYS_EXIT   tid, c = which syscall, and the return value in place of the stacks
//   BLOCK   tid = current (a completion's is whoever the interrupt came on), a = dev (as
//           block:block_rq_issue's: major << 20 | minor), b = sectors, c = BLOCK_* bits,
//           and the first sector in place of the stacks
//   MAJOR_FAULT  tid, a = pid, the stacks; followed by the faulting address (u64)
//   PAGE_FAULT   tid, a = pid, b = the error code, c = 1 for a user fault (0: kernel),
//                the stacks; followed by the faulting address and the instruction (u64s)
//   SYS_CALL     tid, a = pid, c = which syscall, the user stack; followed by its six
//                arguments (u64s; 0 past the syscall's own): a detector's syscall entry
//   PATH         tid, a = pid, b = the path's length, c = which syscall, kstack = PATH_*
//                flags; followed by the path (no NUL), padded to 8 bytes: the path
//                argument of the SYS_CALL record of the same thread and time
// Stack ids are negative when there is none (-errno of bpf_get_stackid, or -1).
struct rec {
	__u64 time_ns;  // bpf_ktime_get_ns(): CLOCK_MONOTONIC
	__u32 tid;
	__u32 a;
	__u32 b;
	__u16 cpu;
	__u8 kind;
	__u8 c;
	__s32 kstack;
	__s32 ustack;
};

// A SYS_ENTER or SYS_EXIT record: a `struct rec` whose stack ids are one 64-bit value.
struct rec_sys {
	__u64 time_ns;
	__u32 tid;
	__u32 a;
	__u32 b;
	__u16 cpu;
	__u8 kind;
	__u8 c;
	__u64 value;
};

struct rec_fault {
	struct rec head;
	__u64 address;
};

struct rec_page_fault {
	struct rec head;
	__u64 address;
	__u64 ip;
};

struct rec_call {
	struct rec head;
	__u64 args[6];
};

struct rec_comm {
	struct rec head;
	char comm[16];
};

// Wake the reader only once this many bytes wait (user space sets it before load and
// reads on a timer too): a wake-up per record would cost an interrupt per context switch.
const volatile __u64 wakeup_bytes = 1 << 20;

// Which stacks are taken (user space sets it before load; keep in sync with StackMode in
// src/sched/recorder.rs): none; kernel stacks only; kernel and user stacks only on a
// switch whose previous task blocks (not runnable, not preempted), on wake-ups by a task
// (not the idle task) and on samples; kernel and user stacks on every event.
#define STACKS_NONE 0
#define STACKS_KERNEL 1
#define STACKS_BLOCKING 2
#define STACKS_ALL 3
const volatile __u32 stack_mode = STACKS_BLOCKING;

// Frames a kernel stack keeps at most (user space sets it before load): the walk stops
// there, since bpf_get_stack's buffer bounds it.
const volatile __u32 kernel_frames = STACK_DEPTH;

// Whether a thread that blocks, or wakes another, where it did the last time reuses the
// stacks of that time instead of walking them again (user space sets it before load; see
// site_key).
const volatile bool reuse_sites = false;

// The kernel's text (`_stext` to `_etext`; user space sets it before load): the words of
// a kernel stack in it are its return addresses (see site_key). 0 and 0: no reuse.
const volatile __u64 text_start = 0;
const volatile __u64 text_end = 0;

// The recorder's own process (user space sets it before load; 0: none): its syscalls and
// faults are not recorded, and its switches and wake-ups are recorded without stacks. Its
// reading of /proc and of the ring would otherwise be recorded, each record making more
// of them, and a wake-up of its reader would walk the stacks of whichever thread raised it.
const volatile __u32 recorder_tgid = 0;

// Or only the recorder's draining thread (user space sets it before load, in place of
// recorder_tgid, when the process's other threads do the work recorded: `lab --trace`).
const volatile __u32 recorder_tid = 0;

// Whether the thread `tid` of process `tgid` is the recorder's.
static __always_inline bool is_recorder(__u32 tgid, __u32 tid)
{
	return (recorder_tgid != 0 && tgid == recorder_tgid) ||
	       (recorder_tid != 0 && tid == recorder_tid);
}

static __always_inline bool current_is_recorder(void)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	return is_recorder(pid_tgid >> 32, (__u32)pid_tgid);
}

// x86-64's kernel stacks (THREAD_SIZE without KASAN): an address within this much of a
// task's `stack` is on its stack; anything else (an interrupt's stack) is not.
#define THREAD_SIZE 16384
// Bytes of a kernel stack site_key reads at most: a site deeper than that is walked.
#define SITE_WINDOW 4096
#define SITE_USER_LEVELS 8

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);  // user space sets the real size before load
} events SEC(".maps");

// One stack: its id (what records carry), its frames, innermost first (zeros after).
// Keep in sync with the reading of `stacks` in src/sched/recorder.rs.
struct stack {
	__u32 id;
	__u32 frames;
	__u64 ips[STACK_DEPTH];
};

// The distinct stacks, keyed by their hash (see intern_stack). Not preallocated: an entry takes
// ~1 KiB whatever its depth, and most recordings use a fraction of the entries.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);  // user space sets the real size before load
	__type(key, __u64);
	__type(value, struct stack);
} stacks SEC(".maps");

// Per CPU, where a stack is walked before it is looked up: slot 0 for the tracepoint
// programs, slot 1 for the perf_event programs (on_sample, on_major_fault), which can
// interrupt them, and TICK_SLOT for on_tick, which can interrupt either (a tp_btf program
// in the timer interrupt: the kernel keeps perf_event programs from running inside any
// other program, not a tp_btf one).
#define TICK_SLOT 2

// A slot: the stack, behind the head of the STACK record that sends it in the ring when
// the map cannot take it (send_stack), so that it goes out in one copy.
struct scratch_stack {
	struct rec head;
	struct stack s;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct scratch_stack);
} scratch SEC(".maps");

// This CPU's scratch slot `slot` (see above), its stack; 0 when there is none.
static __always_inline struct stack *scratch_stack(__u32 slot)
{
	struct scratch_stack *v = bpf_map_lookup_elem(&scratch, &slot);
	return v ? &v->s : 0;
}

// Per CPU, the user stack user_site reads, and user_stack_id's walk reads: one slot for
// each of `scratch`'s.
#define USER_WINDOW 1024
struct user_window {
	__u64 words[USER_WINDOW / 8];
	// Where user_stack_id's walk is. In the map, not in bpf_loop's context on the BPF
	// stack: the verifier knows nothing of a map's contents, so it checks the walk's
	// callback once, not once for each state the walk could be in.
	__u64 fp;    // the frame record to read next
	__u64 base;  // the user address of the window's first word
	__u32 have;  // bytes of the window read (0: none)
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct user_window);
} user_window SEC(".maps");

// Per CPU, the kernel stack site_key reads (only the tracepoint programs use it).
struct window {
	__u64 words[SITE_WINDOW / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct window);
} site_window SEC(".maps");

// Set by user space when the recording stops, before it detaches the programs (a detach
// waits for an RCU grace period, ~80 ms each on a busy VM): from then on nothing is
// recorded, so the trace ends at the stop.
bool recording_stopped = false;

// The next stack id; ids taken by a CPU that lost a race to insert the same stack are
// skipped, so ids have holes.
__u32 next_stack_id = 0;

// Bumped by user space before it removes stacks from `stacks` (ring mode keeps only those
// the last seconds refer to): a site kept under another generation is not reused, since
// its stack ids may be gone; its stacks are walked and found again, or added anew.
__u32 stack_generation = 0;
// Set when the stack map had no room for a stack; the drain clears it once it has made
// room (an eviction pass or a flush). Meanwhile a new stack goes straight into the ring,
// without first trying an insert that would fail: under process churn a ring's map stays
// full and nearly every stack is new.
__u32 stack_map_full = 0;

// Whether an EXEC record wakes the drain at once, so that it reads the new image's
// mappings from /proc while the process is alive. Only while the kernel's own reports of
// mappings are not read (user space clears it once it reads them): a wake-up costs an
// exec ~25 us here (a self-IPI, in a VM), 2.6% of a loop of short processes.
__u32 wake_at_exec = 1;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_N);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &which);
	if (value)
		*value += 1;  // per-CPU: no other writer
}

static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

// Per CPU, how many of the programs here are reading user memory (a user stack walk, or
// user_site's copy): a page fault those reads raise is the recorder's, not the work's, and
// is not recorded (as perf does not record the faults of its own walks).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s32);
} walking SEC(".maps");

static __always_inline void walking_user(__s32 delta)
{
	__u32 zero = 0;
	__s32 *n = bpf_map_lookup_elem(&walking, &zero);
	if (n)
		*n += delta;
}

static __always_inline bool is_walking_user(void)
{
	__u32 zero = 0;
	__s32 *n = bpf_map_lookup_elem(&walking, &zero);
	return n && *n > 0;
}

// Innermost frames of a tp_btf program's kernel stack that are the recorder's: the program
// and bpf_trace_runN (x86-64, 6.x). perf's stacks of the same tracepoints begin at their
// caller (__schedule, try_to_wake_up, exc_page_fault), and so do these.
#define TRACE_SKIP_FRAMES 2

// Fills a record's common fields: now, this CPU, no stacks.
static __always_inline void fill_head(struct rec *r, __u8 kind, __u32 tid)
{
	r->time_ns = bpf_ktime_get_ns();
	r->tid = tid;
	r->a = 0;
	r->b = 0;
	r->cpu = (__u16)bpf_get_smp_processor_id();
	r->kind = kind;
	r->c = 0;
	r->kstack = -1;
	r->ustack = -1;
}

// A stack the map could not take, sent in the ring instead: a STACK record, its head then
// the `struct stack` (id, frames, addresses) of scratch slot `slot`, which the drain keeps
// as it keeps the map's stacks. The rare way: a full map, or the kernel's allocator of map
// entries empty for a moment in an interrupt (-ENOMEM, seen at the start of recordings).
// Returns 0, sending nothing, when the ring is full. A global function: the verifier
// checks it once, not at each of the places intern_stack is inlined (which made loading
// three times as long).
__attribute__((noinline)) int send_stack(__u32 slot)
{
	struct scratch_stack *v = bpf_map_lookup_elem(&scratch, &slot);
	if (!v || recording_stopped)
		return 0;
	fill_head(&v->head, KIND_STACK, 0);
	__u32 frames = v->s.frames;
	if (frames > STACK_DEPTH)  // for the verifier: the record is within the slot
		frames = STACK_DEPTH;
	__u32 size = sizeof(struct rec) + 2 * sizeof(__u32) + frames * sizeof(__u64);
	return bpf_ringbuf_output(&events, v, size, wakeup_flag()) == 0;
}

// The id of the stack `frames` deep walked into `s` (scratch slot `slot`'s) in `stacks`,
// adding it if new, or sent in the ring when the map cannot take it (send_stack); -1 when
// neither can (counted). `user`: a user stack (hashed apart from a kernel one with the
// same addresses).
static __always_inline __s32 intern_stack(struct stack *s, __u32 slot, __u32 frames, bool user)
{
	s->frames = frames;  // take_stacks reads the walk back
	// 64 bits: two distinct stacks of a recording share a hash with a chance of about
	// n^2 / 2^65, never in practice.
	__u64 h = user ? 0x9e3779b97f4a7c15ULL : 0xcbf29ce484222325ULL;
	for (__u32 i = 0; i < STACK_DEPTH; i++) {
		if (i >= frames)
			break;
		h = (h ^ s->ips[i]) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	struct stack *known = bpf_map_lookup_elem(&stacks, &h);
	if (known)
		return (__s32)known->id;
	s->id = __sync_fetch_and_add(&next_stack_id, 1) & 0x7fffffff;
	s->frames = frames;
	long err = -E2BIG;
	if (!stack_map_full) {
		err = bpf_map_update_elem(&stacks, &h, s, BPF_NOEXIST);
		if (err == -E2BIG)
			stack_map_full = 1;
	}
	if (err == -EEXIST) {  // another CPU added it meanwhile
		known = bpf_map_lookup_elem(&stacks, &h);
		if (known)
			return (__s32)known->id;
	}
	if (err && !send_stack(slot)) {
		count(COUNTER_STACK_LOST);
		return -1;
	}
	return (__s32)s->id;
}

// The id of the kernel stack of `ctx` (`skip`: the number of innermost frames left out) in
// `stacks` (intern_stack); -1 when there is none or the map is full. `slot`: the scratch
// slot of the calling program.
static __always_inline __s32 kernel_stack_id(void *ctx, __u64 skip, __u32 slot)
{
	struct stack *s = scratch_stack(slot);
	if (!s)
		return -1;
	__u32 size = kernel_frames * sizeof(__u64);
	if (size > sizeof(s->ips))
		size = sizeof(s->ips);
	if (size < sizeof(__u64))
		size = sizeof(__u64);
	long bytes = bpf_get_stack(ctx, s->ips, size, skip);
	if (bytes <= 0)
		return -1;
	return intern_stack(s, slot, (__u32)bytes / sizeof(__u64), false);
}

// Bytes of user stack the walk reads at once: the frame record it needs and, most often, the
// next few frames' (a read costs about the same for 16 bytes or a kilobyte).
#define WALK_WINDOW 512
// The end of user addresses on x86-64 (TASK_SIZE_MAX with 4-level page tables): the
// kernel's walk stops at a frame record not below it.
#define USER_ADDR_END 0x00007ffffffff000ULL

// The lowest address a process can map (user space sets it before load, from
// /proc/sys/vm/mmap_min_addr): a read below it always fails.
const volatile __u64 user_min_addr = 4096;

// One frame of the walk (bpf_loop's callback), as the kernel's perf_callchain_user takes
// it: the return address from the frame record at `fp` (the saved frame pointer, then the
// return address), read with the window around it if the window does not hold it; the
// walk goes on at the saved frame pointer, whatever it is, and ends where a read fails.
static long user_walk_step(__u64 i, void *data)
{
	__u32 slot = *(__u32 *)data;
	struct stack *s = scratch_stack(slot);
	struct user_window *u = bpf_map_lookup_elem(&user_window, &slot);
	if (!s || !u)
		return 1;
	__u64 fp = u->fp;
	// Where the kernel's walk would read and fail (at 0 past the outermost frame, or at
	// a small number in %rbp in code built without frame pointers), taking a page fault
	// first: stop without reading.
	if (fp < user_min_addr || fp >= USER_ADDR_END - 16)
		return 1;
	__u64 record[2];
	if (fp & 7) {  // no frame record, but the kernel's walk reads it all the same
		if (bpf_probe_read_user(record, sizeof(record), (void *)fp))
			return 1;
	} else {
		if (fp < u->base || fp + 16 > u->base + u->have) {
			u->have = 0;
			if (bpf_probe_read_user(u->words, WALK_WINDOW, (void *)fp) == 0)
				u->have = WALK_WINDOW;
			else if (bpf_probe_read_user(u->words, 16, (void *)fp) == 0)
				u->have = 16;  // readable memory ends nearer than a window
			else
				return 1;
			u->base = fp;
		}
		__u32 at = (fp - u->base) / 8;
		record[0] = u->words[at & (WALK_WINDOW / 8 - 1)];
		record[1] = u->words[(at + 1) & (WALK_WINDOW / 8 - 1)];
	}
	__u32 f = s->frames;
	if (f >= STACK_DEPTH)
		return 1;
	s->ips[f] = record[1];
	s->frames = f + 1;
	u->fp = record[0];
	return 0;
}

// The id of the current thread's user stack in `stacks` (intern_stack), walked here along
// its frame pointers from the registers at its kernel entry; -1 for a kernel thread, a
// thread whose process has let its memory go (exiting), or when the map is full, as the
// kernel's walk. `slot`: the scratch slot of the calling program.
//
// The frames are those of the kernel's walk (bpf_get_stack's BPF_F_USER_STACK,
// perf_callchain_user, as perf records them), which follows whatever %rbp holds until a read
// fails; the last read nearly always fails, at 0 past the outermost frame or at some small
// number in code built without frame pointers, and that page fault, which the kernel
// handles and gives up, cost ~1.2 us of a ~1.4 us walk on this VM (and ran the page-fault
// tracepoint's program each time). This walk stops before a read that must fail.
static __always_inline __s32 user_stack_id(__u32 slot)
{
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->flags & (PF_KTHREAD | PF_USER_WORKER) || !task->mm)
		return -1;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct stack *s = scratch_stack(slot);
	struct user_window *u = bpf_map_lookup_elem(&user_window, &slot);
	if (!regs || !s || !u)
		return -1;
	s->ips[0] = regs->ip;
	s->frames = 1;
	u->fp = regs->bp;
	u->base = 0;
	u->have = 0;
	walking_user(1);
	bpf_loop(STACK_DEPTH - 1, user_walk_step, &slot, 0);
	walking_user(-1);
	return intern_stack(s, slot, s->frames, true);
}

static __always_inline __u64 mix(__u64 h, __u64 v)
{
	h = (h ^ v) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

// Return-address slots of a kernel stack a site remembers (a deeper stack is walked).
#define SITE_FRAMES 32

// A place where a thread blocked, or woke another, and the stacks it had there.
struct site {
	__u64 key;     // see reuse: 0 when nothing is kept
	__s32 kstack;
	__s32 ustack;
	__u32 generation;  // stack_generation when kept
	__u16 npos;
	__u16 pos[SITE_FRAMES];  // where the kernel stack's return addresses were (site_key)
};

// Where a thread last called a detector's syscall (one slot per syscall id modulo
// CALL_SLOTS), and the user stack it had there.
struct call_site {
	__u64 key;  // user_site without the arguments: 0 when nothing is kept
	__s32 ustack;
	__u32 generation;
};

#define CALL_SLOTS 8

// The last two places where a thread blocked (or woke another): a worker that goes back
// and forth between two (a kworker completing requests and waking their waiters) reuses
// both. `recent`: the slot used last; the other is the one replaced.
#define SITE_SLOTS 2

struct site_pair {
	struct site slot[SITE_SLOTS];
	__u32 recent;
};

struct sites {
	struct site_pair block;
	struct site_pair wake;
	struct call_site call[CALL_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sites);
} last_sites SEC(".maps");

// The user side of a site: the syscall and its first two arguments, the user registers at
// the kernel entry (instruction, stack and frame pointers) and the first SITE_USER_LEVELS
// frame-pointer links above them (return address, and the saved frame pointer's place),
// as the user stack walk reads them, as far as they are in the USER_WINDOW bytes above the
// stack pointer, read at once (each read of user memory costs ~350 ns here, so one, not one
// a link); 0 for a kernel thread or when that memory cannot be read.
static __always_inline __u64 user_site(struct task_struct *task, __u64 salt, bool args)
{
	if (task->flags & PF_KTHREAD)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs)
		return 0;
	__u32 zero = 0;
	struct user_window *u = bpf_map_lookup_elem(&user_window, &zero);
	if (!u)
		return 0;
	__u64 sp = regs->sp;
	__u64 h = mix(salt, regs->orig_ax);
	if (args) {
		h = mix(h, regs->di);
		h = mix(h, regs->si);
	}
	h = mix(h, regs->ip);
	h = mix(h, sp);
	__u64 fp = regs->bp;
	h = mix(h, fp);
	walking_user(1);
	long err = bpf_probe_read_user(u->words, sizeof(u->words), (void *)sp);
	walking_user(-1);
	if (err)
		return 0;
	for (int i = 0; i < SITE_USER_LEVELS; i++) {
		__u64 off = fp - sp;
		if (off & 7 || off >= USER_WINDOW - 8)
			break;
		__u32 at = off / 8;
		__u64 ret = u->words[(at + 1) & (USER_WINDOW / 8 - 1)];
		h = mix(mix(h, at), ret);
		fp = u->words[at & (USER_WINDOW / 8 - 1)];
	}
	return h | 1;
}

// How many bytes of `task`'s kernel stack lie above the program's context (the tracepoint's
// arguments, on the stack of the code that hit the tracepoint); 0 when the context is not
// on the task's stack: an interrupt's.
static __always_inline __u64 task_stack_left(void *ctx, struct task_struct *task)
{
	// The context's address as a number (read back from where the pointer was put).
	void *at = ctx;
	__u64 ctx_addr = 0, base = 0;
	if (bpf_probe_read_kernel(&ctx_addr, sizeof(ctx_addr), &at) ||
	    bpf_probe_read_kernel(&base, sizeof(base), &task->stack))
		return 0;
	__u64 top = base + THREAD_SIZE;
	if (ctx_addr < base || ctx_addr >= top)
		return 0;
	return top - ctx_addr;
}

// Reads the `len` bytes of the kernel stack from the program's context up to the top of
// the task's stack (task_stack_left) into the per-CPU window; `len`, or 0 when that is
// less than a word or more than SITE_WINDOW.
static __always_inline __u32 read_window(void *ctx, __u64 len, struct window *w)
{
	if (len < 8 || len > SITE_WINDOW)
		return 0;
	if (bpf_probe_read_kernel(w->words, len, ctx))
		return 0;
	return len;
}

// The key of a site: its user side, its number of frames and the words at the
// remembered return-address slots, counted in words from the context. Not the outermost
// slot: the kernel puts a random gap below the syscall entry's frame at each syscall
// (randomize_kstack_offset), which moves it; the return address there is the entry code's
// call of the C entry function (do_syscall_64, exc_page_fault, …), which the slot inside
// it names, and each has one caller.
static __always_inline __u64 site_key(__u64 user, __u32 len, struct site *site,
				      struct window *w)
{
	__u32 words = len / 8;
	__u64 h = mix(user, site->npos);
	for (__u32 k = 0; k + 1 < SITE_FRAMES; k++) {
		if (k + 1 >= site->npos)
			break;
		__u32 p = site->pos[k];
		if (p >= words)
			return 0;
		h = mix(mix(h, p), w->words[p & (SITE_WINDOW / 8 - 1)]);
	}
	return h | 1;
}

// What learn_slot finds: where the walk's frames (scratch slot 0, `frames` of them) are
// in the window, `next` being the frame looked for.
struct learn {
	__u32 frames;
	__u32 next;
	__u32 found;
	__u32 first;
	bool whole;
	__u16 pos[SITE_FRAMES];
};

// One word of the window (bpf_loop's callback): if it is the frame looked for, or one of
// the three after it before any was found (only the innermost frames may be missing), its
// place is kept.
static long learn_slot(__u64 i, void *data)
{
	struct learn *l = data;
	__u32 zero = 0;
	struct window *w = bpf_map_lookup_elem(&site_window, &zero);
	struct stack *s = scratch_stack(0);
	if (!w || !s || l->next >= l->frames)
		return 1;
	__u64 word = w->words[i & (SITE_WINDOW / 8 - 1)];
	if (word - text_start >= text_end - text_start)
		return 0;
	for (__u32 t = 0; t < 4; t++) {
		__u32 k = l->next + t;
		if (k >= l->frames || k >= STACK_DEPTH)
			break;
		if (s->ips[k] != word)
			continue;
		if (l->found == 0)
			l->first = k;
		else if (t != 0)
			l->whole = false;  // a frame between was not found
		if (l->found >= SITE_FRAMES) {
			l->whole = false;
			return 1;
		}
		l->pos[l->found & (SITE_FRAMES - 1)] = i;
		l->found++;
		l->next = k + 1;
		return 0;
	}
	return 0;
}

// Takes the kernel and user stacks of `task`, the current task, into `r`, or reuses them
// from one of `sites`, the last two places it was at. Costs a few hundred ns where a
// kernel walk costs ~2 us whatever its depth on this kernel, and a user walk ~1 us
// (bench/record/README.md).
//
// Reused when the user side (user_site) and the window's length are as that time and the
// words at the slots where last time's kernel walk found its return addresses are too.
// Kernel: the unwinder goes from frame to frame by reading each return address at a place
// given by the one before; the same start (the same length from the context to the top)
// and the same return addresses at those places make the same walk, frame for frame.
// (The places are found as the first word, going outwards, equal to each return address
// in turn; a stale copy of a return address lying in a frame below its own place would
// be checked instead of it. Nothing here puts one there but a `_RET_IP_` kept in a local.)
// User: the stack is taken to be the same beyond the SITE_USER_LEVELS links compared; true
// of what this is for, a loop that blocks at one call site each time round, and wrong only
// for two paths through frames of exactly the same sizes that part further out than that.
static __always_inline void take_stacks(void *ctx, struct task_struct *task, struct rec *r,
					struct site_pair *sites, __u64 salt)
{
	// In an interrupt (a wake-up from a disk's completion, a timer), `task` is only the
	// thread it interrupted: the kernel stack (the interrupt's, then that thread's) is
	// walked, and that thread's user stack, which says nothing of the wake-up, not taken.
	__u64 left = task_stack_left(ctx, task);
	if (!left) {
		r->kstack = kernel_stack_id(ctx, TRACE_SKIP_FRAMES, 0);
		return;
	}
	__u32 zero = 0;
	struct window *w = bpf_map_lookup_elem(&site_window, &zero);
	// A kernel thread (a kworker, jbd2, a loop device's) has no user side: its sites are
	// told apart by their kernel stacks alone, and have no user stack.
	bool kthread = task->flags & PF_KTHREAD;
	__u64 user = kthread ? mix(salt, PF_KTHREAD) | 1 : user_site(task, salt, true);
	__u32 len = w && user && text_end > text_start ? read_window(ctx, left, w) : 0;
	for (__u32 i = 0; i < SITE_SLOTS && len; i++) {
		struct site *known = &sites->slot[i];
		if (known->key && known->generation == stack_generation &&
		    site_key(user, len, known, w) == known->key) {
			r->kstack = known->kstack;
			r->ustack = known->ustack;
			sites->recent = i;
			count(COUNTER_REUSED);
			return;
		}
	}
	__u32 replaced = (sites->recent + 1) & (SITE_SLOTS - 1);
	sites->recent = replaced;
	struct site *site = &sites->slot[replaced];
	site->key = 0;
	r->kstack = kernel_stack_id(ctx, TRACE_SKIP_FRAMES, 0);
	// Where the walk's return addresses are in the window: each frame's after the one
	// before (the walk begins at the tracepoint's caller, the program's own frames
	// skipped: TRACE_SKIP_FRAMES). A loop of its own (bpf_loop) keeps the verifier's work
	// small.
	__u32 slot = 0;
	struct stack *s = scratch_stack(slot);
	struct learn l = {.whole = len && r->kstack >= 0 && s && s->frames < STACK_DEPTH};
	if (l.whole && s) {
		l.frames = s->frames;
		bpf_loop(len / 8, learn_slot, &l, 0);
	}
	bool whole = l.whole && l.found > 0 && l.next == l.frames && l.first < 4;
	for (__u32 k = 0; k < SITE_FRAMES; k++)
		site->pos[k] = l.pos[k];
	r->ustack = kthread ? -1 : user_stack_id(0);
	if (whole && (kthread || r->ustack >= 0)) {
		site->npos = l.found;
		site->generation = stack_generation;
		site->kstack = r->kstack;
		site->ustack = r->ustack;
		site->key = site_key(user, len, site, w);
	}
}

// Reserves a record and fills its common fields; 0 (counted) when the ring is full.
static __always_inline struct rec *reserve(__u32 size, __u8 kind, __u32 tid)
{
	if (recording_stopped)
		return 0;
	struct rec *r = bpf_ringbuf_reserve(&events, size, 0);
	if (!r) {
		count(COUNTER_DROPS);
		return 0;
	}
	fill_head(r, kind, tid);
	return r;
}

// The state perf's sched_switch records, as an index: 0 runnable, 0xff preempted
// (perf: TASK_REPORT_MAX), else fls() of the reported state bits (perf records
// 1 << (index - 1)); as the kernel's __trace_sched_switch_state().
static __always_inline __u8 state_index(bool preempt, __u32 state, int exit_state)
{
	if (preempt)
		return 0xff;
	__u32 r = (state | (__u32)exit_state) & 0x7f;  // TASK_REPORT
	if ((state & 0x402) == 0x402)                  // TASK_IDLE
		r = 0x80;                              // TASK_REPORT_IDLE
	if (state == 0x1000)                           // TASK_RTLOCK_WAIT
		r = 2;                                 // TASK_UNINTERRUPTIBLE
	__u8 index = 0;
	for (int i = 8; i > 0; i--) {
		if (r & (1u << (i - 1))) {
			index = i;
			break;
		}
	}
	return index;
}

SEC("tp_btf/sched_switch")
int on_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 prev_state = (__u32)ctx[3];
	struct rec *r = reserve(sizeof(struct rec), KIND_SWITCH, prev->pid);
	if (!r)
		return 0;
	r->a = next->pid;
	r->b = next->prio;
	__u8 state = state_index(preempt, prev_state, prev->exit_state);
	r->c = state;
	bool blocks = state != 0 && state != 0xff;
	if (is_recorder(prev->tgid, prev->pid)) {
		bpf_ringbuf_submit(r, wakeup_flag());
		return 0;
	}
	if (reuse_sites && blocks && stack_mode == STACKS_BLOCKING) {
		struct sites *sites = bpf_task_storage_get(&last_sites, prev, 0,
							   BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (sites) {
			take_stacks(ctx, prev, r, &sites->block, 1);
			bpf_ringbuf_submit(r, wakeup_flag());
			return 0;
		}
	}
	if (stack_mode == STACKS_ALL || stack_mode == STACKS_KERNEL ||
	    (stack_mode == STACKS_BLOCKING && blocks))
		r->kstack = kernel_stack_id(ctx, TRACE_SKIP_FRAMES, 0);
	if (prev->pid != 0 &&
	    (stack_mode == STACKS_ALL || (stack_mode == STACKS_BLOCKING && blocks)))
		r->ustack = user_stack_id(0);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

SEC("tp_btf/sched_waking")
int on_waking(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct rec *r = reserve(sizeof(struct rec), KIND_WAKING, (__u32)pid_tgid);
	if (!r)
		return 0;
	r->a = p->pid;
	r->b = p->thread_info.cpu;
	bool task = (__u32)pid_tgid != 0;
	if (is_recorder(pid_tgid >> 32, (__u32)pid_tgid) || is_recorder(p->tgid, p->pid)) {
		// The recorder waking a thread of another process (passing a stop signal on to
		// the command's group): its kernel stack says it was a signal, not what the
		// thread waited for.
		if (!is_recorder(p->tgid, p->pid) && stack_mode != STACKS_NONE)
			r->kstack = kernel_stack_id(ctx, TRACE_SKIP_FRAMES, 0);
		bpf_ringbuf_submit(r, wakeup_flag());
		return 0;
	}
	if (reuse_sites && task && stack_mode == STACKS_BLOCKING) {
		struct task_struct *waker = bpf_get_current_task_btf();
		struct sites *sites = bpf_task_storage_get(&last_sites, waker, 0,
							   BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (sites) {
			take_stacks(ctx, waker, r, &sites->wake, 2);
			bpf_ringbuf_submit(r, wakeup_flag());
			return 0;
		}
	}
	if (stack_mode == STACKS_ALL || stack_mode == STACKS_KERNEL ||
	    (stack_mode == STACKS_BLOCKING && task))
		r->kstack = kernel_stack_id(ctx, TRACE_SKIP_FRAMES, 0);
	if (task && (stack_mode == STACKS_ALL || stack_mode == STACKS_BLOCKING))
		r->ustack = user_stack_id(0);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

// The perf_event program's context (include/uapi/linux/bpf_perf_event.h, x86-64): the
// registers, then the sample period and the event's address.
struct bpf_perf_event_data {
	struct {
		unsigned long regs[21];
	} regs;
	__u64 sample_period;
	__u64 addr;
};

// Where a sample's registers (struct bpf_perf_event_data's) keep the instruction and
// stack pointers (struct pt_regs of the uapi, x86-64).
#define REGS_IP 16
#define REGS_SP 19

// Per CPU, a kernel stack walked once and reused while it applies: kept in a generation
// (stack_generation: ring mode may remove it from the map), for an instruction and stack
// pointer (0 and 0 where the stack is always the same).
struct kstack_cache {
	__u64 ip;
	__u64 sp;
	__u32 valid;
	__u32 generation;
	__s32 id;
};

// The id of the kernel stack of `ctx` (kernel_stack_id's `skip` and `slot`) at `ip` and `sp`:
// the one in `c` if it applies, else walked and kept there. `c` 0: walked.
static __always_inline __s32 cached_kstack(struct kstack_cache *c, void *ctx, __u64 skip,
					   __u32 slot, __u64 ip, __u64 sp)
{
	if (c && c->valid && c->ip == ip && c->sp == sp && c->generation == stack_generation) {
		count(COUNTER_REUSED);
		return c->id;
	}
	__s32 id = kernel_stack_id(ctx, skip, slot);
	if (c && id >= 0) {
		c->ip = ip;
		c->sp = sp;
		c->generation = stack_generation;
		c->id = id;
		c->valid = 1;
	}
	return id;
}

// Per CPU, the kernel stack of the last sample of the idle task: the next one interrupted
// at the same instruction with the same stack pointer (the halt, nearly always) has the
// same stack, which is reused instead of walked again (a sample's walk, through the
// interrupt's frame, costs ~7 us here, and an idle CPU is sampled as often as a busy one).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kstack_cache);
} idle_kstack SEC(".maps");

// The kernel stack id of a sample: walked, or for the idle task the one cached.
static __always_inline __s32 sample_kstack(struct bpf_perf_event_data *ctx, bool idle)
{
	__u32 zero = 0;
	struct kstack_cache *c = idle ? bpf_map_lookup_elem(&idle_kstack, &zero) : 0;
	return cached_kstack(c, ctx, 0, 1, ctx->regs.regs[REGS_IP], ctx->regs.regs[REGS_SP]);
}

// The scheduler tick's timer function (tick_nohz_handler, or tick_sched_timer before 6.9),
// from /proc/kallsyms; 0 unless the samples are taken on the tick (on_tick).
const volatile __u64 tick_function = 0;
// The timer interrupt's entry code (asm_sysvec_apic_timer_interrupt, from /proc/kallsyms):
// a tick sample's kernel stack begins after its frame, where the interrupt came.
const volatile __u64 irq_entry_start = 0;
const volatile __u64 irq_entry_end = 0;

// Frames of the tick's own code looked through for the interrupt's entry (on_tick): the
// program, bpf_trace_run2, __hrtimer_run_queues, hrtimer_interrupt,
// __sysvec_apic_timer_interrupt, sysvec_apic_timer_interrupt and the entry, with room.
#define TICK_FRAMES 16

// Where the interrupt's entry is in a tick's stack (scratch's TICK_SLOT), and what is kept
// of it.
struct tick_frames {
	__u32 frames;  // walked
	__u32 entry;   // the entry's index (frames: not found)
	__u32 kept;    // frames moved down
};

// One of the innermost frames (bpf_loop's callback): stops at the interrupt's entry.
static long find_irq_entry(__u64 i, void *data)
{
	struct tick_frames *t = data;
	__u32 slot = TICK_SLOT;
	struct stack *s = scratch_stack(slot);
	if (!s || i >= t->frames || i >= STACK_DEPTH)
		return 1;
	if (s->ips[i] - irq_entry_start < irq_entry_end - irq_entry_start) {
		t->entry = i;
		return 1;
	}
	return 0;
}

// Moves one frame after the entry down to the start (bpf_loop's callback): what is left is
// the stack of the code the interrupt came in.
static long keep_interrupted_frame(__u64 i, void *data)
{
	struct tick_frames *t = data;
	__u32 slot = TICK_SLOT;
	struct stack *s = scratch_stack(slot);
	__u64 from = t->entry + 1 + i;
	if (!s || from >= t->frames || from >= STACK_DEPTH || i >= STACK_DEPTH)
		return 1;
	s->ips[i] = s->ips[from];
	t->kept = i + 1;
	return 0;
}

// The id of the kernel stack of the code the tick's interrupt came in, -1 when it came in
// user mode (no kernel frames) or its entry is not among the innermost TICK_FRAMES frames.
// (Loops of bpf_loop: the verifier checks each once.)
static __always_inline __s32 tick_kstack(void *ctx)
{
	__u32 slot = TICK_SLOT;
	struct stack *s = scratch_stack(slot);
	if (!s)
		return -1;
	long bytes = bpf_get_stack(ctx, s->ips, sizeof(s->ips), 0);
	if (bytes <= 0)
		return -1;
	struct tick_frames t = {.frames = (__u32)bytes / sizeof(__u64)};
	t.entry = t.frames;
	bpf_loop(TICK_FRAMES, find_irq_entry, &t, 0);
	if (t.entry >= t.frames)
		return -1;
	bpf_loop(STACK_DEPTH, keep_interrupted_frame, &t, 0);
	__u32 kept = t.kept < kernel_frames ? t.kept : kernel_frames;
	if (kept == 0)
		return -1;
	return intern_stack(s, slot, kept, false);
}

// A CPU sample of the current thread (on_tick's or on_sample's, `on_the_tick` says which
// `ctx` is): its kernel stack where the interrupt came (tick_kstack, sample_kstack) and its
// user stack.
static __always_inline int record_sample(void *ctx, bool on_the_tick)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct rec *r = reserve(sizeof(struct rec), KIND_SAMPLE, (__u32)pid_tgid);
	if (!r)
		return 0;
	r->a = pid_tgid >> 32;
	if (stack_mode != STACKS_NONE)
		r->kstack = on_the_tick ? tick_kstack(ctx) : sample_kstack(ctx, pid_tgid == 0);
	if ((__u32)pid_tgid != 0 && (stack_mode == STACKS_ALL || stack_mode == STACKS_BLOCKING))
		r->ustack = user_stack_id(on_the_tick ? TICK_SLOT : 1);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

// A CPU sample taken on the scheduler's tick (`tp_btf/hrtimer_expire_entry`, the tick's
// timer only), instead of on a perf event's timer of its own: the tick comes anyway to a busy
// CPU (CONFIG_HZ times a second; an idle one stops it), so the samples add no interrupts,
// which cost more than the program on a VM (bench/record/README.md). The same record as
// on_sample's: the thread the interrupt came in, its stacks.
SEC("tp_btf/hrtimer_expire_entry")
int on_tick(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	if ((__u64)timer->function != tick_function || !tick_function)
		return 0;
	return record_sample(ctx, true);
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return record_sample(ctx, false);
}

SEC("tp_btf/sched_process_fork")
int on_fork(__u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct rec *r = reserve(sizeof(struct rec), KIND_FORK, (__u32)pid_tgid);
	if (!r)
		return 0;
	(void)parent;
	r->a = child->pid;
	r->b = child->tgid;
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

SEC("tp_btf/sched_process_exec")
int on_exec(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	__u32 old_pid = (__u32)ctx[1];
	struct rec_comm *r =
		(struct rec_comm *)reserve(sizeof(struct rec_comm), KIND_EXEC, p->pid);
	if (!r)
		return 0;
	r->head.a = p->tgid;
	r->head.b = old_pid;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), p->comm);
	bpf_ringbuf_submit(r, wake_at_exec ? BPF_RB_FORCE_WAKEUP : wakeup_flag());
	return 0;
}

SEC("tp_btf/sched_process_exit")
int on_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	struct rec *r = reserve(sizeof(struct rec), KIND_EXIT, p->pid);
	if (!r)
		return 0;
	r->a = p->tgid;
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

SEC("tp_btf/task_rename")
int on_rename(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	const char *comm = (const char *)ctx[1];
	struct rec_comm *r =
		(struct rec_comm *)reserve(sizeof(struct rec_comm), KIND_RENAME, p->pid);
	if (!r)
		return 0;
	r->head.a = p->tgid;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), comm);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

// The context of a `syscalls:sys_enter_NAME` tracepoint program (its format file: the
// common fields, the syscall's number, then each argument in 8 bytes), and of
// `sys_exit_NAME` (the return value in place of the arguments).
struct sys_enter_ctx {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

struct sys_exit_ctx {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

// A SYS_ENTER record of the running thread's call of `which` (its caller leaves the
// recorder's own threads out, as `sys_exit`'s does): no stacks (the wait's stack is its
// blocking switch's, as perf records these without a call graph).
// `nargs`: the syscall's arguments; no more are read (the kernel refuses to attach a
// tracepoint program that reads past its tracepoint's record: EACCES).
static __always_inline int sys_enter(const __u64 *args, __u8 which, __u32 nargs)
{
	struct rec_sys *r = (struct rec_sys *)reserve(sizeof(struct rec), KIND_SYS_ENTER,
						      (__u32)bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->c = which;
	r->a = (__u32)args[1];
	if (nargs > 2)
		r->b = (__u32)args[2];
	r->value = args[0];
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

// Its SYS_EXIT record, with the return value.
static __always_inline int sys_exit(__s64 ret, __u8 which)
{
	struct rec_sys *r = (struct rec_sys *)reserve(sizeof(struct rec), KIND_SYS_EXIT,
						      (__u32)bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	r->c = which;
	r->value = (__u64)ret;
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

// The waiting syscalls: X(name, which, nargs, x86-64 number).
#define WAIT_SYSCALLS(X)                  \
	X(futex, SYS_FUTEX, 6, 202)        \
	X(wait4, SYS_WAIT4, 4, 61)         \
	X(waitid, SYS_WAITID, 5, 247)      \
	X(flock, SYS_FLOCK, 2, 73)

// Their programs on the syscalls' own tracepoints (the default; the raw ones below are the
// alternative).
#define SYSCALL_PROBES(name, which, nargs, nr)                          \
	SEC("tracepoint/syscalls/sys_enter_" #name)                     \
	int enter_##name(struct sys_enter_ctx *ctx)                     \
	{                                                               \
		if (current_is_recorder())                              \
			return 0;                                       \
		return sys_enter(ctx->args, which, nargs);              \
	}                                                               \
	SEC("tracepoint/syscalls/sys_exit_" #name)                      \
	int exit_##name(struct sys_exit_ctx *ctx)                       \
	{                                                               \
		if (current_is_recorder())                              \
			return 0;                                       \
		return sys_exit(ctx->ret, which);                       \
	}

WAIT_SYSCALLS(SYSCALL_PROBES)

// The user stack of a detector's syscall: walked, or, with `reuse_sites`, the one this
// thread had at its last call of it from the same place: the same registers at the
// kernel entry and the same frame-pointer links above them, as user_site compares them,
// but not the arguments (a loop's calls differ in them, not in their stack).
static __always_inline __s32 call_ustack(__u8 which)
{
	struct task_struct *task = reuse_sites ? bpf_get_current_task_btf() : 0;
	struct sites *sites =
		task ? bpf_task_storage_get(&last_sites, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE)
		     : 0;
	__u64 key = sites ? user_site(task, 3, false) : 0;
	struct call_site *last = sites ? &sites->call[which & (CALL_SLOTS - 1)] : 0;
	if (last && key && last->key == key && last->generation == stack_generation) {
		count(COUNTER_REUSED);
		return last->ustack;
	}
	__s32 id = user_stack_id(0);
	if (last && key && id >= 0) {
		last->key = key;
		last->ustack = id;
		last->generation = stack_generation;
	}
	return id;
}

// A detector's syscall (what `slowlab record` asks perf for with stacks: openat, the stat
// family, mmap, unlink, clone, kill, …): its entry with all its arguments (`nargs` of
// them; reading past them the kernel refuses) and the user stack (the call site; the
// kernel stack, the syscall entry path, is not taken), and its exit with the return
// value, without stacks. Returns the record's time, 0 when the ring was full.
static __always_inline __u64 sys_call(const __u64 *args, __u8 which, __u32 nargs)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct rec_call *r = (struct rec_call *)reserve(sizeof(struct rec_call), KIND_SYS_CALL,
							(__u32)pid_tgid);
	if (!r)
		return 0;
	r->head.a = pid_tgid >> 32;
	r->head.c = which;
#pragma unroll
	for (int i = 0; i < 6; i++)
		r->args[i] = i < nargs ? args[i] : 0;
	if ((__u32)pid_tgid != 0 && stack_mode != STACKS_NONE && stack_mode != STACKS_KERNEL)
		r->head.ustack = call_ustack(which);
	__u64 time_ns = r->head.time_ns;
	bpf_ringbuf_submit(r, wakeup_flag());
	return time_ns;
}

// The path argument of a detector's syscall: a PATH record after its SYS_CALL record, with
// the same time, so that the analysis pairs them as it pairs perf's syscall events with
// the path capture's. A path whose page is not in memory yet (a literal in a program's
// .rodata not touched before) cannot be read here, where faults are not taken: it is
// parked in `parked_paths` and read at the syscall's exit, after the kernel has faulted
// it in copying the name itself.
#define PATH_CAP 256
#define PATH_TRUNCATED 1   // longer than PATH_CAP bytes: cut
#define PATH_UNREADABLE 2  // the pointer could not be read, at entry or exit

// Whether paths are recorded (user space sets it before load: `--no-paths`).
const volatile bool capture_paths = true;

struct path_rec {
	struct rec head;
	char path[PATH_CAP + 8];  // one spare byte tells a cut path from a 256-byte one
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct path_rec);
} path_scratch SEC(".maps");

// A path not readable at entry, until the thread's exit from that syscall. LRU: a thread
// that dies inside the call cannot fill it.
struct parked_path {
	__u64 time_ns;
	__u64 user_ptr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct parked_path);
} parked_paths SEC(".maps");

// Paths parked and not yet taken back: while none is, an exit does not look (a parked
// path is rare, and a hash lookup at every exit is not free). One the LRU drops is never
// taken back, and the exits look from then on.
__u64 paths_parked = 0;

// Sends the PATH record of `pid_tgid`'s call of `which` at `time_ns`, reading the path at
// `user_ptr`; returns false, sending nothing, when it cannot be read and `park` says to
// try again at the exit.
static __always_inline bool send_path(__u64 time_ns, __u64 pid_tgid, __u8 which,
				      __u64 user_ptr, bool park)
{
	__u32 zero = 0;
	struct path_rec *p = bpf_map_lookup_elem(&path_scratch, &zero);
	if (!p)
		return true;
	walking_user(1);
	long n = bpf_probe_read_user_str(p->path, PATH_CAP + 1, (const void *)user_ptr);
	walking_user(-1);
	__u32 len = 0, flags = 0;
	if (n <= 0) {
		if (park && user_ptr != 0)
			return false;
		flags = PATH_UNREADABLE;
	} else if (n > PATH_CAP) {
		len = PATH_CAP;
		flags = PATH_TRUNCATED;
	} else {
		len = (__u32)n - 1;
	}
	// Zeros after the path, up to the record's 8-byte end.
	for (__u32 i = 0; i < 8; i++) {
		__u32 at = len + i;
		if (at < PATH_CAP + 8)
			p->path[at] = 0;
	}
	p->head.time_ns = time_ns;
	p->head.tid = (__u32)pid_tgid;
	p->head.a = pid_tgid >> 32;
	p->head.b = len;
	p->head.cpu = (__u16)bpf_get_smp_processor_id();
	p->head.kind = KIND_PATH;
	p->head.c = which;
	p->head.kstack = (__s32)flags;
	p->head.ustack = -1;
	__u32 size = sizeof(struct rec) + ((len + 7) & ~7u);
	if (size > sizeof(struct path_rec))  // for the verifier: bounds the record size
		size = sizeof(struct path_rec);
	if (!recording_stopped && bpf_ringbuf_output(&events, p, size, wakeup_flag()) != 0)
		count(COUNTER_DROPS);
	return true;
}

// At a detector's syscall entry: its PATH record, or the path parked until its exit.
static __always_inline void path_at_entry(const __u64 *args, __u8 which, int arg,
					  __u64 time_ns)
{
	if (!capture_paths || arg < 0 || arg > 5)
		return;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 user_ptr = args[arg];
	if (send_path(time_ns, pid_tgid, which, user_ptr, true))
		return;
	struct parked_path parked = { .time_ns = time_ns, .user_ptr = user_ptr };
	if (bpf_map_update_elem(&parked_paths, &pid_tgid, &parked, BPF_ANY) != 0)
		send_path(time_ns, pid_tgid, which, 0, false);
	else
		__sync_fetch_and_add(&paths_parked, 1);
}

// At its exit: the path parked at its entry, if there is one.
static __always_inline void path_at_exit(__u8 which, int arg)
{
	if (!capture_paths || arg < 0 || paths_parked == 0)
		return;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct parked_path *found = bpf_map_lookup_elem(&parked_paths, &pid_tgid);
	if (!found)
		return;
	struct parked_path parked = *found;
	if (bpf_map_delete_elem(&parked_paths, &pid_tgid) == 0)
		__sync_fetch_and_add(&paths_parked, -1);
	send_path(parked.time_ns, pid_tgid, which, parked.user_ptr, false);
}

// The detectors' syscalls: X(name, which, nargs, path, x86-64 number), `which` in the
// order of RecordedSyscall::ALL, `path` the index of the path argument (-1 for none).
#define DETECTOR_SYSCALLS(X)                    \
	X(openat, 5, 4, 1, 257)                  \
	X(open, 6, 3, 0, 2)                      \
	X(newstat, 7, 2, 0, 4)                   \
	X(newlstat, 8, 2, 0, 6)                  \
	X(newfstatat, 9, 4, 1, 262)              \
	X(statx, 10, 5, 1, 332)                  \
	X(access, 11, 2, 0, 21)                  \
	X(faccessat, 12, 3, 1, 269)              \
	X(faccessat2, 13, 4, 1, 439)             \
	X(mmap, 14, 6, -1, 9)                    \
	X(munmap, 15, 2, -1, 11)                 \
	X(unlink, 16, 1, 0, 87)                  \
	X(unlinkat, 17, 3, 1, 263)               \
	X(unshare, 18, 1, -1, 272)               \
	X(clone, 19, 5, -1, 56)                  \
	X(clone3, 20, 2, -1, 435)                \
	X(kill, 21, 2, -1, 62)                   \
	X(tgkill, 22, 3, -1, 234)                \
	X(tkill, 23, 2, -1, 200)

// A detector's call at its entry: its SYS_CALL record, then its path.
static __always_inline void detector_call(const __u64 *args, __u8 which, __u32 nargs, int path)
{
	__u64 time_ns = sys_call(args, which, nargs);
	if (time_ns)
		path_at_entry(args, which, path, time_ns);
}

// Their programs on the syscalls' own tracepoints (as SYSCALL_PROBES').
#define CALL_PROBES(name, which, nargs, path, nr)                       \
	SEC("tracepoint/syscalls/sys_enter_" #name)                     \
	int call_##name(struct sys_enter_ctx *ctx)                      \
	{                                                               \
		if (current_is_recorder())                              \
			return 0;                                       \
		detector_call(ctx->args, which, nargs, path);           \
		return 0;                                               \
	}                                                               \
	SEC("tracepoint/syscalls/sys_exit_" #name)                      \
	int ret_##name(struct sys_exit_ctx *ctx)                        \
	{                                                               \
		if (current_is_recorder())                              \
			return 0;                                       \
		path_at_exit(which, path);                              \
		return sys_exit(ctx->ret, which);                       \
	}

DETECTOR_SYSCALLS(CALL_PROBES)

// The same records from two programs on the raw `sys_enter` and `sys_exit` tracepoints
// (x86-64 only: they pick the syscalls by number; SchedOptions::raw_syscalls). They detach
// at once, where each per-syscall tracepoint's perf event waits for an RCU grace period as
// it closes (~40 ms here), one after the other, 46 of them: ~1.8 s at a recording's end.
// But they run for every syscall, through two indirect calls (retpolines on this VM),
// where the kernel runs the per-syscall programs only for their syscalls after a bitmap
// test: a syscall not recorded costs ~40 ns more, one recorded ~100 ns less (no perf
// record built first; bench/record/raw_syscalls.sh). So a recording of commands, whose
// end someone waits for, takes them; one of the machine does not (slowlab-record).
struct syscall_spec {
	__u8 which;  // the record's `c`; 0: not recorded
	__u8 nargs;  // the arguments recorded
	__s8 path;   // a detector's call: the path argument's index, -1 for none
	__u8 call;   // a detector's call (SYS_CALL, with its user stack), not a wait (SYS_ENTER)
};

#define SYSCALL_SPECS 448
#define WAIT_SPEC(name, which, nargs, nr) [nr] = { which, nargs, -1, 0 },
#define CALL_SPEC(name, which, nargs, path, nr) [nr] = { which, nargs, path, 1 },
static const struct syscall_spec syscall_specs[SYSCALL_SPECS] = {
	WAIT_SYSCALLS(WAIT_SPEC) DETECTOR_SYSCALLS(CALL_SPEC)
};

// Which of them the raw programs record (user space sets them before load).
const volatile bool raw_waits = true;
const volatile bool raw_calls = true;

// x86-64's TS_COMPAT in thread_info.status: the running syscall is a 32-bit program's,
// whose numbers are not these (the per-syscall tracepoints leave them out too).
#define TS_COMPAT 0x0002

// The spec of syscall `nr` if the raw programs record it; 0 if not, or if it is a 32-bit
// call or the recorder's own.
static __always_inline const struct syscall_spec *raw_syscall_spec(long nr)
{
	if (nr < 0 || nr >= SYSCALL_SPECS)
		return 0;
	const struct syscall_spec *spec = &syscall_specs[nr];
	if (!spec->which || !(spec->call ? raw_calls : raw_waits) || current_is_recorder())
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->thread_info.status & TS_COMPAT)
		return 0;
	return spec;
}

SEC("tp_btf/sys_enter")
int on_raw_sys_enter(__u64 *ctx)
{
	const struct syscall_spec *spec = raw_syscall_spec((long)ctx[1]);
	if (!spec)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	__u64 args[6] = { regs->di, regs->si, regs->dx, regs->r10, regs->r8, regs->r9 };
	if (spec->call)
		detector_call(args, spec->which, spec->nargs, spec->path);
	else
		sys_enter(args, spec->which, spec->nargs);
	return 0;
}

SEC("tp_btf/sys_exit")
int on_raw_sys_exit(__u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	const struct syscall_spec *spec = raw_syscall_spec((long)regs->orig_ax);
	if (!spec)
		return 0;
	if (spec->call)
		path_at_exit(spec->which, spec->path);
	return sys_exit((__s64)ctx[1], spec->which);
}

// The request fields read (CO-RE), for what `block:block_rq_issue` and `block_rq_complete`
// record of it: the device (disk_devt), the first sector, and the operation (cmd_flags).
struct gendisk {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	unsigned int cmd_flags;
	unsigned int __data_len;
	__u64 __sector;
} __attribute__((preserve_access_index));

#define REQ_OP_MASK 0xff
#define REQ_OP_WRITE 1
#define REQ_OP_DRV_IN 34  // this and later operations: passthrough, no sectors

// A disk request issued to the device (`nr_bytes` < 0) or completed by it (`nr_bytes` of
// it): what the tracepoint's perf record says (dev, sector, nr_sector; a write when its
// rwbs has a `W`, an operation of REQ_OP_WRITE), read from the request itself. No
// stacks: a completion comes in an interrupt, on no one's behalf.
// tp_btf, not the perf tracepoint: a perf tracepoint's program is skipped while any other
// such program runs on its CPU (the kernel's bpf_prog_active), so a completion whose
// interrupt came during a detector's syscall program was lost (43 of 1,694 in five runs
// of the tar workload); a tp_btf program is skipped only inside itself.
static __always_inline int block_rq(struct request *rq, __s64 nr_bytes)
{
	struct rec_sys *r =
		(struct rec_sys *)reserve(sizeof(struct rec), KIND_BLOCK,
					  (__u32)bpf_get_current_pid_tgid());
	if (!r)
		return 0;
	__u32 op = rq->cmd_flags & REQ_OP_MASK;
	bool passthrough = op >= REQ_OP_DRV_IN;
	struct gendisk *disk = rq->q->disk;
	// disk_devt(), in the kernel's dev_t (major << 20 | minor), as the tracepoint has it.
	r->a = disk ? ((__u32)disk->major << 20) | (__u32)disk->first_minor : 0;
	if (nr_bytes >= 0) {
		r->b = (__u32)(nr_bytes >> 9);
		r->value = rq->__sector;
	} else {
		r->b = passthrough ? 0 : rq->__data_len >> 9;
		r->value = passthrough ? 0 : rq->__sector;
	}
	r->c = (nr_bytes >= 0 ? BLOCK_COMPLETE : 0) | (op == REQ_OP_WRITE ? BLOCK_WRITE : 0);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

SEC("tp_btf/block_rq_issue")
int on_block_issue(__u64 *ctx)
{
	return block_rq((struct request *)ctx[0], -1);
}

// block_rq_complete(rq, error, nr_bytes).
SEC("tp_btf/block_rq_complete")
int on_block_complete(__u64 *ctx)
{
	return block_rq((struct request *)ctx[0], (__s64)(__u32)ctx[2]);
}

// A major fault (the `major-faults` software event, period 1, one per CPU, attached by
// user space): the faulting address and the stacks of the thread that faulted, as perf
// records them. Rare (each is a wait for a disk), so its stacks are always walked.
SEC("perf_event")
int on_major_fault(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (is_recorder(pid_tgid >> 32, (__u32)pid_tgid))
		return 0;
	struct rec_fault *r = (struct rec_fault *)reserve(sizeof(struct rec_fault),
							  KIND_MAJOR_FAULT, (__u32)pid_tgid);
	if (!r)
		return 0;
	r->head.a = pid_tgid >> 32;
	r->address = ctx->addr;
	if (stack_mode != STACKS_NONE)
		r->head.kstack = kernel_stack_id(ctx, 0, 1);
	if ((__u32)pid_tgid != 0 && stack_mode != STACKS_NONE && stack_mode != STACKS_KERNEL)
		r->head.ustack = user_stack_id(1);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}


// Per CPU, the kernel stack of a fault taken in user mode: always the same (the fault's
// entry and exc_page_fault), so it is walked once per CPU and generation and its id reused.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kstack_cache);
} user_fault_kstack SEC(".maps");

// The kernel stack id of this fault: walked, or for a user-mode fault the one cached.
static __always_inline __s32 fault_kstack(__u64 *ctx, __u8 user)
{
	__u32 zero = 0;
	struct kstack_cache *c = user ? bpf_map_lookup_elem(&user_fault_kstack, &zero) : 0;
	// The kernel stack from exc_page_fault out, as perf's: the program and
	// bpf_trace_run3 skipped.
	return cached_kstack(c, ctx, TRACE_SKIP_FRAMES, 0, 0, 0);
}

// A page fault (`exceptions:page_fault_user`, `_kernel`: every fault, at its start, as
// perf records them): the address, the instruction, the error code and the stacks of the
// thread that faulted (walked: a fault is not where the thread last was; but a user-mode
// fault's kernel stack is the one cached, fault_kstack).
static __always_inline int page_fault(__u64 *ctx, __u8 user)
{
	__u64 address = ctx[0];
	struct pt_regs *regs = (struct pt_regs *)ctx[1];
	__u64 error_code = ctx[2];
	if (is_walking_user())
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	if (is_recorder(pid_tgid >> 32, (__u32)pid_tgid))
		return 0;
	struct rec_page_fault *r = (struct rec_page_fault *)reserve(
		sizeof(struct rec_page_fault), KIND_PAGE_FAULT, (__u32)pid_tgid);
	if (!r)
		return 0;
	r->head.a = pid_tgid >> 32;
	r->head.b = (__u32)error_code;
	r->head.c = user;
	r->address = address;
	r->ip = regs ? regs->ip : 0;
	if (stack_mode != STACKS_NONE)
		r->head.kstack = fault_kstack(ctx, user);
	if ((__u32)pid_tgid != 0 && stack_mode != STACKS_NONE && stack_mode != STACKS_KERNEL)
		r->head.ustack = user_stack_id(0);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

SEC("tp_btf/page_fault_user")
int on_page_fault_user(__u64 *ctx)
{
	return page_fault(ctx, 1);
}

SEC("tp_btf/page_fault_kernel")
int on_page_fault_kernel(__u64 *ctx)
{
	return page_fault(ctx, 0);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
