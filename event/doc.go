package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The document rule: what every read-model document must be, whatever the store. A handler's
// output is checked against it where it is decoded (host), so `projhost test`, the embedded
// store and DynamoDB accept and refuse the same documents. The limits are DynamoDB's, the
// strictest store's (Amazon DynamoDB Developer Guide, "Supported data types and naming rules":
// Number; "Naming rules"; "Nested attribute depth"), so a document accepted here is one
// DynamoDB stores.
const (
	// MaxDocBytes is the largest document in bytes of JSON text (ABI.md §4; wasmabi.MaxDocLen).
	// As DynamoDB attributes such a document takes at most about 4/3 of it (a list element
	// costs 1 byte and an empty map 3, against 3 bytes of "{},"), under the 400 KB item limit.
	MaxDocBytes = 256 << 10
	// MaxDocDepth is how deep objects and arrays may nest, the document itself counting as 1
	// (`{"a":[1]}` is 2 deep): DynamoDB's 32 levels of nested attributes, the DynamoDB store
	// keeping the document as one map attribute of the item (the item is the first level).
	// DynamoDB Local 1.25.1 refuses an item one level deeper with a ValidationException.
	MaxDocDepth = 31
	// MaxFieldNameBytes is the longest object key (bytes of UTF-8 after unescaping); keys are
	// never empty. DynamoDB: attribute names are at least 1 character and less than 64 KB
	// ("Naming rules"); DynamoDB Local refuses an empty map key ("Empty attribute name").
	MaxFieldNameBytes = 64<<10 - 1
	// MaxNumberDigits is how many significant digits a number may have (DynamoDB: "up to 38
	// digits of precision"); leading and trailing zeros do not count.
	MaxNumberDigits = 38
	// MinNumberExp and MaxNumberExp bound the power of ten of a non-zero number's leading
	// digit: DynamoDB's magnitudes 1E-130 .. 9.9999999999999999999999999999999999999E+125.
	MinNumberExp = -130
	MaxNumberExp = 125
)

// ErrBadDoc is wrapped by CheckDoc's errors.
var ErrBadDoc = errors.New("bad document")

// CheckDoc reports whether doc follows the document rule: one JSON object (RFC 8259; leading
// and trailing white space allowed) of at most MaxDocBytes bytes, objects and arrays nested at
// most MaxDocDepth deep, object keys of 1 to MaxFieldNameBytes bytes, no key twice in one
// object, numbers of at most MaxNumberDigits significant digits and, unless zero, a magnitude
// within DynamoDB's range (see MinNumberExp), and valid UTF-8 throughout (RFC 8259 §8.1).
// The syntax taken is encoding/json's (json.Valid), and keys are compared and measured as
// encoding/json unescapes them (a lone surrogate escape is U+FFFD).
//
// Duplicate keys are refused, not resolved: RFC 8259 §4 leaves their meaning to the reader
// ("the names within an object SHOULD be unique"), and readers differ — encoding/json and
// SQLite's json_extract keep the last, others the first — so the same document would read
// differently on the embedded store (which keeps the JSON text) and on DynamoDB (which keeps
// one attribute per name). A handler writing one has a bug the error should show.
//
// The error wraps ErrBadDoc. A document that is not JSON, or not an object, is "not a JSON
// object"; one that is but holds invalid UTF-8 is "not valid UTF-8"; otherwise the error names
// the first offending place in document order as a path (`.a.b[2]`). The check is one pass
// over doc (docscan.go); it does not allocate for a valid document whose objects have at most
// 16 keys and whose keys hold no escapes. Safe for concurrent use.
func CheckDoc(doc []byte) error {
	if len(doc) > MaxDocBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadDoc, len(doc), MaxDocBytes)
	}
	s := docScanner{doc: doc}
	switch s.document() {
	case scanOK:
		return nil
	case scanSyntax:
		return fmt.Errorf("%w: not a JSON object", ErrBadDoc)
	}
	// Invalid UTF-8 or a broken rule was found before the end: the order of the errors is
	// syntax, then encoding, then the rule, whatever comes first in the document.
	if !json.Valid(doc) {
		return fmt.Errorf("%w: not a JSON object", ErrBadDoc)
	}
	if !utf8.Valid(doc) {
		// json.Valid takes invalid UTF-8, which the stores then disagree on: SQLite keeps the
		// bytes, DynamoDB (through encoding/json) turns each into U+FFFD, merging keys.
		return fmt.Errorf("%w: not valid UTF-8 (RFC 8259 §8.1)", ErrBadDoc)
	}
	return fmt.Errorf("%w: %w", ErrBadDoc, s.rule)
}

