package testwasm

// SmallLEBs reports whether no LEB128 number starting at any byte of wasm (read as unsigned,
// up to 5 bytes) exceeds 2^16. wazero's decoder sizes its allocations by the counts a module
// declares (see internal/wasmbounds), so for such bytes, whatever their structure, it allocates
// at most ~2^16 entries per count: fuzz tests may then hand even malformed modules to wazero.
func SmallLEBs(wasm []byte) bool {
	for i := range wasm {
		v := uint64(0)
		for j, shift := i, 0; j < len(wasm) && shift < 35; j, shift = j+1, shift+7 {
			v |= uint64(wasm[j]&0x7F) << shift
			if wasm[j] < 0x80 {
				break
			}
		}
		if v > 1<<16 {
			return false
		}
	}
	return true
}
