// SPDX-License-Identifier: MIT
/*
 * The out-of-band exchange: the 52-byte address message (format, parse,
 * every malformed case) and the TCP conversation over loopback against
 * fake peers in forked processes that misbehave in every way we know.
 * The fake peers speak as ibv_rc_pingpong does (one write per message).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "oob.h"
#include "sv_test.h"

#define OK_TIMEOUT    5000
#define SHORT_TIMEOUT 300

static const struct pp_dest client_dest = {
	.lid = 0x0011,
	.qpn = 0x000abc,
	.psn = 0x123456,
	.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe,
		0x33, 0x44, 0x55},
};
static const struct pp_dest server_dest = {
	.lid = 0x0022,
	.qpn = 0xfedcba,
	.psn = 0xabcdef,
};

static bool dest_eq(const struct pp_dest *a, const struct pp_dest *b)
{
	return a->lid == b->lid && a->qpn == b->qpn && a->psn == b->psn &&
	       !memcmp(a->gid, b->gid, 16);
}

/* ---- the message ---------------------------------------------------- */

/* The original's wire form, computed its way: htonl of each 32-bit word. */
static void original_wire_gid(const uint8_t gid[16], char out[33])
{
	for (int i = 0; i < 4; i++) {
		uint32_t w;

		memcpy(&w, gid + 4 * i, 4);
		sprintf(out + 8 * i, "%08x", htonl(w));
	}
}

SV_TEST(msg_format_matches_original_layout)
{
	char msg[PP_MSG_SIZE];
	struct pp_dest d = {.lid = 0xbeef, .qpn = 0xabcdef, .psn = 0x000001};

	ASSERT_EQ(52, PP_MSG_SIZE);
	for (int i = 0; i < 16; i++)
		d.gid[i] = (uint8_t)i;
	ASSERT_OK(pp_msg_format(&d, msg));
	ASSERT_STR_EQ("beef:abcdef:000001:000102030405060708090a0b0c0d0e0f",
		      msg);
	ASSERT_EQ('\0', msg[51]);

	d.lid = 0x10000;
	ASSERT_EQ(-EINVAL, pp_msg_format(&d, msg));
	d.lid = 1;
	d.qpn = 0x1000000;
	ASSERT_EQ(-EINVAL, pp_msg_format(&d, msg));
	d.qpn = 1;
	d.psn = 0x1000000;
	ASSERT_EQ(-EINVAL, pp_msg_format(&d, msg));
}

SV_TEST(msg_round_trip_with_gid)
{
	char msg[PP_MSG_SIZE], wire[33], orig[33], why[160];
	unsigned int seed = 12345;

	for (int n = 0; n < 1000; n++) {
		struct pp_dest d, back;

		d.lid = (uint32_t)rand_r(&seed) & 0xffff;
		d.qpn = (uint32_t)rand_r(&seed) & 0xffffff;
		d.psn = (uint32_t)rand_r(&seed) & 0xffffff;
		for (int i = 0; i < 16; i++)
			d.gid[i] = (uint8_t)rand_r(&seed);
		ASSERT_OK(pp_msg_format(&d, msg));
		ASSERT_OK(pp_msg_parse(msg, sizeof(msg), &back, why,
				       sizeof(why)));
		ASSERT_TRUE(dest_eq(&d, &back));
		pp_gid_to_wire(d.gid, wire);
		original_wire_gid(d.gid, orig);
		ASSERT_STR_EQ(orig, wire);
	}
}

SV_TEST(msg_parse_accepts_upper_case)
{
	const char m[] = "BEEF:ABCDEF:00000A:FE800000000000000000000000000001";
	struct pp_dest d;
	char why[160];

	ASSERT_OK(pp_msg_parse(m, sizeof(m), &d, why, sizeof(why)));
	ASSERT_EQ(0xbeef, d.lid);
	ASSERT_EQ(0xabcdef, d.qpn);
	ASSERT_EQ(10, d.psn);
	ASSERT_EQ(0xfe, d.gid[0]);
	ASSERT_EQ(0x80, d.gid[1]);
	ASSERT_EQ(0x01, d.gid[15]);
}

/* Parses a message that must be rejected, with why containing expect. */
static void reject(const void *buf, size_t len, const char *expect)
{
	struct pp_dest d = {.lid = 777};
	char why[160] = "";

	ASSERT_EQ(-EINVAL, pp_msg_parse(buf, len, &d, why, sizeof(why)));
	ASSERT_CONTAINS(why, expect);
	ASSERT_EQ(777, d.lid); /* untouched on error */
}

