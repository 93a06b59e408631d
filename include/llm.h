/*
 * libllm — run LLM decoders from GGUF files in little memory.
 *
 * The only public header. C99; includes only <stdint.h>, <stddef.h>, <stdbool.h>.
 *
 * Conventions
 *  - Every fallible function returns an int32_t status: LLM_OK (0), LLM_DONE (1), LLM_STOPPED (2),
 *    or a negative LLM_ERR_* code. On failure llm_last_error() (thread-local) describes what went wrong.
 *  - Results come back through out-parameters. On failure a constructor (llm_model_load*,
 *    llm_session_create) sets *out to NULL (when out itself is not NULL), so a host may free *out
 *    either way; every other out-parameter is left untouched on failure unless stated (the "needed
 *    size" of LLM_ERR_BUFFER_TOO_SMALL).
 *  - Params structs start with `uint32_t version`, are passed by pointer and only ever grow at the
 *    end. Fill one with its *_init(p, LLM_X_VERSION): the version this header describes, which may
 *    be older than the library's; init writes that version's fields and nothing past them, so a host
 *    built against an older llm.h keeps working with a newer libllm. Every struct passed in is read,
 *    and every struct the library fills (llm_memory_plan, llm_stats) written, only as far as its
 *    `version` reaches. A version newer than the library's is LLM_ERR_INVALID_ARGUMENT.
 *  - Binary compatibility: libllm.so versions its symbols (LLM_0.1 ... LLM_0.4). A host linked
 *    against 0.1, whose llm_model_params_init / llm_session_params_init took no version argument,
 *    still gets those one-argument functions (filling the 0.1 layouts); hosts built against this
 *    header get the two-argument ones. The static library and non-ELF platforms have no symbol
 *    versions: hosts there are rebuilt against the header of the library they link.
 *  - Ownership: constructors (`*_load`, `*_create`) give ownership to the caller, who releases it
 *    with the matching `*_free`. `*_free(NULL)` is a no-op. Getters borrow: strings returned by the
 *    library live until the owning handle is freed (or, where stated, until the next call on it).
 *  - Callbacks receive `void *user` last and are never called after the call that runs them returns
 *    (a read started ahead is finished or dropped before it returns). Which thread calls which:
 *      llm_io.size, llm_progress_cb   the thread calling llm_model_load*, during it;
 *      llm_io.read_at                 the thread making the call (load, set_ram_budget, prefill,
 *                                     accept, generate, next), or, with prefetch_depth >= 1 and
 *                                     streamed blocks, the session's own I/O thread while a call on
 *                                     that session runs; only the calling thread with
 *                                     LLM_IO_THREAD_BOUND;
 *      llm_io.close                   the thread whose call fails the load, or that frees the model
 *                                     (llm_model_free, or llm_session_free of its last session);
 *      llm_token_cb                   the thread calling llm_session_generate;
 *                                     a speculation draft model's llm_io.read_at: as its target's
 *                                     (the draft is evaluated inside the target session's calls);
 *      llm_log_cb                     any thread, libllm's own included, but only while some libllm
 *                                     call is running.
 *    Threads of the compute pool never call the host.
 *  - Threads: an llm_model is immutable after load and may be shared by sessions on several threads;
 *    its getters (llm_model_info_json, llm_model_memory_plan, tokenizer calls) may be called from
 *    any thread at any time. An llm_session must be used by one thread at a time; only
 *    llm_session_cancel() may be called on it from another thread.
 *  - Lifetime: a session keeps its model alive. llm_model_free may come before the sessions are
 *    freed; the model is then destroyed (and llm_io.close called) when its last session is freed.
 *  - No C++ exception, abort or exit crosses this boundary.
 */
#ifndef LLM_H
#define LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && !defined(__GNUC__)
#  ifdef LLM_BUILD
#    define LLM_API __declspec(dllexport)
#  else
#    define LLM_API
#  endif
#else
#  define LLM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ---------------------------------------------------------------------------------- */

#define LLM_VERSION_MAJOR 0
#define LLM_VERSION_MINOR 4
#define LLM_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually loaded (static storage). */
LLM_API const char *llm_version_string(void);

/* ---- status ----------------------------------------------------------------------------------- */

#define LLM_OK 0
#define LLM_DONE 1                        /* generation ended at an end-of-generation token */
#define LLM_STOPPED 2                     /* generation ended at a stop string (0.4) */
#define LLM_ERR_INVALID_ARGUMENT (-1)     /* NULL handle, bad params version, out-of-range value */
#define LLM_ERR_IO (-2)                   /* open/read failed, or the host's llm_io reported an error */
#define LLM_ERR_FORMAT (-3)               /* malformed GGUF; the message names the field or tensor */
#define LLM_ERR_UNSUPPORTED (-4)          /* valid file, but an architecture/type we do not run */
#define LLM_ERR_OUT_OF_MEMORY (-5)
#define LLM_ERR_CONTEXT_FULL (-6)         /* the tokens do not fit in the session's n_ctx */
#define LLM_ERR_BUFFER_TOO_SMALL (-7)     /* the out-parameter says how much is needed */
#define LLM_ERR_CANCELLED (-8)            /* llm_session_cancel() or a progress callback said stop */
#define LLM_ERR_INTERNAL (-9)             /* a bug in libllm; please report the message */
#define LLM_ERR_NOT_FOUND (-10)           /* no such metadata key or chat template (0.3) */

/* A short static description of a status code ("unknown status" for others). */
LLM_API const char *llm_status_string(int32_t status);

typedef struct llm_model llm_model;
typedef struct llm_session llm_session;

/* The message of the last failed call on this thread; "" if none. Never NULL. Valid until the next
   failing call on the same thread. */
LLM_API const char *llm_last_error(void);
/* The message of the last failed call on s (the calls taking s first), whatever thread made it: for
   hosts whose calls may hop threads (async runtimes, Dart isolates). "" if none failed or s is NULL.
   Never NULL. Owned by s, valid until the next call on s. */
LLM_API const char *llm_session_last_error(const llm_session *s);

/* ---- logging ---------------------------------------------------------------------------------- */

#define LLM_LOG_DEBUG 0
#define LLM_LOG_INFO 1
#define LLM_LOG_WARN 2
#define LLM_LOG_ERROR 3
#define LLM_LOG_OFF 4

/* Receives library log lines (without a trailing newline). May be called from any thread, libllm's
   own I/O thread included, but only while a libllm call is running. cb = NULL restores the default:
   WARN and above to stderr. */
typedef void (*llm_log_cb)(int32_t level, const char *message, void *user);
LLM_API void llm_set_log_callback(llm_log_cb cb, void *user);
/* Lines below `level` are dropped (default LLM_LOG_WARN). */
LLM_API void llm_set_log_level(int32_t level);

/* ---- host-supplied bytes ---------------------------------------------------------------------- */

#define LLM_IO_VERSION 2

