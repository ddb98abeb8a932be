//! WASI preview 1 modules in WebAssembly text, for the tests of WASM skills (compile them with
//! the `wat` crate). Each reads its JSON arguments from stdin or acts as its name says.

/// Copies stdin (up to 4 KiB) to stdout: the JSON arguments come back as the result.
pub const ECHO: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (i32.const 4096))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 16)))
    (i32.store (i32.const 32) (i32.const 1024))
    (i32.store (i32.const 36) (i32.load (i32.const 16)))
    (drop (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 20)))))"#;

/// Never returns.
pub const ENDLESS_LOOP: &str = r#"(module
  (memory (export "memory") 1)
  (func (export "_start") (loop $again (br $again))))"#;

/// Grows its memory 1 MiB at a time until a grow fails, then traps.
pub const MEMORY_BOMB: &str = r#"(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $again
      (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1)) (then unreachable))
      (br $again))))"#;

/// Writes `message` to stderr and exits with `code`.
pub fn fail(message: &str, code: i32) -> String {
    format!(
        r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{message}")
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 1024))
    (i32.store (i32.const 4) (i32.const {len}))
    (drop (call $fd_write (i32.const 2) (i32.const 0) (i32.const 1) (i32.const 16)))
    (call $exit (i32.const {code}))))"#,
        len = message.len()
    )
}

/// Opens `path` relative to the first preopened directory (the workspace, fd 3) and writes its
/// first 4 KiB to stdout, or `REFUSED <errno>` when the open fails.
pub fn read_file(path: &str) -> String {
    format!(
        r#"(module
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 512) "{path}")
  (data (i32.const 600) "REFUSED ")
  (func (export "_start")
    (local $err i32)
    (local.set $err (call $path_open (i32.const 3) (i32.const 0) (i32.const 512) (i32.const {len})
      (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 100)))
    (if (i32.eqz (local.get $err))
      (then
        (i32.store (i32.const 0) (i32.const 1024))
        (i32.store (i32.const 4) (i32.const 4096))
        (drop (call $fd_read (i32.load (i32.const 100)) (i32.const 0) (i32.const 1) (i32.const 16)))
        (i32.store (i32.const 32) (i32.const 1024))
        (i32.store (i32.const 36) (i32.load (i32.const 16))))
      (else
        (i32.store8 (i32.const 608) (i32.add (i32.const 48) (i32.div_u (local.get $err) (i32.const 10))))
        (i32.store8 (i32.const 609) (i32.add (i32.const 48) (i32.rem_u (local.get $err) (i32.const 10))))
        (i32.store (i32.const 32) (i32.const 600))
        (i32.store (i32.const 36) (i32.const 10))))
    (drop (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 20)))))"#,
        len = path.len()
    )
}

/// Sends `request` (JSON) through `reef.http_request` and writes the answer to stdout.
pub fn http(request: &str) -> String {
    let escaped = request.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        r#"(module
  (import "reef" "http_request" (func $http (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 1024) "{escaped}")
  (func (export "_start")
    (local $n i32)
    (local.set $n (call $http (i32.const 1024) (i32.const {len}) (i32.const 65536) (i32.const 65536)))
    (i32.store (i32.const 0) (i32.const 65536))
    (i32.store (i32.const 4) (local.get $n))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16)))))"#,
        len = request.len()
    )
}
