package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// deepDoc returns a document depth deep (the document itself is 1): nested objects around [1].
func deepDoc(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `[1]` + strings.Repeat(`}`, depth-1)
}

func TestCheckDoc(t *testing.T) {
	many := func(n int, dupAt int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			k := i
			if i == dupAt {
				k = 0
			}
			fmt.Fprintf(&b, `"k%d":%d`, k, i)
		}
		b.WriteString("}")
		return b.String()
	}
	tests := []struct {
		name, doc string
		want      string // "" = accepted, else a substring of the error
	}{
		{"empty object", `{}`, ""},
		{"invalid UTF-8 in a key", "{\"\xff\":1,\"\xfe\":2}", "not valid UTF-8"},
		{"invalid UTF-8 in a string", "{\"a\":\"\xff\"}", "not valid UTF-8"},
		{"U+FFFD itself", "{\"\\ufffd\":1,\"a\":\"\uFFFD\"}", ""},
		{"white space", " \t\n{ \"a\" : [ 1 , { } ] }\r\n", ""},
		{"flight", `{"flights":12,"delayed":3,"total_delay":-17.5,"max_delay":1e2}`, ""},
		{"max depth", deepDoc(MaxDocDepth), ""},
		{"38 digits", `{"x":12345678901234567890123456789012345678}`, ""},
		{"38 digits and zeros", `{"x":1234567890123456789012345678901234567800000e-5}`, ""},
		{"largest", `{"x":9.9999999999999999999999999999999999999E+125}`, ""},
		{"smallest", `{"x":-1e-130}`, ""},
		{"zero with any exponent", `{"x":0e-999,"y":-0.000}`, ""},
		{"escaped keys differ", `{"a\u0062":1,"ab\n":2,"\u00e9":3,"é ":4}`, ""},
		{"same key in two objects", `{"a":{"a":1},"b":{"a":2}}`, ""},
		{"16 keys", many(16, -1), ""},
		{"200 keys", many(200, -1), ""},
		{"longest key", `{"` + strings.Repeat("k", MaxFieldNameBytes) + `":1}`, ""},

		// The five documents of issue 8 that only DynamoDB refused.
		{"1e300", `{"x":1e300}`, "outside the range"},
		{"45-digit integer", `{"x":123456789012345678901234567890123456789012345}`, "45 significant digits"},
		{"40 levels", deepDoc(40), "nested more than 31 deep"},
		{"empty field name", `{"":1}`, "at .: an empty object key"},
		{"duplicate field names", `{"a":1,"a":2}`, "at .a: the key appears twice"},

		{"duplicate after escape", `{"ab":1,"a\u0062":2}`, "at .ab: the key appears twice"},
		{"duplicate in 17 keys", many(17, 16), "at .k0: the key appears twice"},
		{"duplicate in 200 keys", many(200, 150), "at .k0: the key appears twice"},
		{"nested empty key", `{"a":{"b":[1,{"":null}]}}`, "at .a.b[1]: an empty object key"},
		{"nested number", `{"a":[0,1,{"b c":1e-131}]}`, `at .a[2]["b c"]: number "1e-131" is outside the range`},
		{"one too deep", deepDoc(MaxDocDepth + 1), "nested more than 31 deep"},
		{"deep arrays", `{"a":` + strings.Repeat("[", MaxDocDepth) + strings.Repeat("]", MaxDocDepth) + `}`, "nested more than 31 deep"},
		{"39 digits", `{"x":123456789012345678901234567890123456789}`, "39 significant digits"},
		{"1e126", `{"x":1e126}`, "outside the range"},
		{"huge exponent", `{"x":1e99999999999}`, "bad or out-of-range exponent"},
		{"key too long", `{"` + strings.Repeat("k", MaxFieldNameBytes+1) + `":1}`, "an object key of 65536 bytes"},
		{"too big", `{"s":"` + strings.Repeat("x", MaxDocBytes) + `"}`, "bytes, at most 262144"},
		{"array", `[1]`, "not a JSON object"},
		{"string", `"s"`, "not a JSON object"},
		{"empty", ``, "not a JSON object"},
		{"two objects", `{} {}`, "not a JSON object"},
		{"trailing comma", `{"a":1,}`, "not a JSON object"},
		{"NaN", `{"a":NaN}`, "not a JSON object"},

		// Strings and escapes as encoding/json takes them.
		{"every escape", `{"a":"\"\\\/\b\f\n\r\t\u00e9\uD834\uDD1E"}`, ""},
		{"lone surrogates", `{"\ud800":1,"a":"\udc00\ud800x"}`, ""},
		{"lone surrogates are U+FFFD", `{"\ud800":1,"\udbff":2}`, "at [\"\uFFFD\"]: the key appears twice"},
		{"lone surrogate and U+FFFD", `{"\ud800A":1,"\ufffdA":2}`, "the key appears twice"},
		{"surrogate pair", `{"\ud834\udd1e":1,"𝄞":2}`, "the key appears twice"},
		{"high surrogate then letter escape", `{"\ud834\u0041":1,"\ufffdA":2}`, "the key appears twice"},
		{"escaped NUL key", `{"\u0000":1}`, ""},
		{"escaped keys in nested objects", `{"a\u0062":{"a\u0062":1,"c\u0064":{"\u00e9":2}},"c\u0064":3,"\u00e9":4}`, ""},
		{"escaped duplicate after a nested object", `{"a\u0062":{"x\u0079":1},"x\u0079":2,"a\u0062":3}`, "at .ab: the key appears twice"},
		{"escaped duplicate in 20 keys", strings.TrimSuffix(many(19, -1), "}") + `,"k\u0031":1}`, "at .k1: the key appears twice"},
		{"DEL and U+10FFFF", "{\"a\":\"\x7f\xf4\x8f\xbf\xbf\"}", ""},
		{"bad escape", `{"a":"\x"}`, "not a JSON object"},
		{"short \\u", `{"a":"\u12"}`, "not a JSON object"},
		{"bad hex", `{"a":"\u12g4"}`, "not a JSON object"},
		{"control character", "{\"a\":\"\t\"}", "not a JSON object"},
		{"NUL byte", "{\"a\":\"\x00\"}", "not a JSON object"},
		{"unterminated string", `{"a":"b`, "not a JSON object"},
		{"overlong UTF-8", "{\"a\":\"\xc0\x80\"}", "not valid UTF-8"},
		{"UTF-8 surrogate", "{\"a\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"past U+10FFFF", "{\"a\":\"\xf4\x90\x80\x80\"}", "not valid UTF-8"},
		{"truncated UTF-8 at the end", "{\"a\":\"\xe2\x82\"}", "not valid UTF-8"},
		{"UTF-8 outside strings", "{\"a\":1\xc2\xa0}", "not a JSON object"},

		// Numbers: JSON's grammar, then the rule.
		{"number forms", `{"a":-0,"b":0.5,"c":-1.25E+3,"d":7e-2,"e":10E0}`, ""},
		{"leading zero", `{"a":01}`, "not a JSON object"},
		{"minus alone", `{"a":-}`, "not a JSON object"},
		{"dot without digits", `{"a":1.}`, "not a JSON object"},
		{"leading dot", `{"a":.5}`, "not a JSON object"},
		{"plus sign", `{"a":+1}`, "not a JSON object"},
		{"exponent without digits", `{"a":1e+}`, "not a JSON object"},
		{"hex", `{"a":0x1}`, "not a JSON object"},
		{"zero at the int32 exponents", `{"a":0e2147483647,"b":0E-2147483648,"c":0e+0002147483647}`, ""},
		{"zero past an int32 exponent", `{"a":0e2147483648}`, "bad or out-of-range exponent"},
		{"zero past a negative int32 exponent", `{"a":0e-2147483649}`, "bad or out-of-range exponent"},
		{"1E+125 with zeros", `{"a":100000e120,"b":0.00001e130}`, ""},
		{"1E-130 as digits", `{"a":0.0000000001e-120,"b":1000e-133}`, ""},
		{"under 1E-130", `{"a":999e-133}`, "outside the range"},
		{"38 digits around a point", `{"a":1234567890123456789.0123456789012345678000}`, ""},
		{"39 digits around a point", `{"a":0.001234567890123456789.0123456789012345678}`, "not a JSON object"},
		{"39 significant digits with zeros", `{"a":100000000000000000000000000000000000001}`, "39 significant digits"},

		// Literals and structure.
		{"literals", `{"a":true,"b":false,"c":null,"d":[true,false,null]}`, ""},
		{"truncated literal", `{"a":tru}`, "not a JSON object"},
		{"literal run on", `{"a":nullx}`, "not a JSON object"},
		{"missing colon", `{"a" 1}`, "not a JSON object"},
		{"missing comma", `{"a":1 "b":2}`, "not a JSON object"},
		{"array trailing comma", `{"a":[1,]}`, "not a JSON object"},
		{"unclosed", `{"a":[1`, "not a JSON object"},
		{"non-string key", `{1:2}`, "not a JSON object"},

		// One error of each kind: syntax first, then encoding, then the rule, wherever each is.
		{"rule then syntax", `{"a":1,"a":2,}`, "not a JSON object"},
		{"too deep then syntax", deepDoc(40) + "x", "not a JSON object"},
		{"UTF-8 then syntax", "{\"a\":\"\xff\",}", "not a JSON object"},
		{"rule then UTF-8", "{\"\":1,\"b\":\"\xff\"}", "not valid UTF-8"},
		{"number then UTF-8", "{\"a\":1e999,\"b\":\"\xff\"}", "not valid UTF-8"},
		{"first rule wins", `{"a":[{"":1}],"b":1e999}`, "at .a[0]: an empty object key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckDoc([]byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckDoc = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrBadDoc) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckDoc = %v, want an error wrapping ErrBadDoc containing %q", err, tt.want)
			}
		})
	}
}

