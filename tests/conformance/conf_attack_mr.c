// SPDX-License-Identifier: MIT
/*
 * Memory regions under attack (issue 8): MRs whose iova is not their
 * address, PDs deallocated while in use, registrations the kernel would
 * refuse, and memory the program takes away under a registration (munmap,
 * truncate) — which must end in error completions, never in a signal
 * inside the library, while faults of the program's own still crash it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"

#define FAR_IOVA 0x1000000000ull

static int post_send_sge(struct sv_end *e, uint64_t wr_id, uint64_t addr,
			 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sg = {addr, len, lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND},
			   *bad;

	return ibv_post_send(e->qp, &wr, &bad);
}

static int post_recv_sge(struct sv_end *e, uint64_t wr_id, uint64_t addr,
			 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sg = {addr, len, lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sg, .num_sge = 1},
			   *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_TRUE(p != MAP_FAILED);
	return p;
}

/*
 * 64 KiB of memory between two guard mappings, so that once the test
 * unmaps it no larger mapping (a ring, a thread stack) lands there: the
 * hole stays a hole.  *outer is the whole, for the final munmap.
 */
static uint8_t *map_between_guards(void **outer)
{
	uint8_t *p = map_anon(3 * 65536);

	ASSERT_OK(mprotect(p, 65536, PROT_NONE));
	ASSERT_OK(mprotect(p + 2 * 65536, 65536, PROT_NONE));
	*outer = p;
	return p + 65536;
}

/* Unmaps the guards of map_between_guards, not the hole between them:
 * once the test unmapped its buffer, another thread may have mapped
 * something there (ASan's per-thread TLS table did, and LSan faulted on
 * it at exit). */
static void unmap_guards(void *outer)
{
	ASSERT_OK(munmap(outer, 65536));
	ASSERT_OK(munmap((uint8_t *)outer + 2 * 65536, 65536));
}

/* One message each way, so both ends' rings are mapped before a test
 * changes the address space. */
static void warm_up(struct sv_pair *p)
{
	ASSERT_OK(sv_end_recv(&p->b, 100, 0, 64));
	ASSERT_OK(sv_end_recv(&p->a, 101, 0, 64));
	ASSERT_OK(sv_end_send(&p->a, 102, 0, 64, 0));
	ASSERT_OK(sv_end_send(&p->b, 103, 0, 64, 0));
	EXPECT_WC(p->a.scq, IBV_WC_SUCCESS, 102);
	EXPECT_WC(p->b.scq, IBV_WC_SUCCESS, 103);
	EXPECT_WC(p->b.rcq, IBV_WC_SUCCESS, 100);
	EXPECT_WC(p->a.rcq, IBV_WC_SUCCESS, 101);
}

/* Item 3: SGEs of an MR registered at an iova are iovas, on both sides. */
SV_TEST(mr_iova_send_recv)
{
	struct ibv_mr *ma, *mb;
	struct sv_pair p;

	sv_pair_open(&p, NULL, NULL);
	ma = ibv_reg_mr_iova(p.a.pd, p.a.buf, p.a.o.buf_len, FAR_IOVA,
			     IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(ma);
	mb = ibv_reg_mr_iova2(p.b.pd, p.b.buf, p.b.o.buf_len, FAR_IOVA * 2,
			      IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mb);
	ASSERT_EQ((uintptr_t)p.a.buf, (uintptr_t)ma->addr);

	sv_fill(p.a.buf + 1000, 3000, 31);
	ASSERT_OK(post_recv_sge(&p.b, 1, FAR_IOVA * 2 + 5000, 4000, mb->lkey));
	ASSERT_OK(post_send_sge(&p.a, 2, FAR_IOVA + 1000, 3000, ma->lkey));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(-1, sv_check(p.b.buf + 5000, 3000, 31));

	/* the real address is no iova of that MR: outside every MR */
	ASSERT_OK(post_recv_sge(&p.b, 3, FAR_IOVA * 2, 4000, mb->lkey));
	ASSERT_OK(post_send_sge(&p.a, 4, (uintptr_t)p.a.buf, 64, ma->lkey));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 4);
	NO_WC(p.b.rcq, 50);
	ASSERT_OK(ibv_dereg_mr(ma));
	ASSERT_OK(ibv_dereg_mr(mb));
	sv_pair_close(&p);
}

