package event

import (
	"strings"
	"testing"
)

func TestValidSeq(t *testing.T) {
	for _, tt := range []struct {
		seq  string
		want bool
	}{
		{"0", true}, {"7", true}, {"10", true},
		{"49590338271490256608559692538361571095921575989136588898", true},
		{"1" + strings.Repeat("0", 128), true},  // 129 digits
		{"1" + strings.Repeat("0", 129), false}, // 130
		{"", false}, {"00", false}, {"007", false}, {"-1", false}, {"+1", false}, {"1.5", false},
		{"1e3", false}, {" 1", false}, {"1 ", false}, {"١", false}, // Arabic-Indic digit one
	} {
		if got := ValidSeq(tt.seq); got != tt.want {
			t.Errorf("ValidSeq(%q) = %v, want %v", tt.seq, got, tt.want)
		}
	}
}

// TestPadSeqOfValidSeqs: distinct canonical numbers pad to distinct strings in numeric order.
func TestPadSeqOfValidSeqs(t *testing.T) {
	seqs := []string{"0", "1", "9", "10", "99", "100", "49590338271490256608559692538361571095921575989136588898",
		"9" + strings.Repeat("9", 127), "1" + strings.Repeat("0", 128)}
	for i := 1; i < len(seqs); i++ {
		a, b := PadSeq(seqs[i-1]), PadSeq(seqs[i])
		if !ValidSeq(seqs[i]) || len(a) != SeqWidth || !(a < b) || CompareSeq(seqs[i-1], seqs[i]) != -1 {
			t.Fatalf("%s then %s: padded %q < %q is %v", seqs[i-1], seqs[i], a, b, a < b)
		}
	}
}
