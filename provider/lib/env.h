/* SPDX-License-Identifier: MIT */
/*
 * Every SOFTVERBS_* environment variable, declared once as a row of
 * sv_env_rows[] (env.c): name, type, default, valid range, one line of
 * meaning, and what a bad value does.  The rows are read once, at the
 * first accessor call; the code reads the parsed values only through
 * sv_env_uint/sv_env_bool/sv_env_str.  `softverbs-run --env` prints the
 * table (tools/softverbs-stat.c), docs/configuration.md is made from it.
 * libibverbs, librdmacm and softverbs-stat each link their own copy.
 */
#ifndef SV_ENV_H
#define SV_ENV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sv_env_id {
	SV_ENV_DEBUG,
	SV_ENV_TRANSPORT,
	SV_ENV_TCP_PORT,
	SV_ENV_TCP_CONNECT_PORT,
	SV_ENV_RING_KB,
	SV_ENV_EVENT_SPIN_US,
	SV_ENV_SINGLE_COPY,
	SV_ENV_MOVE_AT_REG,
	SV_ENV_SINGLE_COPY_MIN,
	SV_ENV_SINGLE_COPY_COLD,
	SV_ENV_ARENA_GB,
	SV_ENV_UD_LANES,
	SV_ENV_MCAST_DIR,
	SV_ENV_FAULTS,
	SV_ENV_PCAP,
	SV_ENV_PCAP_SNAP,
	SV_ENV_CM_TIMEOUT_MS,
	SV_ENV_CM_MAD_DROP,
	SV_ENV_DEVFILES,
	SV_ENV_SECRET_FILE,
	SV_ENV_SUBNET,
	SV_ENV_PROGRESS_CPUS,
	SV_ENV_ROCE_SPORT,
	SV_ENV_ROCE_GSO,
	SV_ENV_COUNT
};

enum sv_env_type {
	SV_ENV_T_BOOL, /* 0 or 1 */
	SV_ENV_T_UINT, /* decimal (or 0x hex) in [min, max] */
	SV_ENV_T_PORT, /* a TCP/UDP port, [min, max] */
	SV_ENV_T_ENUM, /* one of values[]; the value is its index */
	SV_ENV_T_PATH, /* any non-empty string */
	SV_ENV_T_SPEC, /* a string that check() accepts */
};

/* What a value that does not parse or is out of range does. */
enum sv_env_policy {
	SV_ENV_REFUSE,	/* softverbs0 is not listed: ibv_get_device_list
			 * returns an empty list with errno EINVAL */
	SV_ENV_DEFAULT, /* the default is used */
};

/* Values for SV_ENV_TRANSPORT (indexes of its values[]). */
enum sv_transport {
	SV_TRANSPORT_AUTO, /* shared memory on this host, TCP to others */
	SV_TRANSPORT_SHM,
	SV_TRANSPORT_TCP,
	SV_TRANSPORT_ROCE, /* RoCEv2 (UDP 4791) to every peer */
};

struct sv_env_row {
	const char *name;
	enum sv_env_type type;
	enum sv_env_policy policy;
	uint64_t def;		   /* bool/uint/port/enum: the default */
	const char *def_text;	   /* the default in words, or NULL: def */
	uint64_t min, max;	   /* uint/port: the valid range */
	const char *const *values; /* enum: the names, NULL-terminated */
	const char *unit;	   /* uint: "KiB", "us"... or NULL */
	const char *syntax;	   /* path/spec: what is valid, in words */
	/* spec: 0 if v parses, else -EINVAL with why filled */
	int (*check)(const char *v, char *why, size_t n);
	const char *reader; /* who reads it */
	const char *help;   /* one line of meaning */
};

extern const struct sv_env_row sv_env_rows[SV_ENV_COUNT];

/* SOFTVERBS_PCAP_SNAP's default and most: tcpdump's, whole packets */
#define SV_PCAP_SNAP 262144u

/* Reads the rows (once; every accessor calls it until they are read). */
void sv_env_load(void);
/* The values in effect, published by sv_env_load (release on ready). */
extern uint64_t sv_env_vals[SV_ENV_COUNT];
extern atomic_bool sv_env_ready;

/* The value in effect: bool, uint, port, enum (the index).  Inline: the
 * UD poll and send paths ask it; once read, it costs a load. */
static inline uint64_t sv_env_uint(enum sv_env_id id)
{
	if (__builtin_expect(
		    !atomic_load_explicit(&sv_env_ready, memory_order_acquire),
		    0))
		sv_env_load();
	return sv_env_vals[id];
}

static inline bool sv_env_bool(enum sv_env_id id)
{
	return sv_env_uint(id) != 0;
}
/* path, spec: the string in effect, or NULL (unset, empty or refused). */
const char *sv_env_str(enum sv_env_id id);

/* SOFTVERBS_CM_MAD_DROP's kinds, in the order of n[] below. */
enum sv_cm_drop_kind {
	SV_CM_DROP_REQ,
	SV_CM_DROP_REP,
	SV_CM_DROP_RTU,
	SV_CM_DROP_REJ,
	SV_CM_DROP_DREQ,
	SV_CM_DROP_DREP,
	SV_CM_DROP_KINDS
};
/* "req=N,rep=N,...": 0 and n[kind] (the others 0), or -EINVAL. */
int sv_env_cm_drop_parse(const char *v, unsigned int n[SV_CM_DROP_KINDS]);

/* A REFUSE row has a bad value: softverbs0 must not open. */
bool sv_env_refused(void);

/*
 * What the environment said of row id: NULL if unset or empty, else its
 * string; *bad (if given) tells whether it was refused for the default.
 */
const char *sv_env_raw(enum sv_env_id id, bool *bad);

/*
 * Parses s (non-empty) as a value of row r: 0 and *v (bool, uint, port,
 * enum), or -EINVAL with why filled ("is not a port in 1..65535").
 */
int sv_env_parse(const struct sv_env_row *r, const char *s, uint64_t *v,
		 char *why, size_t n);

/* The valid range of a row, in words ("1..65535", "auto, shm or tcp"). */
void sv_env_range(const struct sv_env_row *r, char *buf, size_t n);
/* The default of a row, in words. */
void sv_env_default(const struct sv_env_row *r, char *buf, size_t n);

/*
 * Set before the first accessor call to read the rows without a word on
 * stderr: librdmacm (libibverbs, which it opens, says it) and
 * softverbs-stat (which prints the verdict in its table).
 */
extern bool sv_env_quiet;

#endif
