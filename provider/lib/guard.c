// SPDX-License-Identifier: MIT
/*
 * Guarded copies.  The engine copies to and from memory the application
 * registered, and the application may take that memory away under the
 * registration (munmap, or truncating the file behind a shared mapping).
 * Hardware keeps such pages pinned; we cannot, so a copy that faults
 * returns -EFAULT and the engine completes the WQE in error.
 *
 * A SIGSEGV/SIGBUS handler, installed at the first registration, recovers
 * a fault only while the faulting thread is inside a guarded copy: at an
 * instruction of the assembly below (small copies and atomics on x86-64:
 * the handler moves the thread to its error return), or else past a
 * thread-local recovery point armed around the copy (sigsetjmp: no
 * syscall on the hot path).  Any other fault goes to the action that was
 * there before us, as if we had never been loaded: its handler is called,
 * or the default action (a core dump) happens.
 *
 * Windows: rmem.c replaces the pages behind a range of the application's
 * memory while other threads may be writing it.  It makes the range
 * read-only first, so such a write faults instead of landing in pages
 * about to be replaced; the handler makes the writer wait until the
 * window closes and returns, so the write retries on the new pages.
 * This is checked before anything else: a guarded copy that hits a
 * window waits too, it does not fail.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>

#include "guard.h"
#include "util.h"

/* The recovery point of this thread's copy in progress, else NULL.
 * initial-exec: the handler must not call __tls_get_addr (it may
 * allocate); the 8 bytes fit glibc's surplus even when we are dlopen()ed. */
static __thread sigjmp_buf *armed __attribute__((tls_model("initial-exec")));

static struct sigaction old_segv, old_bus; /* what we chain to */

/* The open window: [win_lo, win_hi), written under win_lock while
 * win_epoch is even; win_epoch odd while it is open.  Read by the
 * handler with no lock (atomics are async-signal-safe). */
static pthread_mutex_t win_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uintptr_t win_lo, win_hi;
static _Atomic uint64_t win_epoch;
/* The fault this thread retried without a window: its address and the
 * epoch then, so a genuine fault is retried once, then chained. */
static __thread uintptr_t retry_addr __attribute__((tls_model("initial-exec")));
static __thread uint64_t retry_epoch __attribute__((tls_model("initial-exec")));
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* Gives the fault to the action that was installed before ours. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
	bool fault = si->si_code > 0; /* raised by the kernel, not kill() */
	sigset_t mask;

	if (old->sa_handler == SIG_IGN && !fault)
		return;
	if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
		/* the kernel forces the default action on an ignored fault */
		struct sigaction dfl = {.sa_handler = SIG_DFL};

		sigaction(sig, &dfl, NULL);
		if (!fault)
			raise(sig); /* unblocked: SA_NODEFER */
		return; /* the instruction faults again, with SIG_DFL */
	}
	/* run it as the kernel would have: its mask, its flags */
	mask = old->sa_mask;
	if (!(old->sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	if (old->sa_flags & SA_RESETHAND) {
		struct sigaction dfl = {.sa_handler = SIG_DFL};

		sigaction(sig, &dfl, NULL);
	}
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* sigreturn restores */
	if (old->sa_flags & SA_SIGINFO)
		old->sa_sigaction(sig, si, uc);
	else
		old->sa_handler(sig);
}

/*
 * True if the fault is a write into a window (then we waited for it to
 * close), or may have been one that closed before we looked: the caller
 * returns and the instruction runs again.
 */
static bool window_retry(int sig, const siginfo_t *si)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	uint64_t e;

	if (sig != SIGSEGV || si->si_code != SEGV_ACCERR)
		return false;
	/* acquire: the window's bounds, written before it opened */
	e = atomic_load_explicit(&win_epoch, memory_order_acquire);
	if (!e)
		return false; /* never a window: nothing to wait for */
	if ((e & 1) &&
	    a >= atomic_load_explicit(&win_lo, memory_order_relaxed) &&
	    a < atomic_load_explicit(&win_hi, memory_order_relaxed)) {
		/* acquire: the new pages are mapped once the epoch moves */
		while (atomic_load_explicit(&win_epoch, memory_order_acquire) ==
		       e)
			sched_yield();
		return true;
	}
	if (retry_addr == a && retry_epoch == e)
		return false; /* retried already: a fault of the program's */
	retry_addr = a;
	retry_epoch = e;
	return true;
}

