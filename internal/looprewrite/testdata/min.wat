;; min.wat — the smallest module with a loop: one function, no memory, globals or exports.
;; Loops: 1. Functions that call: none. Start section: no.
(module (func (loop (br 0))))
