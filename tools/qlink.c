/* SPDX-License-Identifier: MIT */
/*
 * qlink: the command-line tool. Subcommands:
 *   bench           daemon and VPPU in two processes: round trip and rate
 *   serve / vppu    the two sides as separate programs (serve also as
 *                   CUDA-Q Realtime's test server over its UDP transport)
 *   hololink        Hololink register protocol: read, write, or be a board
 *   ep              the endpoint service: serve a YAML file, call an endpoint
 *   info [URI...]   list RDMA devices of every provider with their limits
 *   sdr             one SDR-RDMA transfer between two processes (qlink_sdr.c)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/verbs.h"
#include "tools.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: qlink <command> [options]\n"
		"\n"
		"commands:\n"
		"  bench           the main job: RPC round trip and rate, daemon and VPPU\n"
		"                  in two processes over the software NIC (qlink bench -h)\n"
		"  serve           run a daemon serving qlink_parity and rpc_increment; with\n"
		"                  --transport=udp CUDA-Q Realtime's test server (qlink serve -h)\n"
		"  vppu            the virtual PPU: call a running daemon, or a CUDA-Q\n"
		"                  server over UDP (qlink vppu -h)\n"
		"  hololink        read/write registers of a Hololink board, or be one\n"
		"                  (qlink hololink -h)\n"
		"  qec             the surface-code QEC workload: threshold sweep offline, or\n"
		"                  end to end through the decoder plugin (qlink qec -h)\n"
		"  sdr             one SDR-RDMA transfer (UC + software reliability, or RC)\n"
		"                  between two processes or hosts (qlink sdr -h)\n"
		"  ep              the RDMA endpoint service: serve a YAML endpoints\n"
		"                  file, or call an endpoint (qlink ep -h)\n"
		"  info [URI...]   show RDMA devices and their limits (default: every\n"
		"                  device every provider lists; a listed SCHEME://NAME,\n"
		"                  any name, is shown as SCHEME://info)\n"
		"\n"
		"options:\n"
		"  -h, --help      this text\n"
		"  --version       print the version\n"
		"\n"
		"Device URIs: soft://loop, soft+shm://NAME, ibv://DEVICE[:PORT[:GID_INDEX]],\n"
		"  soft+udp://IP[:PORT][?progress=thread|caller|auto&...] (docs/progress.md)\n");
}

static const char *port_state(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	default:
		return "unknown";
	}
}

static const char *atomic_cap(enum ibv_atomic_cap c)
{
	return c == IBV_ATOMIC_GLOB ? "GLOB" : c == IBV_ATOMIC_HCA ? "HCA" : "NONE";
}

static int mtu_bytes(enum ibv_mtu m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128 << m : 0;
}

static int info_one(const char *uri)
{
	struct ql_device_attr a;
	struct ql_device *dev;
	char gid[INET6_ADDRSTRLEN];
	int ret;

	ret = ql_device_open(uri, &dev);
	if (ret) {
		fprintf(stderr, "qlink info: %s: %s\n", uri,
			ql_error_detail()[0] ? ql_error_detail() : ql_strerror(ret));
		return ret;
	}
	ret = ql_device_query(dev, &a);
	if (ret) {
		fprintf(stderr, "qlink info: %s: query failed: %s\n", uri, ql_strerror(ret));
		ql_device_close(dev);
		return ret;
	}
	inet_ntop(AF_INET6, a.gid.raw, gid, sizeof(gid));
	printf("%s\n", uri);
	printf("\tprovider:\t%s\n\twire:\t\t%s\n\tname:\t\t%s\n\tfw_ver:\t\t%s\n", a.provider,
	       a.wire, a.name, a.dev.fw_ver);
	printf("\tport 1:\t\t%s, active_mtu %d, link_layer %s\n", port_state(a.port.state),
	       mtu_bytes(a.port.active_mtu),
	       a.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	printf("\tgid:\t\t%s\n", gid);
	printf("\tmax_qp:\t\t%d\n\tmax_qp_wr:\t%d\n\tmax_sge:\t%d\n\tmax_cqe:\t%d\n", a.dev.max_qp,
	       a.dev.max_qp_wr, a.dev.max_sge, a.dev.max_cqe);
	printf("\tmax_mr:\t\t%d\n\tmax_mr_size:\t%" PRIu64 "\n\tmax_msg_sz:\t%u\n", a.dev.max_mr,
	       (uint64_t)a.dev.max_mr_size, a.port.max_msg_sz);
	printf("\tmax_inline:\t%u\n\tmax_rd_atomic:\t%d\n\tatomic_cap:\t%s\n", a.max_inline_data,
	       a.dev.max_qp_rd_atom, atomic_cap(a.dev.atomic_cap));
	ql_device_close(dev);
	return 0;
}

/* A provider lists "SCHEME://NAME" where any name opens a device (soft+shm):
 * show one, named "info". */
static void info_listed(const char *uri, int *fails)
{
	const char *sep = strstr(uri, "://");
	char named[QL_DEVICE_URI_MAX];

	if (sep && strchr(sep, '[')) { /* soft+udp://IP[:PORT]: needs a local address */
		printf("%s\n\t(a template: give an address of this host)\n", uri);
		return;
	}
	if (sep && !strcmp(sep + 3, "NAME")) {
		snprintf(named, sizeof(named), "%.*sinfo", (int)(sep + 3 - uri), uri);
		uri = named;
	}
	*fails += info_one(uri) != 0;
}

static int cmd_info(int argc, char **argv)
{
	char(*uris)[QL_DEVICE_URI_MAX];
	int n, fails = 0;

	if (argc > 0) {
		for (int i = 0; i < argc; i++) {
			if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
				usage(stdout);
				return 0;
			}
			if (argv[i][0] == '-') {
				fprintf(stderr, "qlink info: unknown option '%s'\n", argv[i]);
				return 2;
			}
			fails += info_one(argv[i]) != 0;
		}
		return fails ? 1 : 0;
	}
	/* every provider of the registry lists its devices */
	n = ql_device_list(NULL, 0);
	uris = n > 0 ? calloc((size_t)n, sizeof(*uris)) : NULL;
	if (n > 0 && uris)
		n = ql_device_list(uris, n);
	if (n < 0 || (n > 0 && !uris)) {
		fprintf(stderr, "qlink info: %s\n", ql_strerror(n < 0 ? n : -ENOMEM));
		free(uris);
		return 1;
	}
	for (int i = 0; i < n; i++)
		info_listed(uris[i], &fails);
	free(uris);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("qlink %s\n", QLINK_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "info"))
		return cmd_info(argc - 2, argv + 2);
	if (!strcmp(argv[1], "bench"))
		return tool_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "serve"))
		return tool_serve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "vppu"))
		return tool_vppu(argc - 1, argv + 1);
	if (!strcmp(argv[1], "hololink"))
		return tool_hololink(argc - 1, argv + 1);
	if (!strcmp(argv[1], "qec"))
		return tool_qec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sdr"))
		return tool_sdr(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ep"))
		return tool_ep(argc - 1, argv + 1);
	fprintf(stderr, "qlink: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