/* llm_io.flags (version 2): call read_at, size and close only on the thread that called libllm, for
   hosts whose callbacks may run only on their own thread (Dart callbacks returning a value, Node
   N-API): blocks are then read synchronously when needed, whatever prefetch_depth says (no I/O
   thread; the memory plan counts one streaming slot). It is a property of the callbacks, so it lives
   with them rather than in llm_model_params; for a split model one thread-bound shard binds them all. */
#define LLM_IO_THREAD_BOUND 1u

/* Lets the host feed the model bytes from its own storage (asset bundles, encrypted files, ...).
   The struct is copied by llm_model_load_io; `user` must stay valid until `close` is called.
   Zero it before filling it in (llm_io io = {0};) so fields of a newer version start at 0.
   read_at must fill exactly n bytes at offset and return LLM_OK, or return a negative status.
   read_at is never called concurrently for the same model; for the thread it runs on see the
   conventions at the top (and LLM_IO_THREAD_BOUND).
   Versions: 1 and 2 are accepted (a version 1 struct ends after close and is read no further). A
   struct only grows, so close is at the same place in every version >= 1: when a load fails, close
   is called, once, even if the version is one this library does not know (a newer host's); with
   version 0 nothing is called. */
typedef struct llm_io {
    uint32_t version; /* LLM_IO_VERSION */
    void *user;
    uint64_t (*size)(void *user);
    int32_t (*read_at)(void *user, uint64_t offset, void *dst, uint64_t n);
    void (*close)(void *user); /* may be NULL; called once when the model is freed or the load fails */
    /* version 2 */
    uint32_t flags;   /* 0 or LLM_IO_THREAD_BOUND; other bits are rejected */
} llm_io;

/* ---- model ------------------------------------------------------------------------------------ */

/* Called during load with fraction in [0, 1]; return false to cancel (load returns LLM_ERR_CANCELLED). */
typedef bool (*llm_progress_cb)(float fraction, void *user);

#define LLM_MODEL_PARAMS_VERSION 3

/* Residency policies: which transformer blocks stay in RAM (always in their on-disk encoding). */
#define LLM_RESIDENCY_RESIDENT 0 /* every block read once at load */
#define LLM_RESIDENCY_STREAMED 1 /* no block resident: each matrix is read when needed, into 1 +
                                    prefetch_depth slots of the largest matrix per session, so RAM
                                    tracks one matrix, not the model */
#define LLM_RESIDENCY_BUDGET 2   /* as many blocks (then the LM head) resident as ram_budget_bytes allows
                                    after the streaming slots; the rest streamed */

/* What weight reads leave in the OS page cache. Streaming reads every block once per token: KEEP lets
   the kernel cache the file (fastest when RAM is plentiful; the cached pages are reclaimable, but on a
   phone they evict other apps' memory); DROP reads normally and then tells the kernel the pages are no
   longer needed (posix_fadvise DONTNEED); DIRECT reads blocks with O_DIRECT, bypassing the cache
   (falls back to DROP where the file system refuses O_DIRECT); MAP streams without copying: each
   streamed matrix (and MoE expert slab) is mapped read-only from the file (mmap, its pages read ahead
   and mapped in by the I/O thread while the previous one computes) and unmapped when its slot is
   reused, instead of being read into a slot. Fastest when the file is in the page cache (streamed
   decode is then bounded by memory bandwidth, not by a copy); from disk it reads as KEEP does. A
   streamed LM head is mapped too, a chunk at a time. Every other read (resident blocks, which are
   repacked, norms, embedding rows) is a plain read as under KEEP. Mapped pages count in the
   process's RSS while mapped, as the copy they replace did, so peak RSS stays near the ring of 1 +
   prefetch_depth matrices (plus a page at each end). Files only (llm_io falls back to KEEP); a
   tensor not 32-byte aligned in the file is copied. The file must not change while the model is
   loaded: one that has shrunk since load is LLM_ERR_IO when the next matrix is mapped, but a
   truncation while a matrix is mapped makes touching it raise SIGBUS. */
#define LLM_PAGE_CACHE_KEEP 0
#define LLM_PAGE_CACHE_DROP 1
#define LLM_PAGE_CACHE_DIRECT 2
#define LLM_PAGE_CACHE_MAP 3

typedef struct llm_model_params {
    uint32_t version;          /* LLM_MODEL_PARAMS_VERSION */
    int32_t n_threads;         /* default for sessions; <= 0: number of physical cores */
    llm_progress_cb progress;  /* may be NULL */
    void *progress_user;
    bool vocab_only;           /* load the tokenizer only (works on vocab-only GGUF files) */
    /* version 2 */
    int32_t residency;         /* LLM_RESIDENCY_*; default RESIDENT */
    uint64_t ram_budget_bytes; /* BUDGET: bytes of weights kept in RAM (norms and biases, resident
                                  blocks, LM head, streaming slots). Below the model's minimum the load fails with
                                  LLM_ERR_OUT_OF_MEMORY, naming the minimum, before reading weights. */
    int32_t prefetch_depth;    /* streamed matrices read ahead by an I/O thread while one computes;
                                  0: synchronous reads, no I/O thread. Default 1. */
    /* version 3 (fills what was padding: sizeof is unchanged) */
    int32_t page_cache;        /* LLM_PAGE_CACHE_*; default KEEP. Files only: with llm_io the host
                                  owns its storage and this is ignored. */
} llm_model_params;

/* Fills *p with the defaults of params version `version` (pass LLM_MODEL_PARAMS_VERSION), writing
   only the fields that version has. LLM_ERR_INVALID_ARGUMENT if p is NULL or version is 0 or newer
   than the library's. */
LLM_API int32_t llm_model_params_init(llm_model_params *p, uint32_t version);

/* Opens a GGUF file. On success *out owns the model; free it with llm_model_free. A split model is
   opened by its first shard (<name>-00001-of-0000N.gguf); the other shards are read from beside it,
   and one that is missing or does not fit is LLM_ERR_FORMAT naming its path. */
LLM_API int32_t llm_model_load(const char *path, const llm_model_params *p, llm_model **out);
/* As llm_model_load, reading through the host's callbacks. io->close is called exactly once: when the
   load fails, or when the model is destroyed (llm_model_free, or the free of its last session if
   that comes later). */
LLM_API int32_t llm_model_load_io(const llm_io *io, const llm_model_params *p, llm_model **out);
/* A split model (llama.cpp's gguf-split: model-00001-of-00003.gguf, ...) through the host's callbacks:
   ios[k] reads shard k (the file with split.no k), n_io of them (llm_model_load finds a split file's
   shards beside it by name). The structs are copied. The metadata comes from ios[0]; tensors from
   any shard. A shard that does not fit (wrong split.count or split.no, another split set, a tensor in
   two shards or in none) is LLM_ERR_FORMAT naming it as ios[k]. Each ios[k].close is called exactly
   once, as with llm_model_load_io: when the load fails, or when the model is destroyed. read_at is
   never called concurrently across all the ios of one model.
   The array's layout (its stride) is the one of ios[0].version, and every element must have that
   version; if it is a version this library does not know, the load fails and only ios[0].close is
   called (the others cannot be found).
   n_io = 1 loads a plain file, like llm_model_load_io. */