/* Item 3: an iova just past the MR's end fails, without a crash. */
SV_TEST(mr_iova_outside)
{
	struct ibv_mr *ma;
	struct sv_pair p;

	sv_pair_open(&p, NULL, NULL);
	ma = ibv_reg_mr_iova(p.a.pd, p.a.buf, 8192, FAR_IOVA,
			     IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(ma);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 4096));
	ASSERT_OK(post_send_sge(&p.a, 2, FAR_IOVA + 8192 - 8, 64, ma->lkey));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 2);
	NO_WC(p.b.rcq, 50);
	ASSERT_OK(ibv_dereg_mr(ma));
	sv_pair_close(&p);
}

/* Item 4: a PD in use by an MR or a QP cannot go (the kernel: EBUSY). */
SV_TEST(mr_dealloc_pd_busy)
{
	struct ibv_pd *pd2, *pd3;
	struct ibv_qp_init_attr ia;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct sv_pair p;

	sv_pair_open(&p, NULL, NULL);
	pd2 = ibv_alloc_pd(p.a.ctx);
	ASSERT_NOT_NULL(pd2);
	mr = ibv_reg_mr(pd2, p.a.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(pd2));

	/* pd2 lives on: its MR is no key for a QP of another PD */
	pd3 = ibv_alloc_pd(p.a.ctx);
	ASSERT_NOT_NULL(pd3);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 4096));
	ASSERT_OK(post_send_sge(&p.a, 2, (uintptr_t)p.a.buf, 64, mr->lkey));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 2);

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = p.a.scq;
	ia.recv_cq = p.a.rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd3, &ia);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(pd3));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(pd2));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(pd3));
	ASSERT_OK(ibv_destroy_qp(qp));
	ASSERT_OK(ibv_dealloc_pd(pd3));
	sv_pair_close(&p);
}

/* Item 5a: what the kernel cannot pin for the access asked is EFAULT. */
SV_TEST(mr_reg_unwritable)
{
	static const int writes[] = {
		IBV_ACCESS_LOCAL_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
	};
	struct ibv_mr *mr;
	struct sv_end e;
	uint8_t *ro;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	ro = map_anon(3 * 4096);
	ASSERT_OK(mprotect(ro + 4096, 4096, PROT_READ));
	ASSERT_OK(mprotect(ro + 8192, 4096, PROT_NONE));
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
		errno = 0;
		ASSERT_NULL(ibv_reg_mr(e.pd, ro + 4096, 4096, writes[i]));
		ASSERT_EQ(EFAULT, errno);
		/* one read-only page inside a writable range is enough */
		errno = 0;
		ASSERT_NULL(ibv_reg_mr(e.pd, ro + 100, 8000, writes[i]));
		ASSERT_EQ(EFAULT, errno);
	}
	/* read-only access to read-only memory is fine */
	mr = ibv_reg_mr(e.pd, ro + 4096, 4096, 0);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(ibv_dereg_mr(mr));
	mr = ibv_reg_mr(e.pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(ibv_dereg_mr(mr));
	/* memory that cannot be read at all is refused for any access */
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, ro + 8192, 4096, 0));
	ASSERT_EQ(EFAULT, errno);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, ro + 4096, 8192, 0));
	ASSERT_EQ(EFAULT, errno);
	ASSERT_OK(munmap(ro, 3 * 4096));
	sv_end_close(&e);
}

/* Minor: the kernel refuses an empty registration with EINVAL. */
SV_TEST(mr_reg_empty)
{
	struct sv_end e;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(EINVAL, errno);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, &e, 0, 0));
	ASSERT_EQ(EINVAL, errno);
	sv_end_close(&e);
}

/* A receive buffer unmapped under its MR, then a send of len bytes:
 * the receive completes with want, the send with want_send, and the
 * receiver's QP ends in state. */
