/* SPDX-License-Identifier: MIT */
/* Union-find decoder (stub until the real one lands). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qec/qec_internal.h"

struct ql_qec_decoder {
	const struct ql_qec_code *code;
};

int ql_qec_decoder_create(const struct ql_qec_code *code, const struct ql_qec_params *params,
			  const struct ql_qec_decoder_opts *opts, struct ql_qec_decoder **out)
{
	(void)opts;
	if (!out || ql__qec_params_check(code, params))
		return -EINVAL;
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->code = code;
	return 0;
}

void ql_qec_decoder_destroy(struct ql_qec_decoder *dec)
{
	free(dec);
}

int ql_qec_decoder_push(struct ql_qec_decoder *dec, const uint8_t *frame)
{
	(void)dec;
	(void)frame;
	return -ENOSYS;
}

int ql_qec_decoder_finish(struct ql_qec_decoder *dec, const uint8_t *final_frame,
			  uint8_t *observable_flip)
{
	(void)dec;
	(void)final_frame;
	(void)observable_flip;
	return -ENOSYS;
}

int ql_qec_decoder_corrections(const struct ql_qec_decoder *dec, uint8_t *bits, size_t nbits)
{
	(void)dec;
	(void)bits;
	(void)nbits;
	return -ENOSYS;
}

void ql_qec_decoder_reset(struct ql_qec_decoder *dec)
{
	(void)dec;
}

int ql_qec_decode_exact(const struct ql_qec_code *code, const struct ql_qec_params *params,
			const uint8_t *frames, uint8_t *observable_flip)
{
	(void)code;
	(void)params;
	(void)frames;
	(void)observable_flip;
	return -ENOSYS;
}
