//! Safe Rust bindings for libllm (`include/llm.h`).
//!
//! ```no_run
//! use libllm_runtime as llm;
//! let model = llm::Model::load("stories260K.gguf", &llm::ModelParams::default())?;
//! let mut params = llm::SessionParams::default();
//! params.temperature = 0.0;
//! let mut session = llm::Session::new(&model, &params)?;
//! session.generate("Once upon a time", 32, |_token, piece| {
//!     print!("{}", String::from_utf8_lossy(piece));
//!     true
//! })?;
//! # Ok::<(), llm::Error>(())
//! ```
//!
//! Chat (libllm 0.3): [`Model::apply_chat_template`] renders a conversation with the model's own
//! template ([`apply_chat_template`] with one of yours); a session with `parse_special` turns the
//! rendered special tokens into themselves.
//!
//! More than one token per pass (libllm 0.4): [`Session::set_speculation`] (a draft model and/or
//! prompt lookup; lossless), [`next_batch`] (one token for each of several sessions of one model in
//! one pass), and `passes` / `drafted_tokens` / `accepted_tokens` in [`Stats`].
//!
//! Threading follows the header: a [`Model`] is immutable and `Send + Sync` (share it by reference
//! or `Arc` between threads); a [`Session`] is `Send` but not `Sync` (one thread at a time); a
//! [`Canceller`] is `Send + Sync` and may stop a running call from any thread. A `Session<'m>`
//! borrows its model, so the model cannot be freed first.

use std::any::Any;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};

/// Raw declarations of `llm.h`. Struct layouts are checked by `tests/abi_layout_test.c` (LP64).
#[allow(non_camel_case_types)]
pub mod sys {
    use std::ffi::{c_char, c_void};

    pub const LLM_OK: i32 = 0;
    pub const LLM_DONE: i32 = 1;
    pub const LLM_STOPPED: i32 = 2;
    pub const LLM_ERR_INVALID_ARGUMENT: i32 = -1;
    pub const LLM_ERR_IO: i32 = -2;
    pub const LLM_ERR_FORMAT: i32 = -3;
    pub const LLM_ERR_UNSUPPORTED: i32 = -4;
    pub const LLM_ERR_OUT_OF_MEMORY: i32 = -5;
    pub const LLM_ERR_CONTEXT_FULL: i32 = -6;
    pub const LLM_ERR_BUFFER_TOO_SMALL: i32 = -7;
    pub const LLM_ERR_CANCELLED: i32 = -8;
    pub const LLM_ERR_INTERNAL: i32 = -9;
    pub const LLM_ERR_NOT_FOUND: i32 = -10;

    pub const LLM_KV_F32: i32 = 0;
    pub const LLM_KV_F16: i32 = 1;
    pub const LLM_KV_Q8_0: i32 = 2;

    pub const LLM_RESIDENCY_RESIDENT: i32 = 0;
    pub const LLM_RESIDENCY_STREAMED: i32 = 1;
    pub const LLM_RESIDENCY_BUDGET: i32 = 2;
    pub const LLM_PAGE_CACHE_KEEP: i32 = 0;
    pub const LLM_PAGE_CACHE_DROP: i32 = 1;
    pub const LLM_PAGE_CACHE_DIRECT: i32 = 2;
    pub const LLM_PAGE_CACHE_MAP: i32 = 3;

    pub const LLM_MODEL_PARAMS_VERSION: u32 = 3;
    pub const LLM_SESSION_PARAMS_VERSION: u32 = 3;
    pub const LLM_LOGPROBS_PARAMS_VERSION: u32 = 1;
    pub const LLM_IO_VERSION: u32 = 1;
    pub const LLM_WRITER_VERSION: u32 = 1;
    pub const LLM_MEMORY_PLAN_VERSION: u32 = 1;
    pub const LLM_STATS_VERSION: u32 = 2;
    pub const LLM_SPECULATION_PARAMS_VERSION: u32 = 1;
    pub const LLM_EMBED_PARAMS_VERSION: u32 = 1;

    pub const LLM_POOLING_UNSPECIFIED: i32 = -1;
    pub const LLM_POOLING_NONE: i32 = 0;
    pub const LLM_POOLING_MEAN: i32 = 1;
    pub const LLM_POOLING_CLS: i32 = 2;
    pub const LLM_POOLING_LAST: i32 = 3;
    pub const LLM_POOLING_RANK: i32 = 4;

    #[repr(C)]
    pub struct llm_model {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub struct llm_session {
        _private: [u8; 0],
    }

