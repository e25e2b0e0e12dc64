/* SPDX-License-Identifier: MIT */
/*
 * qlink hololink: read and write the registers of a Hololink board (or of a
 * VPPU's emulated one) over the register protocol, or be such a board; and
 * the hsb register listener of `qlink vppu --hsb-listen`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/hololink.h"
#include "tools.h"

static volatile sig_atomic_t hl_stop;

static void hl_on_signal(int sig)
{
	(void)sig;
	hl_stop = 1;
}

static const struct tool_opt hl_opts[] = {
	{ "timeout", 0, 't', TOOL_VALUE, "TIME", "wait per try (default 200ms)" },
	{ "retries", 0, 'r', TOOL_VALUE, "N", "retransmissions after the first try (default 3)" },
	{ "serve", 0, 's', TOOL_VALUE, "[ADDR:]PORT",
	  "be the board, on [ADDR:]PORT (bare PORT: 0.0.0.0)" },
	{ "vps", 0, 'v', TOOL_VALUE, "N", "VPs of the served board (default 1)" },
	{ "allow", 0, 'a', TOOL_VALUE, "A[/LEN]",
	  "answer only these hosts (up to 8; default: the first)" },
	{ "announce", 0, 'A', TOOL_VALUE, "A[:P]",
	  "send an enumeration packet to A:P (12267) every second" },
	{ "hsb-version", 0, 'V', TOOL_VALUE, "V",
	  "register layout of the served board: 2.6 (default), 2.5" },
	{ 0 },
};

static const struct tool_cmd hl_cmd = {
	.name = "hololink",
	.usage = "[options] HOST[:PORT] read ADDR...\n"
		 "[options] HOST[:PORT] write ADDR VALUE [ADDR VALUE]...\n"
		 "--serve [ADDR:]PORT [--vps N] [--allow ADDR[/LEN]]... [--announce ADDR[:PORT]]\n"
		 "[--hsb-version 2.6|2.5]",
	.about = "Read or write 32-bit registers of a Hololink board over its UDP register\n"
		 "protocol (docs/hololink.md; default port 8192, the VPPU's is 8193). One\n"
		 "register is a RD_DWORD/WR_DWORD, several one RD_BLOCK/WR_BLOCK. read prints\n"
		 "`ADDR VALUE` per register in hex. With --serve it is an emulated board\n"
		 "(the VPPU's) that prints each VP's parameters when its enable bit is set,\n"
		 "until SIGINT/SIGTERM; it answers only the first host that talks to it, or\n"
		 "the --allow ones. Exit 1 on any error (the board's status or silence; the\n"
		 "message counts the replies ignored and says why).\n",
	.opts = hl_opts,
	.in_order = true,
};

/* "[ADDR:]PORT" into a server config (bare PORT binds every address). */
static int parse_listen(const char *spec, char *addr, size_t cap, uint16_t *port)
{
	const char *colon = strrchr(spec, ':');
	uint32_t p;

	if (tool_u32(colon ? colon + 1 : spec, 0, 65535, &p))
		return -EINVAL;
	if (colon) {
		if ((size_t)(colon - spec) >= cap || colon == spec)
			return -EINVAL;
		memcpy(addr, spec, (size_t)(colon - spec));
		addr[colon - spec] = 0;
	} else {
		snprintf(addr, cap, "0.0.0.0");
	}
	*port = (uint16_t)p;
	return 0;
}

void tool_hsb_print(FILE *f, uint32_t vp, const struct ql_hsb_dataplane *dp)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	char ip[INET6_ADDRSTRLEN + 4];

	/* a host GID that is not IPv4-mapped (soft, the GID extension) is shown whole */
	if (memcmp(dp->gid, v4mapped, sizeof(v4mapped))) {
		memcpy(ip, "gid ", 4);
		inet_ntop(AF_INET6, dp->gid, ip + 4, INET6_ADDRSTRLEN);
	} else {
		inet_ntop(AF_INET, dp->gid + 12, ip, sizeof(ip));
	}
	fprintf(f,
		"hsb: VP %u configured: qpn 0x%x rkey 0x%x page_addr 0x%" PRIx64
		" stride %u pages %u frame %u host %s mac %02x:%02x:%02x:%02x:%02x:%02x"
		" udp_port %u mtu %u src_port %u\n",
		vp, dp->qpn, dp->rkey, dp->page_addr, dp->page_inc, dp->num_pages, dp->frame_len,
		ip, dp->mac[0], dp->mac[1], dp->mac[2], dp->mac[3], dp->mac[4], dp->mac[5],
		dp->udp_port, dp->mtu, dp->src_port);
	fflush(f);
}