LLM_API int32_t llm_model_load_io_split(const llm_io *ios, size_t n_io, const llm_model_params *p,
                                        llm_model **out);
/* Releases the host's handle: m must not be used again. Sessions created on m keep the model alive
   and stay fully usable; it is destroyed when the last of them is freed (at once if there are none).
   NULL is a no-op. */
LLM_API void llm_model_free(llm_model *m);

/* JSON object describing the model: architecture and its features as loaded (norm, RoPE style,
   window, experts, ...), dimensions, tensor types, residency and the memory plan. Thread-safe: any
   number of threads may call it on the same m at once. Owned by the library; the returned string
   stays valid and unchanged until the same thread calls llm_model_info_json on m again, or until m
   is freed, whichever comes first (calls on other threads never invalidate it). NULL if m is
   NULL. */
LLM_API const char *llm_model_info_json(const llm_model *m);
/* The run-time RAM dial, e.g. for Android onTrimMemory / iOS memory warnings: keeps as many blocks
   resident as `bytes` allows (see ram_budget_bytes) and streams the rest; frees memory at once when
   lowered, reads blocks when raised. Call it between calls, never while a session of m is running.
   Output is unchanged by any budget. */
LLM_API int32_t llm_model_set_ram_budget(llm_model *m, uint64_t bytes);

#define LLM_MEMORY_PLAN_VERSION 1

/* Predicted memory of m plus one session of n_ctx positions, in bytes. */
typedef struct llm_memory_plan {
    uint32_t version;              /* set by llm_memory_plan_init */
    uint32_t n_layer;
    uint32_t n_resident_layers;
    uint32_t n_stream_slots;       /* per session, when any block is streamed */
    uint64_t resident_block_bytes; /* incl. every block's norms and biases (always resident) */
    uint64_t stream_slot_bytes;
    uint64_t lm_head_bytes;        /* resident head, or one streamed chunk of it */
    uint64_t embedding_bytes;      /* token embeddings are read row by row on demand */
    uint64_t kv_cache_bytes;       /* for n_ctx, with the default KV types (LLM_KV_F16) and the
                                      sliding-window ring, and a hybrid's recurrent state with its
                                      4 checkpoints (allocated as they are first taken); a
                                      session's own: its stats JSON. An
                                      llm_session_embed call holds at most as much again while it
                                      runs (its texts' own caches), not counted in total_bytes */
    uint64_t scratch_bytes;        /* activations of one prompt chunk (256 tokens while streaming, else 512) */
    uint64_t total_bytes;          /* predicted peak: the sum of the above */
    uint64_t minimum_weight_bytes; /* the smallest ram_budget_bytes that can run m */
} llm_memory_plan;

/* Zeroes *p's fields of `version` (pass LLM_MEMORY_PLAN_VERSION) and sets p->version. Errors as
   llm_model_params_init. */
LLM_API int32_t llm_memory_plan_init(llm_memory_plan *p, uint32_t version);
/* n_ctx <= 0: the session default. out must have been set up by llm_memory_plan_init; only the
   fields of out->version are written. */
LLM_API int32_t llm_model_memory_plan(const llm_model *m, int32_t n_ctx, llm_memory_plan *out);

/* Vocabulary size (0 if m is NULL). */
LLM_API int32_t llm_model_n_vocab(const llm_model *m);
/* Special token ids (-1 if absent or m is NULL). */
LLM_API int32_t llm_model_token_bos(const llm_model *m);
LLM_API int32_t llm_model_token_eos(const llm_model *m);
/* True if the token ends generation (EOS, EOT, ...). */
LLM_API bool llm_model_token_is_eog(const llm_model *m, int32_t token);

/* ---- metadata and chat templates (0.3) -------------------------------------------------------- */

/* Strings out: the value's bytes and a terminating NUL are written to buf when cap > length; *len
   (may be NULL) always receives the length without the NUL, also with LLM_ERR_BUFFER_TOO_SMALL, so
   a call with buf = NULL, cap = 0 asks for the size (then pass a buffer of *len + 1 bytes). */

/* The value of GGUF metadata key `key` (e.g. "general.name"): strings as stored (UTF-8), integers in
   decimal, floats in the shortest form that reads back the same, booleans as "true"/"false".
   LLM_ERR_NOT_FOUND if the file has no such key; LLM_ERR_INVALID_ARGUMENT for an array (see
   llm_model_info_json). Thread-safe, like every getter of an llm_model. */
LLM_API int32_t llm_model_meta_string(const llm_model *m, const char *key, char *buf, size_t cap, size_t *len);
/* The model's chat template (the Jinja source in tokenizer.chat_template), or the named one
   (tokenizer.chat_template.<name>, e.g. "tool_use") when name is not NULL. LLM_ERR_NOT_FOUND when
   the file has none. */
LLM_API int32_t llm_model_chat_template(const llm_model *m, const char *name, char *buf, size_t cap, size_t *len);

/* One message of a conversation: NUL-terminated UTF-8 strings, borrowed for the call. */
typedef struct llm_chat_message {
    const char *role;    /* "system", "user", "assistant", ... as the template expects */
    const char *content;
} llm_chat_message;

/* Renders a conversation with a chat template exactly as Hugging Face transformers'
   apply_chat_template(tokenize=False) does with Python's Jinja2 (trim_blocks, lstrip_blocks, loop
   controls, tojson, raise_exception, strftime_now; variables messages, add_generation_prompt,
   bos_token, eos_token, tools = None, documents = None).
   tmpl: the Jinja source, or NULL for the model's own (LLM_ERR_NOT_FOUND if it has none). m may be
   NULL when tmpl is given (bos_token and eos_token are then ""). add_assistant: end with the
   template's opening of an assistant turn (add_generation_prompt). The output is a string as above
   (buf, cap, len); tokenize it with parse_special (llm_tokenize, or the session's parse_special) so
   the template's special tokens become themselves.
   Errors: LLM_ERR_FORMAT for a template that does not parse or exceeds the interpreter's limits
   (steps, nesting, output size: a hostile template ends quickly); LLM_ERR_INVALID_ARGUMENT when the
   template rejects the conversation (its raise_exception, e.g. "System role not supported") or hits
   an error Jinja2 would raise; LLM_ERR_UNSUPPORTED, naming the construct and its line, for Jinja
   features libllm does not implement — never a wrong rendering. Thread-safe. */
LLM_API int32_t llm_chat_apply_template(const llm_model *m, const char *tmpl, const llm_chat_message *msgs,
                                        size_t n_msgs, bool add_assistant, char *buf, size_t cap, size_t *len);

