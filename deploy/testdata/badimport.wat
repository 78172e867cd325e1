;; badimport.wat — a v1 module that imports a function the host does not provide.
(module
  (import "env" "open_socket" (func $sock (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))
