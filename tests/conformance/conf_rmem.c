// SPDX-License-Identifier: MIT
/*
 * Zero-copy registered memory (rmem): memory registered with remote
 * access is moved, in place, onto the context's arena memfd, which
 * /proc/self/maps shows; nothing the application sees changes (contents,
 * concurrent writes, fork's private copies, deregistration back to
 * private memory), and what cannot be moved still registers.  Also
 * ibv_rereg_mr and PD ids.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"
#include "rmem.h"

#define MIB (1u << 20)
#define REMOTE_RW                                           \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)

/* The mapping holding addr: its permissions, inode and path. */
struct mapping {
	char perm[5];
	unsigned long ino;
	char path[512];
};

static bool mapping_of(const void *addr, struct mapping *m)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];
	bool found = false;

	ASSERT_NOT_NULL(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int pos = 0;

		if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %lu %n", &lo, &hi,
			   m->perm, &m->ino, &pos) < 4)
			continue;
		if ((uintptr_t)addr < lo || (uintptr_t)addr >= hi)
			continue;
		snprintf(m->path, sizeof(m->path), "%s", line + pos);
		m->path[strcspn(m->path, "\n")] = '\0';
		found = true;
	}
	fclose(f);
	return found;
}

/* Backed by a context's arena (re-backed). */
static bool on_arena(const void *addr)
{
	struct mapping m;

	return mapping_of(addr, &m) &&
	       !strncmp(m.path, "/memfd:softverbs-arena", 22);
}

/* Private anonymous read-write memory, as malloc and mmap give it. */
static bool private_anon(const void *addr)
{
	struct mapping m;

	return mapping_of(addr, &m) && !strcmp(m.perm, "rw-p") && !m.ino &&
	       (!m.path[0] || !strcmp(m.path, "[heap]") ||
		!strncmp(m.path, "[anon:", 6));
}

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_TRUE(p != MAP_FAILED);
	return p;
}

/* SOFTVERBS_MOVE_AT_REG=1: registration moves memory onto the arena at
 * once, over either transport, as it does once a context has shared its
 * memory with a peer on this host (before that it waits by default:
 * rmem_waits_until_shared).  Before the library reads its environment,
 * which it does at its first use in this process (one test each). */
static void move_at_reg(void)
{
	ASSERT_OK(setenv("SOFTVERBS_MOVE_AT_REG", "1", 1));
}

static void open_ctx(struct sv_end *e)
{
	move_at_reg();
	memset(e, 0, sizeof(*e));
	sv_end_open_ctx(e);
}

static void close_ctx(struct sv_end *e)
{
	ASSERT_OK(ibv_dealloc_pd(e->pd));
	ASSERT_OK(ibv_close_device(e->ctx));
}

/* Registers [buf, buf+len) with access, checks it moved (or not) with
 * its contents, deregisters, checks it is private again, intact. */
static void reg_check(struct sv_end *e, uint8_t *buf, size_t len, int access,
		      bool moves)
{
	struct ibv_mr *mr;

	sv_fill(buf, len, 7);
	mr = ibv_reg_mr(e->pd, buf, len, access);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(-1, sv_check(buf, len, 7));
	ASSERT_EQ(moves, on_arena(buf));
	ASSERT_EQ(moves, on_arena(buf + len - 1));
	sv_fill(buf, len, 8); /* still our memory, writable */
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_FALSE(on_arena(buf));
	ASSERT_FALSE(on_arena(buf + len - 1));
	ASSERT_EQ(-1, sv_check(buf, len, 8));
}

/*
 * This executable's mremap comes before libc's for our library too, as
 * UCX 1.13's memory hooks (libucm) patch it into every library: armed,
 * it is their four-argument wrapper, which never passes MREMAP_FIXED's
 * new address on (here: NULL, where libucm passes whatever a register
 * held).  Disarmed, it is mremap.
 */
static atomic_bool mremap_drops_new_address;

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *new_addr = NULL;
	va_list ap;

	if (!atomic_load(&mremap_drops_new_address) && (flags & MREMAP_FIXED)) {
		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags,
			       new_addr);
}

/* A program whose mremap is not the kernel's (UCX's hooks) still gets its
 * memory moved in place and back, and a fork child its copy. */