/* ---- tools in chat templates (0.4) ------------------------------------------------------------ */

/* Renders a conversation given as JSON, as transformers' apply_chat_template(tokenize=False) does.
   request_json is an object: "messages" (required; an array of message objects passed to the
   template as given — assistant messages may carry "tool_calls": [{"id", "type": "function",
   "function": {"name", "arguments"}}] with arguments an object or a JSON string, "content" may be
   null, role "tool" messages carry "tool_call_id" and "name"), "tools" (the definitions,
   [{"type": "function", "function": {"name", "description", "parameters"}}], or null),
   "documents" (or null), "add_generation_prompt" (default false); any other key becomes a
   template variable too (e.g. "enable_thinking": false), as apply_chat_template's keyword
   arguments; "bos_token"/"eos_token" override the model's texts. Key order is kept (a template's
   tojson shows it). tmpl and m as llm_chat_apply_template; output as a string (buf, cap, len).
   Errors: LLM_ERR_INVALID_ARGUMENT for JSON that does not parse or has the wrong shape (the
   message says where), then as llm_chat_apply_template. Thread-safe. */
LLM_API int32_t llm_chat_apply_template_json(const llm_model *m, const char *tmpl, const char *request_json,
                                             char *buf, size_t cap, size_t *len);

/* Parses a model's raw output (the text generated after the rendered prompt) into one JSON object
   {"content", "reasoning_content", "tool_calls": [{"name", "arguments", "id"}], "format", "parsed"}:
   arguments is the call's arguments as JSON text (a string, as OpenAI's API gives it), format the
   tool-call syntax detected from the template (Hermes/Qwen <tool_call>, Qwen3-Coder XML, Llama 3.x
   JSON, Mistral [TOOL_CALLS], DeepSeek, Command R, gpt-oss harmony, Granite, Functionary, GLM,
   Kimi, ...; "unknown" with parsed false when the template's is not recognised: then the whole
   text is the content). params_json (may be NULL) is an object as the request's: "tools",
   "messages" (a last assistant message is the prefill continued with "continue_final_message":
   "content" or "reasoning"), "reasoning_format" ("none" keeps reasoning inline in content, "auto"
   or "deepseek" extract it; default "auto"), "enable_thinking" (default true),
   "parallel_tool_calls", "tool_choice" ("auto", "none" or "required"; neither changes the parse:
   every call the model wrote is returned), "is_partial" (the output is cut short: an unfinished call
   is kept with the arguments seen so far). tmpl and m as llm_chat_apply_template.
   Errors: LLM_ERR_INVALID_ARGUMENT for params that do not parse or raw that is not UTF-8; a call
   whose arguments are malformed is left in the content, not an error. Thread-safe. */
LLM_API int32_t llm_chat_parse(const llm_model *m, const char *tmpl, const char *raw, const char *params_json,
                               char *buf, size_t cap, size_t *len);

/* ---- tokenizer -------------------------------------------------------------------------------- */

/* Tokenizes len bytes of text. add_bos: prepend BOS if the model's tokenizer adds one.
   parse_special: turn control-token text such as "<s>" into its token. Never two BOS: a text that
   itself begins with the BOS text (a chat template's bos_token) gets no second one, as llama.cpp's
   chat code feeds it.
   If cap is too small returns LLM_ERR_BUFFER_TOO_SMALL with *n_out = the number needed. */
LLM_API int32_t llm_tokenize(const llm_model *m, const char *text, size_t len, bool add_bos,
                             bool parse_special, int32_t *tokens, int32_t cap, int32_t *n_out);
/* The bytes of one token as generation prints them (control tokens give ""). Not NUL-terminated.
   If cap is too small returns LLM_ERR_BUFFER_TOO_SMALL with *len_out = the size needed. */
LLM_API int32_t llm_token_to_piece(const llm_model *m, int32_t token, char *buf, size_t cap,
                                   size_t *len_out);

/* ---- session ---------------------------------------------------------------------------------- */

#define LLM_SESSION_PARAMS_VERSION 3

/* KV cache element types (llm_session_params.kv_type_k / kv_type_v). */
#define LLM_KV_F32 0  /* exact: the goldens' setting */
#define LLM_KV_F16 1  /* the default, as llama.cpp's */
#define LLM_KV_Q8_0 2 /* blocks of 32 with one f16 scale: about half of F16 */

typedef struct llm_session_params {
    uint32_t version;     /* LLM_SESSION_PARAMS_VERSION */
    int32_t n_ctx;        /* context length in tokens; <= 0: min(model's training context, 4096) */
    int32_t n_threads;    /* <= 0: the model's default */
    float temperature;    /* 0 = greedy (argmax, lowest id on ties) */
    int32_t top_k;        /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    int32_t repeat_last_n;/* tokens of history the penalty sees (prompt included); 0: off */
    uint64_t seed;        /* the sampler's RNG seed; same seed, same tokens */
    bool logits_all;      /* keep the logits of every position of a prefill (llm_session_logits_ith) */
    /* version 2 */
    bool parse_special;   /* llm_session_generate tokenizes control-token text in the prompt (e.g. a
                             rendered chat template's "<|im_start|>") as those tokens; default false */
    int32_t kv_type_k;    /* LLM_KV_*: element type of the cached keys; default LLM_KV_F16 */
    int32_t kv_type_v;    /* LLM_KV_*: element type of the cached values; default LLM_KV_F16 */
    bool context_shift;   /* when a token would not fit in n_ctx, drop the oldest positions after the
                             first n_keep and go on instead of LLM_ERR_CONTEXT_FULL; default false.
                             Half of the positions after n_keep go (more if a prefill needs it); only
                             tokens that do not fit beside the n_keep kept ones are CONTEXT_FULL. A
                             shift stays if the call fails later. Models with learned absolute
                             positions (gpt2) refuse it at llm_session_create (LLM_ERR_UNSUPPORTED). */
    int32_t n_keep;       /* positions context shift never drops (e.g. the system prompt), < n_ctx;
                             default 0 */
    /* version 3 (0.4): llama.cpp's penalties over the same history as repeat_penalty (the last
       repeat_last_n tokens, prompt included): a token seen c > 0 times there loses
       c * frequency_penalty + presence_penalty from its logit (after repeat_penalty). 0: off */
    float presence_penalty;
    float frequency_penalty;
} llm_session_params;

/* Fills *p with the defaults of `version` (pass LLM_SESSION_PARAMS_VERSION); errors as
   llm_model_params_init. Defaults: n_ctx 0 (auto), temperature 0.8, top_k 40, top_p 0.95,
   min_p 0.05, repeat_penalty 1, repeat_last_n 64, seed 0, logits_all false; version 2: parse_special
   false, kv_type_k and kv_type_v LLM_KV_F16, context_shift false, n_keep 0; version 3:
   presence_penalty 0, frequency_penalty 0. An older version's struct gets these defaults too. */