    pub type llm_log_cb = Option<unsafe extern "C" fn(level: i32, message: *const c_char, user: *mut c_void)>;
    pub type llm_progress_cb = Option<unsafe extern "C" fn(fraction: f32, user: *mut c_void) -> bool>;
    pub type llm_token_cb =
        Option<unsafe extern "C" fn(token: i32, piece: *const c_char, len: usize, user: *mut c_void) -> bool>;

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_io {
        pub version: u32,
        pub user: *mut c_void,
        pub size: Option<unsafe extern "C" fn(user: *mut c_void) -> u64>,
        pub read_at: Option<unsafe extern "C" fn(user: *mut c_void, offset: u64, dst: *mut c_void, n: u64) -> i32>,
        pub close: Option<unsafe extern "C" fn(user: *mut c_void)>,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_model_params {
        pub version: u32,
        pub n_threads: i32,
        pub progress: llm_progress_cb,
        pub progress_user: *mut c_void,
        pub vocab_only: bool,
        // version 2
        pub residency: i32,
        pub ram_budget_bytes: u64,
        pub prefetch_depth: i32,
        // version 3
        pub page_cache: i32,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_session_params {
        pub version: u32,
        pub n_ctx: i32,
        pub n_threads: i32,
        pub temperature: f32,
        pub top_k: i32,
        pub top_p: f32,
        pub min_p: f32,
        pub repeat_penalty: f32,
        pub repeat_last_n: i32,
        pub seed: u64,
        pub logits_all: bool,
        // version 2
        pub parse_special: bool,
        pub kv_type_k: i32,
        pub kv_type_v: i32,
        pub context_shift: bool,
        pub n_keep: i32,
        // version 3 (0.4)
        pub presence_penalty: f32,
        pub frequency_penalty: f32,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    pub struct llm_token_logprob {
        pub token: i32,
        pub logprob: f32,
    }

    pub type llm_logprobs_cb = Option<
        unsafe extern "C" fn(token: i32, logprob: f32, top: *const llm_token_logprob, n_top: i32, user: *mut c_void),
    >;

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_logprobs_params {
        pub version: u32,
        pub n_top: i32,
        pub on_token: llm_logprobs_cb,
        pub user: *mut c_void,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_chat_message {
        pub role: *const c_char,
        pub content: *const c_char,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_writer {
        pub version: u32,
        pub user: *mut c_void,
        pub write: Option<unsafe extern "C" fn(user: *mut c_void, src: *const c_void, n: u64) -> i32>,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    pub struct llm_memory_plan {
        pub version: u32,
        pub n_layer: u32,
        pub n_resident_layers: u32,
        pub n_stream_slots: u32,
        pub resident_block_bytes: u64,
        pub stream_slot_bytes: u64,
        pub lm_head_bytes: u64,
        pub embedding_bytes: u64,
        pub kv_cache_bytes: u64,
        pub scratch_bytes: u64,
        pub total_bytes: u64,
        pub minimum_weight_bytes: u64,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default)]
    pub struct llm_stats {
        pub version: u32,
        pub prompt_tokens: u64,
        pub generated_tokens: u64,
        pub prefill_seconds: f64,
        pub decode_seconds: f64,
        pub bytes_read: u64,
        pub read_calls: u64,
        pub io_wait_seconds: f64,
        // version 2 (0.4)
        pub passes: u64,
        pub drafted_tokens: u64,
        pub accepted_tokens: u64,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct llm_speculation_params {
        pub version: u32,
        pub draft: *mut llm_model,
        pub n_draft: i32,
        pub lookup_ngram: i32,
        pub draft_p_min: f32,
    }

    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct llm_embed_params {
        pub version: u32,
        pub pooling: i32,
        pub normalize: bool,
        pub add_bos: bool,
        pub parse_special: bool,
    }

    extern "C" {
        pub fn llm_version_string() -> *const c_char;
        pub fn llm_status_string(status: i32) -> *const c_char;
        pub fn llm_last_error() -> *const c_char;
        pub fn llm_set_log_callback(cb: llm_log_cb, user: *mut c_void);
        pub fn llm_set_log_level(level: i32);

        pub fn llm_model_params_init(p: *mut llm_model_params, version: u32) -> i32;
        pub fn llm_model_load(path: *const c_char, p: *const llm_model_params, out: *mut *mut llm_model) -> i32;
        pub fn llm_model_load_io(io: *const llm_io, p: *const llm_model_params, out: *mut *mut llm_model) -> i32;
        pub fn llm_model_free(m: *mut llm_model);
        pub fn llm_model_info_json(m: *const llm_model) -> *const c_char;
        pub fn llm_model_set_ram_budget(m: *mut llm_model, bytes: u64) -> i32;
        pub fn llm_memory_plan_init(p: *mut llm_memory_plan, version: u32) -> i32;
        pub fn llm_model_memory_plan(m: *const llm_model, n_ctx: i32, out: *mut llm_memory_plan) -> i32;
        pub fn llm_model_n_vocab(m: *const llm_model) -> i32;
        pub fn llm_model_token_bos(m: *const llm_model) -> i32;
        pub fn llm_model_token_eos(m: *const llm_model) -> i32;
        pub fn llm_model_token_is_eog(m: *const llm_model, token: i32) -> bool;

        pub fn llm_model_meta_string(m: *const llm_model, key: *const c_char, buf: *mut c_char, cap: usize,
            len: *mut usize) -> i32;
        pub fn llm_model_chat_template(m: *const llm_model, name: *const c_char, buf: *mut c_char, cap: usize,
            len: *mut usize) -> i32;
        pub fn llm_chat_apply_template(
            m: *const llm_model, tmpl: *const c_char, msgs: *const llm_chat_message, n_msgs: usize,
            add_assistant: bool, buf: *mut c_char, cap: usize, len: *mut usize,
        ) -> i32;

        pub fn llm_chat_apply_template_json(
            m: *const llm_model, tmpl: *const c_char, request_json: *const c_char, buf: *mut c_char, cap: usize,
            len: *mut usize,
        ) -> i32;
        pub fn llm_chat_parse(
            m: *const llm_model, tmpl: *const c_char, raw: *const c_char, params_json: *const c_char,
            buf: *mut c_char, cap: usize, len: *mut usize,
        ) -> i32;

        pub fn llm_tokenize(
            m: *const llm_model, text: *const c_char, len: usize, add_bos: bool, parse_special: bool,
            tokens: *mut i32, cap: i32, n_out: *mut i32,
        ) -> i32;
        pub fn llm_token_to_piece(m: *const llm_model, token: i32, buf: *mut c_char, cap: usize, len_out: *mut usize)
            -> i32;

        pub fn llm_session_params_init(p: *mut llm_session_params, version: u32) -> i32;
        pub fn llm_session_create(m: *mut llm_model, p: *const llm_session_params, out: *mut *mut llm_session) -> i32;
        pub fn llm_session_free(s: *mut llm_session);
        pub fn llm_session_reset(s: *mut llm_session) -> i32;
        pub fn llm_session_n_past(s: *const llm_session) -> i32;
        pub fn llm_session_truncate(s: *mut llm_session, n_past: i32) -> i32;
        pub fn llm_session_tokens(s: *const llm_session, tokens: *mut i32, cap: i32, n_out: *mut i32) -> i32;
        pub fn llm_session_prefill(s: *mut llm_session, tokens: *const i32, n: usize) -> i32;
        pub fn llm_session_logits(s: *mut llm_session, logits: *mut *const f32, n_vocab: *mut i32) -> i32;
        pub fn llm_session_logits_ith(s: *mut llm_session, i: i32, logits: *mut *const f32, n_vocab: *mut i32) -> i32;
        pub fn llm_session_sample(s: *mut llm_session, token: *mut i32) -> i32;
        pub fn llm_session_accept(s: *mut llm_session, token: i32) -> i32;
        pub fn llm_session_generate(
            s: *mut llm_session, prompt: *const c_char, max_tokens: i32, on_token: llm_token_cb, user: *mut c_void,
        ) -> i32;
        pub fn llm_session_next(s: *mut llm_session, token: *mut i32, piece: *mut c_char, cap: usize, len: *mut usize)
            -> i32;
        pub fn llm_session_cancel(s: *mut llm_session);
        pub fn llm_session_save(s: *mut llm_session, path: *const c_char) -> i32;
        pub fn llm_session_save_io(s: *mut llm_session, w: *const llm_writer) -> i32;
        pub fn llm_session_load(s: *mut llm_session, path: *const c_char) -> i32;
        pub fn llm_session_load_io(s: *mut llm_session, io: *const llm_io) -> i32;
        pub fn llm_stats_init(p: *mut llm_stats, version: u32) -> i32;
        pub fn llm_session_stats(s: *const llm_session, total: *mut llm_stats, last_call: *mut llm_stats) -> i32;
        pub fn llm_session_stats_json(s: *mut llm_session) -> *const c_char;

        pub fn llm_speculation_params_init(p: *mut llm_speculation_params, version: u32) -> i32;
        pub fn llm_session_set_speculation(s: *mut llm_session, p: *const llm_speculation_params) -> i32;
        pub fn llm_session_next_batch(
            sessions: *const *mut llm_session, n: i32, tokens: *mut i32, statuses: *mut i32,
        ) -> i32;

        pub fn llm_session_set_grammar(s: *mut llm_session, gbnf: *const c_char, root: *const c_char) -> i32;
        pub fn llm_session_set_json_schema(s: *mut llm_session, schema: *const c_char) -> i32;
        pub fn llm_session_set_stop(s: *mut llm_session, stops: *const *const c_char, n: usize) -> i32;
        pub fn llm_session_set_logit_bias(s: *mut llm_session, tokens: *const i32, bias: *const f32, n: usize) -> i32;
        pub fn llm_logprobs_params_init(p: *mut llm_logprobs_params, version: u32) -> i32;
        pub fn llm_session_set_logprobs(s: *mut llm_session, p: *const llm_logprobs_params) -> i32;
        pub fn llm_session_logprobs(
            s: *const llm_session, token: *mut i32, logprob: *mut f32, top: *mut *const llm_token_logprob,
            n_top: *mut i32,
        ) -> i32;
        pub fn llm_session_flush_held(s: *mut llm_session, buf: *mut c_char, cap: usize, len: *mut usize) -> i32;

        pub fn llm_model_pooling_type(m: *const llm_model) -> i32;
        pub fn llm_embed_params_init(p: *mut llm_embed_params, version: u32) -> i32;
        pub fn llm_session_embed(
            s: *mut llm_session, texts: *const *const c_char, n_texts: usize, p: *const llm_embed_params,
            out: *mut f32, cap: usize, n_out: *mut usize, n_dim: *mut i32, n_rows: *mut i32,
        ) -> i32;
    }
}

pub use sys::{llm_memory_plan as MemoryPlan, llm_stats as Stats};

// ---- errors ----------------------------------------------------------------------------------------

/// A failed libllm call: `status` is the `LLM_ERR_*` code, `message` the thread's `llm_last_error()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: i32,
    pub message: String,
}

impl Error {
    /// Reads `llm_last_error()`: must run on the thread of the failed call, right after it.
    fn last(status: i32) -> Error {
        // SAFETY: llm_last_error never returns NULL and the string is valid until the next failing
        // call on this thread; it is copied at once.
        let message = unsafe { CStr::from_ptr(sys::llm_last_error()) }.to_string_lossy().into_owned();
        Error { status, message }
    }

    fn new(status: i32, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// True for `LLM_ERR_NOT_FOUND`: no such metadata key or chat template.
    pub fn is_not_found(&self) -> bool {
        self.status == sys::LLM_ERR_NOT_FOUND
    }

    /// The library's short description of the status ("malformed model file", ...).
    pub fn status_string(&self) -> String {
        status_string(self.status)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.status_string(), self.status, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn check(status: i32) -> Result<i32> {
    if status < 0 {
        Err(Error::last(status))
    } else {
        Ok(status)
    }
}

/// "MAJOR.MINOR.PATCH" of the loaded library.
pub fn version() -> String {
    // SAFETY: static storage.
    unsafe { CStr::from_ptr(sys::llm_version_string()) }.to_string_lossy().into_owned()
}

/// A short static description of a status code.
pub fn status_string(status: i32) -> String {
    // SAFETY: static storage, never NULL.
    unsafe { CStr::from_ptr(sys::llm_status_string(status)) }.to_string_lossy().into_owned()
}

fn finish_of(status: i32) -> Finish {
    match status {
        sys::LLM_DONE => Finish::EndOfGeneration,
        sys::LLM_STOPPED => Finish::StopString,
        _ => Finish::Stopped,
    }
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::LLM_ERR_INVALID_ARGUMENT, "string contains a NUL byte"))
}

fn c_path(path: &Path) -> Result<CString> {
    let path = path
        .to_str()
        .ok_or_else(|| Error::new(sys::LLM_ERR_INVALID_ARGUMENT, "the path is not valid UTF-8"))?;
    c_string(path)
}

// llm.h's string-out protocol: a call with cap 0 gives the length, a second one with length + 1
// bytes the string (invalid UTF-8 replaced).
fn string_out(mut call: impl FnMut(*mut std::ffi::c_char, usize, &mut usize) -> i32) -> Result<String> {
    let mut len = 0usize;
    let mut st = call(ptr::null_mut(), 0, &mut len);
    loop {
        if st != sys::LLM_ERR_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut buf = vec![0u8; len + 1];
        st = call(buf.as_mut_ptr().cast(), buf.len(), &mut len);
        if st == sys::LLM_ERR_BUFFER_TOO_SMALL {
            continue;
        }
        check(st)?;
        buf.truncate(len);
        return Ok(String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()));
    }
}

/// One message of a conversation for [`apply_chat_template`]: `("user", "Hi")` converts into one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

impl<R: Into<String>, C: Into<String>> From<(R, C)> for ChatMessage {
    fn from((role, content): (R, C)) -> ChatMessage {
        ChatMessage::new(role, content)
    }
}

fn render_chat(model: Option<&Model>, template: Option<&str>, messages: &[ChatMessage], add_assistant: bool)
    -> Result<String> {
    let template = template.map(c_string).transpose()?;
    let mut strings = Vec::with_capacity(messages.len() * 2);
    for m in messages {
        strings.push(c_string(&m.role)?);
        strings.push(c_string(&m.content)?);
    }
    let msgs: Vec<sys::llm_chat_message> = strings
        .chunks(2)
        .map(|rc| sys::llm_chat_message { role: rc[0].as_ptr(), content: rc[1].as_ptr() })
        .collect();
    let m = model.map_or(ptr::null(), |m| m.ptr.as_ptr() as *const sys::llm_model);
    let t = template.as_ref().map_or(ptr::null(), |t| t.as_ptr());
    // SAFETY: msgs points at CStrings alive in `strings`; buf has cap bytes.
    string_out(|buf, cap, len| unsafe {
        sys::llm_chat_apply_template(m, t, msgs.as_ptr(), msgs.len(), add_assistant, buf, cap, len)
    })
}

/// Renders `messages` with the Jinja chat template `template` as Hugging Face's
/// `apply_chat_template(tokenize=False)` does, without a model (`bos_token` and `eos_token` are "").
/// `add_assistant` ends with the opening of an assistant turn.
pub fn apply_chat_template(template: &str, messages: &[ChatMessage], add_assistant: bool) -> Result<String> {
    render_chat(None, Some(template), messages, add_assistant)
}

/// Renders a request given as JSON text in Hugging Face's `apply_chat_template` form
/// (`llm_chat_apply_template_json`): `{"messages": [...], "tools": [...], "documents": [...],
/// "add_generation_prompt": true, ...}`, messages passed as given (assistant `tool_calls`, role `tool`
/// with `tool_call_id` and `name`). `model` gives the BOS/EOS texts and, when `template` is `None`,
/// its own template.
pub fn apply_chat_template_json(model: Option<&Model>, template: Option<&str>, request_json: &str) -> Result<String> {
    let template = template.map(c_string).transpose()?;
    let req = c_string(request_json)?;
    let m = model.map_or(ptr::null(), |m| m.ptr.as_ptr() as *const sys::llm_model);
    let t = template.as_ref().map_or(ptr::null(), |t| t.as_ptr());
    // SAFETY: the strings are alive CStrings; buf has cap bytes.
    string_out(|buf, cap, len| unsafe { sys::llm_chat_apply_template_json(m, t, req.as_ptr(), buf, cap, len) })
}

/// Parses a model's raw output (`llm_chat_parse`) into JSON text `{"content", "reasoning_content",
/// "tool_calls": [{"name", "arguments", "id"}], "format", "parsed"}` (arguments: JSON text), the
/// tool-call format read off the template. `params_json`: the request's `tools`, `messages`,
/// `reasoning_format`, `enable_thinking`, `continue_final_message`, `is_partial`.
pub fn chat_parse(model: Option<&Model>, template: Option<&str>, raw: &str, params_json: Option<&str>)
    -> Result<String> {
    let template = template.map(c_string).transpose()?;
    let raw = c_string(raw)?;
    let params = params_json.map(c_string).transpose()?;
    let m = model.map_or(ptr::null(), |m| m.ptr.as_ptr() as *const sys::llm_model);
    let t = template.as_ref().map_or(ptr::null(), |t| t.as_ptr());
    let p = params.as_ref().map_or(ptr::null(), |p| p.as_ptr());
    // SAFETY: the strings are alive CStrings; buf has cap bytes.
    string_out(|buf, cap, len| unsafe { sys::llm_chat_parse(m, t, raw.as_ptr(), p, buf, cap, len) })
}

// Runs a closure from a C callback; a panic is stored (and the callback says "stop") so it can be
// resumed on the Rust side once the C call has returned -- never unwinding through C frames.
struct Callback<F> {
    f: F,
    panic: Option<Box<dyn Any + Send + 'static>>,
}

impl<F> Callback<F> {
    fn call(&mut self, run: impl FnOnce(&mut F) -> bool) -> bool {
        if self.panic.is_some() {
            return false;
        }
        match catch_unwind(AssertUnwindSafe(|| run(&mut self.f))) {
            Ok(go_on) => go_on,
            Err(p) => {
                self.panic = Some(p);
                false
            }
        }
    }

    fn resume(self) {
        if let Some(p) = self.panic {
            resume_unwind(p);
        }
    }
}

// ---- model -----------------------------------------------------------------------------------------

/// `llm_model_params`, filled with the library's defaults by `default()`. Set fields directly
/// (`n_threads`, `vocab_only`, `residency`, `ram_budget_bytes`, `prefetch_depth`, `page_cache`); the progress
/// callback is given to [`Model::load_with_progress`] instead.
#[derive(Clone, Copy, Debug)]
pub struct ModelParams(sys::llm_model_params);

impl Default for ModelParams {
    fn default() -> Self {
        let mut p = std::mem::MaybeUninit::<sys::llm_model_params>::zeroed();
        // SAFETY: init fills every field of the version we pass, which is all of ours. If the library
        // is older than this binding it refuses, leaving version 0, which the load then reports.
        unsafe {
            sys::llm_model_params_init(p.as_mut_ptr(), sys::LLM_MODEL_PARAMS_VERSION);
            ModelParams(p.assume_init())
        }
    }
}

impl Deref for ModelParams {
    type Target = sys::llm_model_params;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for ModelParams {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// A loaded model: immutable, shared by any number of sessions on any threads.
pub struct Model {
    ptr: NonNull<sys::llm_model>,
    info_lock: Mutex<()>,
}

// SAFETY: llm.h: "an llm_model is immutable after load and may be shared by sessions on several
// threads". The one mutating call (set_ram_budget) takes &mut self; the one cached string
// (info_json) is serialized by info_lock.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

unsafe extern "C" fn progress_trampoline<F: FnMut(f32) -> bool>(fraction: f32, user: *mut c_void) -> bool {
    // SAFETY: user is the &mut Callback<F> passed by load_with_progress, alive for the whole call.
    let cb = unsafe { &mut *(user as *mut Callback<F>) };
    cb.call(|f| f(fraction))
}

impl Model {
    /// Opens a GGUF file.
    pub fn load(path: impl AsRef<Path>, params: &ModelParams) -> Result<Model> {
        Self::load_raw(path.as_ref(), params.0)
    }

    /// As [`Model::load`], calling `progress(fraction)` on this thread during the load; returning
    /// false cancels it (`LLM_ERR_CANCELLED`). A panic in `progress` cancels the load and is resumed
    /// after it.
    pub fn load_with_progress<F: FnMut(f32) -> bool>(
        path: impl AsRef<Path>, params: &ModelParams, progress: F,
    ) -> Result<Model> {
        let mut cb = Callback { f: progress, panic: None };
        let mut p = params.0;
        p.progress = Some(progress_trampoline::<F>);
        p.progress_user = &mut cb as *mut Callback<F> as *mut c_void;
        let result = Self::load_raw(path.as_ref(), p);
        cb.resume();
        result
    }

    fn load_raw(path: &Path, p: sys::llm_model_params) -> Result<Model> {
        let path = c_path(path)?;
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers for the duration of the call.
        check(unsafe { sys::llm_model_load(path.as_ptr(), &p, &mut out) })?;
        let ptr = NonNull::new(out).ok_or_else(|| Error::new(sys::LLM_ERR_INTERNAL, "llm_model_load gave NULL"))?;
        Ok(Model { ptr, info_lock: Mutex::new(()) })
    }

    /// The raw handle (borrowed; valid while `self` lives).
    pub fn as_ptr(&self) -> *mut sys::llm_model {
        self.ptr.as_ptr()
    }

    /// The model description (architecture, dimensions, residency, memory plan) as JSON text.
    pub fn info_json(&self) -> String {
        // The library's string lives until the next info call on this model: serialize, then copy.
        let _guard = self.info_lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: non-NULL for a valid model; copied before the lock is released.
        unsafe { CStr::from_ptr(sys::llm_model_info_json(self.ptr.as_ptr())) }.to_string_lossy().into_owned()
    }

    /// Predicted memory of this model plus one session of `n_ctx` positions (0: the default).
    pub fn memory_plan(&self, n_ctx: i32) -> Result<MemoryPlan> {
        let mut plan = MemoryPlan::default();
        // SAFETY: valid pointers.
        check(unsafe { sys::llm_memory_plan_init(&mut plan, sys::LLM_MEMORY_PLAN_VERSION) })?;
        check(unsafe { sys::llm_model_memory_plan(self.ptr.as_ptr(), n_ctx, &mut plan) })?;
        Ok(plan)
    }

    /// The run-time RAM dial. Takes `&mut self`: no session of this model may exist meanwhile.
    pub fn set_ram_budget(&mut self, bytes: u64) -> Result<()> {
        // SAFETY: exclusive access to a valid model.
        check(unsafe { sys::llm_model_set_ram_budget(self.ptr.as_ptr(), bytes) }).map(|_| ())
    }

    pub fn n_vocab(&self) -> i32 {
        unsafe { sys::llm_model_n_vocab(self.ptr.as_ptr()) }
    }

    /// BOS token id, if the model has one.
    pub fn token_bos(&self) -> Option<i32> {
        Some(unsafe { sys::llm_model_token_bos(self.ptr.as_ptr()) }).filter(|&t| t >= 0)
    }

    /// EOS token id, if the model has one.
    pub fn token_eos(&self) -> Option<i32> {
        Some(unsafe { sys::llm_model_token_eos(self.ptr.as_ptr()) }).filter(|&t| t >= 0)
    }

    pub fn token_is_eog(&self, token: i32) -> bool {
        unsafe { sys::llm_model_token_is_eog(self.ptr.as_ptr(), token) }
    }

    /// The GGUF metadata value of `key` (e.g. "general.architecture") as a string: numbers in
    /// decimal, booleans "true"/"false". An error with [`Error::is_not_found`] if the file has no
    /// such key.
    pub fn meta_string(&self, key: &str) -> Result<String> {
        let key = c_string(key)?;
        // SAFETY: valid model and key; buf has cap bytes.
        string_out(|buf, cap, len| unsafe { sys::llm_model_meta_string(self.ptr.as_ptr(), key.as_ptr(), buf, cap, len) })
    }

    /// The model's chat template (Jinja source), or the named one (`tokenizer.chat_template.<name>`).
    /// An error with [`Error::is_not_found`] if the file has none.
    pub fn chat_template(&self, name: Option<&str>) -> Result<String> {
        let name = name.map(c_string).transpose()?;
        let n = name.as_ref().map_or(ptr::null(), |n| n.as_ptr());
        // SAFETY: as meta_string; name may be NULL.
        string_out(|buf, cap, len| unsafe { sys::llm_model_chat_template(self.ptr.as_ptr(), n, buf, cap, len) })
    }

    /// Renders a conversation with the model's chat template, or with `template` (and this model's
    /// BOS/EOS texts). Generate from it with a session whose `parse_special` is on, so the template's
    /// special tokens become themselves.
    pub fn apply_chat_template(&self, messages: &[ChatMessage], add_assistant: bool, template: Option<&str>)
        -> Result<String> {
        render_chat(Some(self), template, messages, add_assistant)
    }

    /// Token ids of `text`; `add_bos` prepends BOS when the tokenizer uses one.
    pub fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<i32>> {
        let mut tokens = vec![0i32; text.len() + 8];
        loop {
            let mut n = 0i32;
            let cap = i32::try_from(tokens.len()).unwrap_or(i32::MAX);
            // SAFETY: text is len bytes; tokens has cap slots.
            let st = unsafe {
                sys::llm_tokenize(
                    self.ptr.as_ptr(), text.as_ptr().cast(), text.len(), add_bos, parse_special,
                    tokens.as_mut_ptr(), cap, &mut n,
                )
            };
            if st == sys::LLM_ERR_BUFFER_TOO_SMALL && n as usize > tokens.len() {
                tokens.resize(n as usize, 0);
                continue;
            }
            check(st)?;
            tokens.truncate(n as usize);
            return Ok(tokens);
        }
    }

    /// The bytes of one token as generation prints them.
    pub fn token_to_piece(&self, token: i32) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; 64];
        loop {
            let mut len = 0usize;
            // SAFETY: buf has buf.len() bytes.
            let st = unsafe {
                sys::llm_token_to_piece(self.ptr.as_ptr(), token, buf.as_mut_ptr().cast(), buf.len(), &mut len)
            };
            if st == sys::LLM_ERR_BUFFER_TOO_SMALL && len > buf.len() {
                buf.resize(len, 0);
                continue;
            }
            check(st)?;
            buf.truncate(len);
            return Ok(buf);
        }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: every Session<'_> borrowing this model has been dropped (the borrow checker).
        unsafe { sys::llm_model_free(self.ptr.as_ptr()) }
    }
}

// ---- session ---------------------------------------------------------------------------------------

/// KV cache element type of a session (`kv_type_k` / `kv_type_v` of [`SessionParams`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum KvType {
    /// Exact: the goldens' setting.
    F32 = sys::LLM_KV_F32,
    /// The default.
    F16 = sys::LLM_KV_F16,
    /// Blocks of 32 with one f16 scale: about half of F16.
    Q8_0 = sys::LLM_KV_Q8_0,
}

impl TryFrom<i32> for KvType {
    type Error = Error;
    fn try_from(v: i32) -> Result<KvType> {
        match v {
            sys::LLM_KV_F32 => Ok(KvType::F32),
            sys::LLM_KV_F16 => Ok(KvType::F16),
            sys::LLM_KV_Q8_0 => Ok(KvType::Q8_0),
            _ => Err(Error::new(sys::LLM_ERR_INVALID_ARGUMENT, format!("unknown KV type {v}"))),
        }
    }
}

/// `llm_session_params`, filled with the library's defaults by `default()` (temperature 0.8, top_k
/// 40, top_p 0.95, min_p 0.05, F16 KV cache, ...). Set fields directly (`parse_special`,
/// `context_shift`, `n_keep`, ...); KV types with [`SessionParams::set_kv_types`].
#[derive(Clone, Copy, Debug)]
pub struct SessionParams(sys::llm_session_params);

impl Default for SessionParams {
    fn default() -> Self {
        let mut p = std::mem::MaybeUninit::<sys::llm_session_params>::zeroed();
        // SAFETY: as ModelParams::default.
        unsafe {
            sys::llm_session_params_init(p.as_mut_ptr(), sys::LLM_SESSION_PARAMS_VERSION);
            SessionParams(p.assume_init())
        }
    }
}

impl SessionParams {
    /// Element types of the cached keys and values.
    pub fn set_kv_types(&mut self, k: KvType, v: KvType) -> &mut Self {
        self.0.kv_type_k = k as i32;
        self.0.kv_type_v = v as i32;
        self
    }

    /// `(keys, values)` element types.
    pub fn kv_types(&self) -> Result<(KvType, KvType)> {
        Ok((KvType::try_from(self.0.kv_type_k)?, KvType::try_from(self.0.kv_type_v)?))
    }
}

impl Deref for SessionParams {
    type Target = sys::llm_session_params;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for SessionParams {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

// The handle as the cancellers see it: NULL once the session is freed.
struct CancelSlot(Mutex<*mut sys::llm_session>);
// SAFETY: the pointer is only used for llm_session_cancel (thread-safe by the header), under the
// mutex that Session::drop takes before freeing.
unsafe impl Send for CancelSlot {}
unsafe impl Sync for CancelSlot {}

/// Stops the running (or next) evaluation of a session from any thread; a no-op once the session
/// has been dropped. Get one with [`Session::canceller`].
#[derive(Clone)]
pub struct Canceller(Arc<CancelSlot>);

impl Canceller {
    pub fn cancel(&self) {
        let slot = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.is_null() {
            // SAFETY: non-NULL means the session is alive: drop clears it under this lock first.
            unsafe { sys::llm_session_cancel(*slot) }
        }
    }
}

/// How a generation ended (errors, including cancellation, are `Err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token was sampled (`LLM_DONE`).
    EndOfGeneration,
    /// `max_tokens` were produced, or the callback returned false.
    Stopped,
    /// A stop string was found (`LLM_STOPPED`, see [`Session::set_stop`]).
    StopString,
}

/// A conversation on a model: KV cache and sampler. Cannot outlive its model. `Send`, not `Sync`.
pub struct Session<'m> {
    ptr: NonNull<sys::llm_session>,
    slot: Arc<CancelSlot>,
    piece: Vec<u8>,
    model: &'m Model,
    // Text next_token received with LLM_DONE / LLM_STOPPED (stop strings), for flush_held.
    tail: Vec<u8>,
    last: Option<Finish>,
}

// SAFETY: llm.h: "an llm_session must be used by one thread at a time" -- moving it to another
// thread is fine; sharing it (&Session across threads) is not, so no Sync (NonNull is !Sync).
unsafe impl Send for Session<'_> {}

unsafe extern "C" fn token_trampoline<F: FnMut(i32, &[u8]) -> bool>(
    token: i32, piece: *const std::ffi::c_char, len: usize, user: *mut c_void,
) -> bool {
    // SAFETY: user is the &mut Callback<F> of generate(), alive for the call; piece has len bytes.
    let cb = unsafe { &mut *(user as *mut Callback<F>) };
    let bytes: &[u8] = if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(piece.cast(), len) } };
    cb.call(|f| f(token, bytes))
}

impl<'m> Session<'m> {
    /// Creates a session (KV cache + sampler) on `model`.
    pub fn new(model: &'m Model, params: &SessionParams) -> Result<Session<'m>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid pointers; the library does not mutate the model through this pointer.
        check(unsafe { sys::llm_session_create(model.ptr.as_ptr(), &params.0, &mut out) })?;
        let ptr = NonNull::new(out).ok_or_else(|| Error::new(sys::LLM_ERR_INTERNAL, "llm_session_create gave NULL"))?;
        Ok(Session {
            ptr,
            slot: Arc::new(CancelSlot(Mutex::new(out))),
            piece: vec![0u8; 256],
            model,
            tail: Vec::new(),
            last: None,
        })
    }

    /// The raw handle (borrowed; valid while `self` lives).
    pub fn as_ptr(&self) -> *mut sys::llm_session {
        self.ptr.as_ptr()
    }

    /// The model this session runs on.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// A handle that cancels this session's running call from any thread.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.slot.clone())
    }

    /// Forgets all tokens; clears a pending cancel.
    pub fn reset(&mut self) -> Result<()> {
        check(unsafe { sys::llm_session_reset(self.ptr.as_ptr()) }).map(|_| ())
    }

    /// Tokens currently in the context.
    pub fn n_past(&self) -> i32 {
        unsafe { sys::llm_session_n_past(self.ptr.as_ptr()) }
    }

    /// Speculative decoding for `generate` / `next_token` from now on (`llm_session_set_speculation`):
    /// a draft model and/or prompt lookup propose tokens that one evaluation pass checks; lossless
    /// (greedy output is identical). `SpeculationParams::default()` (no draft, no lookup) turns it
    /// off. The library keeps its own reference to the draft model, so the `&Model` is only borrowed
    /// for the call: the draft may be dropped afterwards.
    pub fn set_speculation(&mut self, params: &SpeculationParams<'_>) -> Result<()> {
        let mut raw = std::mem::MaybeUninit::<sys::llm_speculation_params>::zeroed();
        // SAFETY: a zeroed struct filled by the library for the version we pass.
        let mut raw = unsafe {
            check(sys::llm_speculation_params_init(raw.as_mut_ptr(), sys::LLM_SPECULATION_PARAMS_VERSION))?;
            raw.assume_init()
        };
        raw.draft = params.draft.map_or(ptr::null_mut(), |m| m.as_ptr());
        raw.n_draft = params.n_draft;
        raw.lookup_ngram = params.lookup_ngram;
        raw.draft_p_min = params.draft_p_min;
        // SAFETY: valid pointers for the call; the library takes its own reference to the draft.
        check(unsafe { sys::llm_session_set_speculation(self.ptr.as_ptr(), &raw) }).map(|_| ())
    }

    /// Drops the context from position `n_past` on (to edit or regenerate a turn); prefill or accept
    /// before sampling again.
    pub fn truncate(&mut self, n_past: i32) -> Result<()> {
        check(unsafe { sys::llm_session_truncate(self.ptr.as_ptr(), n_past) }).map(|_| ())
    }

    /// The tokens in the context (`n_past` of them), in order.
    pub fn tokens(&self) -> Result<Vec<i32>> {
        let mut n = 0i32;
        let mut st = unsafe { sys::llm_session_tokens(self.ptr.as_ptr(), ptr::null_mut(), 0, &mut n) };
        loop {
            if st != sys::LLM_ERR_BUFFER_TOO_SMALL {
                check(st)?;
            }
            let mut tokens = vec![0i32; n.max(0) as usize];
            let cap = n;
            // SAFETY: tokens has cap slots.
            st = unsafe { sys::llm_session_tokens(self.ptr.as_ptr(), tokens.as_mut_ptr(), cap, &mut n) };
            if st != sys::LLM_ERR_BUFFER_TOO_SMALL {
                check(st)?;
                tokens.truncate(n as usize);
                return Ok(tokens);
            }
        }
    }

    /// Saves the conversation (tokens, KV cache, sampler and RNG state) to `path`, atomically.
    pub fn save(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = c_path(path.as_ref())?;
        check(unsafe { sys::llm_session_save(self.ptr.as_ptr(), path.as_ptr()) }).map(|_| ())
    }

    /// [`Session::save`] into memory.
    pub fn save_to_vec(&mut self) -> Result<Vec<u8>> {
        unsafe extern "C" fn write(user: *mut c_void, src: *const c_void, n: u64) -> i32 {
            // SAFETY: user is the Vec of save_to_vec; src has n bytes.
            let out = unsafe { &mut *(user as *mut Vec<u8>) };
            let bytes: &[u8] = if n == 0 { &[] } else { unsafe { std::slice::from_raw_parts(src.cast(), n as usize) } };
            // A capacity overflow panics: it must not unwind through C.
            match catch_unwind(AssertUnwindSafe(|| out.extend_from_slice(bytes))) {
                Ok(()) => sys::LLM_OK,
                Err(_) => sys::LLM_ERR_OUT_OF_MEMORY,
            }
        }
        let mut out = Vec::new();
        let w = sys::llm_writer {
            version: sys::LLM_WRITER_VERSION,
            user: &mut out as *mut Vec<u8> as *mut c_void,
            write: Some(write),
        };
        check(unsafe { sys::llm_session_save_io(self.ptr.as_ptr(), &w) })?;
        Ok(out)
    }

    /// Restores a conversation saved by [`Session::save`] on the same model file; on failure the
    /// session is left as it was.
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = c_path(path.as_ref())?;
        check(unsafe { sys::llm_session_load(self.ptr.as_ptr(), path.as_ptr()) }).map(|_| ())
    }