static void munmap_recv_case(uint32_t len, enum ibv_wc_status want,
			     enum ibv_wc_status want_send,
			     enum ibv_qp_state state)
{
	struct ibv_mr *mr;
	struct sv_pair p;
	uint8_t *buf;
	void *outer;

	sv_pair_open(&p, NULL, NULL);
	warm_up(&p);
	buf = map_between_guards(&outer);
	mr = ibv_reg_mr(p.b.pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(post_recv_sge(&p.b, 1, (uintptr_t)buf, 65536, mr->lkey));
	ASSERT_OK(munmap(buf, 65536));
	ASSERT_OK(sv_end_send(&p.a, 2, 0, len, 0));
	EXPECT_WC(p.b.rcq, want, 1);
	EXPECT_WC(p.a.scq, want_send, 2);
	ASSERT_EQ(state, sv_end_state(&p.b));
	ASSERT_OK(ibv_dereg_mr(mr));
	unmap_guards(outer);
	sv_pair_close(&p);
}

/* Item 5b: the receive buffer unmapped under its MR.  Below the
 * single-copy size the responder copies, and faults. */
SV_TEST(mr_munmap_recv_buffer)
{
	munmap_recv_case(1000, IBV_WC_LOC_PROT_ERR, IBV_WC_REM_OP_ERR,
			 IBV_QPS_ERR);
}

/* A send placed by the sender (single copy) into a receive buffer the
 * receiver unmapped: the bytes land in the shared pages the MR still
 * holds, as an HCA's DMA lands in the pages it pinned; no fault, and
 * nothing else of the receiver's is touched. */
SV_TEST(mr_munmap_recv_buffer_placed)
{
	sv_test_needs_shm("single-copy sends");
	/* placed although the buffer is cold (req.c place_pays) */
	setenv("SOFTVERBS_SINGLE_COPY_COLD", "0", 1);
	munmap_recv_case(5000, IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_QPS_RTS);
}

/* Item 5b: the send buffer unmapped under its MR. */
SV_TEST(mr_munmap_send_buffer)
{
	struct ibv_mr *mr;
	struct sv_pair p;
	uint8_t *buf;
	void *outer;

	sv_pair_open(&p, NULL, NULL);
	buf = map_between_guards(&outer);
	mr = ibv_reg_mr(p.a.pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(sv_end_recv(&p.b, 1, 0, 65536));
	/* one message in the peer's ring first: the fault is not at the
	 * start of the queue */
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 100, 0));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 1);
	ASSERT_OK(sv_end_recv(&p.b, 3, 0, 65536));
	ASSERT_OK(munmap(buf, 65536));
	ASSERT_OK(post_send_sge(&p.a, 4, (uintptr_t)buf, 65536, mr->lkey));
	ASSERT_OK(sv_end_send(&p.a, 5, 0, 100, 0));
	EXPECT_WC(p.a.scq, IBV_WC_LOC_PROT_ERR, 4);
	EXPECT_WC(p.a.scq, IBV_WC_WR_FLUSH_ERR, 5);
	ASSERT_OK(ibv_dereg_mr(mr));
	unmap_guards(outer);
	sv_pair_close(&p);
}

/* Item 5b: the file behind a shared mapping truncated under its MR. */
SV_TEST(mr_truncate_file_buffer)
{
	struct ibv_mr *mr;
	struct sv_pair p;
	uint8_t *buf;
	int fd;

	sv_pair_open(&p, NULL, NULL);
	warm_up(&p);
	fd = memfd_create("sv-mr-test", 0);
	ASSERT_GE(fd, 0);
	ASSERT_OK(ftruncate(fd, 65536));
	buf = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_TRUE(buf != MAP_FAILED);
	memset(buf, 1, 65536);
	mr = ibv_reg_mr(p.b.pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(post_recv_sge(&p.b, 1, (uintptr_t)buf, 65536, mr->lkey));
	ASSERT_OK(ftruncate(fd, 0));
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 3000, 0));
	EXPECT_WC(p.b.rcq, IBV_WC_LOC_PROT_ERR, 1);
	EXPECT_WC(p.a.scq, IBV_WC_REM_OP_ERR, 2);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(munmap(buf, 65536));
	close(fd);
	sv_pair_close(&p);
}

