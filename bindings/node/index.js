'use strict';
// Node.js binding for libllm on koffi (a dynamic FFI: no native addon to compile).
//
// Threading model (llm.h: a session is used by one thread at a time; llm_session_cancel may come
// from any thread; llm_last_error is thread-local):
//  - Model loads by path, prefill and every generation step run on libuv worker threads through
//    koffi's `fn.async`, so the JS thread stays responsive. Generation uses the pull API
//    (llm_session_next, one token per async call): no C-to-JS token callback, and the async
//    iterator yields between steps.
//  - Calls on one session are serialized here (a promise-chain lock), because consecutive async
//    calls may land on different worker threads.
//  - AbortSignal: an abort while a step runs on a worker calls llm_session_cancel (thread-safe) from
//    the JS thread; an abort between steps just ends the loop. See generate() for the one race.
//  - llm_last_error() is thread-local and koffi's workers are anonymous, so an async call cannot
//    read it. A failed session step carries llm_session_last_error() where the library has it (newer
//    libllm), else llm_status_string(); loadModel() retries a failed load once synchronously (no
//    weights are read before the usual failures: open, header, architecture) for the real message.
//    nextBatch() runs on a worker_threads thread of its own instead, which reads llm_last_error()
//    right after a failed call and hands it back with the status.
//  - JS llm_io sources (loadModelIo): read_at must run JS, and JS runs only on the JS thread.
//    The io is marked LLM_IO_THREAD_BOUND (llm_io version 2, libllm >= 0.2), so libllm starts no
//    I/O thread and reads only on the thread of the call that needs the bytes; with an older
//    libllm, prefetch_depth = 0 gives the same. The model is loaded synchronously on the JS thread.
//    During async generation the calling thread is a koffi worker: koffi queues the read_at call
//    to the JS thread and the worker waits for it, which is safe because the JS thread is then in
//    its event loop, never in a synchronous libllm call waiting for that worker.

const koffi = require('koffi');
const fs = require('fs');
const path = require('path');
const { Worker } = require('worker_threads');

// ---- constants (llm.h) ---------------------------------------------------------------------------

const OK = 0;
const DONE = 1;
const STOPPED = 2; // libllm >= 0.4: generation ended at a stop string (Session.setStop)
const ERR_INVALID_ARGUMENT = -1;
const ERR_IO = -2;
const ERR_FORMAT = -3;
const ERR_UNSUPPORTED = -4;
const ERR_OUT_OF_MEMORY = -5;
const ERR_CONTEXT_FULL = -6;
const ERR_BUFFER_TOO_SMALL = -7;
const ERR_CANCELLED = -8;
const ERR_INTERNAL = -9;
const ERR_NOT_FOUND = -10; // libllm >= 0.3

// KV cache element types (session options kvTypeK / kvTypeV; also 'f32', 'f16', 'q8_0').
const KV_F32 = 0;
const KV_F16 = 1;
const KV_Q8_0 = 2;
const KV_TYPES = { f32: KV_F32, f16: KV_F16, q8_0: KV_Q8_0 };

const RESIDENCY_RESIDENT = 0;
const RESIDENCY_STREAMED = 1;
const RESIDENCY_BUDGET = 2;
const PAGE_CACHE_KEEP = 0;
const PAGE_CACHE_DROP = 1;
const PAGE_CACHE_DIRECT = 2;
const PAGE_CACHE_MAP = 3; // streamed weights mapped from the file, not copied (files only)

const IO_VERSION = 2;
const WRITER_VERSION = 1;
const MEMORY_PLAN_VERSION = 1;
const STATS_VERSION = 2; // 2 (libllm 0.4): passes, drafted_tokens, accepted_tokens; see statsVersion()
const SPECULATION_PARAMS_VERSION = 1;

// ---- types (layouts must match llm.h; tests/abi_layout_test.c holds the LP64 table) ----------------

const ProgressCb = koffi.proto('bool llm_progress_cb(float fraction, void *user)');
const IoSizeCb = koffi.proto('uint64_t llm_io_size_cb(void *user)');
const IoReadCb = koffi.proto('int32_t llm_io_read_cb(void *user, uint64_t offset, void *dst, uint64_t n)');
const IoCloseCb = koffi.proto('void llm_io_close_cb(void *user)');

const ModelParams = koffi.struct('llm_model_params', {
    version: 'uint32_t',
    n_threads: 'int32_t',
    progress: 'void *', // llm_progress_cb; a registered callback's pointer, or null
    progress_user: 'void *',
    vocab_only: 'bool',
    residency: 'int32_t',
    ram_budget_bytes: 'uint64_t',
    prefetch_depth: 'int32_t',
    page_cache: 'int32_t',
});

const SessionParams = koffi.struct('llm_session_params', {
    version: 'uint32_t',
    n_ctx: 'int32_t',
    n_threads: 'int32_t',
    temperature: 'float',
    top_k: 'int32_t',
    top_p: 'float',
    min_p: 'float',
    repeat_penalty: 'float',
    repeat_last_n: 'int32_t',
    seed: 'uint64_t',
    logits_all: 'bool',
    // version 2 (libllm 0.3)
    parse_special: 'bool',
    kv_type_k: 'int32_t',
    kv_type_v: 'int32_t',
    context_shift: 'bool',
    n_keep: 'int32_t',
    // version 3 (libllm 0.4)
    presence_penalty: 'float',
    frequency_penalty: 'float',
});

const TokenLogprob = koffi.struct('llm_token_logprob', { token: 'int32_t', logprob: 'float' });
koffi.struct('llm_logprobs_params', {
    version: 'uint32_t',
    n_top: 'int32_t',
    on_token: 'void *', // a callback would run on a koffi worker during generation: the pull side only
    user: 'void *',
});
const LOGPROBS_PARAMS_VERSION = 1;

koffi.struct('llm_chat_message', {
    role: 'const char *',
    content: 'const char *',
});

const WriteCb = koffi.proto('int32_t llm_writer_write_cb(void *user, const void *src, uint64_t n)');
koffi.struct('llm_writer', {
    version: 'uint32_t',
    user: 'void *',
    write: 'void *',
});

const Io = koffi.struct('llm_io', {
    version: 'uint32_t',
    user: 'void *',
    size: 'void *',
    read_at: 'void *',
    close: 'void *',
    flags: 'uint32_t', // version 2
});
const IO_THREAD_BOUND = 1;

const MemoryPlan = koffi.struct('llm_memory_plan', {
    version: 'uint32_t',
    n_layer: 'uint32_t',
    n_resident_layers: 'uint32_t',
    n_stream_slots: 'uint32_t',
    resident_block_bytes: 'uint64_t',
    stream_slot_bytes: 'uint64_t',
    lm_head_bytes: 'uint64_t',
    embedding_bytes: 'uint64_t',
    kv_cache_bytes: 'uint64_t',
    scratch_bytes: 'uint64_t',
    total_bytes: 'uint64_t',
    minimum_weight_bytes: 'uint64_t',
});

const Stats = koffi.struct('llm_stats', {
    version: 'uint32_t',
    prompt_tokens: 'uint64_t',
    generated_tokens: 'uint64_t',
    prefill_seconds: 'double',
    decode_seconds: 'double',
    bytes_read: 'uint64_t',
    read_calls: 'uint64_t',
    io_wait_seconds: 'double',
    // version 2 (libllm 0.4)
    passes: 'uint64_t',
    drafted_tokens: 'uint64_t',
    accepted_tokens: 'uint64_t',
});
const STATS_V2_FIELDS = ['passes', 'drafted_tokens', 'accepted_tokens'];

const SpeculationParams = koffi.struct('llm_speculation_params', {
    version: 'uint32_t',
    draft: 'void *', // llm_model *
    n_draft: 'int32_t',
    lookup_ngram: 'int32_t',
    draft_p_min: 'float',
});

