/* SPDX-License-Identifier: MIT */
/*
 * The out-of-band exchange: the TCP conversation in which two
 * rc_pingpong processes swap LID, QPN, PSN and GID before their QPs can
 * talk.  Wire compatible with ibv_rc_pingpong; knows nothing of verbs,
 * so tests drive it with a fake peer.  Every peer byte is validated.
 */
#ifndef PP_OOB_H
#define PP_OOB_H

#include <stddef.h>
#include <stdint.h>

/* "%04x:%06x:%06x:%32s" plus its NUL, as the original sizes it. */
#define PP_MSG_SIZE \
	sizeof("0000:000000:000000:00000000000000000000000000000000")
/* The client's last word; the NUL is sent too. */
#define PP_DONE_MSG  "done"
#define PP_DONE_SIZE sizeof(PP_DONE_MSG)
/* Our optional extension message: NUL-padded text of this size. */
#define PP_EXT_SIZE 64

/* What one side tells the other about its QP. */
struct pp_dest {
	uint32_t lid;	 /* port LID, 16 bits; 0 on RoCE */
	uint32_t qpn;	 /* QP number, 24 bits */
	uint32_t psn;	 /* first packet sequence number, 24 bits */
	uint8_t gid[16]; /* raw GID bytes; all zero when -g is not used */
};

/*
 * Run parameters both sides must share for --sweep/--warmup.  Sent only
 * when this side was given one of them, after the original's "done", so
 * the default conversation stays byte-for-byte the original's.
 */
struct pp_ext {
	unsigned int iters;
	unsigned int sweep_max;
	unsigned int warmup;
};

/* GID bytes <-> 32 hex digits, byte 0 first (the original's wire form). */
void pp_gid_to_wire(const uint8_t gid[16], char wire[33]);
int pp_wire_to_gid(const char *wire, uint8_t gid[16]);

/* Formats *d; -EINVAL (nothing written) when a field overflows its width. */
int pp_msg_format(const struct pp_dest *d, char msg[PP_MSG_SIZE]);

/*
 * Parses exactly len bytes received from a peer.  On error returns
 * -EINVAL and puts a one-line reason in why; *d is written only on
 * success.
 */
int pp_msg_parse(const void *buf, size_t len, struct pp_dest *d, char *why,
		 size_t why_len);

int pp_ext_format(const struct pp_ext *e, char msg[PP_EXT_SIZE]);
int pp_ext_parse(const void *buf, size_t len, struct pp_ext *e, char *why,
		 size_t why_len);

/* Shows untrusted bytes safely: printable ASCII, else \xNN; capped. */
void pp_describe_bytes(const void *buf, size_t len, char *out, size_t out_len);

/*
 * Binds and listens on port (IPv6 dual-stack, else IPv4).  Prints
 * "port N is in use; pass -p" and returns -1 when it is taken.
 */
int pp_oob_listen(unsigned int port, int *lfd);

/* Called by the server between reading the peer's address and replying:
 * the original moves its QP to RTR/RTS there.  Non-zero aborts. */
typedef int (*pp_connect_fn)(const struct pp_dest *peer, void *arg);

/*
 * Server side on a listening socket: accepts one client (waiting as long
 * as it takes, like the original), reads its address, calls connect,
 * sends ours, reads "done", then with ext swaps extension messages.
 * Each peer message must arrive within timeout_ms.  Errors are printed
 * here; returns 0 and fills *peer on success, else -1.  Does not close
 * lfd.
 */
int pp_oob_serve(int lfd, int timeout_ms, const struct pp_dest *mine,
		 const struct pp_ext *ext, pp_connect_fn connect, void *arg,
		 struct pp_dest *peer);

/*
 * Client side: connects to host:port (IPv4 or IPv6, within timeout_ms),
 * sends our address, reads the server's, sends "done", then with ext
 * swaps extension messages.  Errors printed here; 0 or -1.
 */
int pp_oob_connect(const char *host, unsigned int port, int timeout_ms,
		   const struct pp_dest *mine, const struct pp_ext *ext,
		   struct pp_dest *peer);

#endif
