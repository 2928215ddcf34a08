// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// sched.bpf.c: the scheduler flight recorder. Records every context switch and wake-up
// (with the kernel and user stack of the thread switched out or of the waker, on the
// events `stack_mode` says: by default only switches where the thread blocks and
// wake-ups by a task), the CPU
// samples of a perf event, and process and thread lifetimes (fork, exec, exit, rename),
// as fixed-size 32-byte records in one BPF ring buffer. Stacks are not copied into the
// records: `bpf_get_stack` walks a stack into a per-CPU scratch buffer, the stack's
// 64-bit hash is its key in the `stacks` hash map, which keeps each distinct stack once
// with a small id numbered here, and a record carries that id; user space reads the map at
// the end. (Not `bpf_get_stackid`: its map keeps one stack per bucket of a 32-bit hash
// and fails a stack whose bucket another holds, which lost a hot stack on every event.)
//
// Programs: `tp_btf/sched_switch`, `tp_btf/sched_waking`, `tp_btf/sched_process_fork`,
// `tp_btf/sched_process_exec`, `tp_btf/sched_process_exit`, `tp_btf/task_rename` and
// `on_sample` (a `perf_event` program user space attaches to one PERF_COUNT_SW_CPU_CLOCK
// event per CPU). Records lost because the ring was full are counted in
// `counters[COUNTER_DROPS]`, stacks lost to a full stack map in
// `counters[COUNTER_STACK_LOST]`.
//
// It does not filter processes, read /proc, or name anything: user space does that. Keep
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
#define BPF_NOEXIST 1
#define BPF_MAP_TYPE_RINGBUF 27
#define BPF_F_USER_STACK (1ULL << 8)
#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0
#define EEXIST 17

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

#define COUNTER_DROPS 0
#define COUNTER_STACK_LOST 1
#define COUNTER_N 2

// The task_struct fields read, relocated by libbpf (CO-RE). The CPU is in thread_info
// (CONFIG_THREAD_INFO_IN_TASK, as on x86-64 and arm64).
struct thread_info {
	unsigned int cpu;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	int pid;
	int tgid;
	int prio;
	int exit_state;
	char comm[16];
} __attribute__((preserve_access_index));

// One record, 32 bytes. `a`, `b` and `c` mean what the kind says:
//   SWITCH  tid = prev, a = next tid, b = next prio, c = prev state (see state_index)
//   WAKING  tid = waker (current), a = woken tid, b = the woken task's cpu
//   SAMPLE  tid = current, a = its pid (tgid)
//   FORK    tid = parent thread, a = child tid, b = child pid
//   EXEC    tid, a = pid, b = old tid; followed by comm[16]
//   EXIT    tid, a = pid
//   RENAME  tid, a = pid; followed by the new comm[16]
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

// The distinct stacks, keyed by their hash (see stack_id).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);  // user space sets the real size before load
	__type(key, __u64);
	__type(value, struct stack);
} stacks SEC(".maps");

// Per CPU, where a stack is walked before it is looked up: slot 0 for the tracepoint
// programs, slot 1 for on_sample, which can interrupt them.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct stack);
} scratch SEC(".maps");

// The next stack id; ids taken by a CPU that lost a race to insert the same stack are
// skipped, so ids have holes.
__u32 next_stack_id = 0;

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

// The id of the stack of `ctx` (`flags`: 0 or BPF_F_USER_STACK) in `stacks`, adding it if
// new; -1 when there is none (a kernel thread's user stack) or the map is full (counted).
// `slot`: the scratch slot of the calling program.
static __always_inline __s32 stack_id(void *ctx, __u64 flags, __u32 slot)
{
	struct stack *s = bpf_map_lookup_elem(&scratch, &slot);
	if (!s)
		return -1;
	long bytes = bpf_get_stack(ctx, s->ips, sizeof(s->ips), flags);
	if (bytes <= 0)
		return -1;
	__u32 frames = (__u32)bytes / sizeof(__u64);
	// 64 bits: two distinct stacks of a recording share a hash with a chance of about
	// n^2 / 2^65, never in practice.
	__u64 h = flags ? 0x9e3779b97f4a7c15ULL : 0xcbf29ce484222325ULL;
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
	long err = bpf_map_update_elem(&stacks, &h, s, BPF_NOEXIST);
	if (err == -EEXIST) {  // another CPU added it meanwhile
		known = bpf_map_lookup_elem(&stacks, &h);
		if (known)
			return (__s32)known->id;
	}
	if (err) {
		count(COUNTER_STACK_LOST);
		return -1;
	}
	return (__s32)s->id;
}

// Reserves a record and fills its common fields; 0 (counted) when the ring is full.
static __always_inline struct rec *reserve(__u32 size, __u8 kind, __u32 tid)
{
	struct rec *r = bpf_ringbuf_reserve(&events, size, 0);
	if (!r) {
		count(COUNTER_DROPS);
		return 0;
	}
	r->time_ns = bpf_ktime_get_ns();
	r->tid = tid;
	r->a = 0;
	r->b = 0;
	r->cpu = (__u16)bpf_get_smp_processor_id();
	r->kind = kind;
	r->c = 0;
	r->kstack = -1;
	r->ustack = -1;
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
	if (stack_mode == STACKS_ALL || stack_mode == STACKS_KERNEL ||
	    (stack_mode == STACKS_BLOCKING && blocks))
		r->kstack = stack_id(ctx, 0, 0);
	if (prev->pid != 0 &&
	    (stack_mode == STACKS_ALL || (stack_mode == STACKS_BLOCKING && blocks)))
		r->ustack = stack_id(ctx, BPF_F_USER_STACK, 0);
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
	if (stack_mode == STACKS_ALL || stack_mode == STACKS_KERNEL ||
	    (stack_mode == STACKS_BLOCKING && task))
		r->kstack = stack_id(ctx, 0, 0);
	if (task && (stack_mode == STACKS_ALL || stack_mode == STACKS_BLOCKING))
		r->ustack = stack_id(ctx, BPF_F_USER_STACK, 0);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
}

SEC("perf_event")
int on_sample(void *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct rec *r = reserve(sizeof(struct rec), KIND_SAMPLE, (__u32)pid_tgid);
	if (!r)
		return 0;
	r->a = pid_tgid >> 32;
	if (stack_mode != STACKS_NONE)
		r->kstack = stack_id(ctx, 0, 1);
	if ((__u32)pid_tgid != 0 && (stack_mode == STACKS_ALL || stack_mode == STACKS_BLOCKING))
		r->ustack = stack_id(ctx, BPF_F_USER_STACK, 1);
	bpf_ringbuf_submit(r, wakeup_flag());
	return 0;
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
	bpf_ringbuf_submit(r, wakeup_flag());
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

char LICENSE[] SEC("license") = "Dual BSD/GPL";
