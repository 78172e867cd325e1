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

	"github.com/projhost/projhost/event"
)

// ErrBadDocument is returned (wrapped) for a document that breaks the document rule
// (event.CheckDoc, which the host applies to every handler output already: numbers DynamoDB
// can hold, nesting, key lengths, unique keys) or a key the read-model table cannot hold.
var ErrBadDocument = errors.New("store/dynamo: document cannot be stored as DynamoDB attributes")

// MaxDocDepth is event.MaxDocDepth: DynamoDB's 32 levels of nested attributes, the item
// holding the document being the first. DynamoDB Local 1.25.1 refuses an item one level
// deeper with a ValidationException; dynalite enforces none of the document rule's limits.
const MaxDocDepth = event.MaxDocDepth

// DocToAttributeValue converts a JSON object into a DynamoDB map attribute: objects become M,
// arrays L, strings S, numbers N (canonical plain decimal, see CanonicalNumber), true/false
// BOOL, null NULL. Invalid UTF-8 in strings becomes U+FFFD. A document breaking the document
// rule (event.CheckDoc) is refused. Errors wrap ErrBadDocument (and event.ErrBadDoc).
func DocToAttributeValue(doc []byte) (*types.AttributeValueMemberM, error) {
	if err := event.CheckDoc(doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDocument, err)
	}
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
	av, err := toAV(obj, "")
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

// toAV converts v, found at path.
// The document rule was checked before: the limits hold.
func toAV(v any, path string) (types.AttributeValue, error) {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(x))
		for k, e := range x {
			av, err := toAV(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case []any:
		l := make([]types.AttributeValue, len(x))
		for i, e := range x {
			av, err := toAV(e, path+"["+strconv.Itoa(i)+"]")
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
	digits, exp, err := event.NumberParts(s)
	if err != nil {
		return "", err
	}
	if digits == "" {
		return "0", nil
	}
	var b strings.Builder
	if s[0] == '-' {
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
