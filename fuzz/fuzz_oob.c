// SPDX-License-Identifier: MIT
/*
 * rc_pingpong's out-of-band messages (pingpong/oob.c): the 52-byte
 * "LID:QPN:PSN:GID" address message and the svext1 extension, as bytes a
 * TCP peer sent.  Besides not crashing: a message the parser accepts
 * formats back to the same bytes (hex digits lower-cased), what it
 * rejects comes with a reason, and pp_describe_bytes stays inside its
 * buffer whatever the bytes and the room.
 */
#include <ctype.h>

#include "fuzz.h"
#include "oob.h"

static void address_message(const uint8_t *data, size_t size)
{
	struct pp_dest d, back;
	char why[160] = "", msg[PP_MSG_SIZE];

	memset(&d, 0xa5, sizeof(d));
	if (pp_msg_parse(data, size, &d, why, sizeof(why))) {
		FZ_CHECK(why[0] != '\0');
		return;
	}
	FZ_CHECK(size == PP_MSG_SIZE);
	FZ_CHECK(d.lid <= 0xffff && d.qpn <= 0xffffff && d.psn <= 0xffffff);
	FZ_CHECK(pp_msg_format(&d, msg) == 0);
	for (size_t i = 0; i < PP_MSG_SIZE; i++)
		FZ_CHECK(msg[i] == tolower(data[i]));
	FZ_CHECK(pp_msg_parse(msg, sizeof(msg), &back, why, sizeof(why)) == 0);
	FZ_CHECK(!memcmp(&back, &d, sizeof(d)));
}

static void ext_message(const uint8_t *data, size_t size)
{
	struct pp_ext e, back;
	char why[160] = "", msg[PP_EXT_SIZE];

	if (pp_ext_parse(data, size, &e, why, sizeof(why))) {
		FZ_CHECK(why[0] != '\0');
		return;
	}
	FZ_CHECK(size == PP_EXT_SIZE);
	pp_ext_format(&e, msg);
	FZ_CHECK(pp_ext_parse(msg, sizeof(msg), &back, why, sizeof(why)) == 0);
	FZ_CHECK(!memcmp(&back, &e, sizeof(e)));
}

static void describe(const uint8_t *data, size_t size)
{
	char out[96];
	size_t room = size ? data[0] % sizeof(out) : 0;

	memset(out, 0x5a, sizeof(out));
	pp_describe_bytes(data, size, out, room);
	if (room) {
		FZ_CHECK(memchr(out, 0, room) != NULL);
		for (size_t i = 0; out[i]; i++)
			FZ_CHECK(out[i] >= 0x20 && out[i] < 0x7f);
	}
	for (size_t i = room; i < sizeof(out); i++)
		FZ_CHECK(out[i] == 0x5a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exact-size copies: ASan sees any read past what the peer sent */
	uint8_t *copy = malloc(size ? size : 1);

	memcpy(copy, data, size);
	address_message(copy, size);
	ext_message(copy, size);
	describe(copy, size);
	/* the sizes a parser accepts, from the front of any input */
	if (size >= PP_MSG_SIZE)
		address_message(copy, PP_MSG_SIZE);
	if (size >= PP_EXT_SIZE)
		ext_message(copy, PP_EXT_SIZE);
	free(copy);
	return 0;
}