    /// [`Session::load`] from bytes made by [`Session::save_to_vec`] (or read from a saved file).
    pub fn load_from_slice(&mut self, data: &[u8]) -> Result<()> {
        unsafe extern "C" fn size(user: *mut c_void) -> u64 {
            // SAFETY: user is the &[u8] of load_from_slice.
            let data: &[u8] = unsafe { *(user as *const &[u8]) };
            data.len() as u64
        }
        unsafe extern "C" fn read_at(user: *mut c_void, offset: u64, dst: *mut c_void, n: u64) -> i32 {
            let data = unsafe { *(user as *const &[u8]) };
            match offset.checked_add(n) {
                Some(end) if end <= data.len() as u64 => {
                    // SAFETY: the range is inside data; dst has n bytes.
                    unsafe { ptr::copy_nonoverlapping(data.as_ptr().add(offset as usize), dst.cast(), n as usize) };
                    sys::LLM_OK
                }
                _ => sys::LLM_ERR_IO,
            }
        }
        let io = sys::llm_io {
            version: sys::LLM_IO_VERSION,
            user: &data as *const &[u8] as *mut c_void,
            size: Some(size),
            read_at: Some(read_at),
            close: None,
        };
        check(unsafe { sys::llm_session_load_io(self.ptr.as_ptr(), &io) }).map(|_| ())
    }

