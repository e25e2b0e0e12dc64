/* SPDX-License-Identifier: MIT */
/*
 * ql-udp-flood: garbage datagrams at a control port on 127.0.0.1, from many
 * source ports, at a set rate, bounded in count and in time: the flood of
 * tests/qlinkd_flood.sh and bench_control_flood (docs/benchmarks.md).
 *
 * usage: ql-udp-flood PORT [--rate N/s] [--count N] [--seconds S] [--ports K] [--size B]
 *                          [--kind garbage|json|discover]
 *
 * Only 127.0.0.1 is a destination (no flag changes it). --count and
 * --seconds both bound the run (defaults 100000 and 10, at most 10^8 and
 * 600). garbage: random bytes; json: random bytes after a '{' (they reach
 * the JSON parser); discover: padded DISCOVERs without a cookie (each one
 * earns a RETRY). Prints "sent N in S s (R/s)" when done.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	double rate = 200000, seconds = 10, t0, elapsed;
	long long count = 100000, sent = 0;
	int ports = 64, size = 64, *fds;
	const char *kind = "garbage";
	struct sockaddr_in dst = { .sin_family = AF_INET };
	unsigned char buf[1500];

	if (argc < 2 || atoi(argv[1]) <= 0 || atoi(argv[1]) > 65535)
		goto usage;
	dst.sin_port = htons((uint16_t)atoi(argv[1]));
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 >= argc)
			goto usage;
		if (!strcmp(argv[i], "--rate"))
			rate = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--count"))
			count = atoll(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--ports"))
			ports = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--kind"))
			kind = argv[i + 1];
		else
			goto usage;
	}
	if (rate <= 0 || count < 1 || count > 100000000 || seconds <= 0 || seconds > 600 ||
	    ports < 1 || ports > 1024 || size < 1 || size > (int)sizeof(buf))
		goto usage;
	fds = calloc((size_t)ports, sizeof(*fds));
	if (!fds)
		return 1;
	for (int i = 0; i < ports; i++) {
		struct sockaddr_in src = { .sin_family = AF_INET };

		inet_pton(AF_INET, "127.0.0.1", &src.sin_addr);
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
		if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&src, sizeof(src))) {
			perror("socket");
			return 1;
		}
	}
	t0 = now_s();
	while (sent < count) {
		double t = now_s() - t0;
		long long due = (long long)(t * rate) + 1;

		if (t >= seconds)
			break;
		if (sent >= due) {
			/* ahead of the rate: sleep until the next datagram is due */
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
			continue;
		}
		for (; sent < due && sent < count; sent++) {
			size_t n = (size_t)size;

			if (!strcmp(kind, "discover")) {
				n = (size_t)snprintf(
					(char *)buf, sizeof(buf),
					"{\"v\":2,\"type\":\"DISCOVER\",\"session\":"
					"\"%016llx\",\"seq\":1,\"channels\":4,\"pad\":\"%200s\"}",
					(unsigned long long)next(), "");
			} else {
				for (size_t k = 0; k < n; k += 8) {
					uint64_t r = next();

					memcpy(buf + k, &r, n - k < 8 ? n - k : 8);
				}
				if (!strcmp(kind, "json"))
					buf[0] = '{';
				else if (buf[0] == '{')
					buf[0] = 'x';
			}
			/* The socket buffer fills under a flood: a drop is part of the test. */
			if (sendto(fds[sent % ports], buf, n, 0, (struct sockaddr *)&dst,
				   sizeof(dst)) < 0 &&
			    errno != EAGAIN && errno != ENOBUFS && errno != ECONNREFUSED) {
				perror("sendto");
				return 1;
			}
		}
	}
	elapsed = now_s() - t0;
	printf("sent %lld in %.2f s (%.0f/s)\n", sent, elapsed, elapsed > 0 ? sent / elapsed : 0.0);
	for (int i = 0; i < ports; i++)
		close(fds[i]);
	free(fds);
	return 0;
usage:
	fprintf(stderr, "usage: ql-udp-flood PORT [--rate N/s] [--count N] [--seconds S] "
			"[--ports K] [--size B] [--kind garbage|json|discover]\n");
	return 2;
}
