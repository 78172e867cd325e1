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
				e, err := strconv.Atoi(s[i+1:])
				if err != nil || e > 1e9 || e < -1e9 {
					return errors.New("exponent")
				}
				mant, exp = s[:i], e
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
// rule accepts, and what it accepts encoding/json decodes into an object.
func FuzzCheckDoc(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":[1,{"b":null}],"c":"\u0041"}`, `{"x":1e300}`,
		`{"":1}`, `{"a":1,"a":2}`, `{"a\u0062":1,"ab":2}`, deepDoc(32), `{"x":123456789012345678901234567890123456789012345}`,
		`{"a":-0.5e-3,"b":true,"c":false}`, `{"\ud800":1}`, `[]`, `{"a":1}x`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
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
			return
		}
		var m map[string]any
		if json.Unmarshal(doc, &m) != nil || m == nil {
			t.Fatalf("CheckDoc accepted %q, which is not a JSON object", doc)
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
