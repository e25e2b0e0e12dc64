/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the emulated Hololink board (src/control/hololink_server.c):
 * the input is a sequence of datagrams, each a length byte then that many
 * bytes, fed in order to one board with two VPs, so that multi-request
 * states (a VP configured, enabled, then written) are reached. Checked for
 * each: no crash or sanitizer report, a reply never longer than its request
 * plus 6 bytes, a reply echoing the request's opcode, flags and sequence, and
 * a VP reported configured only with parameters the data plane can run.
 * Build: `cmake --build BUILD --target fuzz_hololink` (needs clang), run:
 * `BUILD/tests/fuzz/fuzz_hololink tests/fuzz/corpus/hololink`.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/hololink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void configured(void *arg, uint32_t vp, const struct ql_hsb_dataplane *dp)
{
	(void)arg;
	if (vp >= 2 || !dp->page_inc || dp->page_inc % QL_HSB_PAGE || !dp->frame_len ||
	    dp->frame_len > dp->page_inc || dp->num_pages < 1 || dp->num_pages > QL_HSB_MAX_PAGES ||
	    dp->page_addr + (uint64_t)dp->page_inc * dp->num_pages > 1ull << 39)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ql_hl_server_config cfg = { .num_vps = 2 };
	struct ql_hl_server *s;
	uint8_t reply[QL_HL_DGRAM_MAX];

	/* a fresh board per input */
	if (ql_hl_server_create(&cfg, configured, NULL, &s))
		abort();
	while (size > 0) {
		size_t len = data[0] < size - 1 ? data[0] : size - 1;
		size_t n;

		/* length byte 0xff: a long block request made of the rest */
		if (data[0] == 0xff)
			len = size - 1;
		n = ql_hl_server_handle(s, data + 1, len, reply, sizeof(reply));
		if (n > len + 6 || n > sizeof(reply) || (n && memcmp(reply, data + 1, 4)))
			abort();
		data += 1 + len;
		size -= 1 + len;
	}
	ql_hl_server_destroy(s);
	return 0;
}
