package event

// ValidSeq reports whether seq is a sequence number in canonical form: a decimal number without
// leading zeros ("0" itself is allowed) of at most SeqWidth digits, the Kinesis API pattern
// 0|([1-9]\d{0,128}). Every number has one canonical spelling, and PadSeq maps canonical
// numbers one-to-one onto fixed-width strings that compare numerically, so stores that key by
// padded sequence numbers require it.
func ValidSeq(seq string) bool {
	if seq == "" || len(seq) > SeqWidth || (seq[0] == '0' && len(seq) > 1) {
		return false
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return false
		}
	}
	return true
}
