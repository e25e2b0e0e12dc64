/* SPDX-License-Identifier: MIT */
/*
 * bench_udp_rtt: RPC round trip and rate over CUDA-Q's UDP transport on
 * loopback (docs/benchmarks.md, "CUDA-Q UDP transport"). A daemon serves
 * CUDA-Q's rpc_increment over the UDP channel on its own dispatcher thread
 * (busy polling, optionally pinned); this process runs the VPPU over the
 * UDP client (full-stride datagrams, as CUDA-Q's caller sends them), closed
 * loop with a window, and prints the VPPU's JSON report and the channel's
 * counters.
 *
 * usage: bench_udp_rtt [-n CALLS] [-w WINDOW] [-s SLOT_SIZE] [-a ARG_LEN]
 *                      [-c SERVER_CPU] [-C CLIENT_CPU] [-b BUSY_POLL_US]
 *                      [-H ADDRESS]
 * defaults: 200000 calls, window 1, stride 256, 16 argument bytes, no
 * pinning, no SO_BUSY_POLL, 127.0.0.1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qlink/daemon.h"
#include "qlink/error.h"
#include "qlink/rpc.h"
#include "qlink/udp.h"
#include "qlink/vppu.h"

static int32_t h_increment(struct ql_rpc_in *in, struct ql_rpc_out *out, void *ctx)
{
	size_t n = ql_rpc_in_left(in);
	const uint8_t *a = ql_rpc_in_view(in, n);
	uint8_t *r = ql_rpc_out_reserve(out, n);

	(void)ctx;
	if (!a || !r)
		return 1;
	for (size_t i = 0; i < n; i++)
		r[i] = (uint8_t)(a[i] + 1);
	return 0;
}

static void make_args(void *ctx, uint64_t n, uint8_t *args)
{
	uint32_t len = *(const uint32_t *)ctx;

	for (uint32_t i = 0; i < len; i++)
		args[i] = (uint8_t)(n + i);
}

static int check(void *ctx, uint64_t n, int32_t status, const uint8_t *res, uint32_t len)
{
	if (status || len != *(const uint32_t *)ctx)
		return 1;
	for (uint32_t i = 0; i < len; i++)
		if (res[i] != (uint8_t)(n + i + 1))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct ql_udp_channel_config cc = { .address = "127.0.0.1", .num_slots = 64 };
	struct ql_daemon_config dc = { .cpu = -1, .bad_requests = QL_BAD_REQUEST_DROP };
	struct ql_udp_client_config uc = { .window = 1 };
	struct ql_vppu_config vc = { .count = 200000 };
	struct ql_vppu_call call = { .function = "rpc_increment",
				     .make_args = make_args,
				     .check = check };
	struct ql_udp_channel_stats us;
	struct ql_vppu_report rep;
	struct ql_vppu_client vcl;
	struct ql_channel *ch = NULL;
	struct ql_daemon *d = NULL;
	struct ql_udp_client *cl = NULL;
	struct sockaddr_storage ss;
	socklen_t sl;
	uint32_t arg_len = 16;
	int client_cpu = -1, opt, ret = 1;
	char name[64];

	while ((opt = getopt(argc, argv, "n:w:s:a:c:C:b:H:")) != -1) {
		switch (opt) {
		case 'n':
			vc.count = strtoull(optarg, NULL, 0);
			break;
		case 'w':
			uc.window = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 's':
			cc.slot_size = uc.slot_size = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'a':
			arg_len = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			dc.cpu = atoi(optarg);
			break;
		case 'C':
			client_cpu = atoi(optarg);
			break;
		case 'b':
			cc.busy_poll_us = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'H':
			cc.address = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-n calls] [-w window] [-s slot_size] "
				"[-a arg_len] [-c server_cpu] [-C client_cpu] "
				"[-b busy_poll_us] [-H address]\n",
				argv[0]);
			return 2;
		}
	}
	call.arg_len = arg_len;
	call.ctx = &arg_len;
	vc.window = uc.window;
	if (client_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(client_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			perror("sched_setaffinity");
	}
	if (ql_udp_channel_create(&cc, &ch) || ql_udp_channel_local_addr(ch, &ss, &sl) ||
	    ql_daemon_create(&dc, ch, &d) ||
	    ql_daemon_register(d, &QL_RPC_RAW_FUNCTION("rpc_increment", h_increment, NULL)) ||
	    ql_daemon_start(d)) {
		fprintf(stderr, "server: %s\n", ql_error_detail());
		goto out;
	}
	uc.host = cc.address;
	uc.port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
						   ((struct sockaddr_in *)&ss)->sin_port);
	if (ql_udp_client_create(&uc, &cl)) {
		fprintf(stderr, "client: %s\n", ql_error_detail());
		goto out;
	}
	ql_vppu_client_udp(&vcl, cl);
	if (ql_vppu_run_client(&vcl, &call, &vc, &rep)) {
		fprintf(stderr, "vppu: %s\n", ql_error_detail());
		goto out;
	}
	snprintf(name, sizeof(name), "udp-w%u-s%u%s", uc.window, cc.slot_size ? cc.slot_size : 256,
		 cc.busy_poll_us ? "-busypoll" : "");
	ql_vppu_report_json(&rep, name, stdout);
	ql_udp_channel_stats(ch, &us);
	printf("\n{\"channel\":{\"datagrams\":%llu,\"oversize\":%llu,\"undersize\":%llu,"
	       "\"send_errors\":%llu,\"kernel_drops\":%llu,\"busy_poll\":%d}}\n",
	       (unsigned long long)us.datagrams, (unsigned long long)us.oversize,
	       (unsigned long long)us.undersize, (unsigned long long)us.send_errors,
	       (unsigned long long)us.kernel_drops, us.busy_poll);
	ret = rep.ok == rep.sent && rep.sent == vc.count ? 0 : 1;
out:
	ql_udp_client_destroy(cl);
	ql_daemon_destroy(d);
	ql_channel_destroy(ch);
	return ret;
}
