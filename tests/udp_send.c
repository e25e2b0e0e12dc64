/* SPDX-License-Identifier: MIT */
/*
 * ql-udp-send: send one datagram to a control port and print the reply, for
 * the tests that throw bad input at a running qlinkd.
 *
 * usage: ql-udp-send [--from ADDR[:PORT]] [--secret-file F] [--wait MS] [--cookie 1]
 *                    [--pad N] HOST PORT FILE|-
 *
 * --secret-file signs the datagram as a QCS would (JSON, "\n", 64 hex chars
 * of HMAC-SHA256). --pad appends blanks to the JSON up to N bytes (a
 * DISCOVER must be 256 bytes long). --cookie 1: when the answer is a RETRY,
 * send the datagram again with its cookie (the DISCOVER round trip) and
 * print only the second answer. Exit 0 when sent; the reply, if one came
 * within --wait ms, is printed on stdout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static size_t slurp(FILE *f, unsigned char *buf, size_t cap)
{
	size_t n = fread(buf, 1, cap, f);

	return n;
}

int main(int argc, char **argv)
{
	const char *from = NULL, *secret_file = NULL;
	unsigned char json[70000];
	size_t jn, pad = 0;
	int cookie = 0;
	unsigned char buf[70000], secret[256], mac[crypto_auth_hmacsha256_BYTES];
	size_t n, slen = 0;
	struct sockaddr_in dst = { .sin_family = AF_INET }, src = { .sin_family = AF_INET };
	int wait_ms = 200, fd = -1, i = 1;
	FILE *f;

	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
		if (i + 1 >= argc)
			goto usage;
		if (!strcmp(argv[i], "--from"))
			from = argv[i + 1];
		else if (!strcmp(argv[i], "--secret-file"))
			secret_file = argv[i + 1];
		else if (!strcmp(argv[i], "--cookie"))
			cookie = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--pad"))
			pad = (size_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--wait"))
			wait_ms = atoi(argv[i + 1]);
		else
			goto usage;
	}
	if (argc - i != 3)
		goto usage;
	if (inet_pton(AF_INET, argv[i], &dst.sin_addr) != 1)
		goto usage;
	dst.sin_port = htons((uint16_t)atoi(argv[i + 1]));
	f = strcmp(argv[i + 2], "-") ? fopen(argv[i + 2], "rb") : stdin;
	if (!f) {
		perror(argv[i + 2]);
		return 1;
	}
	jn = slurp(f, json, sizeof(json) - 400);
	while (jn && json[jn - 1] == '\n')
		jn--;
	if (pad > sizeof(json) - 400)
		pad = sizeof(json) - 400;
	while (jn < pad)
		json[jn++] = ' ';
again:
	memcpy(buf, json, jn);
	n = jn;
	if (secret_file) {
		FILE *s = fopen(secret_file, "rb");

		if (!s || sodium_init() < 0) {
			perror(secret_file);
			return 1;
		}
		slen = fread(secret, 1, sizeof(secret), s);
		fclose(s);
		while (slen && (secret[slen - 1] == '\n' || secret[slen - 1] == '\r'))
			slen--;
		while (n && (buf[n - 1] == '\n'))
			n--;
		{
			crypto_auth_hmacsha256_state st;

			crypto_auth_hmacsha256_init(&st, secret, slen);
			crypto_auth_hmacsha256_update(&st, buf, n);
			crypto_auth_hmacsha256_final(&st, mac);
		}
		buf[n++] = '\n';
		for (size_t k = 0; k < sizeof(mac); k++)
			n += (size_t)sprintf((char *)buf + n, "%02x", mac[k]);
	}
	if (fd >= 0)
		goto send;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	if (from) {
		char host[64];
		const char *colon = strchr(from, ':');

		snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - from) : 63, from);
		if (colon)
			src.sin_port = htons((uint16_t)atoi(colon + 1));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
		if (inet_pton(AF_INET, host, &src.sin_addr) != 1 ||
		    bind(fd, (struct sockaddr *)&src, sizeof(src))) {
			perror("bind");
			return 1;
		}
	}
send:
	if (sendto(fd, buf, n, 0, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		perror("sendto");
		return 1;
	}
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, wait_ms) == 1) {
			ssize_t r = recv(fd, buf, sizeof(buf) - 1, 0);

			if (r > 0 && cookie == 1 && jn > 1 && json[0] == '{') {
				const char *c;

				buf[r] = 0;
				c = strstr((char *)buf, "\"cookie\":\"");
				if (strstr((char *)buf, "\"type\":\"RETRY\"") && c &&
				    strlen(c) >= 42) {
					/* {"cookie":"<32 hex>", then the rest of the JSON */
					memmove(json + 45, json + 1, jn - 1);
					memcpy(json, "{\"cookie\":\"", 11);
					memcpy(json + 11, c + 10, 32);
					memcpy(json + 43, "\",", 2);
					jn += 44;
					cookie = 2;
					goto again;
				}
			}
			if (r > 0) {
				fwrite(buf, 1, (size_t)r, stdout);
				putchar('\n');
			}
		}
	}
	close(fd);
	return 0;
usage:
	fprintf(stderr,
		"usage: ql-udp-send [--from ADDR[:PORT]] [--secret-file F] [--wait MS] [--cookie 1] "
		"[--pad N] HOST PORT FILE|-\n");
	return 2;
}
