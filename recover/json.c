/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * json -- the one piece of JSON the tool needs: a string literal.  Names,
 * paths and program names are arbitrary bytes, so control characters and
 * quotes are escaped and bytes that are not valid UTF-8 become U+FFFD: the
 * output always parses.
 */
#include "tool.h"

/* Length of the valid UTF-8 sequence starting at s, or 0 when it is not one
 * (overlong forms, surrogates and values above U+10FFFF included). */
static int utf8_sequence(const unsigned char *s)
{
	unsigned c = s[0];
	int n;
	unsigned min, cp;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2, min = 0x80, cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3, min = 0x800, cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4, min = 0x10000, cp = c & 0x07;
	} else {
		return 0;
	}
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)	/* also stops at the terminating NUL */
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	const unsigned char *c = (const unsigned char *)s;
	while (*c != '\0') {
		switch (*c) {
		case '"': fputs("\\\"", f); c++; continue;
		case '\\': fputs("\\\\", f); c++; continue;
		case '\n': fputs("\\n", f); c++; continue;
		case '\r': fputs("\\r", f); c++; continue;
		case '\t': fputs("\\t", f); c++; continue;
		default: break;
		}
		if (*c < 0x20) {
			fprintf(f, "\\u%04x", *c);
			c++;
		} else if (*c < 0x80) {
			fputc(*c, f);
			c++;
		} else {
			int n = utf8_sequence(c);
			if (n == 0) {
				fputs("\\ufffd", f);
				c++;
			} else {
				fwrite(c, 1, (size_t)n, f);
				c += n;
			}
		}
	}
	fputc('"', f);
}