const EMBED_PARAMS_VERSION = 1;
koffi.struct('llm_embed_params', {
    version: 'uint32_t',
    pooling: 'int32_t',
    normalize: 'bool',
    add_bos: 'bool',
    parse_special: 'bool',
});
// Embedding poolings (libllm 0.4; llama.cpp's values); embed() also takes their names.
const POOLING_UNSPECIFIED = -1;
const POOLING_NONE = 0;
const POOLING_MEAN = 1;
const POOLING_CLS = 2;
const POOLING_LAST = 3;
const POOLING_RANK = 4;
const POOLINGS = { unspecified: -1, none: 0, mean: 1, cls: 2, last: 3, rank: 4 };

const ModelHandle = koffi.pointer('llm_model_ptr', koffi.opaque('llm_model'));
const SessionHandle = koffi.pointer('llm_session_ptr', koffi.opaque('llm_session'));

// ---- the library ---------------------------------------------------------------------------------

// Where the library is looked for, in order: LLM_LIBRARY (a file), LLM_LIB_DIR (a directory), the
// copy packed into this package (prebuilds/<platform>-<arch>/, written by `npm pack`, or by the
// install script's CMake build from a checkout), then the system's search path (an installed libllm0
// package, ldconfig).
const LIB_NAMES = { linux: ['libllm.so.0', 'libllm.so'], darwin: ['libllm.0.dylib', 'libllm.dylib'], win32: ['llm.dll'] };

function libraryCandidates() {
    if (process.env.LLM_LIBRARY) return [path.resolve(process.env.LLM_LIBRARY)];
    const names = LIB_NAMES[process.platform] || LIB_NAMES.linux;
    const out = [];
    for (const dir of [process.env.LLM_LIB_DIR, path.join(__dirname, 'prebuilds', `${process.platform}-${process.arch}`)]) {
        if (!dir) continue;
        for (const name of names) {
            if (fs.existsSync(path.join(dir, name))) out.push(path.join(dir, name));
        }
    }
    out.push(names[0]); // the dynamic loader's own search
    return out;
}

let loadedPath = null; // the candidate that loaded: the nextBatch workers load the same file

function loadLibrary() {
    const tried = [];
    for (const candidate of libraryCandidates()) {
        try {
            const L = koffi.load(candidate);
            loadedPath = candidate;
            return L;
        } catch (e) {
            tried.push(`${candidate} (${e.message})`);
        }
    }
    throw new Error(`libllm not found; tried LLM_LIBRARY=${process.env.LLM_LIBRARY || '(unset)'}, ` +
        `LLM_LIB_DIR=${process.env.LLM_LIB_DIR || '(unset)'}, then: ${tried.join('; ')}. Install the libllm0 ` +
        'package, or set LLM_LIBRARY to the path of libllm.so.0');
}

let C = null;

function lib() {
    if (C) return C;
    const L = loadLibrary();
    const f = (decl) => L.func(decl);
    const optional = (decl) => { // functions of newer libllm versions
        try {
            return L.func(decl);
        } catch (e) {
            return null;
        }
    };
    C = {
        version_string: f('const char *llm_version_string(void)'),
        status_string: f('const char *llm_status_string(int32_t status)'),
        last_error: f('const char *llm_last_error(void)'),
        set_log_level: f('void llm_set_log_level(int32_t level)'),
        // Declared in the two-argument form of libllm >= 0.2; see initParams().
        model_params_init: f('int32_t llm_model_params_init(_Out_ llm_model_params *p, uint32_t version)'),
        model_load: f('int32_t llm_model_load(const char *path, const llm_model_params *p, _Out_ llm_model_ptr *out)'),
        model_load_io: f('int32_t llm_model_load_io(const llm_io *io, const llm_model_params *p, _Out_ llm_model_ptr *out)'),
        model_free: f('void llm_model_free(llm_model_ptr m)'),
        model_info_json: f('const char *llm_model_info_json(llm_model_ptr m)'),
        model_set_ram_budget: f('int32_t llm_model_set_ram_budget(llm_model_ptr m, uint64_t bytes)'),
        model_memory_plan: f('int32_t llm_model_memory_plan(llm_model_ptr m, int32_t n_ctx, _Inout_ llm_memory_plan *out)'),
        model_n_vocab: f('int32_t llm_model_n_vocab(llm_model_ptr m)'),
        model_token_bos: f('int32_t llm_model_token_bos(llm_model_ptr m)'),
        model_token_eos: f('int32_t llm_model_token_eos(llm_model_ptr m)'),
        model_token_is_eog: f('bool llm_model_token_is_eog(llm_model_ptr m, int32_t token)'),
        tokenize: f('int32_t llm_tokenize(llm_model_ptr m, const uint8_t *text, size_t len, bool add_bos, ' +
                    'bool parse_special, _Out_ int32_t *tokens, int32_t cap, _Out_ int32_t *n_out)'),
        token_to_piece: f('int32_t llm_token_to_piece(llm_model_ptr m, int32_t token, _Out_ uint8_t *buf, size_t cap, ' +
                          '_Out_ size_t *len_out)'),
        session_params_init: f('int32_t llm_session_params_init(_Out_ llm_session_params *p, uint32_t version)'),
        session_create: f('int32_t llm_session_create(llm_model_ptr m, const llm_session_params *p, _Out_ llm_session_ptr *out)'),
        session_free: f('void llm_session_free(llm_session_ptr s)'),
        session_reset: f('int32_t llm_session_reset(llm_session_ptr s)'),
        session_n_past: f('int32_t llm_session_n_past(llm_session_ptr s)'),
        // Pointer arguments of async calls are koffi.alloc'd (stable) memory, never JS buffers.
        session_prefill: f('int32_t llm_session_prefill(llm_session_ptr s, const void *tokens, size_t n)'),
        session_next: f('int32_t llm_session_next(llm_session_ptr s, void *token, void *piece, size_t cap, void *len)'),
        session_cancel: f('void llm_session_cancel(llm_session_ptr s)'),
        session_stats: f('int32_t llm_session_stats(llm_session_ptr s, _Inout_ llm_stats *total, _Inout_ llm_stats *last_call)'),
        session_stats_json: f('const char *llm_session_stats_json(llm_session_ptr s)'),
        // The failed call's message kept by the session, readable from any thread (newer libllm).
        session_last_error: optional('const char *llm_session_last_error(llm_session_ptr s)'),
        // libllm 0.3
        model_meta_string: optional('int32_t llm_model_meta_string(llm_model_ptr m, const char *key, ' +
                                    '_Out_ uint8_t *buf, size_t cap, _Out_ size_t *len)'),
        model_chat_template: optional('int32_t llm_model_chat_template(llm_model_ptr m, const char *name, ' +
                                      '_Out_ uint8_t *buf, size_t cap, _Out_ size_t *len)'),
        chat_apply_template: optional('int32_t llm_chat_apply_template(llm_model_ptr m, const char *tmpl, ' +
                                      'const llm_chat_message *msgs, size_t n_msgs, bool add_assistant, ' +
                                      '_Out_ uint8_t *buf, size_t cap, _Out_ size_t *len)'),
        chat_apply_template_json: optional('int32_t llm_chat_apply_template_json(llm_model_ptr m, const char *tmpl, ' +
                                           'const char *request_json, _Out_ uint8_t *buf, size_t cap, _Out_ size_t *len)'),
        chat_parse: optional('int32_t llm_chat_parse(llm_model_ptr m, const char *tmpl, const char *raw, ' +
                             'const char *params_json, _Out_ uint8_t *buf, size_t cap, _Out_ size_t *len)'),
        session_truncate: optional('int32_t llm_session_truncate(llm_session_ptr s, int32_t n_past)'),
        session_tokens: optional('int32_t llm_session_tokens(llm_session_ptr s, _Out_ int32_t *tokens, int32_t cap, ' +
                                 '_Out_ int32_t *n_out)'),
        session_save: optional('int32_t llm_session_save(llm_session_ptr s, const char *path)'),
        session_load: optional('int32_t llm_session_load(llm_session_ptr s, const char *path)'),
        session_save_io: optional('int32_t llm_session_save_io(llm_session_ptr s, const llm_writer *w)'),
        session_load_io: optional('int32_t llm_session_load_io(llm_session_ptr s, const llm_io *io)'),
        stats_init: optional('int32_t llm_stats_init(_Inout_ llm_stats *p, uint32_t version)'),
        // libllm 0.4
        speculation_params_init: optional('int32_t llm_speculation_params_init(_Out_ llm_speculation_params *p, ' +
                                          'uint32_t version)'),
        session_set_speculation: optional('int32_t llm_session_set_speculation(llm_session_ptr s, ' +
                                          'const llm_speculation_params *p)'),
        // Pointer arguments are koffi.alloc'd (stable) memory: the call runs on a worker.
        session_next_batch: optional('int32_t llm_session_next_batch(void *sessions, int32_t n, void *tokens, ' +
                                     'void *statuses)'),
        model_pooling_type: optional('int32_t llm_model_pooling_type(llm_model_ptr m)'),
        embed_params_init: optional('int32_t llm_embed_params_init(_Out_ llm_embed_params *p, uint32_t version)'),
        session_set_grammar: optional('int32_t llm_session_set_grammar(llm_session_ptr s, const char *gbnf, const char *root)'),
        session_set_json_schema: optional('int32_t llm_session_set_json_schema(llm_session_ptr s, const char *schema)'),
        session_set_stop: optional('int32_t llm_session_set_stop(llm_session_ptr s, const char **stops, size_t n)'),
        session_set_logit_bias: optional('int32_t llm_session_set_logit_bias(llm_session_ptr s, const int32_t *tokens, ' +
                                         'const float *bias, size_t n)'),
        logprobs_params_init: optional('int32_t llm_logprobs_params_init(_Out_ llm_logprobs_params *p, uint32_t version)'),
        session_set_logprobs: optional('int32_t llm_session_set_logprobs(llm_session_ptr s, const llm_logprobs_params *p)'),
        session_logprobs: optional('int32_t llm_session_logprobs(llm_session_ptr s, _Out_ int32_t *token, ' +
                                   '_Out_ float *logprob, _Out_ void **top, _Out_ int32_t *n_top)'),
        session_flush_held: optional('int32_t llm_session_flush_held(llm_session_ptr s, _Out_ uint8_t *buf, size_t cap, ' +
                                     '_Out_ size_t *len)'),
        session_embed: optional('int32_t llm_session_embed(llm_session_ptr s, const char **texts, size_t n_texts, ' +
                                'const llm_embed_params *p, _Out_ float *out, size_t cap, _Out_ size_t *n_out, ' +
                                '_Out_ int32_t *n_dim, _Out_ int32_t *n_rows)'),
    };
    return C;
}

