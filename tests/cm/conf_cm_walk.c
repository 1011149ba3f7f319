// SPDX-License-Identifier: MIT
/*
 * The CM thread's walk at each wake-up (rdmacm/conn.c cm_conn_retry_all,
 * issue 27 item 3) looks at the ids with a timer, not at every live id.
 * A child connects 100 RC id pairs one after another on 127.0.0.1 (no
 * QPs: the REQ and REP carry a QPN) and keeps them; at exit
 * SOFTVERBS_DEBUG's last line says how many walks ran and how many ids
 * they looked at.  With the pairs made one at a time at most a few ids
 * wait at any walk: the walk of every id looked at ~100 per walk (the
 * ids live then), the bound here is 4 (a count, not a time).
 */
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sv_test.h"

#define PAIRS 100

/* In the child: exit with line's code (its stderr is the log). */
#define CHECK(c)                                                      \
	do {                                                          \
		if (!(c)) {                                           \
			fprintf(stderr, "CHECK %s:%d %s\n", __FILE__, \
				__LINE__, #c);                        \
			exit(3);                                      \
		}                                                     \
	} while (0)

static struct rdma_cm_event *next_ev(struct rdma_event_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	CHECK(poll(&p, 1, 10000) == 1);
	CHECK(!rdma_get_cm_event(ch, &ev));
	return ev;
}

static void want(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = next_ev(ch);

	CHECK(ev->event == t && ev->status == 0);
	CHECK(!rdma_ack_cm_event(ev));
}

static void one_pair(struct rdma_event_channel *ch, uint16_t port, uint32_t qpn)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct rdma_conn_param cp = {
		.qp_num = qpn, .retry_count = 7, .rnr_retry_count = 7};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c, *s;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(!rdma_create_id(ch, &c, NULL, RDMA_PS_TCP));
	CHECK(!rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000));
	want(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(!rdma_resolve_route(c, 2000));
	want(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	CHECK(!rdma_connect(c, &cp));
	ev = next_ev(ch);
	CHECK(ev->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	s = ev->id;
	CHECK(!rdma_ack_cm_event(ev));
	cp.qp_num = qpn + 1;
	CHECK(!rdma_accept(s, &cp));
	/* no QP: the active side hears CONNECT_RESPONSE and establishes
	 * itself (rdma_establish), the passive side ESTABLISHED */
	for (int n = 0; n < 2; n++) {
		ev = next_ev(ch);
		if (ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) {
			CHECK(ev->id == c && ev->status == 0);
			CHECK(!rdma_ack_cm_event(ev));
			CHECK(!rdma_establish(c));
			continue;
		}
		if (ev->event != RDMA_CM_EVENT_ESTABLISHED)
			fprintf(stderr, "CHECK event %s status %d\n",
				rdma_event_str(ev->event), ev->status);
		CHECK(ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == s);
		CHECK(!rdma_ack_cm_event(ev));
	}
}

static void child(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = {.sin_family = AF_INET};
	struct rdma_cm_id *l;
	uint16_t port;

	CHECK(ch);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(!rdma_create_id(ch, &l, NULL, RDMA_PS_TCP));
	CHECK(!rdma_bind_addr(l, (struct sockaddr *)&a));
	port = ntohs(rdma_get_src_port(l));
	CHECK(!rdma_listen(l, 64));
	for (uint32_t i = 0; i < PAIRS; i++)
		one_pair(ch, port, 0x100 + 2 * i);
	exit(0); /* the library's destructor says the walks' counts */
}

SV_TEST(cm_walk_visits_only_ids_with_a_timer)
{
	char path[] = "/tmp/sv-cm-walk-XXXXXX", line[512];
	unsigned long long walks = 0, visits = 0;
	int fd = mkstemp(path), st;
	bool found = false;
	pid_t pid;
	FILE *f;

	ASSERT_GE(fd, 0);
	unlink(path);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		setenv("SOFTVERBS_DEBUG", "1", 1);
		dup2(fd, 2);
		child();
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	f = fdopen(fd, "r");
	ASSERT_NOT_NULL(f);
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "CM thread: ");

		if (strstr(line, "CHECK "))
			fprintf(stderr, "child: %s", line);
		if (p && sscanf(p,
				"CM thread: %llu walks of the timed ids, "
				"%llu ids visited",
				&walks, &visits) == 2)
			found = true;
	}
	fclose(f);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ASSERT_TRUE(found);
	fprintf(stderr, "%llu walks, %llu ids visited\n", walks, visits);
	ASSERT_GE(walks, PAIRS);      /* each pair wakes the thread */
	ASSERT_LE(visits, 4 * walks); /* every id: ~PAIRS per walk */
}