SV_TEST(rmem_program_mremap_hook_bypassed)
{
	size_t len = 4 * MIB;
	uint8_t *buf = map_anon(len);
	struct sv_end e;
	pid_t pid;
	int st;

	open_ctx(&e);
	atomic_store(&mremap_drops_new_address, true);
	reg_check(&e, buf, len, REMOTE_RW, true);
	ASSERT_TRUE(private_anon(buf + len / 2));

	struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, len, REMOTE_RW);

	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(buf));
	sv_fill(buf, len, 9);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (!pid) {
		/* the child's pages are its own, with the parent's bytes */
		_exit(private_anon(buf) && sv_check(buf, len, 9) == -1 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ASSERT_OK(ibv_dereg_mr(mr));
	atomic_store(&mremap_drops_new_address, false);
	munmap(buf, len);
	close_ctx(&e);
}

SV_TEST(rmem_malloc_mmap_backed_rebacked)
{
	size_t len = 4 * MIB; /* above malloc's mmap threshold */
	uint8_t *buf = malloc(len);
	struct sv_end e;

	ASSERT_NOT_NULL(buf);
	memset(buf, 0, len);
	open_ctx(&e);
	reg_check(&e, buf, len, REMOTE_RW, true);
	ASSERT_TRUE(private_anon(buf + len / 2));
	free(buf);
	close_ctx(&e);
}

SV_TEST(rmem_malloc_small_heap_rebacked)
{
	uint8_t *before = malloc(64), *buf = malloc(200), *after = malloc(64);
	struct sv_end e;
	struct ibv_mr *mr;

	ASSERT_TRUE(before && buf && after);
	memset(before, 0x11, 64);
	memset(after, 0x22, 64);
	sv_fill(buf, 200, 3);
	ASSERT_TRUE(private_anon(buf));
	open_ctx(&e);
	mr = ibv_reg_mr(e.pd, buf, 200,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(buf));
	ASSERT_EQ(-1, sv_check(buf, 200, 3));
	/* the neighbours on the same pages are intact and still work */
	for (int i = 0; i < 64; i++) {
		ASSERT_EQ(0x11, before[i]);
		ASSERT_EQ(0x22, after[i]);
	}
	free(before);
	before = malloc(32);
	ASSERT_NOT_NULL(before);
	memset(before, 0x33, 32);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_TRUE(private_anon(buf));
	ASSERT_EQ(-1, sv_check(buf, 200, 3));
	ASSERT_EQ(0x33, before[31]);
	ASSERT_EQ(0x22, after[63]);
	free(before);
	free(buf);
	free(after);
	close_ctx(&e);
}

SV_TEST(rmem_mmap_anon_rebacked_pages_of_mr_only)
{
	uint8_t *p = map_anon(16 * 4096);
	struct sv_end e;
	struct ibv_mr *mr;

	open_ctx(&e);
	sv_fill(p, 16 * 4096, 5);
	/* not page aligned: the pages it touches, and only those */
	mr = ibv_reg_mr(e.pd, p + 4096 + 100, 5000, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(p + 4096));
	ASSERT_TRUE(on_arena(p + 3 * 4096 - 1));
	ASSERT_FALSE(on_arena(p + 4095));
	ASSERT_FALSE(on_arena(p + 3 * 4096));
	ASSERT_EQ(-1, sv_check(p, 16 * 4096, 5));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_TRUE(private_anon(p + 4096));
	ASSERT_EQ(-1, sv_check(p, 16 * 4096, 5));
	ASSERT_OK(munmap(p, 16 * 4096));
	close_ctx(&e);
}

/* How many of the pages of [p, p + len) this process has mapped: bit 63
 * of each page's /proc/self/pagemap entry ("present").  Unlike a count
 * of page faults, the sanitizers' shadow memory does not count. */
static size_t pages_present(const void *p, size_t len)
{
	size_t n = len / 4096, present = 0;
	uint64_t *ent = calloc(n, sizeof(*ent));
	int fd = open("/proc/self/pagemap", O_RDONLY);

	ASSERT_NOT_NULL(ent);
	ASSERT_GE(fd, 0);
	ASSERT_EQ((ssize_t)(n * sizeof(*ent)),
		  pread(fd, ent, n * sizeof(*ent),
			(off_t)((uintptr_t)p / 4096 * sizeof(*ent))));
	for (size_t i = 0; i < n; i++)
		present += ent[i] >> 63;
	close(fd);
	free(ent);
	return present;
}

/* rmem.c reback: the arena's pages are mapped at registration (as a
 * hardware provider pins them), not faulted in one by one later on the
 * data path: every page of a fresh, never touched MR is present in the
 * page table once ibv_reg_mr returns, and none was before. */
SV_TEST(rmem_rebacked_pages_populated_at_registration)
{
	size_t len = 256 * 4096;
	uint8_t *p = map_anon(len);
	struct sv_end e;
	struct ibv_mr *mr;

	open_ctx(&e);
	ASSERT_EQ(0, pages_present(p, len));
	mr = ibv_reg_mr(e.pd, p, len, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(p));
	ASSERT_EQ(len / 4096, pages_present(p, len));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(munmap(p, len));
	close_ctx(&e);
}

/* The arena offset of the page holding addr (its mapping's file offset),
 * or -1 if addr is not on an arena. */
static long long arena_off(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[1024];
	long long off = -1;

	ASSERT_NOT_NULL(f);
	while (off < 0 && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, pgoff;
		int pos = 0;

		if (sscanf(line, "%lx-%lx %*4s %lx %*x:%*x %*u %n", &lo, &hi,
			   &pgoff, &pos) < 3 ||
		    !pos)
			continue;
		if ((uintptr_t)addr < lo || (uintptr_t)addr >= hi ||
		    strncmp(line + pos, "/memfd:softverbs-arena", 22))
			continue;
		off = (long long)(pgoff + ((uintptr_t)addr & ~4095ul) - lo);
	}
	fclose(f);
	return off;
}

/* lseek as the library calls it, recorded while armed: the furthest
 * offset a call on an fd answered (how far the kernel looked). */
static atomic_bool lseek_armed;
static atomic_llong lseek_furthest;

static off_t lseek_recorded(int fd, off_t off, int whence)
{
	off_t r = (off_t)syscall(SYS_lseek, fd, off, whence);

	if (atomic_load(&lseek_armed) && r > atomic_load(&lseek_furthest))
		atomic_store(&lseek_furthest, (long long)r);
	return r;
}

off_t lseek(int fd, off_t off, int whence)
{
	return lseek_recorded(fd, off, whence);
}

off_t lseek64(int fd, off_t off, int whence)
{
	return lseek_recorded(fd, off, whence);
}

/* rmem.c copy_from_arena: MRs registered one after the other (QEMU's
 * migration: 1 MiB chunks) lie back to back on the arena, one extent of
 * data; deregistering one must not look past its own range (an
 * lseek(SEEK_HOLE) from it walked every later MR's pages: quadratic). */
SV_TEST(rmem_dereg_looks_at_its_range_only)
{
	enum { N = 4 };
	size_t len = 64 * 4096;
	struct ibv_mr *mr[N];
	uint8_t *p[N];
	struct sv_end e;
	long long o0;

	open_ctx(&e);
	for (int i = 0; i < N; i++) {
		p[i] = map_anon(len);
		sv_fill(p[i], len, (uint8_t)(i + 1));
		mr[i] = ibv_reg_mr(e.pd, p[i], len, REMOTE_RW);
		ASSERT_NOT_NULL(mr[i]);
	}
	o0 = arena_off(p[0]);
	ASSERT_GE(o0, 0);
	atomic_store(&lseek_furthest, -1);
	atomic_store(&lseek_armed, true);
	ASSERT_OK(ibv_dereg_mr(mr[0]));
	atomic_store(&lseek_armed, false);
	ASSERT_TRUE(atomic_load(&lseek_furthest) <= o0 + (long long)len);
	ASSERT_EQ(-1, sv_check(p[0], len, 1));
	for (int i = 1; i < N; i++) {
		ASSERT_OK(ibv_dereg_mr(mr[i]));
		ASSERT_EQ(-1, sv_check(p[i], len, (uint8_t)(i + 1)));
	}
	for (int i = 0; i < N; i++)
		ASSERT_OK(munmap(p[i], len));
	close_ctx(&e);
}

/* True if the system gives huge pages to memory that asks (THP). */
static bool thp_on_madvise(void)
{
	char buf[128] = "";
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n > 0 && !strstr(buf, "[never]");
}

/* rmem.c unback: a deregistered range's bytes come back into memory
 * asked for in huge pages, at the range's offset in a 2 MiB page: byte
 * for byte (a hole of zeros the arena never stored included, and the
 * pages around the MR untouched), private again, and with a fault per
 * 2 MiB rather than per page (16 MiB: 4,096 faults before). */
SV_TEST(rmem_dereg_copies_back_in_huge_pages)
{
	size_t len = 16u << 20, pg = 4096;
	uint8_t *p = map_anon(len + 4 * pg);
	uint8_t *b = p + pg + 512; /* not page aligned, not 2 MiB aligned */
	struct rusage r0, r1;
	struct sv_end e;
	struct ibv_mr *mr;
	long faults;

	uint8_t *want = malloc(len + 4 * pg);

	ASSERT_NOT_NULL(want);
	open_ctx(&e);
	sv_fill(p, len + 4 * pg, 3);
	memset(b + (4u << 20), 0, 2u << 20); /* a hole on the arena */
	memcpy(want, p, len + 4 * pg);
	mr = ibv_reg_mr(e.pd, b, len, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(b));
	ASSERT_OK(getrusage(RUSAGE_THREAD, &r0));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(getrusage(RUSAGE_THREAD, &r1));
	faults = r1.ru_minflt - r0.ru_minflt;
	ASSERT_TRUE(private_anon(b));
	ASSERT_TRUE(private_anon(b + len - 1));
	ASSERT_OK(memcmp(want, p, len + 4 * pg));
	free(want);
	printf("16 MiB deregistered with %ld faults\n", faults);
	/* 4,096 page by page; now 7 or 8 huge pages, and up to 511 small
	 * ones at each edge that is not 2 MiB aligned */
	if (thp_on_madvise())
		ASSERT_TRUE(faults < (long)(len / pg / 2));
	ASSERT_OK(munmap(p, len + 4 * pg));
	close_ctx(&e);
}

/* One RDMA op of e over [e->buf, +len) at raddr/rkey, waited for. */
static void rdma_wait(struct sv_end *e, enum ibv_wr_opcode op, size_t len,
		      uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sg = {(uintptr_t)e->buf, (uint32_t)len, e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sg,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {raddr, rkey}};
	struct ibv_send_wr *bad = NULL;

	ASSERT_OK(ibv_post_send(e->qp, &wr, &bad));
	EXPECT_WC(e->scq, IBV_WC_SUCCESS, 9);
}

/* rmem.c: registration reads no page pagemap says holds no memory
 * (4 MiB, 64 pages written: 1,928 faults before, 968 now, the populated
 * arena's), deregistration allocates no page of zeros, and every byte
 * (written, discarded, zeros, untouched) is right for the program, a
 * peer's RDMA READ and WRITE, and after deregistration. */
SV_TEST(rmem_untouched_pages_not_read)
{
	const size_t pg = 4096, len = 4 * MIB, npages = len / pg;
	struct sv_end_opts o = sv_end_opts_default();
	uint8_t *want = calloc(1, len), *base = map_anon(len + 2 * MIB);
	/* 2 MiB aligned: the second half is a huge page of its own */
	uint8_t *m = (uint8_t *)(((uintptr_t)base + 2 * MIB - 1) &
				 ~(uintptr_t)(2 * MIB - 1));
	unsigned char vec[512];
	struct rusage r0, r1;
	struct ibv_mr *mr;
	struct sv_pair p;

	ASSERT_NOT_NULL(want);
	o.buf_len = len;
	o.mr_access = REMOTE_RW;
	o.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	move_at_reg();
	sv_pair_open(&p, &o, &o);
	(void)madvise(m, len, MADV_NOHUGEPAGE); /* a fault per 4 KiB page */
	/* want made apart: reading m maps the zero page under it */
	for (size_t i = 0; i < 64; i++) {
		sv_fill(want + i * 3 * pg, pg, (uint32_t)i + 1);
		memcpy(m + i * 3 * pg, want + i * 3 * pg, pg);
	}
	memset(m + 300 * pg, 0, pg);
	ASSERT_OK(madvise(m + 3 * pg, pg, MADV_DONTNEED));
	memset(want + 3 * pg, 0, pg);
	ASSERT_OK(getrusage(RUSAGE_THREAD, &r0));
	mr = ibv_reg_mr(p.b.pd, m, len, REMOTE_RW);
	ASSERT_OK(getrusage(RUSAGE_THREAD, &r1));
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(m));
	printf("4 MiB, 64 pages written: registered with %ld faults\n",
	       r1.ru_minflt - r0.ru_minflt);
	ASSERT_TRUE(r1.ru_minflt - r0.ru_minflt < (long)(npages * 3 / 2));
	ASSERT_OK(memcmp(want, m, len));
	memset(p.a.buf, 0x5a, len);
	rdma_wait(&p.a, IBV_WR_RDMA_READ, len, (uintptr_t)m, mr->rkey);
	ASSERT_OK(memcmp(want, p.a.buf, len));
	sv_fill(p.a.buf, 8 * pg, 77);
	memcpy(want + 500 * pg, p.a.buf, 8 * pg);
	rdma_wait(&p.a, IBV_WR_RDMA_WRITE, 8 * pg, (uintptr_t)(m + 500 * pg),
		  mr->rkey);
	ASSERT_OK(memcmp(want, m, len));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_TRUE(private_anon(m));
	ASSERT_OK(mincore(m + 2 * MIB, 2 * MIB, vec));
	for (size_t i = 0; i < 512; i++)
		ASSERT_EQ(0, vec[i] & 1); /* zeros: not allocated */
	ASSERT_OK(memcmp(want, m, len));
	ASSERT_OK(munmap(base, len + 2 * MIB));
	free(want);
	sv_pair_close(&p);
}