// The only place that fills params structs with their defaults. libllm 0.1 has
// `void llm_*_params_init(p)`; 0.2 has `int32_t llm_*_params_init(p, uint32_t version)` (and, on
// ELF, keeps the 0.1 symbol under a symbol version; dlsym finds the default, newest one). Both are
// called with the two-argument signature: a 0.1 library ignores the extra argument and returns
// nothing, so its "status" is only checked from 0.2 on. The struct layouts above are those of
// MODEL_PARAMS_VERSION 3 and SESSION_PARAMS_VERSION 3; a libllm 0.3 refuses version 3 and gets 2,
// one older than 0.3 refuses version 2, so it gets version 1 (whose fields it reads, and no further).
const MODEL_PARAMS_VERSION = 3;
let initReturnsStatus = null;
let sessionParamsVersion = null;

function libVersionAtLeast02() {
    if (initReturnsStatus === null) {
        const [major, minor] = lib().version_string().split('.').map(Number);
        initReturnsStatus = major > 0 || minor >= 2;
        sessionParamsVersion = major > 0 || minor >= 4 ? 3 : minor >= 3 ? 2 : 1;
    }
    return initReturnsStatus;
}

function initParams(kind) {
    libVersionAtLeast02();
    const p = {};
    const st = kind === 'model' ? lib().model_params_init(p, MODEL_PARAMS_VERSION)
                                : lib().session_params_init(p, sessionParamsVersion);
    if (initReturnsStatus) check(st);
    return p;
}

// A function of a newer libllm, or an LlmError naming it.
function need(name, since = '0.3') {
    const fn = lib()[name];
    if (!fn) throw new LlmError(ERR_UNSUPPORTED, `this libllm (${version()}) has no llm_${name} (libllm ${since})`);
    return fn;
}

// The llm_stats version to ask for: STATS_VERSION, or 1 with a library older than 0.4 (whose
// llm_stats_init refuses version 2; its llm_stats ends before `passes`).
let statsVersionCache = 0;
function statsVersion() {
    if (!statsVersionCache) {
        const init = lib().stats_init;
        statsVersionCache = init && init({ version: 0 }, STATS_VERSION) === OK ? STATS_VERSION : 1;
    }
    return statsVersionCache;
}

// llm.h's string-out protocol: cap 0 asks for the length, a buffer of length + 1 gets the string.
// call(buf, cap, lenOut) makes the C call; a missing key or template (ERR_NOT_FOUND) gives null.
function stringOut(call) {
    const n = [0];
    let st = call(null, 0, n);
    for (;;) {
        if (st === ERR_NOT_FOUND) return null;
        if (st !== ERR_BUFFER_TOO_SMALL) check(st);
        const buf = Buffer.alloc(Number(n[0]) + 1);
        st = call(buf, buf.length, n);
        if (st === ERR_BUFFER_TOO_SMALL) continue;
        if (st === ERR_NOT_FOUND) return null;
        check(st);
        return buf.toString('utf8', 0, Number(n[0]));
    }
}

// [role, content] pairs or { role, content } objects, as llm_chat_message structs.
function chatMessages(messages) {
    if (!Array.isArray(messages)) throw new TypeError('messages: expected an array');
    return messages.map((m) => {
        const [role, content] = Array.isArray(m) ? m : [m.role, m.content];
        if (typeof role !== 'string' || typeof content !== 'string') {
            throw new TypeError('a message is [role, content] or { role, content } with strings');
        }
        return { role, content };
    });
}

function renderChat(handle, template, messages, addAssistant) {
    const fn = need('chat_apply_template');
    const msgs = chatMessages(messages);
    // koffi copies the array (and its strings) for the call; an empty one still needs a valid pointer.
    const arr = msgs.length ? msgs : [{ role: '', content: '' }];
    const out = stringOut((buf, cap, n) => fn(handle, template, arr, msgs.length, addAssistant, buf, cap, n));
    if (out === null) {
        throw new LlmError(ERR_NOT_FOUND, template === null ? 'the model has no chat template' : lib().last_error());
    }
    return out;
}

/**
 * Renders messages with the Jinja chat template `template` as Hugging Face's
 * apply_chat_template(tokenize=False) does, without a model (bos_token and eos_token are '').
 */
function applyChatTemplate(template, messages, { addAssistant = true } = {}) {
    if (typeof template !== 'string') throw new TypeError('applyChatTemplate: template must be a string');
    return renderChat(null, template, messages, addAssistant);
}

/**
 * Renders a request in Hugging Face's apply_chat_template form (llm_chat_apply_template_json):
 * { messages, tools, documents, add_generation_prompt, ...other template variables } (an object or
 * its JSON text), messages passed as given (assistant tool_calls, role 'tool' with tool_call_id and
 * name). opts.model gives the BOS/EOS texts and, without opts.template, its own template.
 */
function applyChatTemplateJson(request, { template = null, model = null } = {}) {
    if (template === null && model === null) throw new TypeError('applyChatTemplateJson: give a template or a model');
    const fn = need('chat_apply_template_json');
    const req = typeof request === 'string' ? request : JSON.stringify(request);
    const handle = model === null ? null : model.handle;
    const out = stringOut((buf, cap, n) => fn(handle, template, req, buf, cap, n));
    if (out === null) throw new LlmError(ERR_NOT_FOUND, 'the model has no chat template');
    return out;
}