LLM_API int32_t llm_session_params_init(llm_session_params *p, uint32_t version);

/* Creates a session (KV cache + sampler) on m. The session holds a reference to the model: m may
   be freed before it (see llm_model_free). */
LLM_API int32_t llm_session_create(llm_model *m, const llm_session_params *p, llm_session **out);
/* NULL is a no-op. */
LLM_API void llm_session_free(llm_session *s);
/* Forgets all tokens (empties the KV cache and the sampler history, re-seeds the RNG). */
LLM_API int32_t llm_session_reset(llm_session *s);
/* Number of tokens currently in the context. */
LLM_API int32_t llm_session_n_past(const llm_session *s);
/* Drops the context from position n_past on (0 <= n_past <= llm_session_n_past, else
   LLM_ERR_INVALID_ARGUMENT): to edit or regenerate a turn, or to keep a cached prefix shared with a
   new prompt. The sampler's repetition history forgets the dropped tokens; the logits are discarded,
   so prefill or accept before sampling again. A model with recurrent layers (qwen35, qwen3next)
   cannot cut their state back: its next evaluation restores the newest state checkpoint at or
   below n_past (kept at prompt-chunk boundaries and prefill ends, at most 4) and recomputes the
   kept tokens after it (exact; the stats JSON counts them as kv_recomputed_tokens). (0.3) */
LLM_API int32_t llm_session_truncate(llm_session *s, int32_t n_past);
/* The tokens currently in the context (n_past of them), in order: the host's way to compare a new
   rendering with what is cached. If cap is too small returns LLM_ERR_BUFFER_TOO_SMALL with *n_out =
   the number needed. (0.3) */
LLM_API int32_t llm_session_tokens(const llm_session *s, int32_t *tokens, int32_t cap, int32_t *n_out);

/* Runs n tokens through the model, appending them to the context. Logits of the last one become
   available. LLM_ERR_CONTEXT_FULL (nothing changed) if they do not fit. */
LLM_API int32_t llm_session_prefill(llm_session *s, const int32_t *tokens, size_t n);
/* Logits of the last evaluated position; borrowed, valid until the next call on s. */
LLM_API int32_t llm_session_logits(llm_session *s, const float **logits, int32_t *n_vocab);
/* Logits of row i of the last prefill (0 = its first token) when the session was created with
   logits_all; otherwise only row 0 of the last call exists. Borrowed, valid until the next call on s. */
LLM_API int32_t llm_session_logits_ith(llm_session *s, int32_t i, const float **logits, int32_t *n_vocab);
/* Samples a token from the current logits with the session's sampler (does not append it). */
LLM_API int32_t llm_session_sample(llm_session *s, int32_t *token);
/* Appends one token and runs it (also records it in the sampler's repetition history). */
LLM_API int32_t llm_session_accept(llm_session *s, int32_t token);

/* Called for every generated token with its piece: len bytes, not NUL-terminated, possibly part of a
   UTF-8 character (the rest comes with the next pieces). piece is valid only during the callback;
   copy what you keep. Return false to stop. */
typedef bool (*llm_token_cb)(int32_t token, const char *piece, size_t len, void *user);

/* Tokenizes prompt (with BOS when the session is empty; control-token text parsed as such with the
   session's parse_special, and then a prompt that begins with the BOS text, as a rendered chat
   template may, gets that one BOS, not two), prefills it, then samples and accepts up to
   max_tokens tokens, calling on_token (may be NULL) for each. Returns LLM_DONE if an end-of-generation
   token was sampled (it is not passed to on_token), LLM_STOPPED at a stop string (see
   llm_session_set_stop), LLM_OK if max_tokens were produced or the callback stopped, or an error.
   prompt may be NULL or "" to continue from the current context. */
LLM_API int32_t llm_session_generate(llm_session *s, const char *prompt, int32_t max_tokens,
                                     llm_token_cb on_token, void *user);

/* Pull API for hosts that cannot take callbacks: samples one token, accepts it and returns its piece.
   Returns LLM_DONE (token set, nothing accepted) at an end-of-generation token. piece may be NULL;
   if cap is too small the token is still accepted, *len receives the full size and
   LLM_ERR_BUFFER_TOO_SMALL is returned. Requires a prior prefill/accept. With stop strings
   (llm_session_set_stop) the piece is the text handed out at this step, and LLM_STOPPED ends
   generation at one; with stop strings set, or at LLM_DONE, a piece that does not fit stays held
   (take it with llm_session_flush_held; the status is then LLM_ERR_BUFFER_TOO_SMALL). */
LLM_API int32_t llm_session_next(llm_session *s, int32_t *token, char *piece, size_t cap, size_t *len);

/* Thread-safe. Cancels the call in flight on s (prefill, accept, generate or next): it returns
   LLM_ERR_CANCELLED at the next layer boundary (or before its next evaluation, if the cancel lands
   while it samples or runs on_token). The context is rolled back to where it was before the
   cancelled evaluation (tokens already accepted by a generate stay); the last logits are discarded,
   so prefill or accept before sampling again.
   With no call in flight the cancel stays pending for the next call on s: if that is
   llm_session_next (a pull loop going on) it returns LLM_ERR_CANCELLED, so a cancel between two
   steps of a pull loop stops it; a call that starts new work (prefill, accept, generate, reset)
   drops it, so a cancel that arrives after its call returned never cancels a new one. A host
   driving its own sample/accept loop checks its own flag between the calls. Calls on other
   sessions are not affected. */
LLM_API void llm_session_cancel(llm_session *s);

/* ---- saved sessions (0.3) --------------------------------------------------------------------- */

#define LLM_WRITER_VERSION 1

/* Receives the bytes of a saved session in order, through the host's own storage. write must take
   exactly n bytes and return LLM_OK, or return a negative status (the save then fails with it).
   Called only on the thread calling llm_session_save_io, during it. Zero the struct before filling
   it in (llm_writer w = {0};). */
typedef struct llm_writer {
    uint32_t version; /* LLM_WRITER_VERSION */
    void *user;
    int32_t (*write)(void *user, const void *src, uint64_t n);
} llm_writer;

/* Models with recurrent layers (qwen35, qwen35moe, qwen3next): saving and loading carry the
   recurrent state (state format version 2), speculation stays lossless, embeddings run each input
   on a fresh state; context_shift returns LLM_ERR_UNSUPPORTED at llm_session_create (the state
   cannot forget the dropped tokens). */

/* Saves the conversation: the tokens in the context, their KV cache (only the filled positions),
   the sampler's state with its RNG, under a header binding it to the model (architecture, shapes,
   tensor types, a fingerprint of the weights' metadata) and the state format's version, with a
   checksum. The file is written to a temporary name beside path and renamed over it, so a kill
   mid-save leaves the old file. */
