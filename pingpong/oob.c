// SPDX-License-Identifier: MIT
/*
 * The out-of-band exchange over TCP, as ibv_rc_pingpong does it: the
 * client sends "LID:QPN:PSN:GID" (52 bytes with the NUL), the server
 * connects its QP and answers in kind, the client says "done".  Sockets
 * are non-blocking and every wait has a deadline, so a silent or broken
 * peer is an error message, never a hang.
 */
#include "oob.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Offsets of the separators in the address message. */
#define SEP_LID 4
#define SEP_QPN 11
#define SEP_PSN 18
#define GID_OFF 19
#define GID_HEX 32

static const char hexdig[] = "0123456789abcdef";

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * The original prints each 32-bit word of the GID after htonl() of its
 * in-memory value, which on any host is the bytes in order.
 */
void pp_gid_to_wire(const uint8_t gid[16], char wire[33])
{
	for (int i = 0; i < 16; i++) {
		wire[2 * i] = hexdig[gid[i] >> 4];
		wire[2 * i + 1] = hexdig[gid[i] & 0xf];
	}
	wire[32] = '\0';
}

int pp_wire_to_gid(const char *wire, uint8_t gid[16])
{
	uint8_t g[16];

	for (int i = 0; i < 16; i++) {
		int hi = hexval(wire[2 * i]);
		int lo = hi < 0 ? -1 : hexval(wire[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		g[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(gid, g, sizeof(g));
	return 0;
}

int pp_msg_format(const struct pp_dest *d, char msg[PP_MSG_SIZE])
{
	char gid[33];

	if (d->lid > 0xffff || d->qpn > 0xffffff || d->psn > 0xffffff)
		return -EINVAL;
	pp_gid_to_wire(d->gid, gid);
	snprintf(msg, PP_MSG_SIZE, "%04x:%06x:%06x:%s", (unsigned int)d->lid,
		 (unsigned int)d->qpn, (unsigned int)d->psn, gid);
	return 0;
}

/* Reads a fixed-width hex field; names the first bad byte (1-based). */
static int hex_field(const char *s, int off, int width, const char *name,
		     uint32_t *out, char *why, size_t why_len)
{
	uint32_t v = 0;

	for (int i = off; i < off + width; i++) {
		int h = hexval(s[i]);

		if (h < 0) {
			snprintf(why, why_len,
				 "byte %d is not a hex digit in the %s field "
				 "(%d hex digits expected)",
				 i + 1, name, width);
			return -EINVAL;
		}
		v = v << 4 | (uint32_t)h;
	}
	*out = v;
	return 0;
}

int pp_msg_parse(const void *buf, size_t len, struct pp_dest *d, char *why,
		 size_t why_len)
{
	static const int seps[] = {SEP_LID, SEP_QPN, SEP_PSN};
	const char *s = buf;
	struct pp_dest r;

	if (len != PP_MSG_SIZE) {
		snprintf(why, why_len, "%zu bytes, expected %zu", len,
			 PP_MSG_SIZE);
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(seps) / sizeof(seps[0]); i++) {
		if (s[seps[i]] != ':') {
			snprintf(why, why_len,
				 "expected ':' at byte %d (fields are "
				 "LID:QPN:PSN:GID, 4:6:6:32 hex digits)",
				 seps[i] + 1);
			return -EINVAL;
		}
	}
	if (s[PP_MSG_SIZE - 1] != '\0') {
		snprintf(why, why_len, "byte %zu is not the terminating NUL",
			 PP_MSG_SIZE);
		return -EINVAL;
	}
	if (hex_field(s, 0, 4, "LID", &r.lid, why, why_len) ||
	    hex_field(s, SEP_LID + 1, 6, "QPN", &r.qpn, why, why_len) ||
	    hex_field(s, SEP_QPN + 1, 6, "PSN", &r.psn, why, why_len))
		return -EINVAL;
	for (int i = GID_OFF; i < GID_OFF + GID_HEX; i++) {
		if (hexval(s[i]) < 0) {
			snprintf(why, why_len,
				 "byte %d is not a hex digit in the GID field "
				 "(32 hex digits expected)",
				 i + 1);
			return -EINVAL;
		}
	}
	pp_wire_to_gid(s + GID_OFF, r.gid);
	*d = r;
	return 0;
}

int pp_ext_format(const struct pp_ext *e, char msg[PP_EXT_SIZE])
{
	memset(msg, 0, PP_EXT_SIZE);
	snprintf(msg, PP_EXT_SIZE, "svext1 iters=%u sweep=%u warmup=%u",
		 e->iters, e->sweep_max, e->warmup);
	return 0;
}

int pp_ext_parse(const void *buf, size_t len, struct pp_ext *e, char *why,
		 size_t why_len)
{
	char text[PP_EXT_SIZE], tail;
	struct pp_ext r;
	size_t n;

	if (len != PP_EXT_SIZE) {
		snprintf(why, why_len, "%zu bytes, expected %d", len,
			 PP_EXT_SIZE);
		return -EINVAL;
	}
	n = strnlen(buf, len);
	if (n == len) {
		snprintf(why, why_len, "no terminating NUL");
		return -EINVAL;
	}
	memcpy(text, buf, n + 1);
	if (sscanf(text, "svext1 iters=%u sweep=%u warmup=%u%c", &r.iters,
		   &r.sweep_max, &r.warmup, &tail) != 3) {
		snprintf(why, why_len, "not an svext1 extension message");
		return -EINVAL;
	}
	*e = r;
	return 0;
}

void pp_describe_bytes(const void *buf, size_t len, char *out, size_t out_len)
{
	const unsigned char *b = buf;
	size_t o = 0;

	if (!out_len)
		return;
	for (size_t i = 0; i < len; i++) {
		bool plain = b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\';

		if (o + (plain ? 1 : 4) >= out_len)
			break;
		if (plain)
			out[o++] = (char)b[i];
		else
			o += (size_t)snprintf(out + o, out_len - o, "\\x%02x",
					      b[i]);
	}
	out[o] = '\0';
}

/* Milliseconds on the monotonic clock. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timeout, -1. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		int64_t left = deadline - now_ms();
		int r;

		if (left <= 0)
			return 0;
		r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* Sends all of buf before the deadline; prints why not. */
static int send_all(int fd, const void *buf, size_t len, int timeout_ms,
		    const char *what)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, (const char *)buf + off, len - off,
				 MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(fd, POLLOUT, deadline) > 0)
				continue;
			fprintf(stderr,
				"Couldn't send %s: peer not reading for %.1f "
				"s\n",
				what, timeout_ms / 1000.0);
			return -1;
		}
		fprintf(stderr, "Couldn't send %s: %s\n", what,
			strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Reads exactly len bytes before the deadline.  The deadline covers the
 * whole message, so a peer trickling bytes cannot stretch it.
 */
static int recv_all(int fd, void *buf, size_t len, int timeout_ms,
		    const char *what)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t off = 0;

	while (off < len) {
		ssize_t n = recv(fd, (char *)buf + off, len - off, 0);
		int w;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0) {
			fprintf(stderr,
				"peer closed the connection after %zu of the "
				"%zu bytes of its %s\n",
				off, len, what);
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			fprintf(stderr, "Couldn't read %s: %s\n", what,
				strerror(errno));
			return -1;
		}
		w = wait_fd(fd, POLLIN, deadline);
		if (w == 0) {
			fprintf(stderr,
				"peer sent %zu of the %zu bytes of its %s "
				"and then nothing for %.1f s; giving up "
				"(--oob-timeout)\n",
				off, len, what, timeout_ms / 1000.0);
			return -1;
		}
		if (w < 0) {
			fprintf(stderr, "poll: %s\n", strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* A peer that follows the protocol sends nothing more until answered. */
static int check_no_extra(int fd, const char *what)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n > 0) {
		fprintf(stderr,
			"malformed message from peer: %s is longer than "
			"%zu bytes\n",
			what, PP_MSG_SIZE);
		return -1;
	}
	return 0;
}

static int recv_dest(int fd, int timeout_ms, struct pp_dest *peer)
{
	char msg[PP_MSG_SIZE], why[160], shown[4 * PP_MSG_SIZE + 1];

	if (recv_all(fd, msg, sizeof(msg), timeout_ms, "address message") ||
	    check_no_extra(fd, "its address message"))
		return -1;
	if (pp_msg_parse(msg, sizeof(msg), peer, why, sizeof(why))) {
		pp_describe_bytes(msg, sizeof(msg), shown, sizeof(shown));
		fprintf(stderr, "malformed message from peer: %s: \"%s\"\n",
			why, shown);
		return -1;
	}
	return 0;
}

static int send_dest(int fd, int timeout_ms, const struct pp_dest *mine)
{
	char msg[PP_MSG_SIZE];

	if (pp_msg_format(mine, msg)) {
		fprintf(stderr, "local address does not fit the message: "
				"LID, QPN or PSN too large\n");
		return -1;
	}
	return send_all(fd, msg, sizeof(msg), timeout_ms, "local address");
}

static int recv_done(int fd, int timeout_ms)
{
	char msg[PP_DONE_SIZE], shown[4 * PP_DONE_SIZE + 1];

	if (recv_all(fd, msg, sizeof(msg), timeout_ms, "\"done\" message"))
		return -1;
	if (memcmp(msg, PP_DONE_MSG, PP_DONE_SIZE)) {
		pp_describe_bytes(msg, sizeof(msg), shown, sizeof(shown));
		fprintf(stderr,
			"malformed message from peer: expected \"done\", got "
			"\"%s\"\n",
			shown);
		return -1;
	}
	return 0;
}

static void describe_ext(const struct pp_ext *e, char *out, size_t len)
{
	snprintf(out, len, "-n %u --sweep %u --warmup %u", e->iters,
		 e->sweep_max, e->warmup);
}

/*
 * The extension round: client speaks first.  A peer without --sweep or
 * --warmup closes the socket here, which is how we tell.
 */
static int swap_ext(int fd, int timeout_ms, const struct pp_ext *mine,
		    bool client)
{
	char msg[PP_EXT_SIZE], why[120], shown[4 * PP_EXT_SIZE + 1];
	char a[80], b[80];
	struct pp_ext peer;

	pp_ext_format(mine, msg);
	if (client && send_all(fd, msg, sizeof(msg), timeout_ms,
			       "--sweep/--warmup parameters"))
		return -1;
	if (recv_all(fd, msg, sizeof(msg), timeout_ms,
		     "--sweep/--warmup parameters")) {
		fprintf(stderr, "the peer did not negotiate --sweep/--warmup: "
				"give both sides the same --sweep, --warmup "
				"and -n\n");
		return -1;
	}
	if (pp_ext_parse(msg, sizeof(msg), &peer, why, sizeof(why))) {
		pp_describe_bytes(msg, strnlen(msg, sizeof(msg)), shown,
				  sizeof(shown));
		fprintf(stderr, "malformed message from peer: %s: \"%s\"\n",
			why, shown);
		return -1;
	}
	if (!client) {
		pp_ext_format(mine, msg);
		if (send_all(fd, msg, sizeof(msg), timeout_ms,
			     "--sweep/--warmup parameters"))
			return -1;
	}
	if (memcmp(&peer, mine, sizeof(peer))) {
		describe_ext(mine, a, sizeof(a));
		describe_ext(&peer, b, sizeof(b));
		fprintf(stderr,
			"the two sides disagree: this side has %s, the peer "
			"%s; give both the same values\n",
			a, b);
		return -1;
	}
	return 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int bind_listen(int family, unsigned int port, int *lfd)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int one = 1, zero = 0, fd, err;

	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_any;
		a->sin6_port = htons((uint16_t)port);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_ANY);
		a->sin_port = htons((uint16_t)port);
		len = sizeof(*a);
	}
	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 1) ||
	    set_nonblock(fd)) {
		err = -errno;
		close(fd);
		return err;
	}
	*lfd = fd;
	return 0;
}

