;; spin.wat — functions whose running time the test chooses, for checking when the rewritten
;; module traps once the interrupt flag is set. Loops: 1. Start section: no.
(module
  (memory (export "memory") 1)
  ;; spin runs its loop header n times (n >= 1).
  (func (export "spin") (param $n i32)
    (loop $l (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))))