/**
 * Parses a model's raw output (llm_chat_parse) into { content, reasoning_content,
 * tool_calls: [{ name, arguments (JSON text), id }], format, parsed }, the tool-call format read off
 * the template (parsed false when unknown: the text is then the content). opts.params: the
 * request's tools, messages, reasoning_format, enable_thinking, continue_final_message, is_partial.
 */
function chatParse(raw, { template = null, model = null, params = null } = {}) {
    if (template === null && model === null) throw new TypeError('chatParse: give a template or a model');
    const fn = need('chat_parse');
    const p = params === null ? null : typeof params === 'string' ? params : JSON.stringify(params);
    const handle = model === null ? null : model.handle;
    const out = stringOut((buf, cap, n) => fn(handle, template, String(raw), p, buf, cap, n));
    if (out === null) throw new LlmError(ERR_NOT_FOUND, 'the model has no chat template');
    return JSON.parse(out);
}

function version() {
    return lib().version_string();
}

const LOG_DEBUG = 0;
const LOG_INFO = 1;
const LOG_WARN = 2;
const LOG_ERROR = 3;
const LOG_OFF = 4;

/** Library log lines below level are dropped (default LOG_WARN; they go to stderr). */
function setLogLevel(level) {
    lib().set_log_level(level);
}

// ---- errors ----------------------------------------------------------------------------------------

class LlmError extends Error {
    constructor(status, message) {
        super(`${lib().status_string(status)} (${status}): ${message}`);
        this.name = 'LlmError';
        this.status = status;
        this.detail = message;
    }
}

// For synchronous calls only: llm_last_error is read on the thread that made the call.
function check(status) {
    if (status < 0) throw new LlmError(status, lib().last_error());
    return status;
}

function asyncError(status, message) {
    return new LlmError(status, message || lib().status_string(status));
}

function callAsync(fn, ...args) {
    return new Promise((resolve, reject) => {
        fn.async(...args, (err, res) => (err ? reject(err) : resolve(res)));
    });
}

// An async call on session h: rejects with its LlmError (the session's own message where the
// library keeps one: llm_session_last_error, read as the call completes, before any other call on
// h), resolves with a non-negative status.
function callSession(h, fn, ...args) {
    return new Promise((resolve, reject) => {
        fn.async(h, ...args, (err, st) => {
            if (err) reject(err);
            else if (st < 0 && st !== ERR_BUFFER_TOO_SMALL) {
                const last = lib().session_last_error;
                reject(asyncError(st, last ? last(h) : null));
            } else resolve(st);
        });
    });
}

// ---- model -----------------------------------------------------------------------------------------

function modelParams(opts, progressPtr) {
    const p = initParams('model');
    if (opts.nThreads !== undefined) p.n_threads = opts.nThreads;
    if (opts.vocabOnly !== undefined) p.vocab_only = !!opts.vocabOnly;
    if (opts.residency !== undefined) p.residency = opts.residency;
    if (opts.ramBudgetBytes !== undefined) p.ram_budget_bytes = opts.ramBudgetBytes;
    if (opts.prefetchDepth !== undefined) p.prefetch_depth = opts.prefetchDepth;
    if (opts.pageCache !== undefined) p.page_cache = opts.pageCache;
    p.progress = progressPtr || null;
    p.progress_user = null;
    return p;
}

// A registered (not transient) progress callback: an async load calls it from a worker thread,
// which koffi forwards to the JS thread. An exception in it cancels the load and is rethrown.
function registerProgress(progress, state) {
    if (!progress) return null;
    return koffi.register((fraction) => {
        try {
            return progress(fraction) !== false;
        } catch (e) {
            state.error = e;
            return false;
        }
    }, koffi.pointer(ProgressCb));
}

const numberFields = (obj) => {
    const out = {};
    for (const [k, v] of Object.entries(obj)) if (k !== 'version') out[k] = Number(v);
    return out;
};

// Handles whose JS object was collected without free(). A collected model has no reachable
// session (each holds its model), and libllm keeps a model alive for its sessions, so the two are
// released independently.
const modelRegistry = new FinalizationRegistry((h) => lib().model_free(h));
const sessionRegistry = new FinalizationRegistry((held) => {
    lib().session_free(held.h);
    for (const mem of held.mem) koffi.free(mem);
});

class Model {
    constructor(handle, io) {
        this._h = handle;
        this._freed = false;
        this._sessions = 0; // live sessions: they tokenize through the handle, so it outlives free()
        this._io = io || null; // keeps the JS llm_io source reachable while the library holds it
        modelRegistry.register(this, handle, this);
    }

    get handle() {
        if (this._freed) throw new LlmError(ERR_INVALID_ARGUMENT, 'the model is freed');
        return this._h;
    }

    get freed() {
        return this._freed;
    }

    /**
     * Releases the host's handle. Idempotent. Sessions on this model stay usable: the handle is
     * released when the last of them is freed.
     */
    free() {
        if (this._freed) return;
        this._freed = true;
        this._unref();
    }

    _unref() {
        if (!this._freed || this._sessions > 0 || !this._h) return;
        const h = this._h;
        this._h = null;
        modelRegistry.unregister(this);
        lib().model_free(h);
    }

    info() {
        // The library's string is replaced by the next info call on this model: parse it at once.
        return JSON.parse(lib().model_info_json(this.handle));
    }

    memoryPlan(nCtx = 0) {
        const plan = { version: MEMORY_PLAN_VERSION };
        for (const k of Object.keys(koffi.introspect(MemoryPlan).members)) if (!(k in plan)) plan[k] = 0;
        check(lib().model_memory_plan(this.handle, nCtx, plan));
        return numberFields(plan);
    }

    setRamBudget(bytes) {
        check(lib().model_set_ram_budget(this.handle, bytes));
    }

    get nVocab() {
        return lib().model_n_vocab(this.handle);
    }

    get bos() {
        return lib().model_token_bos(this.handle);
    }

    get eos() {
        return lib().model_token_eos(this.handle);
    }

    isEog(token) {
        return lib().model_token_is_eog(this.handle, token);
    }

    /**
     * The GGUF metadata value of key as a string (numbers in decimal, booleans 'true'/'false'), or
     * null if the file has no such key.
     */
    metaString(key) {
        const fn = need('model_meta_string');
        const h = this.handle;
        return stringOut((buf, cap, n) => fn(h, String(key), buf, cap, n));
    }

    /** The model's chat template (Jinja source), or the named one; null if the file has none. */
    chatTemplate(name = null) {
        const fn = need('model_chat_template');
        const h = this.handle;
        return stringOut((buf, cap, n) => fn(h, name === null ? null : String(name), buf, cap, n));
    }

    /**
     * Renders a conversation with the model's chat template, or with opts.template (and this model's
     * BOS/EOS texts). Throws ERR_NOT_FOUND when the model has no template and none is given.
     * Generate from the result with a session created with parseSpecial: true.
     */
    applyChatTemplate(messages, { addAssistant = true, template = null } = {}) {
        return renderChat(this.handle, template, messages, addAssistant);
    }

    /** Token ids of text (string or bytes). */
    tokenize(text, opts = {}) {
        return this._tokenize(this.handle, text, opts);
    }

    _tokenize(h, text, { addBos = true, parseSpecial = false } = {}) {
        const data = typeof text === 'string' ? Buffer.from(text, 'utf8') : Buffer.from(text);
        let cap = data.length + 8;
        for (;;) {
            const out = new Int32Array(cap);
            const n = [0];
            const st = lib().tokenize(h, data, data.length, addBos, parseSpecial, out, cap, n);
            if (st === ERR_BUFFER_TOO_SMALL) {
                cap = n[0];
                continue;
            }
            check(st);
            return Array.from(out.subarray(0, n[0]));
        }
    }

    /** The bytes of one token as generation prints them. */
    tokenToPiece(token) {
        return this._tokenToPiece(this.handle, token);
    }

