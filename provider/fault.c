// SPDX-License-Identifier: MIT
/*
 * Guarded copies.  The engine copies to and from memory the application
 * registered, and the application may take that memory away under the
 * registration (munmap, or truncating the file behind a shared mapping).
 * Hardware keeps such pages pinned; we cannot, so a copy that faults
 * returns -EFAULT and the engine completes the WQE in error.
 *
 * A SIGSEGV/SIGBUS handler, installed at the first registration, recovers
 * a fault only while the faulting thread is inside sv_copy_guarded (a
 * thread-local recovery point, armed around the copy: no syscall on the
 * hot path).  Any other fault goes to the action that was there before
 * us, as if we had never been loaded: its handler is called, or the
 * default action (a core dump) happens.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "sv.h"

/* The recovery point of this thread's copy in progress, else NULL.
 * initial-exec: the handler must not call __tls_get_addr (it may
 * allocate); the 8 bytes fit glibc's surplus even when we are dlopen()ed. */
static __thread sigjmp_buf *armed __attribute__((tls_model("initial-exec")));

static struct sigaction old_segv, old_bus; /* what we chain to */
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

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *env = armed;

	if (env && si->si_code > 0) {
		armed = NULL;
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

void sv_fault_init(void)
{
	pthread_once(&install_once, install);
}

/* Separate frame: nothing of the caller is live across the sigsetjmp. */
static __attribute__((noinline)) void copy_armed(sigjmp_buf *env, void *dst,
						 const void *src, size_t n)
{
	armed = env;
	/* the copy stays between arming and disarming */
	atomic_signal_fence(memory_order_seq_cst);
	memcpy(dst, src, n);
	atomic_signal_fence(memory_order_seq_cst);
	armed = NULL;
}

int sv_copy_guarded(void *dst, const void *src, size_t n)
{
	sigjmp_buf env;

	/* 0: no signal mask saved, no syscall */
	if (sigsetjmp(env, 0))
		return -EFAULT; /* the handler disarmed */
	copy_armed(&env, dst, src, n);
	return 0;
}
