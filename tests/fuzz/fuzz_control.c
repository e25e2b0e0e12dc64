/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control-message parser: every input is parsed
 * without a secret and with one; whatever parses must re-encode and parse
 * again. Build: `cmake --build BUILD --target fuzz_control` (needs clang),
 * run: `BUILD/tests/fuzz/fuzz_control tests/fuzz/corpus/control`.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t secret[] = "qlink-test-secret";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ql_ctl_msg m, m2;
	uint8_t out[QL_CTL_MAX_DGRAM];
	int n;

	ql_ctl_parse(data, size, secret, sizeof(secret) - 1, &m);
	if (ql_ctl_parse(data, size, NULL, 0, &m))
		return 0;
	n = ql_ctl_format(&m, secret, sizeof(secret) - 1, out, sizeof(out));
	if (n > 0) {
		if (ql_ctl_parse(out, (size_t)n, secret, sizeof(secret) - 1, &m2))
			abort();
		if (m2.type != m.type || m2.session != m.session || m2.seq != m.seq ||
		    m2.nchannels != m.nchannels)
			abort();
	}
	return 0;
}
