/* SPDX-License-Identifier: MIT */
/*
 * Connection parameters: the one format in which both ends of a QP exchange
 * what they need out of band, whatever the provider, and the helper that
 * walks a QP from RESET to RTS towards them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/verbs.h"
#include "verbs/provider.h"

static int mtu_bytes(enum ibv_mtu m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128 << m : -1;
}

static int mtu_from_bytes(unsigned long b, enum ibv_mtu *m)
{
	for (int i = IBV_MTU_256; i <= IBV_MTU_4096; i++) {
		if ((unsigned long)(128 << i) == b) {
			*m = (enum ibv_mtu)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* A GID as sent: eight groups of four lowercase hex digits, no "::" and no
 * dotted quad, so that the simplest parser reads it (docs/wire-protocol.md
 * §1); any inet_pton form is accepted on input. */
static void gid_full(const union ibv_gid *g, char out[40])
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 5 * i, 6, "%02x%02x%s", g->raw[2 * i], g->raw[2 * i + 1],
			 i < 7 ? ":" : "");
}

int ql_conn_params_format(const struct ql_conn_params *p, char *buf, size_t len)
{
	char gid[40];

	if (!p || (!buf && len))
		return -EINVAL;
	if (mtu_bytes(p->mtu) < 0)
		return -EINVAL;
	gid_full(&p->gid, gid);
	if (p->num_slots && p->resp_size)
		return snprintf(buf, len,
				"qpn=0x%06" PRIx32 " psn=0x%06" PRIx32
				" gid=%s mtu=%d vaddr=0x%" PRIx64 " rkey=0x%08" PRIx32
				" length=%" PRIu64 " slots=%" PRIu32 " slot_size=%" PRIu32
				" frame_len=%" PRIu32 " resp_size=%" PRIu32 "%s",
				p->qpn, p->psn, gid, mtu_bytes(p->mtu), p->vaddr, p->rkey,
				p->length, p->num_slots, p->slot_size, p->frame_len, p->resp_size,
				p->qp_type == IBV_QPT_UC ? " qp=uc" : "");
	if (p->num_slots)
		return snprintf(buf, len,
				"qpn=0x%06" PRIx32 " psn=0x%06" PRIx32
				" gid=%s mtu=%d vaddr=0x%" PRIx64 " rkey=0x%08" PRIx32
				" length=%" PRIu64 " slots=%" PRIu32 " slot_size=%" PRIu32 "%s",
				p->qpn, p->psn, gid, mtu_bytes(p->mtu), p->vaddr, p->rkey,
				p->length, p->num_slots, p->slot_size,
				p->qp_type == IBV_QPT_UC ? " qp=uc" : "");
	return snprintf(buf, len,
			"qpn=0x%06" PRIx32 " psn=0x%06" PRIx32 " gid=%s mtu=%d vaddr=0x%" PRIx64
			" rkey=0x%08" PRIx32 " length=%" PRIu64 "%s",
			p->qpn, p->psn, gid, mtu_bytes(p->mtu), p->vaddr, p->rkey, p->length,
			p->qp_type == IBV_QPT_UC ? " qp=uc" : "");
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (!*v || *v == '-')
		return -EINVAL;
	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || *end || x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

int ql_conn_params_parse(const char *text, struct ql_conn_params *p)
{
	char buf[512], *save = NULL, *tok;
	unsigned int seen = 0;
	uint64_t v;

	if (!text || !p)
		return -EINVAL;
	if (strlen(text) >= sizeof(buf))
		return ql_error_set(-EINVAL, "connection parameters longer than %zu bytes",
				    sizeof(buf) - 1);
	strcpy(buf, text);
	memset(p, 0, sizeof(*p));
	p->mtu = IBV_MTU_4096;
	for (tok = strtok_r(buf, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
		char *eq = strchr(tok, '=');
		const char *key = tok, *val;

		if (!eq)
			return ql_error_set(-EINVAL, "connection parameter '%s' is not key=value",
					    tok);
		*eq = '\0';
		val = eq + 1;
		if (!strcmp(key, "qpn")) {
			if (parse_u64(val, 0xffffff, &v))
				goto bad;
			p->qpn = (uint32_t)v;
			seen |= 1;
		} else if (!strcmp(key, "psn")) {
			if (parse_u64(val, 0xffffff, &v))
				goto bad;
			p->psn = (uint32_t)v;
		} else if (!strcmp(key, "gid")) {
			if (inet_pton(AF_INET6, val, p->gid.raw) != 1)
				goto bad;
			seen |= 2;
		} else if (!strcmp(key, "mtu")) {
			if (parse_u64(val, 4096, &v) || mtu_from_bytes((unsigned long)v, &p->mtu))
				goto bad;
		} else if (!strcmp(key, "vaddr")) {
			if (parse_u64(val, UINT64_MAX, &v))
				goto bad;
			p->vaddr = v;
		} else if (!strcmp(key, "rkey")) {
			if (parse_u64(val, UINT32_MAX, &v))
				goto bad;
			p->rkey = (uint32_t)v;
		} else if (!strcmp(key, "slots")) {
			if (parse_u64(val, UINT32_MAX, &v))
				goto bad;
			p->num_slots = (uint32_t)v;
		} else if (!strcmp(key, "slot_size")) {
			if (parse_u64(val, UINT32_MAX, &v))
				goto bad;
			p->slot_size = (uint32_t)v;
		} else if (!strcmp(key, "qp")) {
			if (!strcmp(val, "rc"))
				p->qp_type = IBV_QPT_RC;
			else if (!strcmp(val, "uc"))
				p->qp_type = IBV_QPT_UC;
			else
				goto bad;
		} else if (!strcmp(key, "frame_len")) {
			if (parse_u64(val, UINT32_MAX, &v))
				goto bad;
			p->frame_len = (uint32_t)v;
		} else if (!strcmp(key, "resp_size")) {
			if (parse_u64(val, UINT32_MAX, &v))
				goto bad;
			p->resp_size = (uint32_t)v;
		} else if (!strcmp(key, "length")) {
			if (parse_u64(val, UINT64_MAX, &v))
				goto bad;
			p->length = v;
		} else {
			return ql_error_set(-EINVAL, "unknown connection parameter '%s'", key);
		}
		continue;
bad:
		return ql_error_set(-EINVAL, "bad value '%s' for connection parameter '%s'", val,
				    key);
	}
	if ((seen & 3) != 3)
		return ql_error_set(-EINVAL, "connection parameters need at least qpn= and gid=");
	return 0;
}

int ql_qp_local_params(struct ql_qp *qp, struct ql_conn_params *p)
{
	struct ql_device_attr attr;
	int ret;

	if (!qp || !p)
		return -EINVAL;
	ret = ql_device_query(qp->dev, &attr);
	if (ret)
		return ret;
	memset(p, 0, sizeof(*p));
	p->qpn = qp->qp_num;
	p->psn = qp->init_psn;
	p->qp_type = qp->qp_type;
	p->gid = attr.gid;
	p->mtu = attr.port.active_mtu;
	return 0;
}

void ql_qp_connect_opts_default(struct ql_qp_connect_opts *o)
{
	o->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		    IBV_ACCESS_REMOTE_ATOMIC;
	o->timeout = 14;
	o->retry_cnt = 7;
	o->rnr_retry = 7;
	o->min_rnr_timer = 12;
	o->local_psn = QL_QP_PSN_PROVIDER;
}

int ql_qp_connect(struct ql_qp *qp, const struct ql_conn_params *remote,
		  const struct ql_qp_connect_opts *opts)
{
	struct ql_qp_connect_opts def;
	struct ql_device_attr dattr;
	struct ibv_qp_attr a;
	bool rc;
	int ret;

	if (!qp || !remote)
		return -EINVAL;
	if (!opts) {
		ql_qp_connect_opts_default(&def);
		opts = &def;
	}
	if (opts->local_psn != QL_QP_PSN_PROVIDER && opts->local_psn > 0xffffffu)
		return ql_error_set(-EINVAL, "connect: local PSN 0x%x is wider than 24 bits",
				    opts->local_psn);
	ret = ql_device_query(qp->dev, &dattr);
	if (ret)
		return ret;
	rc = qp->qp_type == IBV_QPT_RC;

	if (ql_qp_state(qp) != IBV_QPS_RESET) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		ret = ql_qp_modify(qp, &a, IBV_QP_STATE);
		if (ret)
			return ret;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = opts->access;
	ret = ql_qp_modify(qp, &a,
			   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = remote->mtu && remote->mtu < dattr.port.active_mtu ? remote->mtu :
									  dattr.port.active_mtu;
	a.dest_qp_num = remote->qpn;
	a.rq_psn = remote->psn;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = remote->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = opts->min_rnr_timer;
	ret = ql_qp_modify(qp, &a,
			   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN |
				   (rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
	if (ret)
		return ret;

	if (opts->local_psn != QL_QP_PSN_PROVIDER)
		qp->init_psn = opts->local_psn;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = qp->init_psn;
	a.timeout = opts->timeout;
	a.retry_cnt = opts->retry_cnt;
	a.rnr_retry = opts->rnr_retry;
	a.max_rd_atomic = 16;
	return ql_qp_modify(qp, &a,
			    IBV_QP_STATE | IBV_QP_SQ_PSN |
				    (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						     IBV_QP_MAX_QP_RD_ATOMIC :
					  0));
}
