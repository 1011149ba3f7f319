/* SPDX-License-Identifier: MIT */
#ifndef SV_CRC32C_H
#define SV_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, as iSCSI and ext4) of n bytes at p, continuing
 * crc (0 to start): sv_crc32c(sv_crc32c(0, a, n), b, m) is the CRC of a
 * then b. */
uint32_t sv_crc32c(uint32_t crc, const void *p, size_t n);
/* The same, and the n bytes copied to dst (not overlapping src) in the
 * same pass. */
uint32_t sv_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n);

#endif
