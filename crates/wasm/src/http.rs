//! The module's one way out: `reef.http_request(req_ptr, req_len, out_ptr, out_cap) -> i32`.
//! The request is JSON (see docs/wasm-abi.md); the embedder's [`HttpHost`] decides, sends and
//! answers in JSON, written to `out_ptr` (at most `out_cap` bytes). The return value is the
//! answer's full length, so a module can tell that its buffer was too small; -1 when the
//! pointers are out of bounds.

use crate::run::State;
use wasmtime::{Caller, Extern, Linker};

/// The import module of reef's host functions.
pub const HTTP_MODULE: &str = "reef";
/// The host function that makes an HTTP request.
pub const HTTP_FUNCTION: &str = "http_request";

/// Makes the HTTP requests of a module: checks the request against what the skill and the
/// agent may reach, injects secrets, sends it and returns the answer, all as JSON. Called on
/// the thread running the module.
pub trait HttpHost: Send + Sync {
    fn request(&self, request: &[u8]) -> Vec<u8>;
}

pub(crate) fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.func_wrap(
        HTTP_MODULE,
        HTTP_FUNCTION,
        |mut caller: Caller<'_, State>,
         req_ptr: i32,
         req_len: i32,
         out_ptr: i32,
         out_cap: i32|
         -> i32 {
            let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
                return -1;
            };
            let range = |ptr: i32, len: i32| -> Option<std::ops::Range<usize>> {
                let (ptr, len) = (usize::try_from(ptr).ok()?, usize::try_from(len).ok()?);
                Some(ptr..ptr.checked_add(len)?)
            };
            let (Some(req), Some(out)) = (range(req_ptr, req_len), range(out_ptr, out_cap)) else {
                return -1;
            };
            let Some(request) = memory.data(&caller).get(req).map(<[u8]>::to_vec) else {
                return -1;
            };
            let answer = match &caller.data().http {
                Some(host) => host.request(&request),
                None => br#"{"error":"this module may not make HTTP requests"}"#.to_vec(),
            };
            let Some(dest) = memory.data_mut(&mut caller).get_mut(out.clone()) else {
                return -1;
            };
            let n = answer.len().min(dest.len());
            dest[..n].copy_from_slice(&answer[..n]);
            i32::try_from(answer.len()).unwrap_or(i32::MAX)
        },
    )?;
    Ok(())
}