/* Single copy (the default) shares receive buffers: memory a peer may
 * write into by a send (LOCAL_WRITE) moves too; memory nothing writes
 * does not. */
SV_TEST(rmem_local_write_rebacked_for_single_copy)
{
	uint8_t *p = map_anon(MIB);
	struct sv_end e;

	open_ctx(&e);
	reg_check(&e, p, MIB, IBV_ACCESS_LOCAL_WRITE, true);
	reg_check(&e, p, MIB, 0, false);
	ASSERT_OK(munmap(p, MIB));
	close_ctx(&e);
}

/* SOFTVERBS_SINGLE_COPY=0: only memory with remote access is shared. */
SV_TEST(rmem_local_access_not_rebacked)
{
	uint8_t *p = map_anon(MIB);
	struct sv_end e;

	setenv("SOFTVERBS_SINGLE_COPY", "0", 1); /* read at first use */
	open_ctx(&e);
	reg_check(&e, p, MIB, IBV_ACCESS_LOCAL_WRITE, false);
	reg_check(&e, p, MIB, 0, false);
	reg_check(&e, p, MIB, REMOTE_RW, true);
	ASSERT_OK(munmap(p, MIB));
	close_ctx(&e);
}

SV_TEST(rmem_shared_file_not_rebacked)
{
	char path[] = "/tmp/sv-rmem-XXXXXX";
	int fd = mkstemp(path);
	uint8_t *p, c = 0;
	struct sv_end e;

	ASSERT_GE(fd, 0);
	ASSERT_OK(unlink(path));
	ASSERT_OK(ftruncate(fd, MIB));
	p = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_TRUE(p != MAP_FAILED);
	open_ctx(&e);
	reg_check(&e, p, MIB, REMOTE_RW, false);
	/* still the file's pages */
	p[12345] = 0x5a;
	ASSERT_EQ(1, pread(fd, &c, 1, 12345));
	ASSERT_EQ(0x5a, c);
	ASSERT_OK(munmap(p, MIB));
	close(fd);
	close_ctx(&e);
}

