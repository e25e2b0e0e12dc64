/* SPDX-License-Identifier: MIT */
/*
 * The endpoint service's connection manager: stream sockets (TCP or UNIX)
 * that carry one hello each way (the two QPs' ql_conn_params as text) and
 * then stay open for the life of the connection, so that either side
 * learns of the other's end from the kernel (docs/endpoint.md).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "endpoint/ep_int.h"
#include "qlink/error.h"

union ep_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
};

/* "HOST:PORT" (HOST an IPv4 address or a name resolved to IPv4, as
 * before), "[IPV6]:PORT" (an IPv6 address, or a name resolved to IPv6,
 * in brackets) or "unix:PATH". An unbracketed HOST with a colon in it is
 * refused: "::1:7471" cannot be split safely. */
static int parse_address(const char *address, union ep_sockaddr *sa, socklen_t *salen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char host[64];
	const char *h, *colon;
	size_t hlen;
	char *end;
	unsigned long port;
	int v6;

	memset(sa, 0, sizeof(*sa));
	if (!address)
		return ql_error_set(-EINVAL, "no address");
	if (!strncmp(address, "unix:", 5)) {
		size_t n = strlen(address + 5);

		if (n == 0 || n >= sizeof(sa->un.sun_path))
			return ql_error_set(-EINVAL, "address '%s': a UNIX path of 1..%zu bytes",
					    address, sizeof(sa->un.sun_path) - 1);
		sa->un.sun_family = AF_UNIX;
		memcpy(sa->un.sun_path, address + 5, n + 1);
		*salen = (socklen_t)sizeof(sa->un);
		return 0;
	}
	v6 = address[0] == '[';
	if (v6) {
		const char *close = strchr(address, ']');

		if (!close || close[1] != ':')
			return ql_error_set(-EINVAL, "address '%s': expected [IPV6]:PORT", address);
		h = address + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(address, ':');
		h = address;
		hlen = colon ? (size_t)(colon - address) : 0;
		if (colon && memchr(address, ':', hlen))
			return ql_error_set(-EINVAL,
					    "address '%s': an IPv6 address goes in brackets, "
					    "[ADDR]:PORT",
					    address);
	}
	if (!colon || hlen == 0 || hlen >= sizeof(host))
		return ql_error_set(-EINVAL,
				    "address '%s': expected HOST:PORT, [IPV6]:PORT or unix:PATH",
				    address);
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port > 65535 || colon[1] == '-' ||
	    colon[1] == '+' || colon[1] == ' ')
		return ql_error_set(-EINVAL, "address '%s': bad port", address);
	hints.ai_family = v6 ? AF_INET6 : AF_INET;
	if (getaddrinfo(host, NULL, &hints, &res) || !res)
		return ql_error_set(-EINVAL, "address '%s': unknown host", address);
	if (v6) {
		memcpy(&sa->in6, res->ai_addr, sizeof(sa->in6));
		sa->in6.sin6_port = htons((uint16_t)port);
		*salen = (socklen_t)sizeof(sa->in6);
	} else {
		sa->in.sin_family = AF_INET;
		sa->in.sin_port = htons((uint16_t)port);
		sa->in.sin_addr = ((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr;
		*salen = (socklen_t)sizeof(sa->in);
	}
	freeaddrinfo(res);
	return 0;
}

/* The address parsed, and a non-blocking stream socket of its family. */
static int open_socket(const char *address, union ep_sockaddr *sa, socklen_t *salen)
{
	int fd, ret = parse_address(address, sa, salen);

	if (ret)
		return ret;
	fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ql_error_set(-errno, "socket: %s", strerror(errno));
	return fd;
}

int ql__ep_listen(const char *address, int *fdp, char *bound, size_t bound_len)
{
	union ep_sockaddr sa;
	socklen_t salen;
	int fd, one = 1, ret;

	fd = open_socket(address, &sa, &salen);
	if (fd < 0)
		return fd;
	if (sa.sa.sa_family == AF_UNIX) {
		unlink(sa.un.sun_path); /* a stale socket of an earlier server */
	} else {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		/* [::] is IPv6 only: IPv4 clients come to an IPv4 address */
		if (sa.sa.sa_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	if (bind(fd, &sa.sa, salen) || listen(fd, 64)) {
		ret = -errno;
		close(fd);
		return ql_error_set(ret, "cannot listen on %s: %s", address, strerror(-ret));
	}
	if (sa.sa.sa_family == AF_INET) {
		char ip[INET_ADDRSTRLEN];

		salen = sizeof(sa.in);
		getsockname(fd, &sa.sa, &salen);
		inet_ntop(AF_INET, &sa.in.sin_addr, ip, sizeof(ip));
		snprintf(bound, bound_len, "%s:%u", ip, ntohs(sa.in.sin_port));
	} else if (sa.sa.sa_family == AF_INET6) {
		char ip[INET6_ADDRSTRLEN];

		salen = sizeof(sa.in6);
		getsockname(fd, &sa.sa, &salen);
		inet_ntop(AF_INET6, &sa.in6.sin6_addr, ip, sizeof(ip));
		snprintf(bound, bound_len, "[%s]:%u", ip, ntohs(sa.in6.sin6_port));
	} else {
		snprintf(bound, bound_len, "unix:%s", sa.un.sun_path);
	}
	*fdp = fd;
	return 0;
}

int ql__ep_connect(const char *address, int timeout_ms, int *fdp)
{
	union ep_sockaddr sa;
	socklen_t salen;
	struct pollfd pfd;
	int fd, ret, soerr = 0, one = 1;
	socklen_t sl = sizeof(soerr);

	fd = open_socket(address, &sa, &salen);
	if (fd < 0)
		return fd;
	if (sa.sa.sa_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, &sa.sa, salen) && errno != EINPROGRESS) {
		ret = -errno;
		goto fail;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	ret = poll(&pfd, 1, timeout_ms);
	if (ret == 0) {
		ret = -ETIMEDOUT;
		goto fail;
	}
	if (ret < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl)) {
		ret = -errno;
		goto fail;
	}
	if (soerr) {
		ret = -soerr;
		goto fail;
	}
	*fdp = fd;
	return 0;
fail:
	close(fd);
	return ql_error_set(ret, "cannot connect to %s: %s", address, strerror(-ret));
}

int ql__ep_hello_format(struct ql_qp *ctl, struct ql_qp *data, const struct ql_conn_params *mem,
			char *buf, size_t len)
{
	struct ql_conn_params pc, pd;
	char a[512], b[512];
	int ret, n;

	ret = ql_qp_local_params(ctl, &pc);
	if (!ret)
		ret = ql_qp_local_params(data, &pd);
	if (ret)
		return ret;
	if (mem) {
		pc.vaddr = mem->vaddr;
		pc.rkey = mem->rkey;
		pc.length = mem->length;
		pc.num_slots = mem->num_slots;
		pc.slot_size = mem->slot_size;
	}
	if (ql_conn_params_format(&pc, a, sizeof(a)) < 0 ||
	    ql_conn_params_format(&pd, b, sizeof(b)) < 0)
		return -EINVAL;
	n = snprintf(buf, len, QL_EPC_MAGIC "\nctl %s\ndata %s\n", a, b);
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

int ql__ep_hello_parse(const char *text, struct ql_conn_params *ctl, struct ql_conn_params *data)
{
	char copy[QL_EPC_HELLO_MAX + 1], *save = NULL, *l1, *l2, *l3;

	if (strlen(text) > QL_EPC_HELLO_MAX)
		return -EPROTO;
	strcpy(copy, text);
	l1 = strtok_r(copy, "\n", &save);
	l2 = strtok_r(NULL, "\n", &save);
	l3 = strtok_r(NULL, "\n", &save);
	if (!l1 || !l2 || !l3 || strtok_r(NULL, "\n", &save) || strcmp(l1, QL_EPC_MAGIC) ||
	    strncmp(l2, "ctl ", 4) || strncmp(l3, "data ", 5))
		return -EPROTO;
	memset(ctl, 0, sizeof(*ctl));
	memset(data, 0, sizeof(*data));
	if (ql_conn_params_parse(l2 + 4, ctl) || ql_conn_params_parse(l3 + 5, data))
		return -EPROTO;
	return 0;
}
