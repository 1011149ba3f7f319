/* SPDX-License-Identifier: MIT */
#ifndef SV_CRC32C_H
#define SV_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, as iSCSI and ext4) of n bytes at p, continuing
 * crc (0 to start): sv_crc32c(sv_crc32c(0, a, n), b, m) is the CRC of a
 * then b. */
uint32_t sv_crc32c(uint32_t crc, const void *p, size_t n);

#endif