/* In a child: registers memory (our fault handler is in place), then
 * dereferences NULL, which is the program's own bug. */
static void __attribute__((noreturn)) child_faults(void)
{
	struct rlimit no_core = {0, 0};
	struct sv_end e;

	setrlimit(RLIMIT_CORE, &no_core);
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	e.buf = map_anon(4096);
	if (!ibv_reg_mr(e.pd, e.buf, 4096, IBV_ACCESS_LOCAL_WRITE))
		_exit(3);
	/* near NULL, aligned, opaque to the compiler (no trap emitted) */
	*(volatile int *)((uintptr_t)(e.lid | 1) << 4) = 0;
	_exit(4);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	_exit((uintptr_t)si->si_addr < (1u << 21) ? 42 : 5);
}

/* Runs child_faults in a child, stderr to a pipe; its wait status. */
static int run_faulting_child(bool own_handler, char *err, size_t errlen)
{
	int fds[2], st;
	ssize_t n, got = 0;
	pid_t pid;

	ASSERT_OK(pipe(fds));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		if (own_handler) {
			struct sigaction sa = {.sa_sigaction = on_segv,
					       .sa_flags = SA_SIGINFO};

			sigaction(SIGSEGV, &sa, NULL);
		}
		child_faults();
	}
	close(fds[1]);
	while ((n = read(fds[0], err + got, errlen - 1 - got)) > 0)
		got += n;
	err[got] = '\0';
	close(fds[0]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	return st;
}

#ifdef __SANITIZE_THREAD__
/* True if SIGSEGV's action here is the default (not TSan's). */
static bool sv_segv_is_default(void)
{
	struct sigaction cur;

	ASSERT_OK(sigaction(SIGSEGV, NULL, &cur));
	return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
}
#endif

/* Item 5b: a fault outside our copies still reaches the action that was
 * there before: the default (death by SIGSEGV) or the program's handler. */
SV_TEST(mr_fault_handler_chains)
{
	static char err[65536];
	int st;

	st = run_faulting_child(false, err, sizeof(err));
#ifdef __SANITIZE_ADDRESS__
	/* ASan's handler was there first: it reports and exits */
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_NE(0, WEXITSTATUS(st));
	ASSERT_CONTAINS(err, "AddressSanitizer: SEGV");
#elif defined(__SANITIZE_THREAD__)
	/* TSan's handler was there first (unless handle_segv=0): it reports
	 * and exits; called from inside its own signal wrapper, as any
	 * program's chained handler would call it, it also says "nested
	 * bug" (tests/conformance/CMakeLists.txt) */
	if (sv_segv_is_default()) {
		ASSERT_TRUE(WIFSIGNALED(st));
		ASSERT_EQ(SIGSEGV, WTERMSIG(st));
	} else {
		if (!WIFEXITED(st) || !WEXITSTATUS(st))
			sv_test_fail(__FILE__, __LINE__,
				     "child status %#x:\n%s", st, err);
		ASSERT_CONTAINS(err, "ThreadSanitizer: SEGV");
	}
#else
	if (!WIFSIGNALED(st))
		sv_test_fail(__FILE__, __LINE__, "child status %#x:\n%s", st,
			     err);
	ASSERT_EQ(SIGSEGV, WTERMSIG(st));
#endif
	st = run_faulting_child(true, err, sizeof(err));
	if (!WIFEXITED(st))
		sv_test_fail(__FILE__, __LINE__, "child status %#x:\n%s", st,
			     err);
	ASSERT_EQ(42, WEXITSTATUS(st));
}

static struct sigaction prog_prev; /* ours, under the program's */

/* A program's SIGSEGV handler installed after ours that chains to it, as
 * a runtime (JVM, Go, TSan's own wrapper) does: it runs with every
 * signal blocked (its sa_mask, no SA_NODEFER). */
static void prog_chains(int sig, siginfo_t *si, void *uc)
{
	prog_prev.sa_sigaction(sig, si, uc);
}