SV_TEST(rmem_shared_anon_not_rebacked)
{
	uint8_t *p = mmap(NULL, MIB, PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct sv_end e;
	struct ibv_mr *mr;
	pid_t pid;
	int st;

	ASSERT_TRUE(p != MAP_FAILED);
	open_ctx(&e);
	reg_check(&e, p, MIB, REMOTE_RW, false);
	mr = ibv_reg_mr(e.pd, p, MIB, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	/* still shared with a child, as the application made it */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		p[77] = 0x77;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_EQ(0x77, p[77]);
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(munmap(p, MIB));
	close_ctx(&e);
}

struct hammer {
	uint64_t *ctr;
	size_t n;
	atomic_bool stop;
	uint64_t done; /* increments made, read after join */
};

static void *hammer_run(void *arg)
{
	struct hammer *h = arg;
	volatile uint64_t *c = h->ctr;
	uint64_t k = 0;

	while (!atomic_load_explicit(&h->stop, memory_order_relaxed)) {
		c[(k * 4099) % h->n]++; /* plain, racy-by-design writes */
		k++;
	}
	h->done = k;
	return NULL;
}

/* Writes by another thread while the pages are moved (both ways) wait
 * and retry on the new pages: none is lost. */
SV_TEST(rmem_writer_thread_loses_nothing)
{
	size_t len = 8 * MIB;
	struct hammer h = {.n = len / sizeof(uint64_t)};
	uint64_t sum = 0;
	struct sv_end e;
	pthread_t t;

	sv_skip_under_tsan("the writer's plain stores and rmem.c's copy of "
			   "the same pages are ordered by the guard window's "
			   "page protection, which TSan does not model");
	h.ctr = map_anon(len);
	open_ctx(&e);
	ASSERT_OK(pthread_create(&t, NULL, hammer_run, &h));
	for (int i = 0; i < 20; i++) {
		struct ibv_mr *mr = ibv_reg_mr(e.pd, h.ctr, len, REMOTE_RW);

		ASSERT_NOT_NULL(mr);
		ASSERT_TRUE(on_arena(h.ctr));
		ASSERT_OK(ibv_dereg_mr(mr));
		ASSERT_FALSE(on_arena(h.ctr));
	}
	atomic_store(&h.stop, true);
	ASSERT_OK(pthread_join(t, NULL));
	for (size_t i = 0; i < h.n; i++)
		sum += h.ctr[i];
	ASSERT_GE(h.done, 1);
	ASSERT_EQ(h.done, sum);
	ASSERT_OK(munmap(h.ctr, len));
	close_ctx(&e);
}

static void xwrite(int fd)
{
	ASSERT_EQ(1, write(fd, "x", 1));
}

static void xread(int fd)
{
	char c;

	ASSERT_EQ(1, read(fd, &c, 1));
}

static bool all_bytes(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* As with real verbs (IBV_FORK_UNNEEDED): the child's copy is private. */
SV_TEST(rmem_fork_child_gets_private_copy)
{
	size_t len = MIB;
	uint8_t *p = map_anon(len);
	int up[2], down[2], st;
	struct sv_end e;
	struct ibv_mr *mr;
	pid_t pid;

	open_ctx(&e);
	sv_fill(p, len, 9);
	mr = ibv_reg_mr(e.pd, p, len, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(p));
	ASSERT_OK(pipe(up));
	ASSERT_OK(pipe(down));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		bool ok = private_anon(p) && sv_check(p, len, 9) == -1;

		memset(p, 0xcc, len);
		xwrite(up[1]);
		xread(down[0]);
		/* the parent's writes since fork are not ours */
		_exit(ok && all_bytes(p, len, 0xcc) ? 0 : 1);
	}
	xread(up[0]);
	ASSERT_EQ(-1, sv_check(p, len, 9)); /* the child's writes: not seen */
	memset(p, 0xaa, len);
	xwrite(down[1]);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
	ASSERT_TRUE(on_arena(p)); /* the parent keeps its registration */
	ASSERT_TRUE(all_bytes(p, len, 0xaa));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_TRUE(all_bytes(p, len, 0xaa));
	ASSERT_OK(munmap(p, len));
	close_ctx(&e);
}

/* MRs inside one moved range share it; one across its edge is not moved;
 * the pages go back when the last MR on them goes. */
SV_TEST(rmem_two_mrs_same_pages)
{
	uint8_t *p = map_anon(2 * MIB);
	struct ibv_mr *a, *b, *c;
	struct sv_end e;

	open_ctx(&e);
	sv_fill(p, 2 * MIB, 4);
	a = ibv_reg_mr(e.pd, p, MIB, REMOTE_RW);
	b = ibv_reg_mr(e.pd, p + 4096, 8192, REMOTE_RW);
	c = ibv_reg_mr(e.pd, p + MIB / 2, MIB, REMOTE_RW);
	ASSERT_TRUE(a && b && c);
	ASSERT_TRUE(on_arena(p));
	ASSERT_FALSE(on_arena(p + MIB)); /* c is partly on a's pages */
	ASSERT_OK(ibv_dereg_mr(a));
	ASSERT_TRUE(on_arena(p + 4096)); /* b holds them */
	ASSERT_TRUE(on_arena(p));
	ASSERT_OK(ibv_dereg_mr(b));
	ASSERT_TRUE(private_anon(p));
	ASSERT_TRUE(private_anon(p + 4096));
	ASSERT_EQ(-1, sv_check(p, 2 * MIB, 4));
	ASSERT_OK(ibv_dereg_mr(c));
	ASSERT_OK(munmap(p, 2 * MIB));
	close_ctx(&e);
}

SV_TEST(rmem_rereg_translation)
{
	uint8_t *p = map_anon(MIB), *q = map_anon(MIB);
	struct sv_end e;
	struct ibv_mr *mr;
	uint32_t lkey, rkey;

	open_ctx(&e);
	sv_fill(p, MIB, 1);
	sv_fill(q, MIB, 2);
	mr = ibv_reg_mr(e.pd, p, MIB, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	lkey = mr->lkey;
	rkey = mr->rkey;
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, q + 8,
			       MIB - 8, 0));
	ASSERT_TRUE(mr->addr == q + 8);
	ASSERT_EQ(MIB - 8, mr->length);
	ASSERT_EQ(lkey, mr->lkey);
	ASSERT_EQ(rkey, mr->rkey);
	ASSERT_TRUE(private_anon(p));
	ASSERT_TRUE(on_arena(q));
	ASSERT_EQ(-1, sv_check(p, MIB, 1));
	ASSERT_EQ(-1, sv_check(q, MIB, 2));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_TRUE(private_anon(q));
	close_ctx(&e);
}

SV_TEST(rmem_rereg_access)
{
	uint8_t *p = map_anon(MIB);
	struct sv_end e;
	struct ibv_mr *mr;

	setenv("SOFTVERBS_SINGLE_COPY", "0", 1); /* local stays private */
	open_ctx(&e);
	sv_fill(p, MIB, 6);
	mr = ibv_reg_mr(e.pd, p, MIB, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_FALSE(on_arena(p));
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       REMOTE_RW));
	ASSERT_TRUE(on_arena(p));
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE));
	ASSERT_TRUE(private_anon(p));
	ASSERT_EQ(-1, sv_check(p, MIB, 6));
	ASSERT_OK(ibv_dereg_mr(mr));
	close_ctx(&e);
}