/* A valid message with bytes [at, at + strlen(s)) replaced by s. */
static void patched(char msg[PP_MSG_SIZE], int at, const char *s)
{
	memcpy(msg, "0001:000002:000003:fe800000000000000000000000000001",
	       PP_MSG_SIZE);
	memcpy(msg + at, s, strlen(s));
}

SV_TEST(msg_parse_rejects_malformed)
{
	static const struct {
		int at;
		const char *patch;
		const char *why;
	} cases[] = {
		{2, "g", "byte 3 is not a hex digit in the LID field"},
		{0, " ", "byte 1 is not a hex digit in the LID field"},
		{0, "+", "byte 1 is not a hex digit in the LID field"},
		{5, "0x", "byte 7 is not a hex digit in the QPN field"},
		{17, "-", "byte 18 is not a hex digit in the PSN field"},
		{40, "Z", "byte 41 is not a hex digit in the GID field"},
		{50, "\0", "byte 51 is not a hex digit in the GID field"},
		{4, "-", "expected ':' at byte 5"},
		{11, ";", "expected ':' at byte 12"},
		{18, "0", "expected ':' at byte 19"},
		/* a field one digit too long shifts the separators */
		{0, "00001:00002", "expected ':' at byte 5"},
		{0, "001:0000002", "expected ':' at byte 5"},
		{5, "0000002:000", "expected ':' at byte 12"},
		{51, "X", "byte 52 is not the terminating NUL"},
	};
	char msg[PP_MSG_SIZE];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		patched(msg, cases[i].at, cases[i].patch);
		if (!*cases[i].patch)
			msg[cases[i].at] = '\0';
		reject(msg, sizeof(msg), cases[i].why);
	}
}

SV_TEST(msg_parse_rejects_wrong_lengths)
{
	char big[200];

	patched(big, 0, "");
	reject(big, 0, "0 bytes, expected 52");
	reject(big, 51, "51 bytes, expected 52");
	reject(big, 53, "53 bytes, expected 52");
	reject(big, 20, "20 bytes");
	memset(big, 'A', sizeof(big));
	reject(big, sizeof(big), "200 bytes");
	reject(big, 52, "expected ':' at byte 5");
}

SV_TEST(ext_message_round_trip_and_rejects)
{
	struct pp_ext e = {.iters = 1000, .sweep_max = 4096, .warmup = 7};
	struct pp_ext back;
	char msg[PP_EXT_SIZE], why[120];

	ASSERT_OK(pp_ext_format(&e, msg));
	ASSERT_OK(pp_ext_parse(msg, sizeof(msg), &back, why, sizeof(why)));
	ASSERT_EQ(1000, back.iters);
	ASSERT_EQ(4096, back.sweep_max);
	ASSERT_EQ(7, back.warmup);

	ASSERT_EQ(-EINVAL, pp_ext_parse(msg, 10, &back, why, sizeof(why)));
	ASSERT_CONTAINS(why, "10 bytes");
	memset(msg, 'x', sizeof(msg));
	ASSERT_EQ(-EINVAL,
		  pp_ext_parse(msg, sizeof(msg), &back, why, sizeof(why)));
	ASSERT_CONTAINS(why, "no terminating NUL");
	memset(msg, 0, sizeof(msg));
	strcpy(msg, "svext1 iters=1 sweep=2 warmup=3junk");
	ASSERT_EQ(-EINVAL,
		  pp_ext_parse(msg, sizeof(msg), &back, why, sizeof(why)));
	strcpy(msg, "done");
	ASSERT_EQ(-EINVAL,
		  pp_ext_parse(msg, sizeof(msg), &back, why, sizeof(why)));
	ASSERT_CONTAINS(why, "not an svext1");
}

SV_TEST(describe_bytes_is_safe)
{
	char out[64];

	pp_describe_bytes("ab\x01\\\xff", 5, out, sizeof(out));
	ASSERT_STR_EQ("ab\\x01\\x5c\\xff", out);
	pp_describe_bytes("0123456789abcdef", 16, out, 8);
	ASSERT_EQ(7, strlen(out));
}

/* ---- fake peers ------------------------------------------------------ */

/* Reads until the other side closes: a peer that waits and says nothing. */
static void drain_until_eof(int fd)
{
	char buf[256];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static bool read_exact(int fd, void *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = read(fd, (char *)buf + off, len - off);

		if (n <= 0)
			return false;
		off += (size_t)n;
	}
	return true;
}