#ifdef SV_GUARD_FIXUP
/*
 * The guarded instructions: every load and store of registered memory in
 * [guard_text, guard_text_end), whose faults resume at guard_fault
 * (-EFAULT; nothing on the stack to undo).  System V: dst/p in rdi,
 * src/compare in rsi, n/value in rdx, old in rcx.  In a section pushed
 * and popped: the compiler's own output goes on where it was.
 *
 * sv_guard_copy_small: 8 bytes at a time forward while more than 8 are
 * left, then a byte at a time, so each byte is stored once and the last
 * one alone, last (sv_place's promise: x86 stores are seen in program
 * order; an 8-byte store across two cache lines is two, so the last byte
 * is never in one).
 */
int sv_guard_fadd(uint64_t *p, uint64_t value, uint64_t *old);
int sv_guard_cas(uint64_t *p, uint64_t compare, uint64_t value, uint64_t *old);
extern const char guard_text[] __attribute__((visibility("hidden")));
extern const char guard_text_end[] __attribute__((visibility("hidden")));
extern const char guard_fault[] __attribute__((visibility("hidden")));
static_assert(EFAULT == 14, "guard_fault returns -14");
#ifdef __CET__
#define ENDBR "	endbr64\n"
#else
#define ENDBR ""
#endif
#define GUARD_FN(name)              \
	"	.p2align 4\n"             \
	"	.globl " name "\n"  \
	"	.hidden " name "\n" \
	"	.type " name ", @function\n" name ":\n" ENDBR
/* clang-format off */
__asm__("	.pushsection .text\n"
	"	.globl guard_text\n"
	"	.hidden guard_text\n"
	"guard_text:\n"
	GUARD_FN("sv_guard_copy_small")
	"	cmp $8, %rdx\n"
	"	jbe 2f\n"
	"1:	mov (%rsi), %rax\n"
	"	mov %rax, (%rdi)\n"
	"	add $8, %rsi\n"
	"	add $8, %rdi\n"
	"	sub $8, %rdx\n"
	"	cmp $8, %rdx\n"
	"	ja 1b\n"
	"2:	test %rdx, %rdx\n"
	"	jz 4f\n"
	"3:	movzbl (%rsi), %eax\n"
	"	mov %al, (%rdi)\n"
	"	inc %rsi\n"
	"	inc %rdi\n"
	"	dec %rdx\n"
	"	jnz 3b\n"
	"4:	xor %eax, %eax\n"
	"	ret\n"
	"	.size sv_guard_copy_small, .-sv_guard_copy_small\n"
	GUARD_FN("sv_guard_fadd")
	"	mov %rsi, %rax\n"
	"	lock xadd %rax, (%rdi)\n"
	"	mov %rax, (%rdx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"	.size sv_guard_fadd, .-sv_guard_fadd\n"
	GUARD_FN("sv_guard_cas")
	"	mov %rsi, %rax\n"
	"	lock cmpxchg %rdx, (%rdi)\n"
	"	mov %rax, (%rcx)\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"	.size sv_guard_cas, .-sv_guard_cas\n"
	"	.globl guard_text_end\n"
	"	.hidden guard_text_end\n"
	"guard_text_end:\n"
	"	.globl guard_fault\n"
	"	.hidden guard_fault\n"
	"guard_fault:\n"
	"	mov $-14, %eax\n"
	"	ret\n"
	"	.popsection\n");
/* clang-format on */

