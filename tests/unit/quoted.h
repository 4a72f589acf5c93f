/*
 * For the tests of messages that quote input: a line of binary garbage
 * with a terminal colour sequence (the sample of issue 22), its form once
 * quoted by strata_quote, and the check that a message is one line of
 * printable ASCII showing that form. Include after cmocka.h.
 */
#ifndef STRATA_TEST_QUOTED_H
#define STRATA_TEST_QUOTED_H

#include <string.h>

#define GARBAGE "\x01M-\x1b\x1b[31mRED"
#define GARBAGE_QUOTED "\\x01M-\\x1b\\x1b[31mRED"

/* msg holds printable ASCII only, and quoted. The failure report gives the
 * offset of a bad byte rather than the message, which would carry it. */
static inline void assert_quoted_msg(const char *msg, const char *quoted) {
  for (size_t i = 0; msg[i]; i++) {
    unsigned char c = (unsigned char)msg[i];
    if (c < 0x20 || c > 0x7e) fail_msg("message has byte 0x%02x at offset %zu", c, i);
  }
  if (!strstr(msg, quoted)) fail_msg("message '%s' lacks '%s'", msg, quoted);
}

#endif