static void write_msg(int fd, const struct pp_dest *d)
{
	char msg[PP_MSG_SIZE];

	pp_msg_format(d, msg);
	if (write(fd, msg, sizeof(msg)) != sizeof(msg))
		_exit(3);
}

static int tcp_listen(int family, int port)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_port = htons((uint16_t)port),
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct sockaddr_in a4 = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(family, SOCK_STREAM, 0), one = 1;

	ASSERT_TRUE(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6)
		ASSERT_OK(bind(fd, (struct sockaddr *)&a6, sizeof(a6)));
	else
		ASSERT_OK(bind(fd, (struct sockaddr *)&a4, sizeof(a4)));
	ASSERT_OK(listen(fd, 1));
	return fd;
}

static int tcp_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		_exit(4);
	return fd;
}

typedef int (*script_fn)(int fd);

/* Forks a fake peer running script on a connection; returns its pid.
 * The child's exit code is the script's result (0: it saw what it
 * expected).  lfd >= 0: accept on it; else connect to port. */
static pid_t fake_peer(int lfd, int port, script_fn script)
{
	pid_t pid = fork();

	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		int fd;

		alarm(20);
		fd = lfd >= 0 ? accept(lfd, NULL, NULL) : tcp_connect(port);
		if (fd < 0)
			_exit(5);
		_exit(script(fd));
	}
	return pid;
}

static int peer_exit(pid_t pid)
{
	int st;

	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* Our client against a fake server; returns stderr, *ret the result. */
static char *client_vs(script_fn script, int timeout_ms, int *ret,
		       struct pp_dest *got, int *peer_code)
{
	int port = sv_free_port(), lfd = tcp_listen(AF_INET, port);
	pid_t pid = fake_peer(lfd, 0, script);
	struct capture cap;
	char *err;

	close(lfd);
	capture_begin(&cap, 2);
	*ret = pp_oob_connect("127.0.0.1", (unsigned int)port, timeout_ms,
			      &client_dest, NULL, got);
	err = capture_end(&cap);
	*peer_code = peer_exit(pid);
	return err;
}

/* Fake servers, each answering one client its own wrong way. */
static int srv_like_original(int fd)
{
	char msg[PP_MSG_SIZE], done[PP_DONE_SIZE], why[160];
	struct pp_dest d;

	if (!read_exact(fd, msg, sizeof(msg)) ||
	    pp_msg_parse(msg, sizeof(msg), &d, why, sizeof(why)) ||
	    !dest_eq(&d, &client_dest))
		return 1;
	write_msg(fd, &server_dest);
	if (!read_exact(fd, done, sizeof(done)) || memcmp(done, "done", 5))
		return 2;
	return 0;
}

static int srv_garbage(int fd)
{
	char msg[PP_MSG_SIZE];

	read_exact(fd, msg, sizeof(msg));
	memset(msg, 'z', sizeof(msg));
	msg[sizeof(msg) - 1] = '\0';
	if (write(fd, msg, sizeof(msg)) != sizeof(msg))
		return 3;
	drain_until_eof(fd);
	return 0;
}

static int srv_close_early(int fd)
{
	char msg[PP_MSG_SIZE];

	read_exact(fd, msg, sizeof(msg));
	close(fd);
	return 0;
}

static int srv_silent(int fd)
{
	drain_until_eof(fd);
	return 0;
}

static int srv_short(int fd)
{
	char msg[PP_MSG_SIZE];

	read_exact(fd, msg, sizeof(msg));
	if (write(fd, "0022:fedcba:abcdef:0", 20) != 20)
		return 3;
	drain_until_eof(fd);
	return 0;
}

static int srv_oversized(int fd)
{
	char msg[PP_MSG_SIZE + 30];

	read_exact(fd, msg, PP_MSG_SIZE);
	pp_msg_format(&server_dest, msg);
	memset(msg + PP_MSG_SIZE, 'J', 30);
	if (write(fd, msg, sizeof(msg)) != sizeof(msg))
		return 3;
	drain_until_eof(fd);
	return 0;
}

SV_TEST(oob_client_against_original_style_server)
{
	struct pp_dest got;
	int ret, code;
	char *err = client_vs(srv_like_original, OK_TIMEOUT, &ret, &got, &code);

	ASSERT_OK(ret);
	ASSERT_OK(code);
	ASSERT_TRUE(dest_eq(&got, &server_dest));
	ASSERT_STR_EQ("", err);
	free(err);
}

SV_TEST(oob_client_rejects_garbage_from_server)
{
	struct pp_dest got = {.lid = 9};
	int ret, code;
	char *err = client_vs(srv_garbage, OK_TIMEOUT, &ret, &got, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_EQ(9, got.lid);
	ASSERT_CONTAINS(err, "malformed message from peer: expected ':' at "
			     "byte 5");
	ASSERT_CONTAINS(err, "zzzz");
	free(err);
}

SV_TEST(oob_client_server_closes_early)
{
	struct pp_dest got;
	int ret, code;
	char *err = client_vs(srv_close_early, OK_TIMEOUT, &ret, &got, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "peer closed the connection after 0 of the 52 "
			     "bytes of its address message");
	free(err);
}

SV_TEST(oob_client_server_never_answers)
{
	uint64_t t0 = sv_now_ms();
	struct pp_dest got;
	int ret, code;
	char *err = client_vs(srv_silent, SHORT_TIMEOUT, &ret, &got, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "sent 0 of the 52 bytes of its address message "
			     "and then nothing for 0.3 s");
	ASSERT_LE(sv_now_ms() - t0, 5000);
	free(err);
}

SV_TEST(oob_client_server_sends_short_message)
{
	struct pp_dest got;
	int ret, code;
	char *err = client_vs(srv_short, SHORT_TIMEOUT, &ret, &got, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "sent 20 of the 52 bytes");
	free(err);
}

SV_TEST(oob_client_server_sends_oversized_message)
{
	struct pp_dest got;
	int ret, code;
	char *err = client_vs(srv_oversized, OK_TIMEOUT, &ret, &got, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "malformed message from peer");
	ASSERT_CONTAINS(err, "longer than 52 bytes");
	free(err);
}

SV_TEST(oob_client_connection_refused)
{
	struct pp_dest got;
	struct capture cap;
	int port = sv_free_port(), ret;
	char *err;

	capture_begin(&cap, 2);
	ret = pp_oob_connect("127.0.0.1", (unsigned int)port, OK_TIMEOUT,
			     &client_dest, NULL, &got);
	err = capture_end(&cap);
	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "Couldn't connect to 127.0.0.1:");
	ASSERT_CONTAINS(err, "Connection refused");
	free(err);
}

SV_TEST(oob_client_unknown_host)
{
	struct pp_dest got;
	struct capture cap;
	int ret;
	char *err;

	capture_begin(&cap, 2);
	ret = pp_oob_connect("no-such-host.invalid", 18515, OK_TIMEOUT,
			     &client_dest, NULL, &got);
	err = capture_end(&cap);
	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "no-such-host.invalid:18515");
	free(err);
}

