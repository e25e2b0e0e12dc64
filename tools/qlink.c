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
 *   stat            a running qlinkd's live statistics (qlink_stat.c)
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
		"  stat            a running qlinkd's live statistics (qlink stat -h)\n"
		"  info [URI...]   show RDMA devices and their limits (qlink info -h)\n"
		"  help CMD        the options of CMD (the same as qlink CMD --help)\n"
		"\n"
		"options:\n"
		"  -h, --help      this text\n"
		"  -V, --version   print the version\n"
		"\n"
		"Every command takes --device URI (its RDMA device), with these URIs:\n"
		"  soft://loop                       the soft NIC in this process\n"
		"  soft+shm://NAME                   the soft NIC between processes of one host\n"
		"  soft+udp://IP[:PORT][?progress=thread|caller|auto&...]\n"
		"                                    the soft NIC over UDP (RoCEv2 on the wire,\n"
		"                                    talks to Linux Soft-RoCE; docs/progress.md)\n"
		"  ibv://DEVICE[:PORT[:GID_INDEX]]   an RDMA device through libibverbs\n"
		"TIME values are seconds, or a number with a unit: 250ms, 500us, 1.5, 2m.\n"
		"A usage error exits 2 with one line on stderr.\n");
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

static const struct tool_opt info_opts[] = { { 0 } };
static const struct tool_cmd info_cmd = {
	.name = "info",
	.usage = "[URI...]",
	.about = "Shows RDMA devices and their limits: each URI given, or every device every\n"
		 "provider lists (a listed SCHEME://NAME, any name, is shown as\n"
		 "SCHEME://info; soft+udp://IP[:PORT] is a template). Per device: provider,\n"
		 "wire format, name, firmware, port 1's state, active MTU and link layer, GID,\n"
		 "and the limits of ibv_query_device (max_qp, max_qp_wr, max_sge, max_cqe,\n"
		 "max_mr, max_mr_size, max_msg_sz, max_inline, max_rd_atomic, atomic_cap).\n",
	.opts = info_opts,
};

static int cmd_info(int argc, char **argv)
{
	char(*uris)[QL_DEVICE_URI_MAX];
	int c, n, fails = 0;

	optind = 0;
	while ((c = tool_getopt(&info_cmd, argc, argv)) != TOOL_END)
		return 2;
	for (int i = optind; i < argc; i++)
		if (tool_device_uri(argv[i]))
			return tool_bad("info", "URI", argv[i]);
	if (optind < argc) {
		for (int i = optind; i < argc; i++)
			fails += info_one(argv[i]) != 0;
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

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "info", cmd_info },	       { "bench", tool_bench },
	{ "serve", tool_serve },       { "vppu", tool_vppu },
	{ "hololink", tool_hololink }, { "qec", tool_qec },
	{ "sdr", tool_sdr },	       { "ep", tool_ep },
	{ "stat", tool_stat },
};

int main(int argc, char **argv)
{
	static char help_opt[] = "--help";
	char *hv[5];
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd) {
		fprintf(stderr, "qlink: no command (see qlink --help)\n");
		return 2;
	}
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || (!strcmp(cmd, "help") && argc == 2)) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
		printf("qlink %s\n", QLINK_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "help")) { /* qlink help CMD [SUB]: qlink CMD [SUB] --help */
		if (argc > 4) {
			fprintf(stderr, "qlink help: one command at a time (see qlink --help)\n");
			return 2;
		}
		hv[0] = argv[0];
		hv[1] = argv[2];
		hv[2] = argc > 3 ? argv[3] : help_opt;
		hv[3] = help_opt;
		hv[4] = NULL;
		argc = argc > 3 ? 4 : 3;
		argv = hv;
		cmd = argv[1];
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "qlink: unknown command '%s' (see qlink --help)\n", cmd);
	return 2;
}