    _tokenToPiece(h, token) {
        let buf = Buffer.alloc(64);
        const n = [0];
        let st = lib().token_to_piece(h, token, buf, buf.length, n);
        if (st === ERR_BUFFER_TOO_SMALL) {
            buf = Buffer.alloc(Number(n[0]));
            st = lib().token_to_piece(h, token, buf, buf.length, n);
        }
        check(st);
        return Buffer.from(buf.subarray(0, Number(n[0])));
    }

    /** The text of a token sequence (pieces concatenated, decoded as UTF-8). */
    detokenize(tokens) {
        return Buffer.concat(tokens.map((t) => this.tokenToPiece(t))).toString('utf8');
    }

    createSession(opts = {}) {
        return new Session(this, opts);
    }
}

/** Loads a model on a worker thread. */
async function loadModel(file, opts = {}) {
    const state = {};
    const cb = registerProgress(opts.progress, state);
    const out = [null];
    let st;
    try {
        st = await callAsync(lib().model_load, String(file), modelParams(opts, cb), out);
    } finally {
        if (cb) koffi.unregister(cb);
    }
    if (state.error) throw state.error;
    if (st === OK) return new Model(out[0]);
    if (st === ERR_CANCELLED || st === ERR_OUT_OF_MEMORY) throw asyncError(st);
    // The worker's llm_last_error is out of reach: one synchronous retry reports the real message.
    return loadModelSync(file, { ...opts, progress: undefined });
}

/** Loads a model on the calling (JS) thread, blocking it. */
function loadModelSync(file, opts = {}) {
    const state = {};
    const cb = registerProgress(opts.progress, state);
    const out = [null];
    let st;
    try {
        st = lib().model_load(String(file), modelParams(opts, cb), out);
    } finally {
        if (cb) koffi.unregister(cb);
    }
    if (state.error) throw state.error;
    check(st);
    return new Model(out[0]);
}

// A JS byte source as { size, readAt(offset, dst) }: Buffer / Uint8Array, a fs.promises FileHandle,
// a numeric file descriptor, or an object with `size` (number) and `readAt(offset, dst: Buffer)`
// that fills dst completely and synchronously (read_at must return its status synchronously).
function toSource(src) {
    if (Buffer.isBuffer(src) || src instanceof Uint8Array) {
        const buf = Buffer.from(src.buffer, src.byteOffset, src.byteLength);
        return {
            size: buf.length,
            readAt: (off, dst) => {
                if (off + dst.length > buf.length) throw new RangeError(`read past the end of the buffer at ${off}`);
                buf.copy(dst, 0, off, off + dst.length);
            },
        };
    }
    const fd = typeof src === 'number' ? src : src && typeof src.fd === 'number' ? src.fd : null;
    if (fd !== null) {
        return {
            size: fs.fstatSync(fd).size,
            readAt: (off, dst) => {
                for (let done = 0; done < dst.length;) {
                    const n = fs.readSync(fd, dst, done, dst.length - done, off + done);
                    if (n <= 0) throw new Error('unexpected end of file');
                    done += n;
                }
            },
        };
    }
    if (src && typeof src.readAt === 'function' && src.size !== undefined) return src;
    throw new TypeError('loadModelIo: expected a Buffer, Uint8Array, FileHandle, fd or { size, readAt }');
}

function makeIo(source) {
    const src = toSource(source);
    const size = Number(typeof src.size === 'function' ? src.size() : src.size);
    const ctx = { error: null, callbacks: [] };
    const reg = (fn, type) => {
        const cb = koffi.register(fn, koffi.pointer(type));
        ctx.callbacks.push(cb);
        return cb;
    };
    libVersionAtLeast02();
    const io = {
        // libllm 0.1 knows only version 1 (no flags); it reads the fields up to close.
        version: initReturnsStatus ? IO_VERSION : 1,
        flags: initReturnsStatus ? IO_THREAD_BOUND : 0,
        user: null,
        size: reg(() => size, IoSizeCb),
        read_at: reg((user, offset, dst, n) => {
            try {
                const len = Number(n);
                if (len === 0) return OK;
                src.readAt(Number(offset), Buffer.from(koffi.view(dst, len)));
                return OK;
            } catch (e) {
                ctx.error = ctx.error || e;
                return ERR_IO;
            }
        }, IoReadCb),
        close: reg(() => {
            // Called from inside a libllm call: unregister once it has returned.
            const cbs = ctx.callbacks.splice(0);
            setImmediate(() => cbs.forEach((cb) => koffi.unregister(cb)));
            if (typeof source.close === 'function' && ctx.closeSource) {
                Promise.resolve(source.close()).catch(() => {}); // FileHandle.close() is async
            }
        }, IoCloseCb),
    };
    return { io, ctx };
}

/**
 * Loads a model whose bytes come from JS (see toSource). Synchronous, on the JS thread; the io is
 * thread-bound (LLM_IO_THREAD_BOUND), so libllm reads nothing ahead on a thread of its own and every
 * read_at runs JS on the JS thread.
 */
function loadModelIo(source, opts = {}) {
    const { io, ctx } = makeIo(source);
    ctx.closeSource = !!opts.closeSource;
    const state = {};
    const cb = registerProgress(opts.progress, state);
    const out = [null];
    let st;
    try {
        st = lib().model_load_io(io, modelParams({ ...opts, prefetchDepth: 0 }, cb), out);
    } finally {
        if (cb) koffi.unregister(cb);
    }
    if (state.error) throw state.error;
    if (st < 0 && ctx.error) {
        const e = new LlmError(st, lib().last_error());
        e.cause = ctx.error;
        throw e;
    }
    check(st);
    return new Model(out[0], ctx);
}

// ---- session ---------------------------------------------------------------------------------------

const SESSION_KEYS = {
    nCtx: 'n_ctx', nThreads: 'n_threads', temperature: 'temperature', topK: 'top_k', topP: 'top_p',
    minP: 'min_p', repeatPenalty: 'repeat_penalty', repeatLastN: 'repeat_last_n', seed: 'seed',
    logitsAll: 'logits_all',
    // libllm 0.3
    parseSpecial: 'parse_special', kvTypeK: 'kv_type_k', kvTypeV: 'kv_type_v', contextShift: 'context_shift',
    nKeep: 'n_keep',
    // libllm 0.4
    presencePenalty: 'presence_penalty', frequencyPenalty: 'frequency_penalty',
};
const SESSION_V2_KEYS = new Set(['parseSpecial', 'kvTypeK', 'kvTypeV', 'contextShift', 'nKeep']);
const SESSION_V3_KEYS = new Set(['presencePenalty', 'frequencyPenalty']);

function kvType(v) {
    const t = typeof v === 'string' ? KV_TYPES[v.toLowerCase()] : v;
    if (![KV_F32, KV_F16, KV_Q8_0].includes(t)) throw new TypeError(`unknown KV type ${v}`);
    return t;
}

const PIECE_CAP = 256;

let sessionSerial = 0;

// nextBatch's threads. llm_last_error() is thread-local and a koffi async call runs on an anonymous
// libuv thread that no later call can reach, so llm_session_next_batch runs synchronously on a
// worker_threads thread that reads llm_last_error() right after a failed call, on that same thread,
// and posts it back with the status: the message is the failing call's own. One worker per batch in
// flight (batches over disjoint sessions still run in parallel); idle ones are kept, unref'd so they
// never hold the process open.
const BATCH_WORKER_SOURCE = `'use strict';
const { parentPort, workerData } = require('worker_threads');
const koffi = require(workerData.koffi);
const L = koffi.load(workerData.library);
const P = workerData.pointerBits === 64 ? 'uint64_t' : 'uint32_t'; // session handles as addresses
const nextBatch = L.func('int32_t llm_session_next_batch(const ' + P + ' *sessions, int32_t n, ' +
                         '_Out_ int32_t *tokens, _Out_ int32_t *statuses)');
const lastError = L.func('const char *llm_last_error(void)');
parentPort.on('message', ({ handles, n }) => {
    const tokens = new Int32Array(Math.max(n, 1));
    const statuses = new Int32Array(Math.max(n, 1));
    const status = nextBatch(handles, n, tokens, statuses);
    const message = status < 0 ? lastError() : ''; // before anything else runs on this thread
    parentPort.postMessage({ status, message, tokens, statuses });
});
`;
const idleBatchWorkers = [];