/* ---- our server against fake clients -------------------------------- */

struct seen {
	int calls;
	struct pp_dest peer;
	int fail; /* make the connect step fail */
};

static int record_connect(const struct pp_dest *peer, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	s->peer = *peer;
	return s->fail;
}

static char *server_vs(script_fn script, int timeout_ms,
		       const struct pp_ext *ext, struct seen *seen, int *ret,
		       int *peer_code)
{
	int port = sv_free_port(), lfd;
	struct pp_dest got;
	struct capture cap;
	pid_t pid;
	char *err;

	ASSERT_OK(pp_oob_listen((unsigned int)port, &lfd));
	pid = fake_peer(-1, port, script);
	capture_begin(&cap, 2);
	*ret = pp_oob_serve(lfd, timeout_ms, &server_dest, ext, record_connect,
			    seen, &got);
	err = capture_end(&cap);
	close(lfd);
	*peer_code = peer_exit(pid);
	if (!*ret)
		ASSERT_TRUE(dest_eq(&got, &client_dest));
	return err;
}

static int cli_like_original(int fd)
{
	char msg[PP_MSG_SIZE], why[160];
	struct pp_dest d;

	write_msg(fd, &client_dest);
	if (!read_exact(fd, msg, sizeof(msg)) ||
	    pp_msg_parse(msg, sizeof(msg), &d, why, sizeof(why)) ||
	    !dest_eq(&d, &server_dest))
		return 1;
	if (write(fd, "done", 5) != 5)
		return 2;
	return 0;
}

static int cli_short_then_close(int fd)
{
	return write(fd, "0011:000a", 9) == 9 ? 0 : 3;
}

