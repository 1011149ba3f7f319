/* The cost of a UD datagram's MAC (provider/lib/auth.c), per call, best of 5
 * rounds of 200,000: sv_auth_mac (a fresh EVP_MAC context each time) and
 * sv_auth_mac_use (each thread's keyed context, what ud.c calls). */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "auth.h"

static uint64_t ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(void)
{
	static uint8_t hdr[64], pay[4096], ids[16], out[32];
	const uint8_t *key = sv_auth_key(SV_AUTH_UD);
	int sizes[] = {8, 1024, 4096};

	if (!key)
		return fprintf(stderr, "set SOFTVERBS_SECRET_FILE\n"), 1;
	for (int s = 0; s < 3; s++)
		for (int fresh = 1; fresh >= 0; fresh--) {
			struct iovec iov[3] = {
				{hdr, 64}, {pay, (size_t)sizes[s]}, {ids, 16}};
			uint64_t best = UINT64_MAX;
			int n = 200000;

			for (int r = 0; r < 5; r++) {
				uint64_t t0 = ns(), d;

				for (int i = 0; i < n; i++)
					if (fresh)
						sv_auth_mac(key, iov, 3, out);
					else
						sv_auth_mac_use(SV_AUTH_UD, iov,
								3, out);
				d = ns() - t0;
				best = d < best ? d : best;
			}
			printf("%-15s payload %4d B: %5.0f ns per MAC\n",
			       fresh ? "sv_auth_mac" : "sv_auth_mac_use",
			       sizes[s], (double)best / n);
		}
	return 0;
}