function newBatchWorker() {
    const pointerBits = koffi.sizeof('void *') * 8;
    const w = new Worker(BATCH_WORKER_SOURCE, {
        eval: true,
        workerData: { koffi: require.resolve('koffi'), library: (lib(), loadedPath), pointerBits },
    });
    w.pointerBits = pointerBits;
    w.job = null;
    const settle = (err, res) => {
        const job = w.job;
        w.job = null;
        w.unref();
        if (!job) return;
        if (err) job.reject(err);
        else job.resolve(res);
    };
    w.on('message', (res) => {
        settle(null, res);
        idleBatchWorkers.push(w);
    });
    const drop = (err) => {
        const i = idleBatchWorkers.indexOf(w);
        if (i >= 0) idleBatchWorkers.splice(i, 1);
        settle(err);
    };
    w.on('error', (e) => drop(new LlmError(ERR_INTERNAL, `nextBatch worker: ${e && e.message}`)));
    w.on('exit', (code) => drop(new LlmError(ERR_INTERNAL, `nextBatch worker exited (${code})`)));
    w.unref();
    return w;
}

// Resolves with { status, message, tokens, statuses } of one llm_session_next_batch call.
function batchOnWorker(addresses) {
    const w = idleBatchWorkers.pop() || newBatchWorker();
    return new Promise((resolve, reject) => {
        w.job = { resolve, reject };
        w.ref(); // a batch in flight keeps the process alive, as a koffi async call would
        // At least one element: koffi passes an empty array as NULL, and n = 0 must reach the
        // library's own check with non-NULL arrays.
        const handles = w.pointerBits === 64 ? new BigUint64Array(Math.max(addresses.length, 1))
                                             : new Uint32Array(Math.max(addresses.length, 1));
        addresses.forEach((a, i) => (handles[i] = w.pointerBits === 64 ? BigInt(a) : Number(a)));
        w.postMessage({ handles, n: addresses.length });
    });
}

const SPECULATION_KEYS = { draft: 'draft', nDraft: 'n_draft', lookupNgram: 'lookup_ngram', draftPMin: 'draft_p_min' };

/**
 * Advances every session (distinct, all on one model) by one token in one evaluation pass
 * (llm_session_next_batch, libllm 0.4, on a worker thread), each sampling as next() would.
 * Resolves with [{ token, status }] in the order of sessions: status OK (token accepted), DONE (an
 * end-of-generation token, not accepted) or an ERR_* of that session alone (e.g. ERR_CONTEXT_FULL);
 * bytes: model.tokenToPiece(token). Rejects with an LlmError only when the whole call failed and no
 * session changed (no sessions, a repeated one, sessions on different models, ERR_CANCELLED). Holds
 * every session's queue for the call. Speculation settings are not used.
 */
async function nextBatch(sessions) {
    need('session_next_batch', '0.4');
    sessions = Array.from(sessions);
    const n = sessions.length;
    // Each session's queue, taken in creation order (two batches over the same sessions in another
    // order must not wait for each other); a repeated session is taken once: the library refuses it.
    const distinct = [...new Set(sessions)].sort((x, y) => x._serial - y._serial);
    const run = async (i) => {
        if (i < distinct.length) return distinct[i]._exclusive(() => run(i + 1));
        const handles = sessions.map((s) => koffi.address(s.handle));
        distinct.forEach((s) => s._inFlight++);
        try {
            const r = await batchOnWorker(handles);
            if (r.status < 0) throw asyncError(r.status, r.message);
            return Array.from({ length: n }, (_, i) => ({ token: r.tokens[i], status: r.statuses[i] }));
        } finally {
            distinct.forEach((s) => {
                s._inFlight--;
                s._maybeRelease();
            });
        }
    };
    return run(0);
}

class Session {
    constructor(model, opts = {}) {
        const p = initParams('session');
        for (const [k, v] of Object.entries(opts)) {
            const field = SESSION_KEYS[k];
            if (!field) throw new TypeError(`unknown session option ${k}`);
            if (SESSION_V2_KEYS.has(k) && p.version < 2) {
                throw new LlmError(ERR_UNSUPPORTED, `session option ${k} needs libllm 0.3 (this is ${version()})`);
            }
            if (SESSION_V3_KEYS.has(k) && p.version < 3) {
                throw new LlmError(ERR_UNSUPPORTED, `session option ${k} needs libllm 0.4 (this is ${version()})`);
            }
            p[field] = k === 'kvTypeK' || k === 'kvTypeV' ? kvType(v) : v;
        }
        this.parseSpecial = !!p.parse_special; // generate() tokenizes its prompt the same way
        const out = [null];
        check(lib().session_create(model.handle, p, out));
        this.model = model;
        model._sessions++;
        this._h = out[0];
        this._serial = ++sessionSerial; // the order nextBatch takes several sessions' queues in
        this._tail = Promise.resolve();
        this._busy = 0; // holders of the session's queue (a generator holds it between its steps)
        this._inFlight = 0; // async libllm calls running on a worker
        this._freeWhenIdle = false;
        // Stable memory for the out-parameters of async llm_session_next calls.
        this._tok = koffi.alloc('int32_t', 1);
        this._len = koffi.alloc('size_t', 1);
        this._piece = koffi.alloc('uint8_t', PIECE_CAP);
        this._held = Buffer.alloc(0); // text a step got with DONE / STOPPED (stop strings), for flushHeld()
        this.lastStatus = OK; // how the last step ended: OK, DONE or STOPPED
        sessionRegistry.register(this, { h: this._h, mem: [this._tok, this._len, this._piece] }, this);
    }

    get handle() {
        if (!this._h || this._freeWhenIdle) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is freed');
        return this._h;
    }

    get freed() {
        return !this._h || this._freeWhenIdle;
    }

    // Runs fn with the session to itself; consecutive async calls may run on different workers.
    async _exclusive(fn) {
        const prev = this._tail;
        let release;
        this._tail = new Promise((r) => (release = r));
        await prev;
        this._busy++;
        try {
            return await fn();
        } finally {
            this._busy--;
            release();
        }
    }

    /**
     * Frees the session. Idempotent. If a step runs on a worker it is cancelled and the handle is
     * freed when it returns; a generator waiting between steps throws at its next step.
     */
    free() {
        if (!this._h || this._freeWhenIdle) return;
        this._freeWhenIdle = true;
        if (this._inFlight > 0) lib().session_cancel(this._h);
        else this._release();
    }

    _maybeRelease() {
        if (this._freeWhenIdle && this._inFlight === 0) this._release();
    }

    _release() {
        const h = this._h;
        this._h = null;
        if (!h) return;
        sessionRegistry.unregister(this);
        lib().session_free(h);
        this.model._sessions--;
        this.model._unref();
        koffi.free(this._tok);
        koffi.free(this._len);
        koffi.free(this._piece);
    }

    /** Any time, from the JS thread: the running call (or the next pull step) fails with ERR_CANCELLED. */
    cancel() {
        if (this._h && !this._freeWhenIdle) lib().session_cancel(this._h);
    }

    get nPast() {
        return lib().session_n_past(this.handle);
    }

    reset() {
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        check(lib().session_reset(this.handle));
    }

    /**
     * Drops the context from position nPast on (to edit or regenerate a turn). Throws while a call is
     * in flight. Prefill or generate new text before sampling again.
     */
    truncate(nPast) {
        const fn = need('session_truncate');
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        check(fn(this.handle, nPast));
    }