    /// Runs tokens through the model, appending them to the context.
    pub fn prefill(&mut self, tokens: &[i32]) -> Result<()> {
        check(unsafe { sys::llm_session_prefill(self.ptr.as_ptr(), tokens.as_ptr(), tokens.len()) }).map(|_| ())
    }

    /// Logits of the last evaluated position (borrowed until the next call on the session).
    pub fn logits(&mut self) -> Result<&[f32]> {
        let mut p = ptr::null();
        let mut n = 0i32;
        check(unsafe { sys::llm_session_logits(self.ptr.as_ptr(), &mut p, &mut n) })?;
        // SAFETY: n floats, valid until the next call on s -- which needs &mut self again.
        Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
    }

    /// Samples a token from the current logits (does not append it).
    pub fn sample(&mut self) -> Result<i32> {
        let mut t = 0;
        check(unsafe { sys::llm_session_sample(self.ptr.as_ptr(), &mut t) })?;
        Ok(t)
    }

    /// Appends one token and runs it.
    pub fn accept(&mut self, token: i32) -> Result<()> {
        check(unsafe { sys::llm_session_accept(self.ptr.as_ptr(), token) }).map(|_| ())
    }

    /// Tokenizes `prompt` (with BOS into an empty context), prefills it, then generates up to
    /// `max_tokens`, calling `on_token(token, piece_bytes)` for each; return false to stop (with stop
    /// strings, text held back comes in a last call with token -1, whose answer is ignored). A panic
    /// in the closure stops generation and is resumed here after the C call has returned.
    pub fn generate<F: FnMut(i32, &[u8]) -> bool>(&mut self, prompt: &str, max_tokens: i32, on_token: F) -> Result<Finish> {
        let prompt = c_string(prompt)?;
        let mut cb = Callback { f: on_token, panic: None };
        // SAFETY: cb outlives the call; the trampoline matches F.
        let st = unsafe {
            sys::llm_session_generate(
                self.ptr.as_ptr(), prompt.as_ptr(), max_tokens, Some(token_trampoline::<F>),
                &mut cb as *mut Callback<F> as *mut c_void,
            )
        };
        let result = check(st);
        cb.resume();
        let finish = finish_of(result?);
        self.last = Some(finish);
        Ok(finish)
    }

