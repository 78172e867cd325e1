package host

import "github.com/projhost/projhost/internal/looprewrite"

// Untrusted modules are instrumented by internal/looprewrite (RATIONALE: "The batch
// deadline"): every loop header and the entry of every function that calls counts down a fuel
// global and, every looprewrite.Period checks, leaves native code and traps if the interrupt
// flag is set. Load rewrites the module with looprewrite.Rewrite and compiles it on the runtime
// without WithCloseOnContextDone; a module it cannot rewrite, or whose rewrite does not compile,
// falls back to wazero's mechanism.

// Names of the exports the rewrite adds: the interrupt flag the interrupter sets, and the former
// start section's function, which Handler.instantiate calls right after instantiating.
const (
	interruptExport = looprewrite.InterruptExport
	startExport     = looprewrite.StartExport
)
