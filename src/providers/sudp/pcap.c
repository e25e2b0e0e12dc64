// SPDX-License-Identifier: MIT
/* pcap capture of soft+udp packets (pcap.h, docs/soft-udp.md). */
#include "providers/sudp/pcap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <qlink/error.h>

/* classic pcap, nanosecond timestamps (magic a1b23c4d), Ethernet frames */
#define PCAP_MAGIC_NS 0xa1b23c4du
#define LINKTYPE_ETHERNET 1
#define SNAPLEN 65535
#define ETH_LEN 14
#define FRAME_MAX (ETH_LEN + 40 + 8 + 65535)

struct roce_pcap {
	FILE *f;
	uint8_t frame[FRAME_MAX];
};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* the Internet checksum's one's-complement sum over n bytes (n even or odd) */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

int ql__roce_pcap_open(struct roce_pcap **out, const char *path)
{
	struct roce_pcap *p = calloc(1, sizeof(*p));
	if (!p)
		return ql_error_set(-ENOMEM, "pcap: no memory");
	/* A new file only (O_EXCL), never through a symbolic link (O_NOFOLLOW;
	 * O_EXCL refuses a dangling one too), readable by its owner only: a
	 * capture holds every payload, and a link planted at the name (in /tmp,
	 * say) must not make a privileged process create or truncate the file
	 * it points at (docs/security.md, round 2). */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = -errno;
		free(p);
		if (e == -EEXIST || e == -ELOOP)
			return ql_error_set(e,
					    "pcap: '%s' exists%s; pcap= creates a new file "
					    "only (remove it first)",
					    path, e == -ELOOP ? " (a symbolic link)" : "");
		return ql_error_set(e, "pcap: cannot create '%s': %s", path, strerror(-e));
	}
	p->f = fdopen(fd, "wb");
	if (!p->f) {
		int e = -errno;
		close(fd);
		unlink(path);
		free(p);
		return ql_error_set(e, "pcap: cannot create '%s': %s", path, strerror(-e));
	}
	/* host byte order, as the format allows (readers check the magic) */
	struct {
		uint32_t magic;
		uint16_t major, minor;
		int32_t thiszone;
		uint32_t sigfigs, snaplen, linktype;
	} hdr = { PCAP_MAGIC_NS, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET };
	_Static_assert(sizeof(hdr) == 24, "pcap file header");
	if (fwrite(&hdr, sizeof(hdr), 1, p->f) != 1) {
		fclose(p->f);
		free(p);
		return ql_error_set(-EIO, "pcap: cannot write '%s'", path);
	}
	*out = p;
	return 0;
}

int ql__roce_pcap_write(struct roce_pcap *p, uint64_t ts_ns, const struct roce_addr *a,
			const struct iovec *iov, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	bool v6 = a->family == AF_INET6;
	size_t iph = v6 ? 40 : 20;
	if (len + 8 > 0xffff || (!v6 && len + 8 + iph > 0xffff))
		return -EMSGSIZE;
	uint8_t *fr = p->frame;
	/* Ethernet: locally administered addresses from the IP's last byte */
	static const uint8_t mac[6] = { 0x02, 0x71, 0x6c, 0x00, 0x00, 0x00 };
	memcpy(fr, mac, 6);
	fr[5] = v6 ? a->dst[15] : a->dst[3];
	memcpy(fr + 6, mac, 6);
	fr[11] = v6 ? a->src[15] : a->src[3];
	put16(fr + 12, v6 ? 0x86dd : 0x0800);
	uint8_t *ip = fr + ETH_LEN, *udp = ip + iph, *pl = udp + 8;
	size_t ulen = 8 + len;
	if (v6) {
		memset(ip, 0, 40);
		ip[0] = 0x60;
		put16(ip + 4, (uint16_t)ulen);
		ip[6] = 17;
		ip[7] = 64;
		memcpy(ip + 8, a->src, 16);
		memcpy(ip + 24, a->dst, 16);
	} else {
		memset(ip, 0, 20);
		ip[0] = 0x45;
		put16(ip + 2, (uint16_t)(20 + ulen));
		put16(ip + 4, a->ip_id);
		ip[6] = 0x40; /* DF */
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, a->src, 4);
		memcpy(ip + 16, a->dst, 4);
		put16(ip + 10, csum_fold(csum_add(0, ip, 20)));
	}
	put16(udp, a->sport);
	put16(udp + 2, a->dport);
	put16(udp + 4, (uint16_t)ulen);
	udp[6] = udp[7] = 0;
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		memcpy(pl + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	/* UDP checksum over the pseudo-header (needed for IPv6, where 0 is illegal) */
	uint8_t ph[4] = { 0, 17, (uint8_t)(ulen >> 8), (uint8_t)ulen };
	uint32_t s = csum_add(0, v6 ? ip + 8 : ip + 12, v6 ? 32 : 8);
	s = csum_add(s, ph, 4);
	s = csum_add(s, udp, ulen);
	uint16_t c = csum_fold(s);
	put16(udp + 6, c ? c : 0xffff);

	uint32_t caplen = (uint32_t)(ETH_LEN + iph + ulen);
	uint32_t rec[4] = { (uint32_t)(ts_ns / 1000000000u), (uint32_t)(ts_ns % 1000000000u),
			    caplen, caplen };
	if (fwrite(rec, sizeof(rec), 1, p->f) != 1 || fwrite(fr, caplen, 1, p->f) != 1)
		return -EIO;
	return 0;
}

int ql__roce_pcap_close(struct roce_pcap *p)
{
	if (!p)
		return 0;
	int r = fclose(p->f) ? -errno : 0;
	free(p);
	return r;
}
