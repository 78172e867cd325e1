package dynamo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrBadDocument is returned (wrapped) for a document that is not one JSON object, or that
// DynamoDB cannot store: a number with more than 38 significant digits or a magnitude outside
// 1E-130 .. 9.99E+125 (Amazon DynamoDB Developer Guide, "Supported data types", Number); an
// object key that is empty or of 64 KiB or more (attribute names: "Naming rules"); objects and
// arrays nested more than MaxDocDepth deep.
var ErrBadDocument = errors.New("store/dynamo: document cannot be stored as DynamoDB attributes")

// Number limits of DynamoDB (Developer Guide, "Supported data types").
const (
	maxNumberDigits = 38
	minNumberExp    = -130 // power of ten of the leading digit of the smallest magnitude
	maxNumberExp    = 125  // and of the largest
)

// Limits of DynamoDB on map attributes ("Naming rules"; "Nested attribute depth": 32 levels).
// dynalite enforces none of them; DynamoDB Local 1.25.1 refuses an item past them with a
// ValidationException, and the boundaries below are the ones it enforces.
const (
	// MaxDocDepth is how deep a document's objects and arrays may nest, the document itself
	// counting as 1 (`{"a":[1]}` is 2 deep): DynamoDB's 32 levels of nested attributes, the
	// item being the first.
	MaxDocDepth   = 31
	maxAttrNameSz = 64*1024 - 1 // bytes of an attribute name (a map key); names are never empty
)

// DocToAttributeValue converts a JSON object into a DynamoDB map attribute: objects become M,
// arrays L, strings S, numbers N (canonical plain decimal, see CanonicalNumber), true/false
// BOOL, null NULL. Duplicate object keys: the last wins (as encoding/json). Invalid UTF-8 in
// strings becomes U+FFFD. Errors wrap ErrBadDocument.
func DocToAttributeValue(doc []byte) (*types.AttributeValueMemberM, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: not JSON: %v", ErrBadDocument, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrBadDocument)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the document is a JSON %s, want an object", ErrBadDocument, jsonKind(v))
	}
	av, err := toAV(obj, "", 1)
	if err != nil {
		return nil, err
	}
	return av.(*types.AttributeValueMemberM), nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// toAV converts v, found at path at nesting depth (the document is 1).