SV_TEST(rmem_rereg_pd)
{
	uint8_t *p = map_anon(MIB);
	struct ibv_pd *pd2;
	struct sv_end e;
	struct ibv_mr *mr;

	open_ctx(&e);
	pd2 = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(pd2);
	mr = ibv_reg_mr(e.pd, p, MIB, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0));
	ASSERT_TRUE(mr->pd == pd2);
	ASSERT_TRUE(on_arena(p));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(pd2));
	/* all three at once, back to the first PD */
	ASSERT_OK(ibv_rereg_mr(mr,
			       IBV_REREG_MR_CHANGE_PD |
				       IBV_REREG_MR_CHANGE_ACCESS |
				       IBV_REREG_MR_CHANGE_TRANSLATION,
			       e.pd, p + 4096, 4096, IBV_ACCESS_LOCAL_WRITE));
	ASSERT_TRUE(mr->pd == e.pd);
	ASSERT_TRUE(private_anon(p));
	ASSERT_OK(ibv_dealloc_pd(pd2));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(e.pd));
	ASSERT_OK(ibv_dereg_mr(mr));
	close_ctx(&e);
}

static void expect_rereg(int code, int err, struct ibv_mr *mr, int flags,
			 struct ibv_pd *pd, void *addr, size_t len, int access)
{
	errno = 0;
	ASSERT_EQ(code, ibv_rereg_mr(mr, flags, pd, addr, len, access));
	ASSERT_EQ(err, errno);
}