int pp_oob_listen(unsigned int port, int *lfd)
{
	int r = bind_listen(AF_INET6, port, lfd);

	if (r == -EAFNOSUPPORT || r == -EADDRNOTAVAIL)
		r = bind_listen(AF_INET, port, lfd);
	if (r == -EADDRINUSE) {
		fprintf(stderr, "port %u is in use; pass -p\n", port);
		return -1;
	}
	if (r) {
		fprintf(stderr, "Couldn't listen to port %u: %s\n", port,
			strerror(-r));
		return -1;
	}
	return 0;
}

/* Blocks until a client connects: a server may wait for its client. */
static int accept_one(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct pollfd p = {.fd = lfd, .events = POLLIN};

		if (fd >= 0)
			return fd;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
		    errno != ECONNABORTED) {
			fprintf(stderr, "accept() failed: %s\n",
				strerror(errno));
			return -1;
		}
		if (poll(&p, 1, -1) < 0 && errno != EINTR) {
			fprintf(stderr, "poll: %s\n", strerror(errno));
			return -1;
		}
	}
}

int pp_oob_serve(int lfd, int timeout_ms, const struct pp_dest *mine,
		 const struct pp_ext *ext, pp_connect_fn connect, void *arg,
		 struct pp_dest *peer)
{
	struct pp_dest rem;
	int fd, ret = -1;