static bool blocked(int sig)
{
	sigset_t cur;

	ASSERT_OK(pthread_sigmask(SIG_BLOCK, NULL, &cur));
	return sigismember(&cur, sig) == 1;
}

/* A fault we recover leaves the thread's signal mask as the copy found
 * it, whatever mask the handler that called ours ran under: else SIGSEGV
 * stays blocked and the next fault in that thread kills the process.
 * Guarded copies (ibv_memcpy_to_dm) and guarded atomics (a write
 * prefetch of an ODP MR) in the calling thread, three faults each. */
SV_TEST(mr_fault_recovery_keeps_signal_mask)
{
	struct ibv_alloc_dm_attr attr = {.length = 4096};
	struct sigaction sa = {.sa_sigaction = prog_chains,
			       .sa_flags = SA_SIGINFO},
			 back;
	struct ibv_sge sg;
	struct ibv_mr *mr;
	struct ibv_dm *dm;
	struct sv_end e;
	uint8_t *hole, *ro;

	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	dm = ibv_alloc_dm(e.ctx, &attr); /* our handler is in place */
	ASSERT_NOT_NULL(dm);
	ro = map_anon(4096);
	mr = ibv_reg_mr(e.pd, ro, 4096,
			IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(mprotect(ro, 4096, PROT_READ));
	hole = map_anon(3 * 4096);
	/* a page no access reaches, guards on each side: PROT_NONE, not
	 * unmapped, which another thread's mmap could take meanwhile (the
	 * TCP variant under ASan read 64 bytes there, 1 run in 40) */
	ASSERT_OK(mprotect(hole + 4096, 4096, PROT_NONE));
	sigfillset(&sa.sa_mask);
	ASSERT_OK(sigaction(SIGSEGV, &sa, &prog_prev));
	ASSERT_TRUE(prog_prev.sa_flags & SA_SIGINFO);
	ASSERT_FALSE(blocked(SIGSEGV));
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(EFAULT, ibv_memcpy_to_dm(dm, 0, hole + 4096, 64));
		ASSERT_FALSE(blocked(SIGSEGV));
		ASSERT_FALSE(blocked(SIGUSR1));
	}
	sg = (struct ibv_sge){(uintptr_t)ro, 4096, mr->lkey};
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(EFAULT,
			  ibv_advise_mr(e.pd,
					IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
					IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1));
		ASSERT_FALSE(blocked(SIGSEGV));
	}
	ASSERT_OK(ibv_memcpy_to_dm(dm, 0, hole, 64)); /* still works */
	ASSERT_OK(sigaction(SIGSEGV, &prog_prev, &back));
	ASSERT_TRUE(back.sa_sigaction == prog_chains);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_free_dm(dm));
	sv_end_close(&e);
	ASSERT_OK(munmap(hole, 3 * 4096));
	ASSERT_OK(munmap(ro, 4096));
}

/* Minor: rdma-core on a modern kernel needs no fork protection and does
 * not madvise registered memory: a child reads it. */