static int cli_garbage(int fd)
{
	char junk[PP_MSG_SIZE];

	memset(junk, 0xff, sizeof(junk));
	if (write(fd, junk, sizeof(junk)) != sizeof(junk))
		return 3;
	drain_until_eof(fd);
	return 0;
}

static int cli_hostile_flood(int fd)
{
	static char junk[65536];

	memset(junk, 'A', sizeof(junk));
	signal(SIGPIPE, SIG_IGN);
	(void)!write(fd, junk, sizeof(junk));
	drain_until_eof(fd);
	return 0;
}

static int cli_silent(int fd)
{
	drain_until_eof(fd);
	return 0;
}

static int cli_bad_done(int fd)
{
	char msg[PP_MSG_SIZE];

	write_msg(fd, &client_dest);
	read_exact(fd, msg, sizeof(msg));
	if (write(fd, "nope", 5) != 5)
		return 3;
	drain_until_eof(fd);
	return 0;
}

static int cli_no_done(int fd)
{
	char msg[PP_MSG_SIZE];

	write_msg(fd, &client_dest);
	read_exact(fd, msg, sizeof(msg));
	close(fd);
	return 0;
}

SV_TEST(oob_server_against_original_style_client)
{
	struct seen seen = {0};
	int ret, code;
	char *err = server_vs(cli_like_original, OK_TIMEOUT, NULL, &seen, &ret,
			      &code);

	ASSERT_OK(ret);
	ASSERT_OK(code);
	ASSERT_EQ(1, seen.calls);
	ASSERT_TRUE(dest_eq(&seen.peer, &client_dest));
	ASSERT_STR_EQ("", err);
	free(err);
}