/* Refusals leave the MR as it was. */
SV_TEST(rmem_rereg_errors)
{
	uint8_t *p = map_anon(MIB), *none = map_anon(4096);
	struct ibv_context *other;
	struct ibv_pd *opd;
	struct sv_end e;
	struct ibv_mr *mr;

	open_ctx(&e);
	ASSERT_OK(mprotect(none, 4096, PROT_NONE));
	other = ibv_open_device(e.ctx->device);
	ASSERT_NOT_NULL(other);
	opd = ibv_alloc_pd(other);
	ASSERT_NOT_NULL(opd);
	mr = ibv_reg_mr(e.pd, p, MIB, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr, 0, NULL, NULL, 0, 0);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr,
		     IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL, NULL, 0, 0);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr, IBV_REREG_MR_CHANGE_PD,
		     NULL, NULL, 0, 0);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr, IBV_REREG_MR_CHANGE_PD,
		     opd, NULL, 0, 0);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr,
		     IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, MIB, 0);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr,
		     IBV_REREG_MR_CHANGE_TRANSLATION, NULL, p, 0, 0);
	expect_rereg(IBV_REREG_MR_ERR_INPUT, EINVAL, mr, IBV_REREG_MR_CHANGE_PD,
		     e.pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE);
	/* what registration refuses */
	expect_rereg(IBV_REREG_MR_ERR_CMD, EINVAL, mr,
		     IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		     IBV_ACCESS_REMOTE_WRITE);
	expect_rereg(IBV_REREG_MR_ERR_CMD, EFAULT, mr,
		     IBV_REREG_MR_CHANGE_TRANSLATION, NULL, none, 4096, 0);
	ASSERT_TRUE(mr->addr == p);
	ASSERT_TRUE(on_arena(p));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_TRUE(private_anon(p));
	ASSERT_OK(ibv_dealloc_pd(opd));
	ASSERT_OK(ibv_close_device(other));
	close_ctx(&e);
}

/* PDs have distinct non-zero ids (their handle); a PD with an MR on it,
 * moved or not, is busy. */
SV_TEST(rmem_pd_ids_and_busy)
{
	uint8_t *p = map_anon(MIB);
	struct ibv_pd *pd2;
	struct sv_end e;
	struct ibv_mr *mr;

	open_ctx(&e);
	pd2 = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(pd2);
	ASSERT_NE(0, e.pd->handle);
	ASSERT_NE(0, pd2->handle);
	ASSERT_NE(e.pd->handle, pd2->handle);
	mr = ibv_reg_mr(pd2, p, MIB, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(p));
	ASSERT_EQ(EBUSY, ibv_dealloc_pd(pd2));
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_OK(ibv_dealloc_pd(pd2));
	close_ctx(&e);
}

/* Closing the device with MRs still registered gives the memory back.
 * In a child that leaves by _exit: the PD and MR are leaked on purpose. */
SV_TEST(rmem_close_device_restores)
{
	uint8_t *p = map_anon(MIB);
	struct sv_end e;
	pid_t pid;
	int st;

	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		open_ctx(&e);
		sv_fill(p, MIB, 12);
		ASSERT_NOT_NULL(ibv_reg_mr(e.pd, p, MIB, REMOTE_RW));
		ASSERT_TRUE(on_arena(p));
		ASSERT_OK(ibv_close_device(e.ctx));
		ASSERT_TRUE(private_anon(p));
		ASSERT_EQ(-1, sv_check(p, MIB, 12));
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
}

/* The two-sided path works on moved memory (both ends' MRs given remote
 * access by rereg). */
SV_TEST(rmem_send_recv_on_rebacked)
{
	struct sv_end_opts o = sv_end_opts_default();
	struct sv_pair p;

	o.buf_len = 256 * 1024;
	move_at_reg();
	sv_pair_open(&p, &o, &o);
	ASSERT_OK(ibv_rereg_mr(p.a.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
			       0, REMOTE_RW));
	ASSERT_OK(ibv_rereg_mr(p.b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
			       0, REMOTE_RW));
	ASSERT_TRUE(on_arena(p.a.buf));
	ASSERT_TRUE(on_arena(p.b.buf));
	sv_fill(p.a.buf, 100000, 21);
	memset(p.b.buf, 0, o.buf_len);
	ASSERT_OK(sv_end_recv(&p.b, 1, 4096, 100000));
	ASSERT_OK(sv_end_send(&p.a, 2, 0, 100000, 0));
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 2);
	EXPECT_WC(p.b.rcq, IBV_WC_SUCCESS, 1);
	ASSERT_EQ(-1, sv_check(p.b.buf + 4096, 100000, 21));
	sv_pair_close(&p);
}

static void *malloc_churn(void *arg)
{
	atomic_bool *stop = arg;

	while (!atomic_load_explicit(stop, memory_order_relaxed)) {
		void *x = malloc(48), *y = malloc(200);

		memset(x, 1, 48);
		memset(y, 2, 200);
		free(x);
		free(y);
	}
	return NULL;
}

/* fork while another thread mallocs on the pages of a small MR: fork
 * takes malloc's locks after our prepare handler, so nothing of ours may
 * make a malloc-lock holder wait across it. */