LLM_API int32_t llm_session_save(llm_session *s, const char *path);
LLM_API int32_t llm_session_save_io(llm_session *s, const llm_writer *w);
/* Restores a saved conversation into s (any session of the same model file, whatever its residency,
   with n_ctx large enough and the same KV types); generation then continues with exactly the tokens
   the saved session would have produced. A state made by another model, a truncated or corrupted
   file (checksum), or a newer format version fails with LLM_ERR_FORMAT (LLM_ERR_INVALID_ARGUMENT
   for another model or a session that cannot hold it), naming the reason, and leaves s as it was.
   The sampling parameters stay s's own; the RNG state comes from the file.
   llm_session_load_io reads through io (size and read_at, on the calling thread; flags ignored) and
   calls io->close, if set, once before returning. */
LLM_API int32_t llm_session_load(llm_session *s, const char *path);
LLM_API int32_t llm_session_load_io(llm_session *s, const llm_io *io);

/* ---- more than one token per pass (0.4) -------------------------------------------------------- */

#define LLM_SPECULATION_PARAMS_VERSION 1

/* Speculative decoding: cheap guesses of the next tokens are checked by one evaluation pass of the
   model over all of them (which reads each streamed block once, for nearly the price of one token),
   the longest agreeing run is kept plus the model's own next token, the rest is rolled back.
   Lossless: the tokens, n_past and every logit the API exposes are bit-identical to generating
   without it, in every residency mode and at every temperature for a given seed. (A pass over K+1
   tokens gives the rows K+1 single passes would; each token is still sampled by the session's own
   sampler, with the same RNG draws, from those rows, and a proposal is kept only when that token
   equals it: for a deterministic proposal this is the standard speculative-sampling rule.) */
typedef struct llm_speculation_params {
    uint32_t version;        /* LLM_SPECULATION_PARAMS_VERSION */
    llm_model *draft;        /* a second model that proposes tokens (any residency; typically small and
                                resident) with the session model's vocabulary (same size and token
                                texts, else LLM_ERR_INVALID_ARGUMENT naming the first difference).
                                The session keeps a reference, so the host may free it after the call.
                                NULL: no draft model */
    int32_t n_draft;         /* K: most tokens proposed per pass, 1..64; default 8 */
    int32_t lookup_ngram;    /* prompt lookup: propose the tokens that followed the latest earlier
                                occurrence of the context's last lookup_ngram tokens (falling back to
                                shorter n-grams down to 1); 0: off (default), at most 32. With a
                                draft model too, lookup is tried first and the draft proposes when
                                lookup finds nothing */
    float draft_p_min;       /* adaptive K: the draft model stops proposing when its probability of its
                                own next token falls below this; 0 (default): always n_draft */
} llm_speculation_params;

/* Fills *p with the defaults of `version` (pass LLM_SPECULATION_PARAMS_VERSION): draft NULL,
   n_draft 8, lookup_ngram 0, draft_p_min 0. Errors as llm_model_params_init. */
LLM_API int32_t llm_speculation_params_init(llm_speculation_params *p, uint32_t version);

/* Speculation for llm_session_generate and llm_session_next on s from now on; p NULL (or neither a
   draft nor lookup_ngram > 0) turns it off. A pass may accept several tokens: llm_session_next then
   hands them out one per call without evaluating; llm_session_logits, n_past, tokens, truncate, save
   and the low-level prefill / sample / accept calls always see the state after the tokens handed out
   so far, exactly as without speculation. LLM_ERR_INVALID_ARGUMENT for a draft with another
   vocabulary, n_draft, lookup_ngram or draft_p_min (0..1) out of range, or a draft that cannot hold
   the session's n_ctx; the previous settings then stay. Proposals never include an end-of-generation
   token. */
LLM_API int32_t llm_session_set_speculation(llm_session *s, const llm_speculation_params *p);

/* ---- grammar-constrained sampling (0.4) ------------------------------------------------------- */

/* From the next sampled token on, s samples only tokens whose text keeps the text generated since
   this call a prefix of the language of the GBNF grammar `gbnf` (llama.cpp's grammars/README.md:
   rules, | ( ) * + ? {m,n}, "literals", [classes] with ranges, negation and escapes, `.`, # comments,
   <[N]> / !<[N]> token ids), starting at rule `root` (NULL or "": "root"), and an end-of-generation
   token only where the language may end. gbnf NULL removes the grammar. The text is copied.
   It applies to llm_session_sample, llm_session_next, llm_session_generate, llm_session_next_batch
   and speculation (a proposal is kept only if it equals the token sampled under the grammar);
   llm_session_accept refuses (LLM_ERR_INVALID_ARGUMENT) a token the grammar does not allow here;
   prefilled tokens are not matched. llm_session_truncate rewinds the grammar with the context;
   llm_session_reset starts it over. Saved sessions: a saved session holds no grammar state (nor the
   grammar), and llm_session_load neither removes nor restores one: the loading session's own grammar,
   if it has one, starts over at its start rule and constrains only the text generated after the load
   (a WARN log line says so). A structure the saved conversation left half-done is therefore not
   continued by the grammar that began it: re-attach a grammar describing the rest after the load
   (or load, then set the grammar, to constrain a new answer).
   A grammar that does not parse, has no such rule, uses an undefined rule or is left-recursive gives
   LLM_ERR_INVALID_ARGUMENT with the line, column and what was expected in llm_last_error(); the
   grammar in use then stays. A grammar whose alternatives multiply as they nest (a repetition of
   something that may be empty, repeated again, many levels deep) gives LLM_ERR_UNSUPPORTED once more
   than 4096 of them are open at once or more than 32768 are expanded for one token: here, if that
   happens at the start rule, else from the sampling or accept call that would pass the bound (the
   grammar's state then stays as it was). Sampling fails with LLM_ERR_INVALID_ARGUMENT if the grammar allows no
   token of the vocabulary at all. Time spent in the grammar: llm_session_stats_json's grammar_seconds,
   grammar_tokens, grammar_masks (draws the grammar refused) and grammar_us_per_token. */
LLM_API int32_t llm_session_set_grammar(llm_session *s, const char *gbnf, const char *root);

/* As llm_session_set_grammar, with the grammar that the JSON schema `schema` (its JSON text, draft
   2020-12) converts to: the output is JSON that the schema accepts. {"type": "object"} asks for any
   JSON object. Supported keywords (README "Grammar-constrained output"): type, enum, const, properties,
   required, additionalProperties, items, prefixItems, min/maxItems, min/maxLength, integer bounds,
   pattern, format date/time/date-time/uuid, anyOf, oneOf, allOf, $ref within the schema. Another
   keyword gives LLM_ERR_UNSUPPORTED naming it (never silently ignored); text that is not JSON or a
   keyword of the wrong type gives LLM_ERR_INVALID_ARGUMENT. schema NULL removes the grammar. */
LLM_API int32_t llm_session_set_json_schema(llm_session *s, const char *schema);

/* ---- stop strings (0.4) ----------------------------------------------------------------------- */