SV_TEST(mr_fork_child_reads_registered)
{
	struct ibv_mr *mr;
	struct sv_end e;
	uint8_t *buf;
	pid_t pid;
	int st;

	ASSERT_OK(ibv_fork_init());
	ASSERT_EQ(IBV_FORK_UNNEEDED, ibv_is_fork_initialized());
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	buf = map_anon(8192);
	sv_fill(buf, 8192, 7);
	mr = ibv_reg_mr(e.pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(sv_check(buf, 8192, 7) == -1 ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(munmap(buf, 8192));
	sv_end_close(&e);
}

static long rss_kib(void)
{
	long size, rss;
	FILE *f = fopen("/proc/self/statm", "r");

	ASSERT_NOT_NULL(f);
	ASSERT_EQ(2, fscanf(f, "%ld %ld", &size, &rss));
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Minor: a context's MR key table costs address space, not memory. */
SV_TEST(mr_key_table_rss)
{
	struct ibv_device **list;
	struct ibv_context *c;
	long base, peak = 0;

	list = ibv_get_device_list(NULL);
	ASSERT_NOT_NULL(list);
	c = ibv_open_device(list[0]);
	ASSERT_NOT_NULL(c);
	ASSERT_OK(ibv_close_device(c));
	base = rss_kib();
	for (int i = 0; i < 20; i++) {
		long r;

		c = ibv_open_device(list[0]);
		ASSERT_NOT_NULL(c);
		r = rss_kib();
		if (r > peak)
			peak = r;
		ASSERT_OK(ibv_close_device(c));
	}
	ibv_free_device_list(list);
	if (peak - base > 2048 || rss_kib() - base > 2048)
		sv_test_fail(__FILE__, __LINE__,
			     "RSS %ld KiB after one cycle, peak %ld, end %ld",
			     base, peak, rss_kib());
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Issue 24: an rkey is all a remote write needs besides the QP, so keys
 * must not be guessable.  10,000 registrations, up to 1,000 live, each
 * past that deregistering a random live one first (so slots are reused):
 * every key nonzero and lkey == rkey, none equal to a live one, each of
 * the 31 low bits set in 45-55% of the keys (a binomial's sd is 0.5%
 * here; bit 31 is clear: a set one names a memory window, verbs/mw.c),
 * and consecutive keys' differences nearly all distinct (> 9,000 of
 * 9,999).  Index << 8 | generation fails all but the first.
 */
SV_TEST(mr_keys_unguessable)
{
	enum { N = 10000, LIVE = 1000 };
	struct ibv_mr *live[LIVE];
	uint32_t *keys = calloc(N, sizeof(*keys));
	uint32_t *diff = calloc(N, sizeof(*diff));
	uint32_t ones[32] = {0}, ndiff = 1, nlive = 0, seed = 24;
	char *buf = aligned_alloc(4096, 4096);
	struct sv_end e;

	ASSERT_NOT_NULL(keys);
	ASSERT_NOT_NULL(diff);
	ASSERT_NOT_NULL(buf);
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e);
	for (int i = 0; i < N; i++) {
		struct ibv_mr *mr;

		if (nlive == LIVE) {
			uint32_t v;

			seed = seed * 1103515245u + 12345u;
			v = (seed >> 8) % LIVE;
			ASSERT_OK(ibv_dereg_mr(live[v]));
			live[v] = live[--nlive];
		}
		mr = ibv_reg_mr(e.pd, buf, 4096,
				i & 1 ? IBV_ACCESS_LOCAL_WRITE |
						IBV_ACCESS_REMOTE_WRITE
				      : IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(mr);
		ASSERT_NE(0, mr->lkey);
		ASSERT_EQ(mr->lkey, mr->rkey);
		for (uint32_t j = 0; j < nlive; j++)
			if (live[j]->lkey == mr->lkey)
				sv_test_fail(__FILE__, __LINE__,
					     "registration %d: key %#x is live",
					     i, mr->lkey);
		live[nlive++] = mr;
		keys[i] = mr->lkey;
		for (int b = 0; b < 32; b++)
			ones[b] += keys[i] >> b & 1;
		if (i)
			diff[i - 1] = keys[i] - keys[i - 1];
	}
	ASSERT_EQ(0, ones[31]);
	for (int b = 0; b < 31; b++)
		if (ones[b] < N * 45 / 100 || ones[b] > N * 55 / 100)
			sv_test_fail(__FILE__, __LINE__,
				     "key bit %d set in %u of %d keys", b,
				     ones[b], N);
	qsort(diff, N - 1, sizeof(*diff), cmp_u32);
	for (int i = 1; i < N - 1; i++)
		ndiff += diff[i] != diff[i - 1];
	if (ndiff <= 9000)
		sv_test_fail(__FILE__, __LINE__,
			     "%u distinct differences of consecutive keys in "
			     "%d: the next key follows from the last",
			     ndiff, N - 1);
	while (nlive)
		ASSERT_OK(ibv_dereg_mr(live[--nlive]));
	sv_end_close(&e);
	free(buf);
	free(diff);
	free(keys);
}