SV_TEST(rmem_fork_while_malloc_on_mr_pages)
{
	uint8_t *buf = malloc(100);
	atomic_bool stop = false;
	struct sv_end e;
	struct ibv_mr *mr;
	pthread_t t;

	ASSERT_NOT_NULL(buf);
	memset(buf, 0x42, 100);
	open_ctx(&e);
	mr = ibv_reg_mr(e.pd, buf, 100, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_TRUE(on_arena(buf));
	ASSERT_OK(pthread_create(&t, NULL, malloc_churn, &stop));
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		int st;

		ASSERT_GE(pid, 0);
		if (!pid)
			_exit(all_bytes(buf, 100, 0x42) && private_anon(buf)
				      ? 0
				      : 1);
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		ASSERT_TRUE(WIFEXITED(st));
		ASSERT_EQ(0, WEXITSTATUS(st));
	}
	atomic_store(&stop, true);
	ASSERT_OK(pthread_join(t, NULL));
	ASSERT_OK(ibv_dereg_mr(mr));
	free(buf);
	close_ctx(&e);
}

/* The fd of ours whose link is "/memfd:<name> (deleted)", or -1. */
static int memfd_named(const char *name)
{
	char want[64], link[128], path[64];

	snprintf(want, sizeof(want), "/memfd:%s (deleted)", name);
	for (int fd = 0; fd < 1024; fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (!strcmp(link, want))
			return fd;
	}
	return -1;
}

/* What a peer sees: the key table names the MR (key, iova, length, PD,
 * access) and where its bytes are in the arena; deregistration clears
 * the entry first.  Read through the fds, as a peer maps them. */
