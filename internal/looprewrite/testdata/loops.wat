;; loops.wat — nested loops and a loop with a result type, a start section, and no memory,
;; global or export section (the rewrite adds the global and export sections).
;; Loops: 3. Functions that call: 1 ($start). Start section: yes ($start).
(module
  (func $f (param i32) (result i32)
    (loop $a (loop $b (br_if $b (i32.const 0))) (br_if $a (i32.const 0)))
    (loop $c (result i32) (local.get 0)))
  (func $start (drop (call $f (i32.const 1))))
  (start $start))
