/* SPDX-License-Identifier: MIT */
/*
 * What the two halves of the SDR-RDMA example (sdr_receiver.c, sdr_sender.c)
 * both need besides qlink: CHECK, which prints a failed call's error and its
 * detail and leaves main, and the out-of-band exchange of one line of text
 * (a QP's address) through a directory both processes can see. Real
 * programs swap these lines over their own control channel.
 */
#ifndef QL_EXAMPLE_UTIL_H
#define QL_EXAMPLE_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <qlink/error.h>

#define CHECK(call)                                                                \
	do {                                                                       \
		int ret_ = (call);                                                 \
		if (ret_ < 0) {                                                    \
			fprintf(stderr, "%s: %s (%s)\n", #call, ql_strerror(ret_), \
				ql_error_detail());                                \
			return 1;                                                  \
		}                                                                  \
	} while (0)

/* Write our line to DIR/NAME.tmp and rename it into place, so the peer
 * never reads half a line. */
static inline int put_line(const char *dir, const char *name, const char *line)
{
	char path[4096], tmp[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", line) < 0 || fclose(f) || rename(tmp, path))
		return -errno;
	return 0;
}

/* Wait up to 20 s for the peer's line in DIR/NAME. */
static inline int get_line(const char *dir, const char *name, char *line, size_t len)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < 2000; i++, usleep(10000)) {
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		char *ok = fgets(line, (int)len, f);
		fclose(f);
		if (ok)
			return 0;
	}
	return -ETIMEDOUT;
}

#endif
