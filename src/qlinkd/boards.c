/* SPDX-License-Identifier: MIT */
/* qlinkd's Hololink boards (`qcs:`): an hsb session each, the board's
 * data-plane registers programmed. */

#define _GNU_SOURCE

#include "qlinkd_int.h"

#define QLINKD_BOARD_TIMEOUT_MS 200 /* per register transaction try */
#define QLINKD_BOARD_RETRIES 3

/* ---- boards (`qcs:`) ------------------------------------------------------------ */

/* The MAC of the interface that holds the IPv4 of an IPv4-mapped GID (what
 * a RoCE board addresses its frames to): 0, or -ENOENT (not mapped, e.g.
 * soft, or no such interface: the MAC stays 0). */
static int host_mac(const uint8_t gid[16], uint8_t mac[6])
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct ifaddrs *ifs, *a, *b;
	int ret = -ENOENT;

	if (memcmp(gid, v4mapped, sizeof(v4mapped)) || getifaddrs(&ifs))
		return -ENOENT;
	for (a = ifs; a && ret; a = a->ifa_next) {
		if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET ||
		    memcmp(&((struct sockaddr_in *)a->ifa_addr)->sin_addr, gid + 12, 4))
			continue;
		for (b = ifs; b && ret; b = b->ifa_next) {
			const struct sockaddr_ll *ll = (const void *)b->ifa_addr;

			if (ll && ll->sll_family == AF_PACKET && ll->sll_halen == 6 &&
			    !strcmp(a->ifa_name, b->ifa_name)) {
				memcpy(mac, ll->sll_addr, 6);
				ret = 0;
			}
		}
	}
	freeifaddrs(ifs);
	return ret;
}

/*
 * One `qcs` entry of kind hsb: an hsb session connected to the board's QP
 * (qcs.qp, default 2; GID qcs.gid, default its address IPv4-mapped),
 * dispatching before the board is told anything (its first frame may come
 * the moment its VP is enabled), then the board's data-plane registers
 * written and read back (ql_hsb_configure_board). On failure the session is
 * destroyed and the error, naming the board, VP and register, logged.
 */
static int board_open(struct qlinkd *q, const struct ql_config_qcs *b)
{
	const struct ql_hsb_target t = { .vp = b->vp,
					 .data_plane = b->data_plane,
					 .vp_address = b->vp_address,
					 .hif_address = b->hif_address,
					 .layout = b->layout };
	struct ql_hsb_dataplane dp = { 0 };
	struct ql_conn_params board = { 0 };
	struct qlinkd_session *s = NULL;
	struct ql_hsb_params hp;
	char gid[INET6_ADDRSTRLEN], where[300], mac[24], ipv[12];
	uint32_t ip_version = 0;
	int ret;

	inet_ntop(AF_INET6, b->gid, gid, sizeof(gid));
	snprintf(where, sizeof(where), "%s:%u", b->address, b->port);
	/* a board is hsb whatever `transport` */
	ret = qlinkd_session_create(q, SESSION_HSB, NULL, &s, NULL);
	if (!ret)
		ret = ql_hsb_channel_local_params(s->ch, &hp);
	if (!ret) {
		board.qpn = b->qp;
		memcpy(board.gid.raw, b->gid, 16);
		board.mtu = hp.mtu;
		ret = qlinkd_session_connect(s, &board);
	}
	if (!ret) {
		dp.qpn = hp.qpn;
		dp.rkey = hp.rkey;
		dp.page_addr = hp.page_addr;
		dp.page_inc = hp.page_size;
		dp.num_pages = hp.num_pages;
		dp.frame_len = hp.frame_len;
		memcpy(dp.gid, hp.gid.raw, 16);
		if (host_mac(dp.gid, dp.mac) && !memcmp(dp.gid + 10, "\xff\xff", 2))
			qlog(QL_LOG_WARN, "board", "no interface holds the host IP: MAC 0",
			     QS("board", where), QU("vp", b->vp));
		/* DP_PACKET_SIZE follows the Ethernet MTU (qcs.mtu, 1500), not
		 * the IB path MTU, as upstream's host sets it */
		dp.mtu = b->mtu;
		ret = ql_hsb_configure_board(b->address, (uint16_t)b->port, &t, &dp,
					     QLINKD_BOARD_TIMEOUT_MS, QLINKD_BOARD_RETRIES,
					     &ip_version);
	}
	if (ret) {
		qlog(QL_LOG_ERROR, "board", "not programmed: session failed", QS("board", where),
		     QU("vp", b->vp), QU("board_qpn", b->qp), QS("board_gid", gid),
		     QS("error", qlinkd_detail_or(ret)));
		qlinkd_say("qlinkd: qcs board %s:%u VP %u: %s\n", b->address, b->port, b->vp,
			   qlinkd_detail_or(ret));
		qlinkd_session_destroy(s);
		return ret;
	}
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", dp.mac[0], dp.mac[1], dp.mac[2],
		 dp.mac[3], dp.mac[4], dp.mac[5]);
	snprintf(ipv, sizeof(ipv), "0x%04x", ip_version);
	qlog(QL_LOG_INFO, "board", "programmed", QU("session", s->id), QS("board", where),
	     QU("vp", b->vp), QU("board_qpn", b->qp), QS("board_gid", gid),
	     QS("hsb_ip_version", ipv), QS("hsb_version", ql_hsb_layout_name(b->layout)),
	     QU("qpn", hp.qpn), QX("rkey", hp.rkey), QU("pages", hp.num_pages),
	     QU("page_size", hp.page_size), QU("frame_len", hp.frame_len), QU("mtu", b->mtu),
	     QS("mac", mac));
	return 0;
}

/* Every `qcs` entry, in order; the first that fails stops qlinkd (a board
 * named in the config that is not served is an error, not a degraded run). */
int qlinkd_boards_open(struct qlinkd *q)
{
	for (uint32_t i = 0; i < q->cfg->qcs_count; i++) {
		int ret = board_open(q, &q->cfg->qcs[i]);

		if (ret)
			return ret;
	}
	return 0;
}