    /// [`Session::generate`] collecting the text (invalid UTF-8 replaced).
    pub fn generate_text(&mut self, prompt: &str, max_tokens: i32) -> Result<String> {
        let mut bytes = Vec::new();
        self.generate(prompt, max_tokens, |_, piece| {
            bytes.extend_from_slice(piece);
            true
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// One step of the pull API: samples, accepts and returns `(token, piece)`, or `None` at an
    /// end-of-generation token (not accepted). Needs a prior prefill/accept.
    pub fn next_token(&mut self) -> Result<Option<(i32, Vec<u8>)>> {
        let mut tok = 0i32;
        let mut len = 0usize;
        // SAFETY: piece has piece.len() bytes.
        let st = unsafe {
            sys::llm_session_next(self.ptr.as_ptr(), &mut tok, self.piece.as_mut_ptr().cast(), self.piece.len(), &mut len)
        };
        if st == sys::LLM_ERR_BUFFER_TOO_SMALL {
            // The token was accepted; only its bytes did not fit. With stop strings they stay held.
            self.piece.resize(len.max(self.piece.len()), 0);
            let held = self.flush_held()?;
            if !held.is_empty() {
                return Ok(Some((tok, held)));
            }
            let mut buf = vec![0u8; len];
            let mut len2 = 0usize;
            check(unsafe {
                sys::llm_token_to_piece(self.model.as_ptr(), tok, buf.as_mut_ptr().cast(), buf.len(), &mut len2)
            })?;
            buf.truncate(len2);
            self.piece.resize(len.max(self.piece.len()), 0);
            return Ok(Some((tok, buf)));
        }
        let st = check(st)?;
        if st == sys::LLM_DONE || st == sys::LLM_STOPPED {
            self.tail.extend_from_slice(&self.piece[..len]);
            self.last = Some(finish_of(st));
            return Ok(None);
        }
        self.last = Some(Finish::Stopped);
        Ok(Some((tok, self.piece[..len].to_vec())))
    }

    /// How the last [`Session::generate`] ended, or whether the last [`Session::next_token`] ended
    /// generation (`EndOfGeneration`, `StopString`; `Stopped` for a token handed out). `None` before.
    pub fn last_finish(&self) -> Option<Finish> {
        self.last
    }

    /// The text held back for stop strings (`llm_session_flush_held`), after the text a
    /// [`Session::next_token`] received when generation ended: a pull loop's last piece.
    pub fn flush_held(&mut self) -> Result<Vec<u8>> {
        let mut out = std::mem::take(&mut self.tail);
        let mut len = 0usize;
        let st = unsafe { sys::llm_session_flush_held(self.ptr.as_ptr(), ptr::null_mut(), 0, &mut len) };
        if st == sys::LLM_ERR_BUFFER_TOO_SMALL {
            let mut buf = vec![0u8; len];
            // SAFETY: buf has len bytes.
            check(unsafe { sys::llm_session_flush_held(self.ptr.as_ptr(), buf.as_mut_ptr().cast(), len, &mut len) })?;
            out.extend_from_slice(&buf[..len]);
        } else {
            check(st)?;
        }
        Ok(out)
    }

    /// Constrains sampling to the GBNF grammar `gbnf` (llama.cpp's syntax) from rule `root` (`None`:
    /// "root"), from the next token on; end-of-generation only where the language may end. `None`
    /// removes it. A bad grammar is `LLM_ERR_INVALID_ARGUMENT` saying where (line, column).
    pub fn set_grammar(&mut self, gbnf: Option<&str>, root: Option<&str>) -> Result<()> {
        let g = gbnf.map(c_string).transpose()?;
        let r = root.map(c_string).transpose()?;
        let ptr_of = |c: &Option<CString>| c.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::llm_session_set_grammar(self.ptr.as_ptr(), ptr_of(&g), ptr_of(&r)) }).map(|_| ())
    }

    /// As [`Session::set_grammar`] with the grammar of a JSON schema (its JSON text): the output is
    /// JSON the schema accepts. An unsupported keyword is `LLM_ERR_UNSUPPORTED` naming it.
    pub fn set_json_schema(&mut self, schema: Option<&str>) -> Result<()> {
        let sc = schema.map(c_string).transpose()?;
        let p = sc.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        check(unsafe { sys::llm_session_set_json_schema(self.ptr.as_ptr(), p) }).map(|_| ())
    }

    /// Generation ends at the first occurrence of any of `stops` ([`Finish::StopString`]); the stop
    /// text is neither handed out nor left in the context. An empty slice turns them off.
    pub fn set_stop<S: AsRef<str>>(&mut self, stops: &[S]) -> Result<()> {
        let owned = stops.iter().map(|s| c_string(s.as_ref())).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const std::ffi::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let p = if ptrs.is_empty() { ptr::null() } else { ptrs.as_ptr() };
        self.tail.clear();
        check(unsafe { sys::llm_session_set_stop(self.ptr.as_ptr(), p, ptrs.len()) }).map(|_| ())
    }

    /// Adds `bias` to the logits of `token` for every later sample (`f32::NEG_INFINITY` bans it);
    /// replaces the previous map, an empty slice removes it.
    pub fn set_logit_bias(&mut self, bias: &[(i32, f32)]) -> Result<()> {
        let tokens: Vec<i32> = bias.iter().map(|b| b.0).collect();
        let values: Vec<f32> = bias.iter().map(|b| b.1).collect();
        check(unsafe {
            sys::llm_session_set_logit_bias(self.ptr.as_ptr(), tokens.as_ptr(), values.as_ptr(), tokens.len())
        })
        .map(|_| ())
    }

    /// From the next sampled token on, computes its log-probability and the `n_top` most likely
    /// alternatives (pull them with [`Session::logprobs`]); `None` turns them off.
    pub fn set_logprobs(&mut self, n_top: Option<i32>) -> Result<()> {
        let Some(n_top) = n_top else {
            return check(unsafe { sys::llm_session_set_logprobs(self.ptr.as_ptr(), ptr::null()) }).map(|_| ());
        };
        let mut raw = std::mem::MaybeUninit::<sys::llm_logprobs_params>::zeroed();
        // SAFETY: a zeroed struct filled by the library for the version we pass.
        let mut raw = unsafe {
            check(sys::llm_logprobs_params_init(raw.as_mut_ptr(), sys::LLM_LOGPROBS_PARAMS_VERSION))?;
            raw.assume_init()
        };
        raw.n_top = n_top;
        check(unsafe { sys::llm_session_set_logprobs(self.ptr.as_ptr(), &raw) }).map(|_| ())
    }

    /// The last sampled token, its log-probability and its top alternatives (most likely first).
    pub fn logprobs(&self) -> Result<(i32, f32, Vec<sys::llm_token_logprob>)> {
        let (mut tok, mut lp, mut top, mut n) = (0i32, 0f32, ptr::null(), 0i32);
        check(unsafe { sys::llm_session_logprobs(self.ptr.as_ptr(), &mut tok, &mut lp, &mut top, &mut n) })?;
        // SAFETY: n entries, valid until the next call on the session; copied here.
        let alts = if n <= 0 || top.is_null() { Vec::new() } else { unsafe { std::slice::from_raw_parts(top, n as usize) }.to_vec() };
        Ok((tok, lp, alts))
    }

    /// Counters since creation/reset (`total`) and of the last call (`last_call`). Against a
    /// library older than 0.4, which refuses `llm_stats` version 2, version 1 is used: `version` is 1
    /// and `passes`, `drafted_tokens`, `accepted_tokens` stay 0.
    pub fn stats(&self) -> Result<(Stats, Stats)> {
        let mut total = Stats::default();
        let mut last = Stats::default();
        let mut version = sys::LLM_STATS_VERSION;
        if unsafe { sys::llm_stats_init(&mut total, version) } == sys::LLM_ERR_INVALID_ARGUMENT {
            version = 1; // its llm_stats ends before `passes`
        }
        check(unsafe { sys::llm_stats_init(&mut total, version) })?;
        check(unsafe { sys::llm_stats_init(&mut last, version) })?;
        check(unsafe { sys::llm_session_stats(self.ptr.as_ptr(), &mut total, &mut last) })?;
        Ok((total, last))
    }

    /// The session's counters as JSON text.
    pub fn stats_json(&mut self) -> String {
        // SAFETY: owned by s until the next call on s; copied at once.
        unsafe { CStr::from_ptr(sys::llm_session_stats_json(self.ptr.as_ptr())) }.to_string_lossy().into_owned()
    }
}

/// Embedding poolings of [`Session::embed`] (llama.cpp's values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// Every token's row.
    None,
    Mean,
    /// The first token's row.
    Cls,
    Last,
    /// A classifier head's scores (files with `cls.*` tensors).
    Rank,
}

impl Pooling {
    fn raw(p: Option<Pooling>) -> i32 {
        match p {
            Option::None => sys::LLM_POOLING_UNSPECIFIED,
            Some(Pooling::None) => sys::LLM_POOLING_NONE,
            Some(Pooling::Mean) => sys::LLM_POOLING_MEAN,
            Some(Pooling::Cls) => sys::LLM_POOLING_CLS,
            Some(Pooling::Last) => sys::LLM_POOLING_LAST,
            Some(Pooling::Rank) => sys::LLM_POOLING_RANK,
        }
    }
}

impl Session<'_> {
    /// Per text its pooled final-norm hidden state (`llm_session_embed`): one vector of the model's
    /// width, or with [`Pooling::None`] every token's row one after another (len = n_tokens * dim).
    /// `pooling` `None`: the file's `pooling_type`, else none. `normalize`: L2 per row. All texts
    /// share the evaluation passes; the session's context is left as it was.
    pub fn embed<S: AsRef<str>>(&mut self, texts: &[S], pooling: Option<Pooling>, normalize: bool)
        -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Err(Error::new(sys::LLM_ERR_INVALID_ARGUMENT, "embed: no texts"));
        }
        let owned = texts
            .iter()
            .map(|t| CString::new(t.as_ref()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::new(sys::LLM_ERR_INVALID_ARGUMENT, "embed: a text contains a NUL byte"))?;
        let ptrs: Vec<*const std::ffi::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut p = std::mem::MaybeUninit::<sys::llm_embed_params>::zeroed();
        // SAFETY: init fills the struct of the version it is given.
        let mut p = unsafe {
            check(sys::llm_embed_params_init(p.as_mut_ptr(), sys::LLM_EMBED_PARAMS_VERSION))?;
            p.assume_init()
        };
        p.pooling = Pooling::raw(pooling);
        p.normalize = normalize;
        let mut rows = vec![0i32; ptrs.len()];
        let (mut n, mut dim) = (0usize, 0i32);
        // SAFETY: ptrs.len() NUL-terminated strings alive for the call, rows has one entry each.
        let st = unsafe {
            sys::llm_session_embed(self.as_ptr(), ptrs.as_ptr(), ptrs.len(), &p, ptr::null_mut(), 0, &mut n, &mut dim,
                rows.as_mut_ptr())
        };
        if st != sys::LLM_ERR_BUFFER_TOO_SMALL {
            check(st)?;
        }
        let mut out = vec![0f32; n];
        // SAFETY: as above, with out holding n floats.
        check(unsafe {
            sys::llm_session_embed(self.as_ptr(), ptrs.as_ptr(), ptrs.len(), &p, out.as_mut_ptr(), out.len(), &mut n,
                &mut dim, rows.as_mut_ptr())
        })?;
        let mut at = 0usize;
        Ok(rows
            .iter()
            .map(|&r| {
                let len = r as usize * dim as usize;
                let v = out[at..at + len].to_vec();
                at += len;
                v
            })
            .collect())
    }
}

