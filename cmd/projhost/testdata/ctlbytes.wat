;; ctlbytes.wat — a handler whose output, log and failure carry terminal control bytes, for the
;; test of `projhost test` escaping them (cmd/projhost/embedded_test.go). For each batch it logs
;; "ESC ]0;pwned BEL log" and puts c/"k U+009B DEL" = {"s":"U+009B"}; when the partition key of
;; the batch's first event starts with 'F' it fails instead, with "ESC [31m red BEL". Assemble with
;; `node host/testdata/wat2wasm.js cmd/projhost/testdata cmd/projhost/testdata/ctlbytes.wat`.
(module
  (import "projhost" "log" (func $log (param i32 i32 i32)))
  (import "projhost" "fail" (func $fail (param i32 i32)))
  (memory (export "memory") 4)
  (data (i32.const 16) "\1b]0;pwned\07log")
  (data (i32.const 48) "\1b[31mred\07")
  ;; header: version 1, one mutation; put, collection "c", key "k\c2\9b\7f", doc {"s":"\c2\9b"}
  (data (i32.const 128) "\01\00\00\00\01\00\00\00\01\01\00c\04\00k\c2\9b\7f\0a\00\00\00{\"s\":\"\c2\9b\"}")

  (func (export "projhost_abi_v1"))

  (func (export "projhost_alloc") (param $size i32) (result i32)
    (if (i32.gt_u (local.get $size) (i32.const 131072)) (then unreachable))
    (i32.const 65536))

  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64)
    (local $i i32)
    (call $log (i32.const 1) (i32.const 16) (i32.const 13))
    ;; first event: skip the batch header and the sequence number; then the partition key
    (local.set $i (i32.add (i32.add (local.get $p) (i32.const 14)) (i32.load16_u offset=12 (local.get $p))))
    (local.set $i (i32.add (i32.add (local.get $i) (i32.const 2)) (i32.load16_u (local.get $i))))
    (if (i32.eq (i32.load8_u offset=2 (local.get $i)) (i32.const 70)) ;; 'F'
      (then
        (call $fail (i32.const 48) (i32.const 9))
        (return (i64.const 0))))
    (i64.or (i64.shl (i64.const 128) (i64.const 32)) (i64.const 32))))