// pathError is an error found at a place of the document; the path grows as it is returned
// up through the containers, so it is built only when there is an error.
type pathError struct {
	path []string // innermost last
	msg  string
}

func (e *pathError) Error() string {
	var b strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		b.WriteString(e.path[i])
	}
	if b.Len() == 0 {
		b.WriteString(".")
	}
	return "at " + b.String() + ": " + e.msg
}

func (e *pathError) in(seg string) *pathError {
	e.path = append(e.path, seg)
	return e
}

// fieldSeg is the path segment of an object key: .name, or ["name"] when it is not a plain
// identifier.
func fieldSeg(k []byte) string {
	plain := len(k) > 0 && len(k) <= 64
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			plain = false
			break
		}
	}
	if plain {
		return "." + string(k)
	}
	if len(k) > 64 {
		k = k[:64]
	}
	return "[" + strconv.Quote(string(k)) + "]"
}

// CheckNumber reports whether s, a JSON number (or DynamoDB's N syntax, which also allows a
// leading "+", leading zeros and "1." / ".5"), is one the document rule takes: at most
// MaxNumberDigits significant digits and, unless it is zero, a leading digit's power of ten in
// MinNumberExp..MaxNumberExp. Errors say which limit s breaks.
func CheckNumber(s string) error {
	_, err := splitNumber(s)
	return err
}

// number is a decimal number split by splitNumber: its significant digits are the bytes lo..hi
// of intPart+frac (empty for zero), and exp is the power of ten of the last of them.
type number struct {
	intPart, frac string
	lo, hi        int
	exp           int64
}

// NumberParts splits a decimal number checked by the rule of CheckNumber into its significant
// digits (no leading or trailing zeros; "" for zero) and the power of ten of the last of them,
// so that the value is ±digits × 10^exp; neg tells the sign. Errors: not a number, too many
// significant digits, out of range.
func NumberParts(s string) (digits string, exp int64, err error) {
	n, err := splitNumber(s)
	if err != nil || n.lo == n.hi {
		return "", 0, err
	}
	switch ip := len(n.intPart); {
	case n.hi <= ip:
		digits = n.intPart[n.lo:n.hi]
	case n.lo >= ip:
		digits = n.frac[n.lo-ip : n.hi-ip]
	default:
		digits = n.intPart[n.lo:] + n.frac[:n.hi-ip]
	}
	return digits, n.exp, nil
}

func splitNumber(s string) (number, error) {
	in := s
	var exp int64
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return number{}, fmt.Errorf("number %q: bad or out-of-range exponent", in)
		}
		exp = e
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return number{}, fmt.Errorf("number %q: not a decimal number", in)
	}
	exp -= int64(len(frac))
	// The significant digits are intPart+frac without leading and trailing zeros; find them
	// without concatenating.
	all := len(intPart) + len(frac)
	at := func(i int) byte {
		if i < len(intPart) {
			return intPart[i]
		}
		return frac[i-len(intPart)]
	}
	lo, hi := 0, all
	for lo < hi && at(lo) == '0' {
		lo++
	}
	if lo == hi {
		return number{}, nil
	}
	for at(hi-1) == '0' {
		hi--
	}
	exp += int64(all - hi)
	n := hi - lo
	if n > MaxNumberDigits {
		return number{}, fmt.Errorf("number %q has %d significant digits, at most %d are kept (DynamoDB's precision)", in, n, MaxNumberDigits)
	}
	if lead := int64(n) - 1 + exp; lead < MinNumberExp || lead > MaxNumberExp {
		return number{}, fmt.Errorf("number %q is outside the range 1E-130 .. 9.99E+125 (DynamoDB's)", in)
	}
	return number{intPart: intPart, frac: frac, lo: lo, hi: hi, exp: exp}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