/* Generation through llm_session_next and llm_session_generate ends at the first occurrence of any
   of the n NUL-terminated strings (byte-exact, anywhere in the generated text, across tokens); they
   are copied. n 0 (stops may then be NULL) turns them off. A NULL or empty string is
   LLM_ERR_INVALID_ARGUMENT (the list in use then stays). Setting the list forgets held text.
   - Held text: a piece that may be the beginning of a stop string is not handed out yet; a pull
     (llm_session_next) then returns LLM_OK with a shorter piece, maybe *len 0, and the text comes
     with a later token once it can no longer begin one.
   - A stop string found: LLM_STOPPED (token = the token that completed it). The text before it that
     was not handed out yet comes with that call (llm_session_next's piece, or llm_session_generate's
     last on_token call with token -1); the stop string and everything after it never do. The
     context is cut back to before the first token holding any of its bytes (as llm_session_truncate
     would), so the next turn does not see it: the context holds whole tokens, so bytes of that
     token before the stop string are handed out but are not in the context. The token completing
     it is not accepted.
   - End of generation: at LLM_DONE llm_session_next's piece receives the held text (without stop
     strings it is empty); llm_session_generate hands it out, at LLM_DONE, at max_tokens or when
     on_token returned false, in one last on_token call with token -1 (whose answer is ignored).
     A host that ends a pull loop itself takes it with llm_session_flush_held.
   llm_session_prefill, llm_session_truncate, llm_session_reset and llm_session_load forget held
   text; llm_session_next_batch hands out no text and does not look for stop strings. */
LLM_API int32_t llm_session_set_stop(llm_session *s, const char *const *stops, size_t n);

/* ---- log-probabilities and logit bias (0.4) ------------------------------------------------------ */

/* Added to the logits of tokens[i] (n entries; both arrays may be NULL when n is 0) before any other
   sampling step, for every later sample (llm_session_sample, next, generate, next_batch, speculation);
   -INFINITY bans a token. Replaces the previous map (a token listed twice: the sum); n 0 removes it.
   A token id out of range, or a NaN or +inf bias, is LLM_ERR_INVALID_ARGUMENT (the map in use stays).
   Not part of a saved session (like the sampling parameters, it stays s's own). */
LLM_API int32_t llm_session_set_logit_bias(llm_session *s, const int32_t *tokens, const float *bias, size_t n);

typedef struct llm_token_logprob {
    int32_t token;
    float logprob; /* natural log of the probability; -INFINITY for a banned token */
} llm_token_logprob;

/* Receives each sampled token's log-probability and the n_top most likely tokens (most likely first;
   borrowed: valid only during the call). Runs on the thread that samples, during the call that
   samples (llm_session_sample, next, generate, next_batch), before the token is accepted. */
typedef void (*llm_logprobs_cb)(int32_t token, float logprob, const llm_token_logprob *top, int32_t n_top, void *user);

#define LLM_LOGPROBS_PARAMS_VERSION 1

typedef struct llm_logprobs_params {
    uint32_t version;         /* LLM_LOGPROBS_PARAMS_VERSION */
    int32_t n_top;            /* alternatives per sampled token, 0..256 (0: the sampled token's only); default 0 */
    llm_logprobs_cb on_token; /* may be NULL (pull them with llm_session_logprobs); default NULL */
    void *user;
} llm_logprobs_params;

/* Fills *p with the defaults of `version` (pass LLM_LOGPROBS_PARAMS_VERSION). Errors as
   llm_model_params_init. */
LLM_API int32_t llm_logprobs_params_init(llm_logprobs_params *p, uint32_t version);

/* From the next sampled token on, s computes each sampled token's log-probability and the top n_top
   alternatives; p NULL turns it off. The distribution is the log-softmax over the whole vocabulary of
   the logits after the logit bias and the penalties (repeat, frequency, presence), before the
   grammar's mask, top-k, top-p, min-p and temperature: the same at every temperature, and equal to
   the log-softmax of llm_session_logits when there is no bias and no penalty (as llama.cpp's n_probs
   without post-sampling probabilities). A token the grammar made the sampler redraw is reported from
   this distribution too. Costs a pass over the vocabulary per token (and a partial sort for n_top).
   n_top out of range: LLM_ERR_INVALID_ARGUMENT. */
LLM_API int32_t llm_session_set_logprobs(llm_session *s, const llm_logprobs_params *p);

/* The pull side: the last sampled token (also one llm_session_next reported with LLM_DONE or
   LLM_STOPPED), its log-probability, and its top alternatives (*top borrowed, valid until the next
   call on s; *n_top of them). Any out-parameter may be NULL. LLM_ERR_INVALID_ARGUMENT when
   log-probabilities are off or nothing was sampled since they were turned on. */
LLM_API int32_t llm_session_logprobs(const llm_session *s, int32_t *token, float *logprob,
                                     const llm_token_logprob **top, int32_t *n_top);

/* The text held back for stop strings (see llm_session_set_stop), handed out and forgotten: buf,
   cap, len as llm_token_to_piece (on LLM_ERR_BUFFER_TOO_SMALL *len is the size needed and the text
   stays held). *len 0 when nothing is held. */
LLM_API int32_t llm_session_flush_held(llm_session *s, char *buf, size_t cap, size_t *len);

/* Advances n sessions of one model by one token each in one evaluation pass, which reads each
   streamed block once for all of them (a server with several users on one streamed model). Each
   session samples from its own logits with its own sampler, as llm_session_next would, and the
   tokens are then evaluated together; each session's tokens are identical to running it alone.
   tokens[i] and statuses[i] (n entries each) receive session i's token and status: LLM_OK (token
   accepted), LLM_DONE (an end-of-generation token, sampled but not accepted, as llm_session_next), or
   an error for that session alone, token -1 (LLM_ERR_CONTEXT_FULL, unless the session has
   context_shift, which makes room as llm_session_next does; LLM_ERR_INVALID_ARGUMENT if it has no
   logits). Speculation settings are not used by this call (one token per session per pass), and
   each session's pending speculative drafts (tokens a speculating llm_session_next verified but has
   not handed out yet) are forgotten before its pass: it goes on from the state its caller has seen
   (n_past, tokens, logits), and its next speculating call drafts anew.
   The pass runs on the thread pool, scratch and block reader of the first session that advances:
   its reads and I/O are counted in that session's stats (bytes_read, read_calls, io_wait_seconds);
   every advancing session counts the token, the pass and its time. More sessions than a prompt
   chunk (256 streamed, 512 resident) take several passes.
   Returns LLM_OK when the pass ran (see statuses), or an error that changed no session: NULL or
   repeated sessions, sessions on different models, n < 1, tokens or statuses NULL (nothing
   written); LLM_ERR_CANCELLED (llm_session_cancel on any of them cancels the pass, also one pending
   from between calls, as with llm_session_next) or a read error: tokens all -1, statuses all that
   error, and every session as before the call, its logits and sampler included, so the call can be
   repeated (only a context shift made for it stays, as llm_session_params.context_shift says).
   Runs on the calling thread; no call on any of the sessions may run at the same time. */
