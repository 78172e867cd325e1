package eventfile

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/wasmabi"
)

type rec struct {
	key, raw string
}

func scanAll(t *testing.T, in []byte, field string) ([]rec, error) {
	t.Helper()
	var out []rec
	err := Scan(bytes.NewReader(in), field, func(i int, key string, raw []byte) error {
		require.Equal(t, len(out), i)
		out = append(out, rec{key, string(raw)})
		return nil
	})
	return out, err
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func TestScan(t *testing.T) {
	two := []rec{{"DTW", `{"origin":"DTW","delay":66}`}, {"LAX", `{"origin":"LAX","delay":-3}`}}
	cases := []struct {
		name  string
		in    []byte
		want  []rec
		errIs string
	}{
		{"array", []byte(`[{"origin":"DTW","delay":66}, {"origin": "LAX", "delay": -3}]`), two, ""},
		{"lines", []byte("{\"origin\":\"DTW\",\"delay\":66}\n\n{\"origin\":\"LAX\",\"delay\":-3}\n"), two, ""},
		{"gzip array", gz(`[{"origin":"DTW","delay":66},{"origin":"LAX","delay":-3}]`), two, ""},
		{"gzip lines", gz("{\"origin\":\"DTW\",\"delay\":66}\n{\"origin\":\"LAX\",\"delay\":-3}"), two, ""},
		{"empty", []byte("  \n"), nil, ""},
		{"empty array", []byte("[]"), nil, ""},
		{"numeric key", []byte(`{"origin":42}`), []rec{{"42", `{"origin":42}`}}, ""},
		{"escaped key", []byte(`{"origin":"A\u0042C"}`), []rec{{"ABC", `{"origin":"A\u0042C"}`}}, ""},
		{"not object", []byte(`[{"origin":"DTW"}, 3]`), nil, "element 1 is not a JSON object"},
		{"missing key", []byte(`{"origin":"DTW"}` + "\n" + `{"dest":"X"}`), nil, `element 1: no field "origin"`},
		{"bool key", []byte(`{"origin":true}`), nil, "is a boolean"},
		{"truncated array", []byte(`[{"origin":"DTW"}`), nil, "ErrBadInput"},
		{"garbage line", []byte("{\"origin\":\"DTW\"}\nnot json\n"), nil, "element 1"},
		{"bad gzip", []byte{0x1f, 0x8b, 1, 2, 3}, nil, "gzip"},
		{"two arrays", []byte(`[{"origin":"A"}] [{"origin":"B"}]`), nil, "after the closing ]"},
		{"junk after array", []byte("[{\"origin\":\"A\"}]\nthis is junk"), nil, `unexpected 't'`},
		{"invalid utf8 key", []byte("{\"origin\":\"A\xffB\"}"), nil, "not valid UTF-8"},
		{"nul key", []byte(`{"origin":"a\u0000b"}`), nil, "contains NUL"},
		{"256 characters of 4 bytes", []byte(`{"origin":"` + strings.Repeat("😀", 256) + `"}`), []rec{{strings.Repeat("😀", 256), `{"origin":"` + strings.Repeat("😀", 256) + `"}`}}, ""},
		{"256 escaped characters", []byte(`{"origin":"` + strings.Repeat(`\ud83d\ude00`, 256) + `"}`), []rec{{strings.Repeat("😀", 256), `{"origin":"` + strings.Repeat(`\ud83d\ude00`, 256) + `"}`}}, ""},
		{"long key", []byte(`{"origin":"` + strings.Repeat("k", 257) + `"}`), nil, `field "origin" is 257 characters long; partition keys are at most 256 characters`},
		{"257 characters of 4 bytes", []byte(`{"origin":"` + strings.Repeat("😀", 257) + `"}`), nil, `field "origin" is 257 characters long`},
		{"256-digit number key", []byte(`{"origin":` + strings.Repeat("9", 256) + `}`), []rec{{strings.Repeat("9", 256), `{"origin":` + strings.Repeat("9", 256) + `}`}}, ""},
		{"257-digit number key", []byte(`{"origin":` + strings.Repeat("9", 257) + `}`), nil, `field "origin" is 257 characters long`},
		{"bom", append([]byte{0xEF, 0xBB, 0xBF}, `[{"origin":"DTW","delay":66},{"origin":"LAX","delay":-3}]`...), two, ""},
		{"duplicate field: the last wins, as encoding/json and JSON.parse decode it", []byte(`{"origin":"A","origin":"B"}`), []rec{{"B", `{"origin":"A","origin":"B"}`}}, ""},
		{"escaped field name", []byte(`{"orig\u0069n": "X"}`), []rec{{"X", `{"orig\u0069n":"X"}`}}, ""},
		{"key field nested only", []byte(`{"a":{"origin":"X"}}`), nil, `no field "origin"`},
		{"lone surrogate: U+FFFD, as encoding/json decodes it", []byte(`{"origin":"\ud800"}`), []rec{{"\uFFFD", `{"origin":"\ud800"}`}}, ""},
		{"invalid utf8 elsewhere passes", []byte("{\"origin\":\"A\",\"x\":\"\xff\"}"), []rec{{"A", "{\"origin\":\"A\",\"x\":\"\xff\"}"}}, ""},
		{"depth 10000", []byte(deep(9999)), []rec{{"1", deep(9999)}}, ""},
		{"depth 10001", []byte(deep(10000)), nil, "exceeded max depth"},
		{"missing comma", []byte(`[{"origin":"a"} {"origin":"b"}]`), nil, "after element 0"},
		{"trailing comma", []byte(`[{"origin":"a"},]`), nil, "element 1"},
		{"number ending the input", []byte(`{"origin":1`), nil, "element 0: unexpected end of input"},
		{"pretty", []byte("{\n  \"origin\" : \"DTW\" ,\n  \"n\" : [ 1 , { } ]\n}\n"), []rec{{"DTW", `{"origin":"DTW","n":[1,{}]}`}}, ""},
		{"array then space", []byte("[{\"origin\":\"DTW\",\"delay\":66},{\"origin\":\"LAX\",\"delay\":-3}]\n \n"), two, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := scanAll(t, c.in, "origin")
			if c.errIs != "" {
				require.Error(t, err)
				require.True(t, errors.Is(err, ErrBadInput), err)
				if c.errIs != "ErrBadInput" {
					require.Contains(t, err.Error(), c.errIs)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
		t.Run(c.name+"/encoding-json", func(t *testing.T) {
			want, wantErr := reference(c.in, "origin")
			require.Equal(t, c.errIs != "", wantErr != nil, wantErr)
			got, _ := scanAll(t, c.in, "origin")
			require.Equal(t, want, got)
		})
	}
}

// deep is an object whose field d nests n arrays: its depth is n+1.
func deep(n int) string {
	return `{"origin":1,"d":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}"
}

func TestScanStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Scan(strings.NewReader("{\"k\":\"a\"}\n{\"k\":\"b\"}\n"), "k", func(int, string, []byte) error { n++; return stop })
	require.Same(t, stop, err)
	require.Equal(t, 1, n)
}

// FuzzScan checks Scan against reference, the same reading done with encoding/json: both
// accept the same inputs, give the same elements (keys and compacted bytes) in the same order,
// and, on input they refuse, give the same elements before the error. The input is read whole
// and, up to 4 KiB, one byte per Read (every element then ends mid-buffer first). Seeds:
// testdata/fuzz/FuzzScan.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`[{"origin":"DTW","delay":66}]`), "origin")
	f.Add([]byte("{\"origin\":\"x\"}\n{\"origin\":1}"), "origin")
	f.Add(gz(`[{"origin":"DTW"}]`), "origin")
	f.Add([]byte(`[{"origin":"DTW"},`), "origin")
	f.Fuzz(func(t *testing.T, in []byte, keyField string) {
		want, wantErr := reference(in, keyField)
		for _, oneByte := range []bool{false, true} {
			if oneByte && len(in) > 4<<10 {
				break // one restart per byte: quadratic
			}
			var r io.Reader = bytes.NewReader(in)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			var got []rec
			err := Scan(r, keyField, func(i int, key string, raw []byte) error {
				require.Equal(t, len(got), i)
				got = append(got, rec{key, string(raw)})
				return nil
			})
			require.Equal(t, want, got, "one byte per read: %v; reference error: %v; error: %v", oneByte, wantErr, err)
			if wantErr == nil {
				require.NoError(t, err, "one byte per read: %v", oneByte)
			} else {
				require.Error(t, err, "one byte per read: %v; reference error: %v", oneByte, wantErr)
				require.ErrorIs(t, err, ErrBadInput)
			}
		}
	})
}

// reference reads in as Scan does, with encoding/json: a Decoder for the elements, json.Compact,
// and the key field from a decoding of the object into a map (the last duplicate wins).
func reference(in []byte, keyField string) ([]rec, error) {
	if len(in) >= 2 && in[0] == 0x1f && in[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(in))
		if err != nil {
			return nil, err
		}
		in, err = io.ReadAll(zr)
		if err != nil { // what was read before the error counts
			out, perr := referencePlain(in, keyField)
			return out, cmp.Or(perr, err)
		}
	}
	return referencePlain(in, keyField)
}

func referencePlain(in []byte, keyField string) ([]rec, error) {
	in = bytes.TrimPrefix(in, []byte{0xEF, 0xBB, 0xBF})
	rest := bytes.TrimLeft(in, " \t\r\n")
	if len(rest) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	array := rest[0] == '['
	if array {
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
	}
	var out []rec
	for i := 0; ; i++ {
		if array && !dec.More() {
			if _, err := dec.Token(); err != nil {
				return out, err
			}
			if len(bytes.TrimLeft(rest[dec.InputOffset():], " \t\r\n")) > 0 {
				return out, errors.New("junk after the array")
			}
			return out, nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF && !array {
				return out, nil
			}
			return out, err
		}
		if raw[0] != '{' {
			return out, errors.New("not an object")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return out, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			return out, err
		}
		v, ok := m[keyField]
		if !ok {
			return out, errors.New("no key")
		}
		var key string
		switch {
		case v[0] == '"':
			if !utf8.Valid(v[1:len(v)-1]) || json.Unmarshal(v, &key) != nil || key == "" || strings.ContainsRune(key, 0) {
				return out, errors.New("bad string key")
			}
		case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
			key = string(v)
		default:
			return out, errors.New("key neither a string nor a number")
		}
		if utf8.RuneCountInString(key) > wasmabi.MaxKeyChars {
			return out, errors.New("key too long")
		}
		out = append(out, rec{key, buf.String()})
	}
}

// BenchmarkScan reads plugins/examples' flights-20k.json (a JSON array, one object per line),
// as JSON lines: with Scan, and with reference (encoding/json's Decoder, json.Compact and a map
// decoding for the key), the way Scan read before its one-pass scanner. Reports events/s.
func BenchmarkScan(b *testing.B) {
	arr, err := os.ReadFile("../../plugins/examples/flightdelays/data/flights-20k.json")
	require.NoError(b, err)
	var objs []json.RawMessage
	require.NoError(b, json.Unmarshal(arr, &objs))
	var lines bytes.Buffer
	for _, o := range objs {
		lines.Write(o)
		lines.WriteByte('\n')
	}
	in := lines.Bytes()
	for _, c := range []struct {
		name string
		scan func() (int, error)
	}{
		{"scan", func() (int, error) {
			n := 0
			err := Scan(bytes.NewReader(in), "origin", func(int, string, []byte) error { n++; return nil })
			return n, err
		}},
		{"encoding-json", func() (int, error) {
			out, err := reference(in, "origin")
			return len(out), err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			start := time.Now()
			for b.Loop() {
				n, err := c.scan()
				require.NoError(b, err)
				require.Equal(b, len(objs), n)
			}
			b.ReportMetric(float64(b.N*len(objs))/time.Since(start).Seconds(), "events/s")
		})
	}
}