	fd = accept_one(lfd);
	if (fd < 0)
		return -1;
	if (recv_dest(fd, timeout_ms, &rem))
		goto out_close;
	if (connect && connect(&rem, arg)) {
		fprintf(stderr, "Couldn't connect to remote QP\n");
		goto out_close;
	}
	if (send_dest(fd, timeout_ms, mine) || recv_done(fd, timeout_ms))
		goto out_close;
	if (ext && swap_ext(fd, timeout_ms, ext, false))
		goto out_close;
	*peer = rem;
	ret = 0;
out_close:
	close(fd);
	return ret;
}

/* Non-blocking connect bounded by the deadline; 0 or -errno. */
static int connect_within(int fd, const struct addrinfo *ai, int64_t deadline)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	if (wait_fd(fd, POLLOUT, deadline) <= 0)
		return -ETIMEDOUT;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return -err;
}

static int dial(const char *host, unsigned int port, int timeout_ms)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *t;
	int64_t deadline = now_ms() + timeout_ms;
	char service[8];
	int fd = -1, err = -ECONNREFUSED, n;

	snprintf(service, sizeof(service), "%u", port);
	n = getaddrinfo(host, service, &hints, &res);
	if (n) {
		fprintf(stderr, "%s for %s:%u\n", gai_strerror(n), host, port);
		return -1;
	}
	for (t = res; t; t = t->ai_next) {
		fd = socket(t->ai_family,
			    t->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    t->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		err = connect_within(fd, t, deadline);
		if (!err)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		fprintf(stderr, "Couldn't connect to %s:%u: %s%s\n", host, port,
			strerror(-err),
			err == -ECONNREFUSED ? " (is the server running? "
					       "check -p)"
					     : "");
	return fd;
}

int pp_oob_connect(const char *host, unsigned int port, int timeout_ms,
		   const struct pp_dest *mine, const struct pp_ext *ext,
		   struct pp_dest *peer)
{
	struct pp_dest rem;
	int fd, ret = -1;

	fd = dial(host, port, timeout_ms);
	if (fd < 0)
		return -1;
	if (send_dest(fd, timeout_ms, mine) || recv_dest(fd, timeout_ms, &rem))
		goto out_close;
	if (send_all(fd, PP_DONE_MSG, PP_DONE_SIZE, timeout_ms,
		     "\"done\" message"))
		goto out_close;
	if (ext && swap_ext(fd, timeout_ms, ext, true))
		goto out_close;
	*peer = rem;
	ret = 0;
out_close:
	close(fd);
	return ret;
}
