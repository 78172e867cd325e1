package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// terminalUnsafe reports whether r must not reach a terminal raw: C0 and C1 control characters
// and DEL (escape sequences: colours, cursor moves, window titles, bells) and format
// characters (Unicode category Cf: bidirectional overrides that reorder what is shown).
func terminalUnsafe(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// escapeText returns s with every terminal-unsafe rune and every invalid UTF-8 byte written as
// a Go escape (\x1b, \u202e, \xff), for text from a handler (an error's message) printed on a
// terminal. Other text is unchanged.
func escapeText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return terminalUnsafe(r) || r == utf8.RuneError }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case terminalUnsafe(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeJSON returns the valid JSON text j with every terminal-unsafe rune that encoding/json
// leaves raw (DEL, C1 controls, format characters; it escapes C0 itself, so C0 here is
// whitespace between tokens) written as a \u escape. Such runes can only be inside JSON
// strings, where the escape means the same rune.
func escapeJSON(j []byte) []byte {
	var out []byte
	for i := 0; i < len(j); {
		r, n := utf8.DecodeRune(j[i:])
		if r < utf8.RuneSelf && r != 0x7f || !terminalUnsafe(r) { // C0 here is JSON whitespace
			if out != nil {
				out = append(out, j[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(j)+16), j[:i]...)
		}
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	if out == nil {
		return j
	}
	return out
}