SV_TEST(oob_server_client_sends_short_and_closes)
{
	struct seen seen = {0};
	int ret, code;
	char *err = server_vs(cli_short_then_close, OK_TIMEOUT, NULL, &seen,
			      &ret, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_EQ(0, seen.calls);
	ASSERT_CONTAINS(err, "peer closed the connection after 9 of the 52 "
			     "bytes of its address message");
	free(err);
}

SV_TEST(oob_server_rejects_garbage)
{
	struct seen seen = {0};
	int ret, code;
	char *err =
		server_vs(cli_garbage, OK_TIMEOUT, NULL, &seen, &ret, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_EQ(0, seen.calls);
	ASSERT_CONTAINS(err, "malformed message from peer");
	ASSERT_CONTAINS(err, "\\xff\\xff");
	free(err);
}

SV_TEST(oob_server_survives_hostile_flood)
{
	struct seen seen = {0};
	int ret, code;
	char *err = server_vs(cli_hostile_flood, OK_TIMEOUT, NULL, &seen, &ret,
			      &code);

	ASSERT_EQ(-1, ret);
	ASSERT_EQ(0, seen.calls);
	ASSERT_CONTAINS(err, "malformed message from peer");
	free(err);
}

SV_TEST(oob_server_client_never_speaks)
{
	struct seen seen = {0};
	int ret, code;
	char *err =
		server_vs(cli_silent, SHORT_TIMEOUT, NULL, &seen, &ret, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "sent 0 of the 52 bytes of its address message "
			     "and then nothing for 0.3 s");
	free(err);
}

SV_TEST(oob_server_bad_done)
{
	struct seen seen = {0};
	int ret, code;
	char *err =
		server_vs(cli_bad_done, OK_TIMEOUT, NULL, &seen, &ret, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "expected \"done\", got \"nope\\x00\"");
	free(err);
}

SV_TEST(oob_server_client_vanishes_before_done)
{
	struct seen seen = {0};
	int ret, code;
	char *err =
		server_vs(cli_no_done, OK_TIMEOUT, NULL, &seen, &ret, &code);

	ASSERT_EQ(-1, ret);
	ASSERT_CONTAINS(err, "peer closed the connection after 0 of the 5 "
			     "bytes of its \"done\" message");
	free(err);
}

SV_TEST(oob_server_connect_step_fails)
{
	struct seen seen = {.fail = 1};
	int ret, code;
	char *err = server_vs(cli_like_original, OK_TIMEOUT, NULL, &seen, &ret,
			      &code);

	ASSERT_EQ(-1, ret);
	ASSERT_EQ(1, seen.calls);
	ASSERT_CONTAINS(err, "Couldn't connect to remote QP");
	ASSERT_NE(0, code); /* the fake client got no answer */
	free(err);
}

SV_TEST(oob_listen_port_in_use)
{
	int port = sv_free_port(), busy = tcp_listen(AF_INET, port), lfd;
	struct capture cap;
	char *err, expect[64];

	capture_begin(&cap, 2);
	ASSERT_EQ(-1, pp_oob_listen((unsigned int)port, &lfd));
	err = capture_end(&cap);
	snprintf(expect, sizeof(expect), "port %d is in use; pass -p", port);
	ASSERT_CONTAINS(err, expect);
	free(err);
	close(busy);
}

/* ---- our client against our server ---------------------------------- */

static const char *child_host = "127.0.0.1";
static const struct pp_ext *child_ext;
static const char *child_expect_err; /* NULL: the child must succeed */

/* Runs our client in a child; exit 0 when it behaved as expected. */
static pid_t our_client(int port)
{
	pid_t pid = fork();

	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		struct pp_dest got;
		struct capture cap;
		char *err;
		int ret;

		alarm(20);
		capture_begin(&cap, 2);
		ret = pp_oob_connect(child_host, (unsigned int)port, OK_TIMEOUT,
				     &client_dest, child_ext, &got);
		err = capture_end(&cap);
		if (!child_expect_err)
			_exit(ret || !dest_eq(&got, &server_dest) ? 1 : 0);
		_exit(ret == -1 && strstr(err, child_expect_err) ? 0 : 1);
	}
	return pid;
}

static char *ours_vs_ours(const struct pp_ext *server_ext, int *ret,
			  int *client_code)
{
	int port = sv_free_port(), lfd;
	struct seen seen = {0};
	struct pp_dest got;
	struct capture cap;
	pid_t pid;
	char *err;

	ASSERT_OK(pp_oob_listen((unsigned int)port, &lfd));
	pid = our_client(port);
	capture_begin(&cap, 2);
	*ret = pp_oob_serve(lfd, OK_TIMEOUT, &server_dest, server_ext,
			    record_connect, &seen, &got);
	err = capture_end(&cap);
	close(lfd);
	*client_code = peer_exit(pid);
	if (!*ret)
		ASSERT_TRUE(dest_eq(&got, &client_dest));
	return err;
}

SV_TEST(oob_ours_both_ways_ipv4_ipv6_names)
{
	static const char *hosts[] = {"127.0.0.1", "::1", "localhost"};

	for (size_t i = 0; i < 3; i++) {
		int ret, code;
		char *err;

		child_host = hosts[i];
		err = ours_vs_ours(NULL, &ret, &code);
		ASSERT_OK(ret);
		ASSERT_OK(code);
		ASSERT_STR_EQ("", err);
		free(err);
	}
}

SV_TEST(oob_ext_agreed)
{
	static const struct pp_ext e = {100, 4096, 10};
	int ret, code;
	char *err;

	child_ext = &e;
	err = ours_vs_ours(&e, &ret, &code);
	ASSERT_OK(ret);
	ASSERT_OK(code);
	free(err);
}

SV_TEST(oob_ext_mismatch_fails_both)
{
	static const struct pp_ext mine = {100, 4096, 10};
	static const struct pp_ext theirs = {100, 1024, 10};
	int ret, code;
	char *err;

	child_ext = &theirs;
	child_expect_err = "the two sides disagree";
	err = ours_vs_ours(&mine, &ret, &code);
	ASSERT_EQ(-1, ret);
	ASSERT_OK(code);
	ASSERT_CONTAINS(err, "this side has -n 100 --sweep 4096 --warmup 10, "
			     "the peer -n 100 --sweep 1024 --warmup 10");
	free(err);
}

SV_TEST(oob_ext_only_on_client)
{
	static const struct pp_ext e = {100, 64, 0};
	int ret, code;
	char *err;

	child_ext = &e;
	child_expect_err = "the peer did not negotiate --sweep/--warmup";
	err = ours_vs_ours(NULL, &ret, &code);
	ASSERT_OK(ret); /* a server without --sweep cannot know */
	ASSERT_OK(code);
	free(err);
}

SV_TEST(oob_ext_only_on_server)
{
	static const struct pp_ext e = {100, 64, 0};
	int ret, code;
	char *err;

	err = ours_vs_ours(&e, &ret, &code);
	ASSERT_EQ(-1, ret);
	ASSERT_OK(code);
	ASSERT_CONTAINS(err, "the peer did not negotiate --sweep/--warmup");
	free(err);
}