func TestNumberParts(t *testing.T) {
	for _, tt := range []struct {
		in     string
		digits string
		exp    int64
		bad    bool
	}{
		{in: "0", digits: ""}, {in: "-0.0e5", digits: ""}, {in: "17", digits: "17"}, {in: "1700", digits: "17", exp: 2},
		{in: "1.50e2", digits: "15", exp: 1}, {in: "0.001", digits: "1", exp: -3}, {in: "+000123.4500", digits: "12345", exp: -2},
		{in: ".5", digits: "5", exp: -1}, {in: "5.", digits: "5"}, {in: "10.01", digits: "1001", exp: -2},
		{in: "", bad: true}, {in: "-", bad: true}, {in: ".", bad: true}, {in: "1e", bad: true}, {in: "1x", bad: true},
		{in: "0x10", bad: true}, {in: "1e-131", bad: true}, {in: "1e126", bad: true},
	} {
		d, e, err := NumberParts(tt.in)
		if tt.bad != (err != nil) || !tt.bad && (d != tt.digits || e != tt.exp) {
			t.Errorf("NumberParts(%q) = %q, %d, %v; want %q, %d, bad=%v", tt.in, d, e, err, tt.digits, tt.exp, tt.bad)
		}
	}
}

func TestCheckDocAllocations(t *testing.T) {
	doc := []byte(`{"flights":12,"delayed":3,"total_delay":-17.5,"max_delay":1e2}`)
	if n := testing.AllocsPerRun(100, func() {
		if err := CheckDoc(doc); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("CheckDoc allocates %v times per flat valid document, want 0", n)
	}
}

// refCheck is an independent statement of the document rule on encoding/json's token stream.
func refCheck(doc []byte) error {
	if len(doc) > MaxDocBytes || !json.Valid(doc) || !utf8.Valid(doc) {
		return errors.New("size, syntax or encoding")
	}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // next token of an object is a key
	}
	var stack []*frame
	for first := true; ; first = false {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if first && tok != json.Delim('{') {
			return errors.New("not an object")
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true
				}
				continue
			}
			k := tok.(string)
			if k == "" || len(k) > MaxFieldNameBytes || top.keys[k] {
				return errors.New("key")
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, &frame{obj: v == '{', keys: map[string]bool{}, key: true})
				if len(stack) > MaxDocDepth {
					return errors.New("depth")
				}
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			s := strings.TrimLeft(string(v), "-")
			mant, exp := s, 0
			if i := strings.IndexAny(s, "eE"); i >= 0 {
				e, err := strconv.ParseInt(s[i+1:], 10, 32) // DynamoDB's exponents fit easily
				if err != nil {
					return errors.New("exponent")
				}
				mant, exp = s[:i], int(e)
			}
			if i := strings.IndexByte(mant, '.'); i >= 0 {
				exp -= len(mant) - i - 1
				mant = mant[:i] + mant[i+1:]
			}
			d := strings.TrimLeft(mant, "0")
			t := strings.TrimRight(d, "0")
			exp += len(d) - len(t)
			if t != "" && (len(t) > MaxNumberDigits || len(t)-1+exp < MinNumberExp || len(t)-1+exp > MaxNumberExp) {
				return errors.New("number")
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].key = true
		}
	}
}

