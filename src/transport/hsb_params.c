/* SPDX-License-Identifier: MIT */
/* The hsb connection parameters: rules and text form, and the frame
 * metadata's layout (qlink/hsb.h, docs/wire-protocol.md section 8). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "qlink/error.h"
#include "qlink/hsb.h"

int ql_hsb_params_check(const struct ql_hsb_params *p)
{
	uint64_t end;

	if (!p)
		return -EINVAL;
	if (p->page_size < 2 * QL_HSB_PAGE_UNIT || p->page_size > QL_HSB_MAX_PAGE_SIZE ||
	    p->page_size % QL_HSB_PAGE_UNIT)
		return ql_error_set(-EINVAL, "hsb: page size %u is not a multiple of %u in %u..%u",
				    p->page_size, QL_HSB_PAGE_UNIT, 2 * QL_HSB_PAGE_UNIT,
				    QL_HSB_MAX_PAGE_SIZE);
	if (!p->num_pages || p->num_pages > QL_HSB_MAX_PAGES)
		return ql_error_set(-EINVAL, "hsb: %u pages, not 1..%u", p->num_pages,
				    QL_HSB_MAX_PAGES);
	end = (uint64_t)p->num_pages * p->page_size;
	if (p->page_addr % QL_HSB_PAGE_UNIT || p->page_addr >= QL_HSB_ADDR_LIMIT ||
	    end > QL_HSB_ADDR_LIMIT - p->page_addr)
		return ql_error_set(-EINVAL,
				    "hsb: pages at 0x%" PRIx64 " (%" PRIu64 " bytes) are not "
				    "128-byte aligned below 2^39",
				    p->page_addr, end);
	if (p->frame_len < QL_HSB_MIN_FRAME)
		return ql_error_set(-EINVAL, "hsb: frame length %u is under the %u-byte RPC header",
				    p->frame_len, QL_HSB_MIN_FRAME);
	/* a board writes 128 bytes of metadata at page + round_up(frame, 128):
	 * past the page it would land in the next page's frame */
	if (p->frame_len > p->page_size ||
	    ql_hsb_metadata_offset(p->frame_len) + QL_HSB_METADATA_SIZE > p->page_size)
		return ql_error_set(-EINVAL,
				    "hsb: frame length %u needs pages of at least %u bytes "
				    "(round_up(frame, 128) + 128 of metadata), not %u: frame_len "
				    "at most %u for this page size",
				    p->frame_len,
				    ql_hsb_metadata_offset(p->frame_len) + QL_HSB_METADATA_SIZE,
				    p->page_size, p->page_size - QL_HSB_METADATA_SIZE);
	if (p->resp_size < QL_HSB_MIN_RESP)
		return ql_error_set(-EINVAL, "hsb: response buffers of %u bytes hold no response",
				    p->resp_size);
	return 0;
}

void ql_hsb_params_to_conn(const struct ql_hsb_params *h, struct ql_conn_params *c)
{
	memset(c, 0, sizeof(*c));
	c->qpn = h->qpn;
	c->gid = h->gid;
	c->mtu = h->mtu;
	c->vaddr = h->page_addr;
	c->rkey = h->rkey;
	c->length = (uint64_t)h->num_pages * h->page_size;
	c->num_slots = h->num_pages;
	c->slot_size = h->page_size;
	c->frame_len = h->frame_len;
	c->resp_size = h->resp_size;
}

int ql_hsb_params_from_conn(const struct ql_conn_params *c, struct ql_hsb_params *p)
{
	if (!c || !p)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	if (!c->resp_size || !c->num_slots || !c->slot_size ||
	    c->length != (uint64_t)c->num_slots * c->slot_size)
		return ql_error_set(-EINVAL, "hsb parameters need slots, slot_size, "
					     "length = slots x slot_size, frame_len and resp_size");
	p->qpn = c->qpn;
	p->gid = c->gid;
	p->mtu = c->mtu;
	p->rkey = c->rkey;
	p->page_addr = c->vaddr;
	p->page_size = c->slot_size;
	p->num_pages = c->num_slots;
	p->frame_len = c->frame_len;
	p->resp_size = c->resp_size;
	return ql_hsb_params_check(p);
}

int ql_hsb_params_format(const struct ql_hsb_params *p, char *buf, size_t len)
{
	struct ql_conn_params c;

	if (!p || (!buf && len) || !p->resp_size || !p->num_pages)
		return -EINVAL;
	ql_hsb_params_to_conn(p, &c);
	return ql_conn_params_format(&c, buf, len);
}

int ql_hsb_params_parse(const char *text, struct ql_hsb_params *p)
{
	struct ql_conn_params c;
	int ret;

	if (!text || !p)
		return -EINVAL;
	ret = ql_conn_params_parse(text, &c);
	if (ret)
		return ret;
	return ql_hsb_params_from_conn(&c, p);
}

/* The layout NVIDIA's host library decodes (docs/wire-protocol.md 8.3). */
static uint64_t be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

void ql_hsb_metadata_decode(const void *mem, struct ql_hsb_metadata *m)
{
	const uint8_t *p = mem;

	m->flags = (uint32_t)be(p + 0, 4);
	m->psn = (uint32_t)be(p + 4, 4);
	m->crc = (uint32_t)be(p + 8, 4);
	m->timestamp_s = be(p + 12, 8);
	m->timestamp_ns = (uint32_t)be(p + 20, 4);
	m->bytes_written = be(p + 24, 8);
	m->frame_number = (uint16_t)be(p + 34, 2);
	m->metadata_s = be(p + 36, 8);
	m->metadata_ns = (uint32_t)be(p + 44, 4);
}

void ql_hsb_metadata_encode(void *mem, const struct ql_hsb_metadata *m)
{
	uint8_t *p = mem;

	memset(p, 0, QL_HSB_METADATA_SIZE);
	put_be(p + 0, m->flags, 4);
	put_be(p + 4, m->psn, 4);
	put_be(p + 8, m->crc, 4);
	put_be(p + 12, m->timestamp_s, 8);
	put_be(p + 20, m->timestamp_ns, 4);
	put_be(p + 24, m->bytes_written, 8);
	put_be(p + 34, m->frame_number, 2);
	put_be(p + 36, m->metadata_s, 8);
	put_be(p + 44, m->metadata_ns, 4);
}