    /** The tokens in the context (nPast of them), in order. */
    tokens() {
        const fn = need('session_tokens');
        const h = this.handle;
        const n = [0];
        let st = fn(h, null, 0, n);
        for (;;) {
            if (st !== ERR_BUFFER_TOO_SMALL) check(st);
            const out = new Int32Array(Math.max(n[0], 1));
            st = fn(h, out, out.length, n);
            if (st === ERR_BUFFER_TOO_SMALL) continue;
            check(st);
            return Array.from(out.subarray(0, n[0]));
        }
    }

    /** Saves the conversation (tokens, KV cache, sampler and RNG state) to file, on a worker thread. */
    save(file) {
        const fn = need('session_save');
        return this._exclusive(() => this._inWorker(fn, String(file)));
    }

    /** Restores a conversation saved by save() on the same model file; on failure it is unchanged. */
    load(file) {
        const fn = need('session_load');
        return this._exclusive(() => this._inWorker(fn, String(file)));
    }

    async _inWorker(fn, ...args) {
        const h = this.handle;
        this._inFlight++;
        try {
            await callSession(h, fn, ...args);
        } finally {
            this._inFlight--;
            this._maybeRelease();
        }
    }

    /** save() into a Buffer, synchronously on the JS thread (the writer runs JS). */
    saveBuffer() {
        const fn = need('session_save_io');
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        const chunks = [];
        let error = null;
        const cb = koffi.register((user, src, n) => {
            try {
                const len = Number(n);
                // slice copies: the library may reuse its buffer for the next write
                if (len > 0) chunks.push(Buffer.from(koffi.view(src, len).slice(0, len)));
                return OK;
            } catch (e) {
                error = error || e;
                return ERR_IO;
            }
        }, koffi.pointer(WriteCb));
        let st;
        try {
            st = fn(this.handle, { version: WRITER_VERSION, user: null, write: cb });
        } finally {
            koffi.unregister(cb);
        }
        if (st < 0 && error) {
            const e = new LlmError(st, lib().last_error());
            e.cause = error;
            throw e;
        }
        check(st);
        return Buffer.concat(chunks);
    }

    /** load() from the bytes of saveBuffer() or of a saved file, synchronously on the JS thread. */
    loadBuffer(data) {
        const fn = need('session_load_io');
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        const { io, ctx } = makeIo(data);
        const st = fn(this.handle, io);
        // llm_session_load_io has called close (which unregisters the callbacks) before returning.
        if (st < 0 && ctx.error) {
            const e = new LlmError(st, lib().last_error());
            e.cause = ctx.error;
            throw e;
        }
        check(st);
    }

    async _prefill(tokens) {
        if (tokens.length === 0) return;
        const h = this.handle;
        const mem = koffi.alloc('int32_t', tokens.length);
        this._inFlight++;
        try {
            koffi.encode(mem, 'int32_t', tokens, tokens.length);
            await callSession(h, lib().session_prefill, mem, tokens.length);
        } finally {
            koffi.free(mem);
            this._inFlight--;
            this._maybeRelease();
        }
    }

    /** Runs tokens through the model (on a worker thread). */
    prefill(tokens) {
        return this._exclusive(() => this._prefill(tokens));
    }

    async _next() {
        const h = this.handle;
        this._inFlight++;
        try {
            const st = await callSession(h, lib().session_next, this._tok, this._piece, PIECE_CAP, this._len);
            const token = koffi.decode(this._tok, 'int32_t');
            if (st === ERR_BUFFER_TOO_SMALL) {
                // accepted; its bytes did not fit (with stop strings they stay held: take them there)
                this.lastStatus = OK;
                const held = this._flushHeld();
                return { token, bytes: held.length ? held : this.model._tokenToPiece(this.model._h, token) };
            }
            this.lastStatus = st;
            const len = Number(koffi.decode(this._len, 'size_t'));
            const bytes = Buffer.from(koffi.view(this._piece, PIECE_CAP).slice(0, len));
            if (st === DONE || st === STOPPED) { // the text held back for stop strings comes with the end
                if (len) this._held = Buffer.concat([this._held, bytes]);
                return null;
            }
            return { token, bytes };
        } finally {
            this._inFlight--;
            this._maybeRelease(); // a free() that came during the step
        }
    }

    /**
     * One pull step on a worker thread: { token, bytes }, or null at an end-of-generation token or a
     * stop string (lastStatus DONE or STOPPED; the text that came with the end: flushHeld()).
     */
    next() {
        return this._exclusive(() => this._next());
    }

    /**
     * Async iterator over generated tokens, { token, text, bytes } each; text is decoded
     * incrementally as UTF-8 (it may be '' while a multi-byte character is incomplete). The prompt is
     * tokenized (BOS when the session is empty) and prefilled first; '' or null continues. An aborted
     * signal stops generation and the iterator throws signal.reason; the session stays usable.
     */
    async *generate(prompt, { maxTokens = 256, signal } = {}) {
        if (signal) signal.throwIfAborted();
        let release;
        const prev = this._tail;
        this._tail = new Promise((r) => (release = r));
        await prev;
        this._busy++;
        // An abort reaches libllm only while a call runs (or is queued) on a worker; between steps
        // the loop itself stops. A cancel that lands just after its call finished stays pending in
        // libllm, so `unconsumed` makes one more step take it before the loop ends: no abort ever
        // leaks into a later call on the session.
        let unconsumed = false;
        const onAbort = () => {
            if (this._inFlight > 0 && !this._freeWhenIdle) {
                unconsumed = true;
                lib().session_cancel(this._h);
            }
        };
        const step = async (fn) => {
            try {
                return await fn();
            } catch (e) {
                if (e instanceof LlmError && e.status === ERR_CANCELLED) {
                    unconsumed = false;
                    if (signal && signal.aborted) throw signal.reason;
                }
                throw e;
            }
        };
        if (signal) signal.addEventListener('abort', onAbort, { once: true });
        try {
            if (signal && signal.aborted) throw signal.reason; // aborted while waiting for the session
            if (prompt) {
                const tokens = this.model._tokenize(this.model._h, prompt,
                    { addBos: this.nPast === 0, parseSpecial: this.parseSpecial });
                await step(() => this._prefill(tokens));
            }
            const decoder = new TextDecoder('utf-8');
            this._held = Buffer.alloc(0);
            for (let i = 0; i < maxTokens; i++) {
                if (signal && signal.aborted && !unconsumed) throw signal.reason;
                const out = await step(() => this._next());
                if (out === null) break;
                yield { token: out.token, text: decoder.decode(out.bytes, { stream: true }), bytes: out.bytes };
            }
            const held = this._flushHeld(); // stop strings: text held back, or handed out with the end
            if (held.length) yield { token: -1, text: decoder.decode(held, { stream: true }), bytes: held };
            const tail = decoder.decode();
            if (tail) yield { token: -1, text: tail, bytes: Buffer.alloc(0) };
        } finally {
            if (signal) signal.removeEventListener('abort', onAbort);
            if (unconsumed && !this.freed) {
                try {
                    await this._next(); // returns ERR_CANCELLED at once, taking the pending cancel
                } catch (e) {
                    // expected
                }
            }
            this._busy--;
            release();
        }
    }

    /** The whole generated text of generate() as one string. */
    async complete(prompt, opts = {}) {
        let text = '';
        for await (const step of this.generate(prompt, opts)) text += step.text;
        return text;
    }

    /**
     * Counters { total, lastCall } (llm_session_stats). passes, drafted_tokens and accepted_tokens
     * (libllm 0.4) are absent with an older library (it refuses llm_stats version 2; 1 is used).
     */
    stats() {
        const v = statsVersion();
        const blank = () => {
            const s = { version: v };
            for (const k of Object.keys(koffi.introspect(Stats).members)) if (!(k in s)) s[k] = 0;
            return s;
        };
        const total = blank();
        const last = blank();
        check(lib().session_stats(this.handle, total, last));
        const fields = (o) => {
            const out = numberFields(o);
            if (v < 2) for (const k of STATS_V2_FIELDS) delete out[k];
            return out;
        };
        return { total: fields(total), lastCall: fields(last) };
    }

