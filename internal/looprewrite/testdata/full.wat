;; full.wat — every kind of import, export and section the rewriter passes through, and
;; instructions whose immediates contain the byte 0x03 (the loop opcode), which must not be
;; mistaken for loops. Loops: 6 (one in unreachable code, one taking a parameter). Functions that
;; call: 2, one starting with a loop ($loops, no entry check) and $init. Start section: yes
;; ($init).
(module
  (type $ii (func (param i32) (result i32)))
  (import "env" "f" (func $imp (param i32) (result i32)))
  (import "env" "g" (global $ig i32))
  (import "env" "gm" (global $igm (mut i64)))
  (import "env" "memory" (memory 1 4))
  (import "env" "table" (table 2 funcref))
  (table $t2 1 externref)
  (global $a (mut i32) (global.get $ig))
  (global $b f64 (f64.const 3.0303))
  (global $c (mut funcref) (ref.func $leaf))
  (export "f" (func $loops))
  (export "g" (global $a))
  (export "gi" (global $ig))
  (export "m" (memory 0))
  (export "t" (table 0))
  (elem (table 0) (global.get $ig) func $leaf $loops)
  (elem declare func $init)
  (data (i32.const 3) "\03\03\03")
  (data $passive "\03")

  (func $leaf (param i32) (result i32)
    (i32.add (local.get 0) (i32.const 3)))

  (func $loops (param $n i32) (result i32)
    (local $x i64) (local $y f32) (local $v v128)
    ;; 1: a counting loop with a br_table and the byte 3 in immediates
    (loop $l
      (block $b0 (block $b1
        (br_table $b0 $b1 $l (i32.and (local.get $n) (i32.const 3)))))
      (local.set $n (i32.sub (local.get $n) (i32.const 3)))
      (br_if $l (i32.gt_s (local.get $n) (i32.const 0))))
    ;; 2: a loop taking a parameter (type-index block type)
    (i32.const 3)
    (loop $p (type $ii) (param i32) (result i32)
      (i32.load offset=3 align=1)
      (br_if $p (i32.const 0)))
    (drop)
    ;; constants and memory instructions holding 0x03 bytes
    (local.set $x (i64.const 0x0303030303030303))
    (local.set $y (f32.const 0x1.060606p-121))
    (local.set $v (v128.const i32x4 0x03030303 0x03030303 0x03030303 0x03030303))
    (local.set $v (i8x16.shuffle 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 (local.get $v) (local.get $v)))
    (drop (i8x16.extract_lane_s 3 (local.get $v)))
    (local.set $v (v128.load8_lane offset=3 3 (i32.const 0) (local.get $v)))
    (v128.store offset=3 (i32.const 0) (local.get $v))
    (i64.store32 offset=3 (i32.const 0) (local.get $x))
    (memory.copy (i32.const 3) (i32.const 3) (i32.const 3))
    (memory.fill (i32.const 3) (i32.const 3) (i32.const 3))
    (memory.init $passive (i32.const 3) (i32.const 0) (i32.const 1))
    (data.drop $passive)
    (drop (i32.trunc_sat_f32_s (local.get $y)))
    (drop (i32.extend8_s (i32.const 3)))
    (drop (select (result i64) (local.get $x) (i64.const 3) (i32.const 3)))
    (drop (ref.is_null (table.get $t2 (i32.const 0))))
    (drop (table.grow $t2 (ref.null extern) (i32.const 3)))
    (table.fill $t2 (i32.const 0) (ref.null extern) (i32.const 0))
    (drop (table.size 0))
    (global.set $c (ref.func $leaf))
    (global.set $a (i32.add (global.get $a) (global.get $ig)))
    (global.set $igm (i64.const 3))
    (drop (global.get $b))
    ;; 3, 4: nested loops calling through the table and the import
    (loop $outer
      (loop $inner
        (br_if $inner (call_indirect (type $ii) (i32.const 3) (i32.const 0))))
      (br_if $outer (call $imp (i32.const 3))))
    ;; 5: a loop with a result
    (drop (loop (result i32) (i32.const 3)))
    (local.get $n)
    (return)
    ;; 6: a loop in unreachable code
    (loop $dead (br $dead)))

  (func $init (drop (call $loops (i32.const 3))))
  (start $init))