func toAV(v any, path string, depth int) (types.AttributeValue, error) {
	switch v.(type) {
	case map[string]any, []any:
		if depth > MaxDocDepth {
			return nil, fmt.Errorf("%w: at %s: objects and arrays nested more than %d deep", ErrBadDocument, path, MaxDocDepth)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(x))
		for k, e := range x {
			if k == "" || len(k) > maxAttrNameSz {
				return nil, fmt.Errorf("%w: at %s: an object key of %d bytes (DynamoDB takes 1 to %d)",
					ErrBadDocument, orRoot(path), len(k), maxAttrNameSz)
			}
			av, err := toAV(e, path+"."+k, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case []any:
		l := make([]types.AttributeValue, len(x))
		for i, e := range x {
			av, err := toAV(e, path+"["+strconv.Itoa(i)+"]", depth+1)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case string:
		return &types.AttributeValueMemberS{Value: x}, nil
	case json.Number:
		n, err := CanonicalNumber(string(x))
		if err != nil {
			return nil, fmt.Errorf("%w: at %s: %w", ErrBadDocument, orRoot(path), err)
		}
		return &types.AttributeValueMemberN{Value: n}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: x}, nil
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	}
	return nil, fmt.Errorf("%w: unexpected %T", ErrBadDocument, v)
}

// orRoot returns path, or "." for the document itself.
func orRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}

// CanonicalNumber returns the canonical form of a decimal number (JSON number syntax, or
// DynamoDB's N syntax which also allows a leading "+", leading zeros and "1." / ".5"): plain
// decimal without exponent, no leading zeros, no trailing fractional zeros, "0" for any zero,
// e.g. "1.50e2" -> "150", "-0.0" -> "0", "1e-3" -> "0.001". Errors: not a number, more than 38
// significant digits, magnitude outside DynamoDB's range.
func CanonicalNumber(s string) (string, error) {
	in := s
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return "", fmt.Errorf("number %q: bad or out-of-range exponent", in)
		}
		exp = e
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	if intPart == "" && frac == "" || !allDigits(intPart) || !allDigits(frac) {
		return "", fmt.Errorf("number %q: not a decimal number", in)
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	if digits == "" {
		return "0", nil
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	if len(digits) > maxNumberDigits {
		return "", fmt.Errorf("number %q has %d significant digits, DynamoDB keeps at most %d", in, len(digits), maxNumberDigits)
	}
	lead := int64(len(digits)) - 1 + exp
	if lead < minNumberExp || lead > maxNumberExp {
		return "", fmt.Errorf("number %q is outside DynamoDB's range 1E-130 .. 9.99E+125", in)
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch point := int64(len(digits)) + exp; {
	case exp >= 0:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", int(exp)))
	case point > 0:
		b.WriteString(digits[:point])
		b.WriteByte('.')
		b.WriteString(digits[point:])
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", int(-point)))
		b.WriteString(digits)
	}
	return b.String(), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// AttributeValueToDoc converts a DynamoDB attribute value into canonical JSON: object keys
// sorted by their bytes, numbers in CanonicalNumber form, no insignificant whitespace, only
// '"', '\' and control characters escaped. Types JSON lacks are mapped too, for items other
// clients wrote: B -> base64 string, SS -> array of strings, NS -> array of numbers, BS -> array
// of base64 strings. Errors: an N that is not a number, an unknown member type.
func AttributeValueToDoc(av types.AttributeValue) ([]byte, error) {
	return appendAV(nil, av)
}

func appendAV(b []byte, av types.AttributeValue) ([]byte, error) {
	var err error
	switch x := av.(type) {
	case *types.AttributeValueMemberM:
		keys := make([]string, 0, len(x.Value))
		for k := range x.Value {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			if b, err = appendAV(b, x.Value[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case *types.AttributeValueMemberL:
		b = append(b, '[')
		for i, e := range x.Value {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendAV(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *types.AttributeValueMemberS:
		return appendString(b, x.Value), nil
	case *types.AttributeValueMemberN:
		n, err := CanonicalNumber(x.Value)
		if err != nil {
			return nil, fmt.Errorf("store/dynamo: document: stored N attribute: %w", err)
		}
		return append(b, n...), nil
	case *types.AttributeValueMemberBOOL:
		return strconv.AppendBool(b, x.Value), nil
	case *types.AttributeValueMemberNULL:
		return append(b, "null"...), nil
	case *types.AttributeValueMemberB:
		return appendString(b, base64.StdEncoding.EncodeToString(x.Value)), nil
	case *types.AttributeValueMemberSS:
		l := make([]types.AttributeValue, len(x.Value))
		for i, s := range x.Value {
			l[i] = &types.AttributeValueMemberS{Value: s}
		}
		return appendAV(b, &types.AttributeValueMemberL{Value: l})
	case *types.AttributeValueMemberNS:
		l := make([]types.AttributeValue, len(x.Value))
		for i, s := range x.Value {
			l[i] = &types.AttributeValueMemberN{Value: s}
		}
		return appendAV(b, &types.AttributeValueMemberL{Value: l})
	case *types.AttributeValueMemberBS:
		l := make([]types.AttributeValue, len(x.Value))
		for i, s := range x.Value {
			l[i] = &types.AttributeValueMemberB{Value: s}
		}
		return appendAV(b, &types.AttributeValueMemberL{Value: l})
	}
	return nil, fmt.Errorf("store/dynamo: unsupported attribute value type %T", av)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string (RFC 8259 §7); invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