/* A fault at a guarded instruction returns -EFAULT from its function. */
static bool fixup(siginfo_t *si, void *uc)
{
	greg_t *ip;

	if (!uc || si->si_code <= 0)
		return false;
	ip = &((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
	if ((uintptr_t)*ip < (uintptr_t)guard_text ||
	    (uintptr_t)*ip >= (uintptr_t)guard_text_end)
		return false;
	*ip = (greg_t)(uintptr_t)guard_fault;
	return true; /* sigreturn restores the mask the copy ran under */
}
#else
static bool fixup(siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	return false;
}
#endif

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *env;

	if (window_retry(sig, si) || fixup(si, uc))
		return;
	env = armed;

	if (env && si->si_code > 0) {
		armed = NULL;
		/*
		 * Leave with the mask the copy ran under (the kernel saved it
		 * in uc), not the one we were called with: whoever runs us may
		 * have blocked more than our sa_mask (TSan's wrapper blocks
		 * every signal, a program's handler chaining to ours its own
		 * sa_mask), and a thread left with SIGSEGV blocked is killed
		 * at its next fault.  A syscall on the fault path only.
		 */
		if (uc)
			pthread_sigmask(SIG_SETMASK,
					&((ucontext_t *)uc)->uc_sigmask, NULL);
		siglongjmp(*env, 1);
	}
	chain(sig, si, uc);
}

static void install(void)
{
	struct sigaction sa = {.sa_sigaction = on_fault};

	/* NODEFER: we leave by siglongjmp with no mask to restore */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
}

void sv_guard_init(void)
{
	pthread_once(&install_once, install);
}

void sv_guard_window_open(uintptr_t lo, uintptr_t hi)
{
	pthread_mutex_lock(&win_lock);
	atomic_store_explicit(&win_lo, lo, memory_order_relaxed);
	atomic_store_explicit(&win_hi, hi, memory_order_relaxed);
	/* release: the bounds before the epoch that opens them */
	atomic_fetch_add_explicit(&win_epoch, 1, memory_order_release);
}

void sv_guard_window_close(void)
{
	/* release: the new mapping is in place before waiters retry */
	atomic_fetch_add_explicit(&win_epoch, 1, memory_order_release);
	pthread_mutex_unlock(&win_lock);
}

/* Separate frame: nothing of the caller is live across the sigsetjmp. */
static __attribute__((noinline)) void copy_armed(sigjmp_buf *env, void *dst,
						 const void *src, size_t n)
{
	armed = env;
	/* the copy stays between arming and disarming */
	atomic_signal_fence(memory_order_seq_cst);
	sv_place(dst, src, n);
	atomic_signal_fence(memory_order_seq_cst);
	armed = NULL;
}

int sv_guard_copy_long(void *dst, const void *src, size_t n)
{
	sigjmp_buf env;

	/* 0: no signal mask saved, no syscall */
	if (sigsetjmp(env, 0))
		return -EFAULT; /* the handler disarmed */
	copy_armed(&env, dst, src, n);
	return 0;
}

#ifndef SV_GUARD_FIXUP
/*
 * Under TSan only: an instrumented atomic holds a lock of TSan's runtime
 * across the access, and leaving a fault there by siglongjmp leaves it
 * held, so the thread's next atomic waits for ever.  An atomic or of 0
 * that TSan does not see (inline assembly) takes the fault first, outside
 * TSan; the atomic TSan sees then runs on a word known writable.  (A
 * page taken away between the two still hangs: TSan builds only.)
 */
static inline void probe_writable(uint64_t *p)
{
#if defined(__SANITIZE_THREAD__) && defined(__x86_64__)
	__asm__ volatile("lock orq $0, %0" : "+m"(*p) : : "memory");
#else
	(void)p;
#endif
}

/* Separate frame, as copy_armed. */
static __attribute__((noinline)) uint64_t
atomic_armed(sigjmp_buf *env, uint64_t *p, uint64_t compare, uint64_t value,
	     bool fetch_add)
{
	uint64_t old = compare;

	armed = env;
	atomic_signal_fence(memory_order_seq_cst);
	probe_writable(p);
	if (fetch_add)
		old = __atomic_fetch_add(p, value, __ATOMIC_SEQ_CST);
	else
		__atomic_compare_exchange_n(p, &old, value, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	atomic_signal_fence(memory_order_seq_cst);
	armed = NULL;
	return old;
}
#endif

int sv_atomic_guarded(uint64_t *p, uint64_t compare, uint64_t value,
		      bool fetch_add, uint64_t *old)
{
#ifdef SV_GUARD_FIXUP
	return fetch_add ? sv_guard_fadd(p, value, old)
			 : sv_guard_cas(p, compare, value, old);
#else
	sigjmp_buf env;

	if (sigsetjmp(env, 0))
		return -EFAULT; /* the handler disarmed */
	*old = atomic_armed(&env, p, compare, value, fetch_add);
	return 0;
#endif
}