LLM_API int32_t llm_session_next_batch(llm_session *const *sessions, int32_t n, int32_t *tokens, int32_t *statuses);

/* ---- embeddings (0.4) ------------------------------------------------------------------------- */

/* Poolings (llama.cpp's llama_pooling_type values, which a file's <arch>.pooling_type stores). The
   pooled quantity is the final norm's output (the hidden state the LM head would read). */
#define LLM_POOLING_UNSPECIFIED (-1) /* the file's <arch>.pooling_type; NONE when it has none (llama.cpp) */
#define LLM_POOLING_NONE 0           /* every token's row */
#define LLM_POOLING_MEAN 1           /* the average of the input's rows */
#define LLM_POOLING_CLS 2            /* the first token's row (BOS) */
#define LLM_POOLING_LAST 3           /* the last token's row (Qwen3-Embedding, gte-Qwen2) */
#define LLM_POOLING_RANK 4           /* a classifier head's scores (cls.output.weight, cls.weight, as
                                        llama.cpp's rerankers): qwen3 scores the last token and
                                        softmaxes the outputs, others score the first. A file without
                                        the head: LLM_ERR_UNSUPPORTED */

/* The pooling m's embeddings get when the caller leaves it unspecified: the file's
   <arch>.pooling_type, LLM_POOLING_NONE when it has none (as llama.cpp); -1 if m is NULL, vocab-only,
   or the file's pooling cannot run (a value no LLM_POOLING_* names, or RANK without a classifier
   head; llm_last_error() says which). */
LLM_API int32_t llm_model_pooling_type(const llm_model *m);

#define LLM_EMBED_PARAMS_VERSION 1

typedef struct llm_embed_params {
    uint32_t version;   /* LLM_EMBED_PARAMS_VERSION */
    int32_t pooling;    /* LLM_POOLING_*; default LLM_POOLING_UNSPECIFIED (the file decides) */
    bool normalize;     /* L2-normalise every output row (as llama-embedding --embd-normalize 2);
                           default false */
    bool add_bos;       /* texts: tokenized with BOS (and EOS) where the vocabulary adds them, as
                           llama.cpp's add_special; default true. Token inputs are used as given */
    bool parse_special; /* texts: control-token text becomes those tokens; default true (llama.cpp's
                           embedding tool does so) */
} llm_embed_params;

/* Fills *p with the defaults of `version` (pass LLM_EMBED_PARAMS_VERSION). Errors as
   llm_model_params_init. */
LLM_API int32_t llm_embed_params_init(llm_embed_params *p, uint32_t version);

/* Embeds n_texts NUL-terminated UTF-8 texts (each non-empty), each as its own sequence (positions
   0.., attending only to itself), and writes per text its rows: one pooled vector, or for
   LLM_POOLING_NONE one row per token, each row *n_dim floats (n_embd; the classifier's outputs for
   RANK), text after text into out. p NULL: the defaults.
   Several texts share each evaluation pass (a streamed block is read once for all of them), as many
   tokens per pass as a prompt chunk (256 streamed, 512 resident); the result of a text does not
   depend on the texts it is batched with (bit for bit). A text may have up to the session's n_ctx
   tokens (else LLM_ERR_CONTEXT_FULL naming it).
   The session: its context, KV cache, logits and sampler are left as they were (the texts run on
   key/value caches of their own, in the session's KV types, together at most n_ctx positions, i.e.
   the plan's kv_cache_bytes once more, freed before the call returns; the activations are the
   scratch the plan counts). The call uses the session's threads and block reader: its passes and
   reads count in llm_session_stats (passes, bytes_read), not as tokens; llm_session_cancel cancels
   it (LLM_ERR_CANCELLED; out may then hold some of the rows, the session is unchanged).
   Sizes: *n_out (required) receives the number of floats all the rows take, also with
   LLM_ERR_BUFFER_TOO_SMALL when cap is smaller (nothing evaluated: a call with out NULL and cap 0
   asks for the size); n_dim (may be NULL) the floats per row; n_rows (may be NULL, else n_texts
   entries) the rows of each text. Errors: NULL session, texts, texts[i] or n_out, n_texts 0, an
   empty text, a pooling outside LLM_POOLING_*: LLM_ERR_INVALID_ARGUMENT naming it; RANK without a
   classifier head: LLM_ERR_UNSUPPORTED. */
LLM_API int32_t llm_session_embed(llm_session *s, const char *const *texts, size_t n_texts,
                                  const llm_embed_params *p, float *out, size_t cap, size_t *n_out,
                                  int32_t *n_dim, int32_t *n_rows);
/* As llm_session_embed for token ids: input i is n_tokens[i] (>= 1) ids at tokens[i], used as
   given (no BOS added; add_bos and parse_special are not used). */
LLM_API int32_t llm_session_embed_tokens(llm_session *s, const int32_t *const *tokens, const size_t *n_tokens,
                                         size_t n_inputs, const llm_embed_params *p, float *out, size_t cap,
                                         size_t *n_out, int32_t *n_dim, int32_t *n_rows);

#define LLM_STATS_VERSION 2

typedef struct llm_stats {
    uint32_t version;          /* set by llm_stats_init */
    uint64_t prompt_tokens;    /* evaluated by prefill */
    uint64_t generated_tokens; /* generated tokens accepted into the context (accept / generate / next) */
    double prefill_seconds;
    double decode_seconds;
    uint64_t bytes_read;       /* weight bytes read from storage (streamed blocks, embeddings, head) */
    uint64_t read_calls;
    double io_wait_seconds;    /* time evaluation waited for a block to arrive */
    /* version 2 (0.4) */
    uint64_t passes;           /* evaluation passes of the session's model (a prefill chunk, an accept,
                                  a verify pass, a batched pass: one each) */
    uint64_t drafted_tokens;   /* tokens proposed by speculation (draft model or lookup) */
    uint64_t accepted_tokens;  /* of those, the ones the model agreed with and kept */
} llm_stats;

/* Zeroes *p's fields of `version` (pass LLM_STATS_VERSION) and sets p->version. Errors as
   llm_model_params_init. */
LLM_API int32_t llm_stats_init(llm_stats *p, uint32_t version);

/* Counters since the session was created or reset (total), and of the last prefill / accept /
   generate / next call (last_call). Either pointer may be NULL; each is set up by llm_stats_init and
   only the fields of its version are written. */
LLM_API int32_t llm_session_stats(const llm_session *s, llm_stats *total, llm_stats *last_call);

/* The same counters and more as a JSON object owned by s, valid until the next call on s. */
LLM_API const char *llm_session_stats_json(llm_session *s);

#ifdef __cplusplus
}
#endif

#endif /* LLM_H */