int tool_hsb_listen(const char *spec, uint32_t vp, const uint32_t *allow, const uint32_t *allow_len,
		    uint32_t n_allow, double timeout_s, const volatile sig_atomic_t *stop,
		    struct ql_hl_server **srv, struct ql_hsb_dataplane *out)
{
	int left = (int)(timeout_s * 1000);
	struct ql_hl_server_config cfg = { .num_vps = vp + 1 };
	char addr[64];
	int ret;

	if (parse_listen(spec, addr, sizeof(addr), &cfg.port))
		return ql_error_set(-EINVAL, "'%s' is not [ADDR:]PORT", spec);
	if (vp >= QL_HSB_MAX_VPS)
		return ql_error_set(-EINVAL, "VP %u out of range (0..%d)", vp, QL_HSB_MAX_VPS - 1);
	if (n_allow > QL_HL_ALLOW_MAX)
		return ql_error_set(-EINVAL, "more than %d allowed hosts", QL_HL_ALLOW_MAX);
	for (uint32_t i = 0; i < n_allow; i++) {
		cfg.allow[i] = allow[i];
		cfg.allow_len[i] = allow_len[i];
	}
	cfg.n_allow = n_allow;
	cfg.address = addr;
	ret = ql_hl_server_create(&cfg, NULL, NULL, srv);
	if (ret)
		return ret;
	/* the port line first: with port 0 it is how a caller learns the port */
	printf("hsb: register server on %s:%u, VP %u\n", addr, ql_hl_server_port(*srv), vp);
	fflush(stdout);
	/* in slices, so that a signal ends the wait */
	for (;;) {
		int slice = left < 200 ? left : 200;

		ret = ql_hl_server_wait(*srv, vp, slice, out);
		left -= slice;
		if (ret != -ETIMEDOUT)
			break;
		if (stop && *stop) {
			ret = ql_error_set(-EINTR, "stopped by a signal before VP %u was enabled",
					   vp);
			break;
		}
		if (left <= 0) {
			ret = ql_error_set(-ETIMEDOUT,
					   "hololink server: VP %u not configured within %.0f ms",
					   vp, timeout_s * 1000);
			break;
		}
	}
	if (ret) {
		ql_hl_server_destroy(*srv);
		*srv = NULL;
		return ret;
	}
	tool_hsb_print(stdout, vp, out);
	return 0;
}

static void serve_report(void *arg, uint32_t vp, const struct ql_hsb_dataplane *dp)
{
	(void)arg;
	tool_hsb_print(stdout, vp, dp);
}

static int hl_serve(const char *spec, struct ql_hl_server_config *cfg_in, const char *announce)
{
	struct ql_hl_server_config cfg = *cfg_in;
	struct ql_hl_server *s;
	uint32_t vps = cfg.num_vps;
	char addr[64], ann[64];
	int ret;

	if (parse_listen(spec, addr, sizeof(addr), &cfg.port))
		return tool_bad("hololink", "--serve", spec);
	cfg.address = addr;
	if (announce) {
		const char *colon = strrchr(announce, ':');
		uint32_t p = QL_HL_ENUM_PORT;

		snprintf(ann, sizeof(ann), "%s", announce);
		if (colon) {
			ann[colon - announce] = 0;
			if (tool_u32(colon + 1, 1, 65535, &p))
				return tool_bad("hololink", "--announce", announce);
		}
		cfg.announce_addr = ann;
		cfg.announce_port = (uint16_t)p;
	}
	ret = ql_hl_server_create(&cfg, serve_report, NULL, &s);
	if (ret) {
		tool_fail("hololink", "starting the board", ret);
		return 1;
	}
	printf("hsb: register server on %s:%u, %u VP(s)\n", addr, ql_hl_server_port(s), vps);
	fflush(stdout);
	signal(SIGINT, hl_on_signal);
	signal(SIGTERM, hl_on_signal);
	while (!hl_stop)
		ql_hl_server_poll(s, 100);
	ql_hl_server_destroy(s);
	return 0;
}