/// Settings of [`Session::set_speculation`] (`llm_speculation_params`). `Default` is
/// `llm_speculation_params_init`: no draft, `n_draft` 8, `lookup_ngram` 0 (off), `draft_p_min` 0.
#[derive(Clone, Copy)]
pub struct SpeculationParams<'d> {
    /// A model with the session model's vocabulary that proposes tokens; borrowed for the call only.
    pub draft: Option<&'d Model>,
    /// Most tokens proposed per pass, 1..=64.
    pub n_draft: i32,
    /// Prompt lookup n-gram size; 0: off.
    pub lookup_ngram: i32,
    /// The draft stops proposing below this probability of its own next token; 0: always `n_draft`.
    pub draft_p_min: f32,
}

impl Default for SpeculationParams<'_> {
    fn default() -> Self {
        let mut p = std::mem::MaybeUninit::<sys::llm_speculation_params>::zeroed();
        // SAFETY: as ModelParams::default (a library without 0.4 cannot be linked against).
        let p = unsafe {
            sys::llm_speculation_params_init(p.as_mut_ptr(), sys::LLM_SPECULATION_PARAMS_VERSION);
            p.assume_init()
        };
        SpeculationParams { draft: None, n_draft: p.n_draft, lookup_ngram: p.lookup_ngram, draft_p_min: p.draft_p_min }
    }
}