SV_TEST(rmem_key_table_describes_mr)
{
	uint8_t *p = map_anon(MIB), got[256];
	struct sv_rkey_entry en;
	struct sv_rkey_hdr h;
	int tfd, afd, seals;
	struct sv_end e;
	struct ibv_mr *mr;
	uint64_t arena_off;
	off_t at;

	open_ctx(&e);
	sv_fill(p, MIB, 31);
	mr = ibv_reg_mr_iova(e.pd, p + 1000, 5000, 0x7000, REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	tfd = memfd_named("softverbs-keys");
	afd = memfd_named("softverbs-arena");
	ASSERT_GE(tfd, 0);
	ASSERT_GE(afd, 0);
	seals = fcntl(afd, F_GET_SEALS);
	ASSERT_TRUE(seals & F_SEAL_SHRINK);
	ASSERT_TRUE(fcntl(tfd, F_GET_SEALS) & F_SEAL_SHRINK);
	ASSERT_EQ(sizeof(h), pread(tfd, &h, sizeof(h), 0));
	ASSERT_EQ(SV_RKEY_MAGIC, h.magic);
	ASSERT_EQ(SV_RKEY_VERSION, h.version);
	ASSERT_EQ(sizeof(en), h.entry_size);
	at = (off_t)(h.entries_off +
		     (mr->rkey & (h.nentries - 1)) * sizeof(en));
	ASSERT_EQ(sizeof(en), pread(tfd, &en, sizeof(en), at));
	ASSERT_EQ(0, en.gen & 1);
	ASSERT_EQ(mr->rkey, en.key);
	ASSERT_EQ(0x7000, en.iova);
	ASSERT_EQ(5000, en.length);
	ASSERT_EQ(e.pd->handle, en.pd_id);
	ASSERT_EQ(REMOTE_RW, en.access);
	ASSERT_NE(SV_RMEM_NOT_REBACKED, en.arena_off);
	/* the MR's bytes, at arena_off; and a write through the arena is a
	 * write to our memory (what a peer's RDMA write does) */
	ASSERT_EQ(sizeof(got), pread(afd, got, sizeof(got), en.arena_off));
	ASSERT_EQ(0, memcmp(got, p + 1000, sizeof(got)));
	ASSERT_EQ(4, pwrite(afd, "peer", 4, en.arena_off + 10));
	ASSERT_EQ(0, memcmp(p + 1010, "peer", 4));
	arena_off = en.arena_off;
	ASSERT_OK(ibv_dereg_mr(mr));
	ASSERT_EQ(sizeof(en), pread(tfd, &en, sizeof(en), at));
	ASSERT_EQ(0, en.gen & 1);
	ASSERT_EQ(0, en.key);
	ASSERT_EQ(SV_RMEM_NOT_REBACKED, en.arena_off);
	/* after deregistration the arena no longer aliases our memory */
	ASSERT_EQ(4, pwrite(afd, "late", 4, arena_off + 10));
	ASSERT_EQ(0, memcmp(p + 1010, "peer", 4));
	ASSERT_OK(munmap(p, MIB));
	close_ctx(&e);
}

/* The entry a peer would read for mr (the key table through its fd). */
static struct sv_rkey_entry entry_of(const struct ibv_mr *mr)
{
	int tfd = memfd_named("softverbs-keys");
	struct sv_rkey_entry en;
	struct sv_rkey_hdr h;

	ASSERT_GE(tfd, 0);
	ASSERT_EQ(sizeof(h), pread(tfd, &h, sizeof(h), 0));
	ASSERT_EQ(sizeof(en),
		  pread(tfd, &en, sizeof(en),
			(off_t)(h.entries_off +
				(mr->rkey & (h.nentries - 1)) * sizeof(en))));
	ASSERT_EQ(0, en.gen & 1);
	ASSERT_EQ(mr->rkey, en.key);
	return en;
}

/*
 * Before a peer on this host could map the arena, registration moves
 * nothing (it copied every written page twice, 0.4-0.5 s for 512 MiB,
 * for programs whose peers are all on other hosts): the MR is published
 * "not re-backed" and its memory stays private.  The first share moves
 * what waited, in registration order (an MR inside an earlier one shares
 * its segment), bytes intact, and the entries then say where; an MR
 * deregistered while it waited never moves; later ones move at once.
 */
SV_TEST(rmem_waits_until_shared)
{
	const size_t pg = 4096, len = 16 * pg;
	uint8_t *p = map_anon(len);
	struct ibv_mr *a, *b, *gone, *c;
	struct sv_end e;

	sv_test_needs_shm("over TCP no peer maps our memory: nothing moves");
	memset(&e, 0, sizeof(e));
	sv_end_open_ctx(&e); /* not shared */
	sv_fill(p, len, 3);
	a = ibv_reg_mr(e.pd, p, 8 * pg, REMOTE_RW);
	b = ibv_reg_mr(e.pd, p + pg, pg, REMOTE_RW); /* inside a */
	gone = ibv_reg_mr(e.pd, p + 12 * pg, pg, REMOTE_RW);
	ASSERT_NOT_NULL(a);
	ASSERT_NOT_NULL(b);
	ASSERT_NOT_NULL(gone);
	for (size_t i = 0; i < len; i += pg)
		ASSERT_TRUE(private_anon(p + i));
	ASSERT_EQ(SV_RMEM_NOT_REBACKED, entry_of(a).arena_off);
	ASSERT_EQ(SV_RMEM_NOT_REBACKED, entry_of(b).arena_off);
	ASSERT_OK(ibv_dereg_mr(gone));
	sv_fill(p, len, 4); /* still the program's memory */
	ASSERT_TRUE(sv_end_share_memory(&e));
	ASSERT_TRUE(on_arena(p));
	ASSERT_TRUE(on_arena(p + 8 * pg - 1));
	ASSERT_FALSE(on_arena(p + 8 * pg));
	ASSERT_FALSE(on_arena(p + 12 * pg));
	ASSERT_EQ(-1, sv_check(p, len, 4));
	ASSERT_NE(SV_RMEM_NOT_REBACKED, entry_of(a).arena_off);
	ASSERT_EQ(entry_of(a).arena_off + pg, entry_of(b).arena_off);
	c = ibv_reg_mr(e.pd, p + 12 * pg, pg, REMOTE_RW);
	ASSERT_NOT_NULL(c);
	ASSERT_TRUE(on_arena(p + 12 * pg));
	ASSERT_OK(ibv_dereg_mr(a));
	ASSERT_TRUE(on_arena(p + pg)); /* b holds the segment */
	ASSERT_OK(ibv_dereg_mr(b));
	ASSERT_OK(ibv_dereg_mr(c));
	for (size_t i = 0; i < len; i += pg)
		ASSERT_TRUE(private_anon(p + i));
	ASSERT_EQ(-1, sv_check(p, len, 4));
	ASSERT_OK(munmap(p, len));
	close_ctx(&e);
}

/* Over a connection on this host the connect itself shares: memory
 * registered before it moves then, and the peer's one-sided operations
 * on it land in our memory.  Over TCP no peer maps it: it never moves,
 * and the responder does the same. */
SV_TEST(rmem_connect_moves_what_waited)
{
	struct sv_end_opts o = sv_end_opts_default();
	uint64_t v = 0x1122334455667788ull;
	bool moves = !sv_test_wire();
	struct sv_pair p;

	o.mr_access = REMOTE_RW;
	o.qp_access = REMOTE_RW;
	sv_end_open(&p.a, &o);
	o.psn = 0x5678;
	sv_end_open(&p.b, &o);
	ASSERT_FALSE(on_arena(p.a.buf)); /* registered, not yet shared */
	ASSERT_FALSE(on_arena(p.b.buf));
	sv_fill(p.b.buf, o.buf_len, 5);
	sv_end_connect(&p.a, p.b.qp->qp_num, p.b.o.psn);
	sv_end_connect(&p.b, p.a.qp->qp_num, p.a.o.psn);
	ASSERT_EQ(moves, on_arena(p.a.buf));
	ASSERT_EQ(moves, on_arena(p.b.buf));
	ASSERT_EQ(-1, sv_check(p.b.buf, o.buf_len, 5));
	/* a's write lands in b's memory */
	memcpy(p.a.buf, &v, sizeof(v));
	{
		struct ibv_sge sg = {(uintptr_t)p.a.buf, sizeof(v),
				     p.a.mr->lkey};
		struct ibv_send_wr wr = {
			.wr_id = 9,
			.sg_list = &sg,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = {(uintptr_t)p.b.buf + 64, p.b.mr->rkey}};
		struct ibv_send_wr *bad;

		ASSERT_OK(ibv_post_send(p.a.qp, &wr, &bad));
	}
	EXPECT_WC(p.a.scq, IBV_WC_SUCCESS, 9);
	ASSERT_EQ(0, memcmp(p.b.buf + 64, &v, sizeof(v)));
	sv_pair_close(&p);
}

static void *reg_stack_buffer(void *arg)
{
	struct sv_end *e = arg;
	uint8_t buf[3 * 4096];
	struct ibv_mr *mr;

	sv_fill(buf, sizeof(buf), 17);
	mr = ibv_reg_mr(e->pd, buf, sizeof(buf), REMOTE_RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_FALSE(on_arena(buf));
	ASSERT_EQ(-1, sv_check(buf, sizeof(buf), 17));
	ASSERT_OK(ibv_dereg_mr(mr));
	return NULL;
}

/* A thread's own stack (anonymous, unnamed for threads) is not moved:
 * its frames would be written while it is read-only. */
SV_TEST(rmem_thread_stack_not_rebacked)
{
	struct sv_end e;
	pthread_t t;

	open_ctx(&e);
	ASSERT_OK(pthread_create(&t, NULL, reg_stack_buffer, &e));
	ASSERT_OK(pthread_join(t, NULL));
	close_ctx(&e);
}
