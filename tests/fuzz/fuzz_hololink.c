/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the emulated Hololink board (src/control/hololink_server.c):
 * the input is a sequence of datagrams, each a length byte then that many
 * bytes, fed in order to one board with two VPs, so that multi-request
 * states (a VP configured, enabled, then written) are reached. Checked for
 * each: no crash or sanitizer report, a reply never longer than its request
 * plus 8 bytes (a RD_DWORD's value and the 4-byte trailer), a reply carrying
 * the request's opcode | 0x80, flags and sequence, and a VP reported
 * configured only with parameters the data plane can run (the metadata
 * after round_up(frame, 128) inside the page, the ring not wrapping).
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
	    (dp->frame_len + 127ull) / 128 * 128 + 128 > dp->page_inc || dp->num_pages < 1 ||
	    dp->num_pages > QL_HSB_MAX_PAGES ||
	    dp->page_addr + (uint64_t)dp->page_inc * dp->num_pages <= dp->page_addr)
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
		if (n > len + 8 || n > sizeof(reply) ||
		    (n && (reply[0] != (data[1] | 0x80) || memcmp(reply + 1, data + 2, 3))))
			abort();
		data += 1 + len;
		size -= 1 + len;
	}
	ql_hl_server_destroy(s);
	return 0;
}
