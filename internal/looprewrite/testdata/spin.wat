;; spin.wat — functions whose running time the test chooses, for checking when the rewritten
;; module traps once the interrupt flag is set. Loops: 1. Functions that call: 1 ($fork).
;; Start section: no.
(module
  (memory (export "memory") 1)
  ;; spin runs its loop header n times (n >= 1).
  (func (export "spin") (param $n i32)
    (loop $l (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
  ;; fork(n) makes 2^(n+1) - 1 calls, and has no loop.
  (func $fork (export "fork") (param $n i32)
    (if (local.get $n)
      (then
        (call $fork (i32.sub (local.get $n) (i32.const 1)))
        (call $fork (i32.sub (local.get $n) (i32.const 1)))))))