// FuzzCheckDoc: CheckDoc never panics, accepts exactly what the reference statement of the
// rule on encoding/json accepts, says "not a JSON object" exactly when encoding/json does not
// take doc as one object and "not valid UTF-8" exactly when it does but doc is not UTF-8, and
// what it accepts encoding/json decodes into an object. Seeds: testdata/fuzz/FuzzCheckDoc.
func FuzzCheckDoc(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := CheckDoc(doc)
		ref := refCheck(doc)
		if (err == nil) != (ref == nil) {
			t.Fatalf("CheckDoc(%q) = %v, reference rule says %v", doc, err, ref)
		}
		if err != nil {
			if !errors.Is(err, ErrBadDoc) {
				t.Fatalf("error %v does not wrap ErrBadDoc", err)
			}
			trimmed := strings.TrimLeft(string(doc), " \t\r\n")
			syntax := !json.Valid(doc) || !strings.HasPrefix(trimmed, "{")
			encoding := !syntax && !utf8.Valid(doc)
			if len(doc) <= MaxDocBytes && (syntax != strings.Contains(err.Error(), "not a JSON object") ||
				encoding != strings.Contains(err.Error(), "not valid UTF-8")) {
				t.Fatalf("CheckDoc(%q) = %v; json.Valid and an object: %v, valid UTF-8: %v", doc, err, !syntax, utf8.Valid(doc))
			}
			return
		}
		var m map[string]any
		if json.Unmarshal(doc, &m) != nil || m == nil {
			t.Fatalf("CheckDoc accepted %q, which is not a JSON object", doc)
		}
	})
}

// FuzzCheckDocNumber: a JSON number in a document is taken exactly when CheckNumber takes it.
// Seeds: testdata/fuzz/FuzzCheckDocNumber.
func FuzzCheckDocNumber(f *testing.F) {
	f.Fuzz(func(t *testing.T, num string) {
		if num == "" || !(num[0] == '-' || num[0] >= '0' && num[0] <= '9') || strings.TrimSpace(num) != num || !json.Valid([]byte(num)) {
			return // not a JSON number
		}
		err := CheckDoc([]byte(`{"n":` + num + `}`))
		want := CheckNumber(num)
		if (err == nil) != (want == nil) || err != nil && !strings.HasSuffix(err.Error(), "at .n: "+want.Error()) {
			t.Fatalf("CheckDoc of number %q = %v, CheckNumber says %v", num, err, want)
		}
	})
}

func BenchmarkCheckDoc(b *testing.B) {
	doc := []byte(`{"flights":1234,"delayed":321,"total_delay":45678,"max_delay":1440}`)
	b.Run("CheckDoc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := CheckDoc(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(doc) {
				b.Fatal("invalid")
			}
		}
	})
}