/// Advances every session (all on one model) by one token in one evaluation pass
/// (`llm_session_next_batch`), each sampling as [`Session::next_token`] would (pieces: use
/// [`Model::token_to_piece`]). `&mut` borrows make the sessions distinct and idle. Returns
/// `(token, status)` per session in order: `LLM_OK` (accepted), `LLM_DONE` (end of generation, not
/// accepted) or an `LLM_ERR_*` for that session alone (e.g. `LLM_ERR_CONTEXT_FULL`). `Err` only when
/// the whole call failed and no session changed (an empty slice, sessions on different models,
/// cancellation). Speculation settings are not used.
pub fn next_batch(sessions: &mut [&mut Session<'_>]) -> Result<Vec<(i32, i32)>> {
    let handles: Vec<*mut sys::llm_session> = sessions.iter().map(|s| s.ptr.as_ptr()).collect();
    let n = i32::try_from(handles.len())
        .map_err(|_| Error::new(sys::LLM_ERR_INVALID_ARGUMENT, "next_batch: too many sessions"))?;
    let mut tokens = vec![0i32; handles.len().max(1)];
    let mut statuses = vec![0i32; handles.len().max(1)];
    // SAFETY: n handles of live sessions, exclusively borrowed; n entries in each output.
    check(unsafe { sys::llm_session_next_batch(handles.as_ptr(), n, tokens.as_mut_ptr(), statuses.as_mut_ptr()) })?;
    Ok(tokens.into_iter().zip(statuses).take(handles.len()).collect())
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // No canceller may reach the handle once it is freed.
        *self.slot.0.lock().unwrap_or_else(|e| e.into_inner()) = ptr::null_mut();
        // SAFETY: a valid session, no longer reachable from anywhere.
        unsafe { sys::llm_session_free(self.ptr.as_ptr()) }
    }
}
