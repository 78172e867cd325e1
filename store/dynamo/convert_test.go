package dynamo

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/event"
)

func TestCanonicalNumber(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "0", want: "0"},
		{in: "-0", want: "0"},
		{in: "0.000", want: "0"},
		{in: "0e-999", want: "0"},
		{in: "1", want: "1"},
		{in: "-17", want: "-17"},
		{in: "1.50", want: "1.5"},
		{in: "1.50e2", want: "150"},
		{in: "1E+2", want: "100"},
		{in: "1e-3", want: "0.001"},
		{in: "-12.5e-1", want: "-1.25"},
		{in: "66.5", want: "66.5"},
		{in: "000123.4500", want: "123.45"},
		{in: "+5", want: "5"},
		{in: ".5", want: "0.5"},
		{in: "5.", want: "5"},
		{in: "12345678901234567890123456789012345678", want: "12345678901234567890123456789012345678"},
		{in: "1234567890123456789012345678901234567800000", want: "1234567890123456789012345678901234567800000"},
		{in: "1e125", want: "1" + strings.Repeat("0", 125)},
		{in: "9.9999999999999999999999999999999999999e125", want: "99999999999999999999999999999999999999" + strings.Repeat("0", 88)},
		{in: "1e-130", want: "0." + strings.Repeat("0", 129) + "1"},
		{in: "-1e-130", want: "-0." + strings.Repeat("0", 129) + "1"},
		{in: "123456789012345678901234567890123456789", bad: true}, // 39 digits
		{in: "1e126", bad: true},
		{in: "1e-131", bad: true},
		{in: "1e99999999999", bad: true},
		{in: "", bad: true},
		{in: "-", bad: true},
		{in: ".", bad: true},
		{in: "1x", bad: true},
		{in: "1e", bad: true},
		{in: "NaN", bad: true},
		{in: "Infinity", bad: true},
	}
	for _, tt := range tests {
		got, err := CanonicalNumber(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("CanonicalNumber(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("CanonicalNumber(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestDocRoundTrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{` { "x" : [ 1 , "two" , true , false , null , { } , [ ] ] } `, `{"x":[1,"two",true,false,null,{},[]]}`},
		{`{"n":1.50e2,"m":-0.0,"f":0.001}`, `{"f":0.001,"m":0,"n":150}`},
		{`{"s":"Détroit → Las Vegas","e":"","q":"\"\\\/\b\f\n\r\t\u0001\u2028"}`,
			`{"e":"","q":"\"\\/\u0008\u000c\n\r\t\u0001` + "\u2028" + `","s":"Détroit → Las Vegas"}`},
		{`{"deep":{"a":{"b":{"c":[[[{"d":[]}]]]}}}}`, `{"deep":{"a":{"b":{"c":[[[{"d":[]}]]]}}}}`},
		{DeepDoc(MaxDocDepth), DeepDoc(MaxDocDepth)},
		{DeepArrays(MaxDocDepth), DeepArrays(MaxDocDepth)},
		{`{"` + strings.Repeat("k", 64*1024-1) + `":1}`, `{"` + strings.Repeat("k", 64*1024-1) + `":1}`},
		{`{"big":12345678901234567890123456789012345678}`, `{"big":12345678901234567890123456789012345678}`},
	}
	for _, tt := range tests {
		av, err := DocToAttributeValue([]byte(tt.in))
		if err != nil {
			t.Errorf("DocToAttributeValue(%s): %v", tt.in, err)
			continue
		}
		got, err := AttributeValueToDoc(av)
		if err != nil || string(got) != tt.want {
			t.Errorf("round trip of %s = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		if !json.Valid(got) {
			t.Errorf("round trip of %s is not valid JSON: %s", tt.in, got)
		}
	}
}

func TestDocToAttributeValueShapes(t *testing.T) {
	av, err := DocToAttributeValue([]byte(`{"s":"x","n":2,"t":true,"z":null,"l":[1],"m":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"s": &types.AttributeValueMemberS{Value: "x"},
		"n": &types.AttributeValueMemberN{Value: "2"},
		"t": &types.AttributeValueMemberBOOL{Value: true},
		"z": &types.AttributeValueMemberNULL{Value: true},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}},
	}}
	if !reflect.DeepEqual(av, want) {
		t.Fatalf("DocToAttributeValue = %#v, want %#v", av, want)
	}
}

// DeepDoc returns a document depth objects and arrays deep: objects nested in "a", an array
// innermost. (Exported for the package's external tests.)
func DeepDoc(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `[1]` + strings.Repeat(`}`, depth-1)
}

// DeepArrays returns a document depth deep: one object holding nested arrays.
func DeepArrays(depth int) string {
	return `{"a":` + strings.Repeat(`[`, depth-1) + strings.Repeat(`]`, depth-1) + `}`
}

func TestDocToAttributeValueErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `"s"`, `1`, `null`, `{`, `{"a":1} {}`, `{"a":1}x`,
		`{"n":1e400}`, `{"l":[1,{"n":123456789012345678901234567890123456789}]}`,
		`{"":1}`, `{"a":{"b":[{"":null}]}}`, `{"` + strings.Repeat("k", 64*1024) + `":1}`, `{"dup":1,"dup":2}`,
		DeepDoc(MaxDocDepth + 1), DeepArrays(MaxDocDepth + 1)} {
		if _, err := DocToAttributeValue([]byte(in)); !errors.Is(err, ErrBadDocument) {
			t.Errorf("DocToAttributeValue(%.80s) error = %v, want ErrBadDocument", in, err)
		}
	}
}

func TestAttributeValueToDocOtherTypes(t *testing.T) {
	av := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"b":  &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns": &types.AttributeValueMemberNS{Value: []string{"1.0", "2E1"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{255}}},
	}}
	got, err := AttributeValueToDoc(av)
	if want := `{"b":"AAEC","bs":["/w=="],"ns":[1,20],"ss":["a","b"]}`; err != nil || string(got) != want {
		t.Fatalf("AttributeValueToDoc = %s, %v; want %s", got, err, want)
	}
	if _, err := AttributeValueToDoc(&types.AttributeValueMemberN{Value: "x"}); err == nil {
		t.Fatal("AttributeValueToDoc(N x): no error")
	}
}

// FuzzDocRoundTrip: any input either is refused with ErrBadDocument or converts to attributes
// whose JSON is valid, canonical (a fixed point) and converts back to the same attributes.
func FuzzDocRoundTrip(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5e3,-0,true,null,"x"],"b":{"c":{}}}`, `{"s":"\u00e9\ud83d\ude00\n"}`,
		`{"n":1e125}`, `{"n":1e-130}`, `[1]`, `{"a":1}{"b":2}`, `{"\u0000":"\u001f"}`} {
		f.Add([]byte(s))
	}
	if data, err := os.ReadFile("testdata/flight.json"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		av, err := DocToAttributeValue(in)
		if err != nil {
			if !errors.Is(err, ErrBadDocument) {
				t.Fatalf("error %v does not wrap ErrBadDocument", err)
			}
			return
		}
		out, err := AttributeValueToDoc(av)
		if err != nil {
			t.Fatalf("AttributeValueToDoc: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q", out)
		}
		av2, err := DocToAttributeValue(out)
		if err != nil {
			t.Fatalf("re-converting %q: %v", out, err)
		}
		if !reflect.DeepEqual(av, av2) {
			t.Fatalf("round trip changed the value: %q -> %q", in, out)
		}
		out2, _ := AttributeValueToDoc(av2)
		if string(out2) != string(out) {
			t.Fatalf("output is not canonical: %q then %q", out, out2)
		}
	})
}

func TestCheckMutation(t *testing.T) {
	cases := []struct {
		name string
		m    event.Mutation
		ok   bool
	}{
		{"fine", event.Mutation{Collection: "c", Key: "k", Doc: []byte(`{"a":1}`)}, true},
		{"delete", event.Mutation{Collection: "c", Key: "k"}, true},
		{"number out of range", event.Mutation{Collection: "c", Key: "k", Doc: []byte(`{"a":1e200}`)}, false},
		{"empty field name", event.Mutation{Collection: "c", Key: "k", Doc: []byte(`{"":1}`)}, false},
		{"key too long", event.Mutation{Collection: "c", Key: strings.Repeat("k", 1025)}, false},
		{"collection too long", event.Mutation{Collection: strings.Repeat("c", 2048), Key: "k"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckMutation("p", c.m)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadDocument)) {
				t.Fatalf("CheckMutation = %v, want ok=%v (errors wrapping ErrBadDocument)", err, c.ok)
			}
		})
	}
}
