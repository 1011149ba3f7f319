/* SPDX-License-Identifier: MIT */
/*
 * The import protocol (verbs/import_wire.c): what a process that was
 * given a context's cmd_fd (SCM_RIGHTS) asks the context's owner, and
 * the answer.  A request is one SOCK_SEQPACKET message on the cmd_fd,
 * exactly struct sv_imp_req, carrying one fd with SCM_RIGHTS: a socket
 * of the asker's own (a fresh socketpair end) the answer goes back on,
 * so that no other holder of the cmd_fd can read it.  The answer is
 * exactly struct sv_imp_rep; an SV_IMP_MR answer of status 0, shared 1, carries
 * one fd with SCM_RIGHTS, the owner's revocation page (a sealed memfd of
 * SV_IMP_PAGE bytes of uint64_t words: word is the import's, gen its
 * value now; the owner moves it when the MR goes); an SV_IMP_DM answer
 * of status 0 two: that page, then the DM's own memfd (length bytes
 * rounded up to pages, sealed F_SEAL_SHRINK|GROW|SEAL, writable: the
 * DM's bytes and nothing else, verbs/dm.c); any other none.
 * Both sides check every field: an owner drops a request it cannot read
 * (the asker sees its socket close), an asker refuses an answer it
 * cannot read.
 */
#ifndef SV_IMPORT_WIRE_H
#define SV_IMPORT_WIRE_H

#include <stdint.h>

/* 2: the MR's iova, PD and backing; 3: its revocation page's word;
 * 4: a DM's memfd and word */
#define SV_IMP_VERSION 4
#define SV_IMP_MAGIC   0x53564950u /* "SVIP" */
#define SV_IMP_PAGE    4096	   /* bytes of the revocation page */

enum sv_imp_op {
	SV_IMP_HELLO = 1, /* is this a softverbs context's cmd_fd? */
	SV_IMP_PD = 2,	  /* is handle a live PD of it? */
	SV_IMP_MR = 3,	  /* handle's MR: keys, range, access */
	SV_IMP_DM = 4,	  /* handle's DM: its length, memfd and word */
};

struct sv_imp_req {
	uint32_t magic;
	uint16_t version;
	uint16_t op;	 /* enum sv_imp_op */
	uint32_t handle; /* PD or MR handle; 0 for HELLO */
	uint32_t zero;	 /* must be 0 */
};

struct sv_imp_rep {
	uint32_t magic;
	uint16_t version;
	uint16_t op;		     /* the request's */
	uint32_t handle;	     /* the request's */
	uint32_t status;	     /* 0, or the errno the import fails with */
	uint32_t pid;		     /* the owner's process */
	uint32_t lkey, rkey, access; /* SV_IMP_MR */
	uint64_t addr, length;	     /* SV_IMP_MR: in the owner's memory;
				      * SV_IMP_DM: length, the DM's */
	uint64_t iova;		     /* SV_IMP_MR: what SGEs and peers name */
	uint32_t pd_handle;	     /* SV_IMP_MR: its PD's handle */
	/* SV_IMP_MR: 1 when [addr, addr+length) is, in the owner, shared
	 * memory of one object (file, memfd, shmem): device and inode as
	 * /proc/self/maps says them, and the object's offset at addr; an
	 * importer that maps the same object at the same address reaches
	 * the MR's bytes (verbs/import.c) */
	uint32_t shared;
	uint32_t dev_major, dev_minor;
	uint64_t ino, offset;
	/* SV_IMP_MR, shared, and SV_IMP_DM: the import's word in the
	 * revocation page the answer carries, and its value while the MR
	 * (the DM) lives */
	uint32_t word, zero;
	uint64_t gen;
};

_Static_assert(sizeof(struct sv_imp_req) == 16, "import request");
_Static_assert(sizeof(struct sv_imp_rep) == 104, "import reply");

#endif