int tool_hololink(int argc, char **argv)
{
	struct ql_hl_reg regs[QL_HL_BLOCK_MAX];
	uint32_t timeout = 200, retries = 3, vps = 1, port = QL_HL_PORT;
	double timeout_s;
	const char *serve = NULL, *announce = NULL;
	struct ql_hl_server_config scfg = { 0 };
	char host[256];
	struct ql_hl *h;
	size_t n = 0;
	bool write;
	char *colon;
	int c, ret;

	optind = 0;
	while ((c = tool_getopt(&hl_cmd, argc, argv)) != TOOL_END) {
		switch (c) {
		case 't':
			if (tool_time(optarg, 0.001, 60, &timeout_s))
				return tool_bad("hololink", "--timeout", optarg);
			timeout = (uint32_t)(timeout_s * 1000 + 0.5);
			break;
		case 'r':
			if (tool_u32(optarg, 0, 16, &retries))
				return tool_bad("hololink", "--retries", optarg);
			break;
		case 's':
			if (tool_listen_port(optarg))
				return tool_bad("hololink", "--serve", optarg);
			serve = optarg;
			break;
		case 'v':
			if (tool_u32(optarg, 1, QL_HSB_MAX_VPS, &vps))
				return tool_bad("hololink", "--vps", optarg);
			break;
		case 'a':
			if (scfg.n_allow == QL_HL_ALLOW_MAX ||
			    ql_hl_allow_parse(optarg, &scfg.allow[scfg.n_allow],
					      &scfg.allow_len[scfg.n_allow]))
				return tool_bad("hololink", "--allow", optarg);
			scfg.n_allow++;
			break;
		case 'A':
			announce = optarg;
			break;
		case 'V':
			if (ql_hsb_layout_parse(optarg, &scfg.layout))
				return tool_bad("hololink", "--hsb-version", optarg);
			break;
		default:
			return 2;
		}
	}
	if (serve) {
		if (optind < argc)
			return tool_usage("hololink", "--serve takes no other arguments");
		scfg.num_vps = vps;
		return hl_serve(serve, &scfg, announce);
	}
	if (argc - optind < 3 ||
	    (strcmp(argv[optind + 1], "read") && strcmp(argv[optind + 1], "write")))
		return tool_usage("hololink",
				  "want HOST[:PORT] read ADDR... or write ADDR VALUE...");
	if (tool_hostport(argv[optind], QL_HL_PORT))
		return tool_bad("hololink", "HOST:PORT", argv[optind]);
	snprintf(host, sizeof(host), "%s", argv[optind]);
	colon = strrchr(host, ':');
	if (colon) {
		*colon = 0;
		if (tool_u32(colon + 1, 1, 65535, &port))
			return tool_bad("hololink", "HOST:PORT", argv[optind]);
	}
	write = !strcmp(argv[optind + 1], "write");
	for (int i = optind + 2; i < argc; i += write ? 2 : 1) {
		if (n == QL_HL_BLOCK_MAX)
			return tool_usage("hololink", "at most %d registers", QL_HL_BLOCK_MAX);
		if (tool_u32(argv[i], 0, UINT32_MAX, &regs[n].addr) || regs[n].addr % 4)
			return tool_bad("hololink", "ADDR", argv[i]);
		regs[n].value = 0;
		if (write) {
			if (i + 1 >= argc)
				return tool_usage("hololink", "write %s needs a VALUE", argv[i]);
			if (tool_u32(argv[i + 1], 0, UINT32_MAX, &regs[n].value))
				return tool_bad("hololink", "VALUE", argv[i + 1]);
		}
		n++;
	}
	ret = ql_hl_open(host, (uint16_t)port, timeout, retries, &h);
	if (ret) {
		tool_fail("hololink", host, ret);
		return 1;
	}
	if (write)
		ret = n == 1 ? ql_hl_write_dword(h, regs[0].addr, regs[0].value) :
			       ql_hl_write_block(h, regs, n);
	else
		ret = n == 1 ? ql_hl_read_dword(h, regs[0].addr, &regs[0].value) :
			       ql_hl_read_block(h, regs, n);
	if (ret)
		tool_fail("hololink", write ? "write" : "read", ret);
	else if (!write)
		for (size_t i = 0; i < n; i++)
			printf("0x%08x 0x%08x\n", regs[i].addr, regs[i].value);
	ql_hl_close(h);
	return ret ? 1 : 0;
}
