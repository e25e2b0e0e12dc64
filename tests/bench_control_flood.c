/* SPDX-License-Identifier: MIT */
/*
 * bench_control_flood: the control server's CPU time per rejected datagram
 * (issue 9, docs/benchmarks.md). A server runs in its own thread on
 * 127.0.0.1 (optionally with a shared secret); this process sends N
 * datagrams of each kind from 64 source ports and reads the server thread's
 * CPU clock (pthread_getcpuclockid) before and after, divided by the
 * datagrams the server actually handled (its `received` counter; the
 * kernel may drop some when the socket buffer is full).
 *
 * usage: bench_control_flood [N per kind (default 200000)] [--secret]
 * Kinds: garbage (random bytes), json (random bytes after '{', parsed),
 * discover (padded DISCOVER without a cookie: answered RETRY, or bad_mac
 * with --secret). Only loopback traffic, bounded by N.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "qlink/control.h"
#include "qlink/log.h"

static struct ql_ctl_server *srv;
static int stop;
static uint64_t user_ns, sys_ns; /* the server thread's, after its last poll */

static int offer(void *ctx, struct ql_ctl_session *s, uint32_t n, struct ql_conn_params *out)
{
	return -1; /* never reached by the flood: no cookie */
}

static const struct ql_ctl_server_ops ops = { .offer = offer };

static void *serve(void *arg)
{
	struct rusage ru;

	while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST)) {
		ql_ctl_server_poll(srv, 10);
		/* user and system time apart: how much is the kernel's receive path */
		getrusage(RUSAGE_THREAD, &ru);
		__atomic_store_n(&user_ns,
				 (uint64_t)ru.ru_utime.tv_sec * 1000000000ull +
					 (uint64_t)ru.ru_utime.tv_usec * 1000ull,
				 __ATOMIC_SEQ_CST);
		__atomic_store_n(&sys_ns,
				 (uint64_t)ru.ru_stime.tv_sec * 1000000000ull +
					 (uint64_t)ru.ru_stime.tv_usec * 1000ull,
				 __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static uint64_t ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t received(void)
{
	struct ql_ctl_stats st;

	ql_ctl_server_stats(srv, &st);
	return st.received;
}

int main(int argc, char **argv)
{
	static const char *const kinds[] = { "garbage", "json", "discover" };
	static const uint8_t key[] = "bench-secret";
	long n = argc > 1 && argv[1][0] != '-' ? atol(argv[1]) : 200000;
	bool with_secret = argc > 1 && !strcmp(argv[argc - 1], "--secret");
	struct ql_ctl_server_config cfg = { .bind_addr = "127.0.0.1" };
	struct sockaddr_in dst = { .sin_family = AF_INET };
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int fds[64];
	clockid_t cpu;
	pthread_t th;

	if (n < 1 || n > 10000000) {
		fprintf(stderr, "usage: bench_control_flood [N 1..10^7] [--secret]\n");
		return 2;
	}
	ql_log_set_level(QL_LOG_ERROR);
	if (with_secret) {
		cfg.secret = key;
		cfg.secret_len = sizeof(key) - 1;
	}
	if (ql_ctl_server_create(&cfg, &ops, NULL, &srv))
		return 1;
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	dst.sin_port = htons(ql_ctl_server_port(srv));
	for (int i = 0; i < 64; i++)
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
	pthread_create(&th, NULL, serve, NULL);
	pthread_getcpuclockid(th, &cpu);
	printf("control server CPU per rejected datagram (%s, %ld datagrams per kind)\n",
	       with_secret ? "with secret" : "no secret", n);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		uint64_t r0 = received(), c0 = ns(cpu), t0 = ns(CLOCK_MONOTONIC), r1, last;
		uint64_t u0 = __atomic_load_n(&user_ns, __ATOMIC_SEQ_CST),
			 s0 = __atomic_load_n(&sys_ns, __ATOMIC_SEQ_CST);
		uint8_t buf[512];

		for (long i = 0; i < n; i++) {
			size_t len = 64;

			if (k == 2) {
				len = (size_t)snprintf(
					(char *)buf, sizeof(buf),
					"{\"v\":2,\"type\":\"DISCOVER\",\"session\":"
					"\"%016lx\",\"seq\":1,\"channels\":4,\"pad\":\"%200s\"}",
					(unsigned long)i + 1, "");
			} else {
				for (size_t b = 0; b < len; b += 8) {
					rng ^= rng << 13;
					rng ^= rng >> 7;
					rng ^= rng << 17;
					memcpy(buf + b, &rng, 8);
				}
				buf[0] = k == 1 ? '{' : (buf[0] == '{' ? 'x' : buf[0]);
			}
			sendto(fds[i % 64], buf, len, 0, (struct sockaddr *)&dst, sizeof(dst));
			if (i % 256 == 255)
				usleep(200); /* let the server keep up rather than measure drops */
		}
		/* until the server has handled what arrived */
		do {
			last = received();
			usleep(100000);
		} while (received() != last);
		r1 = received() - r0;
		printf("  %-9s handled %8llu of %ld  %7.0f ns CPU each (user %.0f, system %.0f)  "
		       "(%.0f/s offered)\n",
		       kinds[k], (unsigned long long)r1, n,
		       r1 ? (double)(ns(cpu) - c0) / (double)r1 : 0.0,
		       r1 ? (double)(__atomic_load_n(&user_ns, __ATOMIC_SEQ_CST) - u0) /
				       (double)r1 :
			    0.0,
		       r1 ? (double)(__atomic_load_n(&sys_ns, __ATOMIC_SEQ_CST) - s0) / (double)r1 :
			    0.0,
		       (double)n * 1e9 / (double)(ns(CLOCK_MONOTONIC) - t0));
	}
	__atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
	for (int i = 0; i < 64; i++)
		close(fds[i]);
	ql_ctl_server_destroy(srv);
	return 0;
}