    /**
     * Speculative decoding for generate()/next() from now on (llm_session_set_speculation, libllm
     * 0.4): opts { draft: Model (same vocabulary), nDraft, lookupNgram, draftPMin }; what is left out
     * keeps llm_speculation_params_init's default (no draft, 8, 0 = off, 0). With neither a draft nor
     * lookupNgram > 0 it is off. Lossless: greedy output is identical. The library keeps its own
     * reference to the draft, so draft.free() afterwards is fine. Throws while a call is in flight.
     */
    setSpeculation(opts = {}) {
        const fn = need('session_set_speculation', '0.4');
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        const p = {};
        check(need('speculation_params_init', '0.4')(p, SPECULATION_PARAMS_VERSION));
        for (const [k, v] of Object.entries(opts)) {
            const field = SPECULATION_KEYS[k];
            if (!field) throw new TypeError(`unknown speculation option ${k}`);
            p[field] = k === 'draft' ? (v ? v.handle : null) : v;
        }
        check(fn(this.handle, p));
    }

    // ---- structured output (libllm 0.4); synchronous, they throw while a call is in flight ----

    _idle(name) {
        const fn = need(name, '0.4');
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        return fn;
    }

    /**
     * Samples only text of the GBNF grammar (llama.cpp's syntax) from rule root (null: "root") from
     * the next token on; end-of-generation only where the language may end. null removes it. A bad
     * grammar throws ERR_INVALID_ARGUMENT saying where (line, column).
     */
    setGrammar(gbnf, root = null) {
        check(this._idle('session_set_grammar')(this.handle, gbnf, root));
    }

    /**
     * setGrammar with the grammar of a JSON schema (an object or its JSON text): the output is JSON
     * the schema accepts. null removes it; an unsupported keyword throws ERR_UNSUPPORTED naming it.
     */
    setJsonSchema(schema) {
        const text = schema === null || schema === undefined ? null
            : typeof schema === 'string' ? schema : JSON.stringify(schema);
        check(this._idle('session_set_json_schema')(this.handle, text));
    }

    /**
     * Generation ends at the first occurrence of any of the strings (lastStatus STOPPED); the stop
     * text is neither handed out nor left in the context; generate() yields text held back while it
     * might begin one at the end (token -1). [] or null turns them off.
     */
    setStop(stops) {
        const fn = this._idle('session_set_stop');
        const list = Array.from(stops || []);
        check(fn(this.handle, list.length ? list : null, list.length));
        this._held = Buffer.alloc(0);
    }

    /**
     * Adds bias to token logits for every later sample: a Map or an object { token: bias } (-Infinity
     * bans the token). Replaces the previous map; {} or null removes it.
     */
    setLogitBias(bias) {
        const fn = this._idle('session_set_logit_bias');
        const entries = bias instanceof Map ? [...bias.entries()] : Object.entries(bias || {});
        const tokens = Int32Array.from(entries, ([t]) => Number(t));
        const values = Float32Array.from(entries, ([, b]) => b);
        check(fn(this.handle, entries.length ? tokens : null, entries.length ? values : null, entries.length));
    }

    /**
     * From the next sampled token on, compute its log-probability and the nTop most likely
     * alternatives (read them with logprobs()); null turns them off.
     */
    setLogprobs(nTop = 0) {
        const fn = this._idle('session_set_logprobs');
        if (nTop === null) {
            check(fn(this.handle, null));
            return;
        }
        const p = {};
        check(need('logprobs_params_init', '0.4')(p, LOGPROBS_PARAMS_VERSION));
        p.n_top = nTop;
        check(fn(this.handle, p));
    }

    /** { token, logprob, top: [{ token, logprob }] } of the last sampled token (llm_session_logprobs). */
    logprobs() {
        const fn = need('session_logprobs', '0.4');
        const tok = [0];
        const lp = [0];
        const top = [null];
        const n = [0];
        check(fn(this.handle, tok, lp, top, n));
        const alts = n[0] > 0 ? koffi.decode(top[0], TokenLogprob, n[0]) : [];
        return { token: tok[0], logprob: lp[0], top: alts.map((x) => ({ token: x.token, logprob: x.logprob })) };
    }

    _flushHeld() {
        let out = this._held;
        this._held = Buffer.alloc(0);
        const fn = lib().session_flush_held;
        if (!fn || !this._h) return out;
        const len = [0];
        const st = fn(this._h, null, 0, len);
        if (st === ERR_BUFFER_TOO_SMALL) {
            const buf = Buffer.alloc(Number(len[0]));
            check(fn(this._h, buf, buf.length, len));
            out = Buffer.concat([out, buf.subarray(0, Number(len[0]))]);
        } else {
            check(st);
        }
        return out;
    }

    /** The text held back for stop strings (and what a next() got with the end), as a Buffer. */
    flushHeld() {
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        return this._flushHeld();
    }

    statsJson() {
        return JSON.parse(lib().session_stats_json(this.handle));
    }

    /**
     * Embeddings (llm_session_embed, libllm 0.4), synchronous: per text a Float32Array of its pooled
     * vector, or with pooling 'none' its tokens' rows one after another (length n_tokens * dim).
     * pooling: undefined (the file's pooling_type, else none), 'none' | 'mean' | 'cls' | 'last' |
     * 'rank' or a POOLING_* value; normalize: L2 per row. The texts share the evaluation passes; the
     * session's context is left as it was. Throws while a call is in flight on the session.
     */
    embed(texts, pooling, normalize = false) {
        const fn = need('session_embed', '0.4');
        if (this._busy) throw new LlmError(ERR_INVALID_ARGUMENT, 'the session is busy');
        if (typeof texts === 'string') texts = [texts];
        if (!Array.isArray(texts) || texts.length === 0) throw new LlmError(ERR_INVALID_ARGUMENT, 'embed: no texts');
        let pool = POOLING_UNSPECIFIED;
        if (typeof pooling === 'string') {
            if (!(pooling in POOLINGS)) throw new LlmError(ERR_INVALID_ARGUMENT, `embed: unknown pooling ${pooling}`);
            pool = POOLINGS[pooling];
        } else if (pooling !== undefined && pooling !== null) {
            pool = pooling;
        }
        const p = {};
        check(need('embed_params_init', '0.4')(p, EMBED_PARAMS_VERSION));
        p.pooling = pool;
        p.normalize = !!normalize;
        const n = [0];
        const dim = [0];
        const rows = new Int32Array(texts.length);
        const st = fn(this.handle, texts, texts.length, p, null, 0, n, dim, rows);
        if (st !== ERR_BUFFER_TOO_SMALL) check(st);
        const out = new Float32Array(Number(n[0]));
        check(fn(this.handle, texts, texts.length, p, out, out.length, n, dim, rows));
        const result = [];
        let at = 0;
        for (const r of rows) {
            result.push(out.slice(at, at + r * dim[0]));
            at += r * dim[0];
        }
        return result;
    }
}

module.exports = {
    version, setLogLevel, LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF, lib, loadModel, _initParams: initParams, loadModelSync, loadModelIo, Model, Session, LlmError,
    applyChatTemplate, applyChatTemplateJson, chatParse, nextBatch,
    OK, DONE, STOPPED, ERR_INVALID_ARGUMENT, ERR_IO, ERR_FORMAT, ERR_UNSUPPORTED, ERR_OUT_OF_MEMORY,
    ERR_CONTEXT_FULL, ERR_BUFFER_TOO_SMALL, ERR_CANCELLED, ERR_INTERNAL, ERR_NOT_FOUND, KV_F32, KV_F16, KV_Q8_0,
    RESIDENCY_RESIDENT, RESIDENCY_STREAMED, RESIDENCY_BUDGET, PAGE_CACHE_KEEP, PAGE_CACHE_DROP, PAGE_CACHE_DIRECT,
    PAGE_CACHE_MAP,
    POOLING_UNSPECIFIED, POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK,
};
