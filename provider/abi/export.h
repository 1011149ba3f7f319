/* SPDX-License-Identifier: MIT */
/*
 * What crosses the library boundary.  The library is compiled with
 * -fvisibility=hidden; a function is exported only when it is marked
 * SV_EXPORT *and* named in libibverbs.map, which gives it its version node.
 * For provider/abi/ only: the layers below export nothing (core/objects.h
 * poisons SV_EXPORT and SV_SYMVER; ctest abi.exports_only_in_abi checks
 * the tree and the objects).
 */
#ifndef SV_EXPORT_H
#define SV_EXPORT_H

#define SV_EXPORT __attribute__((visibility("default")))

/*
 * Binds `impl` to the non-default version `name@node` (one '@': old
 * binaries that asked for that node get it; new links never see it).
 * `impl` must be SV_EXPORT, or the alias is born hidden; the version
 * script's `local: *` then hides the plain `impl` name itself.
 */
#define SV_SYMVER(impl, name, node) \
	__asm__(".symver " #impl ", " #name "@" node)

#endif
