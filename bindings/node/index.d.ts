// Types of the libllm Node binding (index.js). Status codes and struct fields follow include/llm.h.

export declare const OK: 0;
export declare const DONE: 1;
/** libllm 0.4: generation ended at a stop string (Session.setStop). */
export declare const STOPPED: 2;
export declare const ERR_INVALID_ARGUMENT: -1;
export declare const ERR_IO: -2;
export declare const ERR_FORMAT: -3;
export declare const ERR_UNSUPPORTED: -4;
export declare const ERR_OUT_OF_MEMORY: -5;
export declare const ERR_CONTEXT_FULL: -6;
export declare const ERR_BUFFER_TOO_SMALL: -7;
export declare const ERR_CANCELLED: -8;
export declare const ERR_INTERNAL: -9;
/** No such metadata key or chat template (libllm 0.3). */
export declare const ERR_NOT_FOUND: -10;

/** KV cache element types (SessionOptions.kvTypeK / kvTypeV). */
export declare const KV_F32: 0;
export declare const KV_F16: 1;
export declare const KV_Q8_0: 2;
export type KvType = 0 | 1 | 2 | 'f32' | 'f16' | 'q8_0';

export declare const RESIDENCY_RESIDENT: 0;
export declare const RESIDENCY_STREAMED: 1;
export declare const RESIDENCY_BUDGET: 2;
export declare const PAGE_CACHE_KEEP: 0;
export declare const PAGE_CACHE_DROP: 1;
export declare const PAGE_CACHE_DIRECT: 2;
/** Streamed weights are mapped from the file instead of copied (files only; see llm.h). */
export declare const PAGE_CACHE_MAP: 3;

/** A failed libllm call. `status` is the LLM_ERR_* code; `detail` is llm_last_error() for calls made
 *  on the JS thread, or llm_status_string() for steps that ran on a worker thread. */
export declare class LlmError extends Error {
    readonly status: number;
    readonly detail: string;
}

export interface ModelOptions {
    /** Default for sessions; <= 0: the number of physical cores. */
    nThreads?: number;
    /** Load the tokenizer only. */
    vocabOnly?: boolean;
    /** RESIDENCY_*: which transformer blocks stay in RAM. */
    residency?: number;
    /** With RESIDENCY_BUDGET: bytes of weights kept in RAM. */
    ramBudgetBytes?: number;
    /** Streamed blocks read ahead by an I/O thread (ignored by loadModelIo, which uses 0). */
    prefetchDepth?: number;
    /** PAGE_CACHE_*; files only. */
    pageCache?: number;
    /** Called with a fraction in [0, 1] on the JS thread; return false (or throw) to cancel the load. */
    progress?: (fraction: number) => boolean | void;
}

export interface IoOptions extends ModelOptions {
    /** Call source.close() when libllm releases the source (the model and its sessions are freed). */
    closeSource?: boolean;
}

/** A JS byte source: readAt must fill dst completely, synchronously; throw to fail the read. */
export interface ByteSource {
    size: number | (() => number);
    readAt(offset: number, dst: Buffer): void;
    close?(): void;
}

export interface SessionOptions {
    /** Context length in tokens; <= 0: min(training context, 4096). */
    nCtx?: number;
    nThreads?: number;
    /** 0 = greedy. Default 0.8. */
    temperature?: number;
    topK?: number;
    topP?: number;
    minP?: number;
    repeatPenalty?: number;
    repeatLastN?: number;
    seed?: number | bigint;
    logitsAll?: boolean;
    /** libllm 0.3: tokenize control-token text in prompts (a rendered chat template's "<|im_start|>") as those tokens. Default false. */
    parseSpecial?: boolean;
    /** libllm 0.3: element type of the cached keys. Default KV_F16. */
    kvTypeK?: KvType;
    /** libllm 0.3: element type of the cached values. Default KV_F16. */
    kvTypeV?: KvType;
    /** libllm 0.3: drop the oldest positions (after nKeep) instead of failing with ERR_CONTEXT_FULL. Default false. */
    contextShift?: boolean;
    /** libllm 0.3: positions context shift never drops. Default 0. */
    nKeep?: number;
    /** libllm 0.4: llama.cpp's presence penalty over the repeatLastN history. Default 0. */
    presencePenalty?: number;
    /** libllm 0.4: llama.cpp's frequency penalty over the repeatLastN history. Default 0. */
    frequencyPenalty?: number;
}

/** A token and its natural-log probability. */
export interface TokenLogprob {
    token: number;
    logprob: number;
}

/** One message of a conversation: [role, content] or { role, content }. */
export type ChatMessage = readonly [string, string] | { role: string; content: string };

export interface ChatTemplateOptions {
    /** End with the template's opening of an assistant turn (add_generation_prompt). Default true. */
    addAssistant?: boolean;
}

export interface GenerateOptions {
    /** Default 256. */
    maxTokens?: number;
    /** Aborting it cancels the step in flight; the iterator then throws signal.reason. */
    signal?: AbortSignal;
}

export interface TokenStep {
    /** The token id; -1 for a final step that only flushes an incomplete UTF-8 sequence or text held back for stop strings. */
    token: number;
    /** Decoded incrementally as UTF-8; '' while a multi-byte character is incomplete. */
    text: string;
    /** The raw bytes of the token's piece. */
    bytes: Buffer;
}

export interface MemoryPlan {
    n_layer: number;
    n_resident_layers: number;
    n_stream_slots: number;
    resident_block_bytes: number;
    stream_slot_bytes: number;
    lm_head_bytes: number;
    embedding_bytes: number;
    kv_cache_bytes: number;
    scratch_bytes: number;
    total_bytes: number;
    minimum_weight_bytes: number;
}

export interface Stats {
    prompt_tokens: number;
    generated_tokens: number;
    prefill_seconds: number;
    decode_seconds: number;
    bytes_read: number;
    read_calls: number;
    io_wait_seconds: number;
    /** libllm 0.4 (llm_stats version 2); absent with an older library. */
    passes?: number;
    drafted_tokens?: number;
    accepted_tokens?: number;
}

/** Options of Session.setSpeculation; left out: llm_speculation_params_init's defaults. */
export interface SpeculationOptions {
    /** Proposes tokens; needs the session model's vocabulary. The library keeps its own reference. */
    draft?: Model | null;
    /** Most tokens proposed per pass, 1..64 (default 8). */
    nDraft?: number;
    /** Prompt lookup n-gram size; 0 (default): off. */
    lookupNgram?: number;
    /** The draft stops below this probability of its own next token; 0 (default): always nDraft. */
    draftPMin?: number;
}

/** One session's outcome of nextBatch: status OK, DONE or that session's ERR_*. */
export interface BatchResult {
    token: number;
    status: number;
}

export declare class Model {
    /** True after free(). */
    readonly freed: boolean;
    readonly nVocab: number;
    readonly bos: number;
    readonly eos: number;
    /** Releases the host's handle. Idempotent; sessions on the model stay usable. */
    free(): void;
    /** llm_model_info_json, parsed. */
    info(): Record<string, unknown>;
    memoryPlan(nCtx?: number): MemoryPlan;
    /** The run-time RAM dial; only while no session of this model is generating. */
    setRamBudget(bytes: number): void;
    isEog(token: number): boolean;
    tokenize(text: string | Uint8Array, opts?: { addBos?: boolean; parseSpecial?: boolean }): number[];
    tokenToPiece(token: number): Buffer;
    detokenize(tokens: readonly number[]): string;
    /** A GGUF metadata value as a string (numbers in decimal, booleans 'true'/'false'); null if the key is absent. */
    metaString(key: string): string | null;
    /** The model's chat template (Jinja source), or the named one; null if the file has none. */
    chatTemplate(name?: string | null): string | null;
    /** Renders messages with the model's chat template, or opts.template; throws ERR_NOT_FOUND without either. */
    applyChatTemplate(messages: readonly ChatMessage[], opts?: ChatTemplateOptions & { template?: string | null }): string;
    createSession(opts?: SessionOptions): Session;
}

export declare class Session {
    constructor(model: Model, opts?: SessionOptions);
    readonly model: Model;
    /** True after free(). */
    readonly freed: boolean;
    /** Tokens in the context. */
    readonly nPast: number;
    /** Idempotent. A call in flight is cancelled and the handle freed when it returns. */
    free(): void;
    /** Cancels the step in flight, or the next pull step. */
    cancel(): void;
    /** Forgets all tokens. Throws while a call is in flight. */
    reset(): void;
    /** Runs tokens through the model on a worker thread. */
    prefill(tokens: readonly number[]): Promise<void>;
    /** One pull step on a worker thread; null at an end-of-generation token or a stop string (see lastStatus). */
    next(): Promise<{ token: number; bytes: Buffer } | null>;
    /** How the last step ended: OK, DONE or STOPPED (libllm 0.4). */
    readonly lastStatus: number;
    /** libllm 0.4: only text of the GBNF grammar from rule root (null: "root"); null removes it. */
    setGrammar(gbnf: string | null, root?: string | null): void;
    /** libllm 0.4: only JSON the schema (an object or its JSON text) accepts; null removes it. */
    setJsonSchema(schema: object | string | null): void;
    /** libllm 0.4: generation ends at the first occurrence of any of them (lastStatus STOPPED); [] turns them off. */
    setStop(stops: readonly string[] | null): void;
    /** libllm 0.4: bias added to token logits (-Infinity bans); {} or null removes the map. */
    setLogitBias(bias: Map<number, number> | Record<number, number> | null): void;
    /** libllm 0.4: log-probabilities of every later sampled token with nTop alternatives; null turns them off. */
    setLogprobs(nTop?: number | null): void;
    /** libllm 0.4: the last sampled token, its log-probability and its top alternatives. */
    logprobs(): { token: number; logprob: number; top: TokenLogprob[] };
    /** libllm 0.4: the text held back for stop strings (and what next() got with the end). */
    flushHeld(): Buffer;
    /** Prefills prompt ('' or null continues) and yields up to maxTokens tokens, each computed on a worker thread. */
    generate(prompt: string | null, opts?: GenerateOptions): AsyncGenerator<TokenStep, void, undefined>;
    /** generate(), joined into one string. */
    complete(prompt: string | null, opts?: GenerateOptions): Promise<string>;
    stats(): { total: Stats; lastCall: Stats };
    statsJson(): Record<string, unknown>;
    /** Per text its pooled vector (pooling 'none': every token's row, one after another); libllm 0.4. */
    embed(texts: string | string[], pooling?: 'none' | 'mean' | 'cls' | 'last' | 'rank' | number,
          normalize?: boolean): Float32Array[];
    /** True if created with parseSpecial: generate() tokenizes its prompt with special tokens. */
    readonly parseSpecial: boolean;
    /** Drops the context from position nPast on. Throws while a call is in flight. */
    truncate(nPast: number): void;
    /** Speculative decoding for generate()/next() from now on (libllm 0.4). Throws while a call is in flight. */
    setSpeculation(opts?: SpeculationOptions): void;
    /** The tokens in the context, in order. */
    tokens(): number[];
    /** Saves the conversation to a file (on a worker thread). */
    save(path: string): Promise<void>;
    /** Restores a conversation saved on the same model file (on a worker thread); unchanged on failure. */
    load(path: string): Promise<void>;
    /** save() into a Buffer, on the JS thread. */
    saveBuffer(): Buffer;
    /** load() from saved bytes, on the JS thread. */
    loadBuffer(data: Buffer | Uint8Array): void;
}

export declare const LOG_DEBUG: 0;
export declare const LOG_INFO: 1;
export declare const LOG_WARN: 2;
export declare const LOG_ERROR: 3;
export declare const LOG_OFF: 4;
/** Library log lines below level are dropped (default LOG_WARN; they go to stderr). */
export declare function setLogLevel(level: number): void;

/** Renders messages with a Jinja chat template and no model (bos_token and eos_token are ''). */
export declare function applyChatTemplate(template: string, messages: readonly ChatMessage[], opts?: ChatTemplateOptions): string;

/** A tool call parsed out of a model's output; arguments is JSON text. */
export interface ToolCall { name: string; arguments: string; id: string; }
/** llm_chat_parse's result. */
export interface ParsedMessage {
    content: string;
    reasoning_content: string;
    tool_calls: ToolCall[];
    /** The tool-call format read off the template ('unknown' when none is known). */
    format: string;
    parsed: boolean;
}
/** Renders a request in apply_chat_template's form: { messages, tools, documents, add_generation_prompt, ... } (libllm 0.4). */
export declare function applyChatTemplateJson(request: object | string, opts: { template?: string | null; model?: Model | null }): string;
/** Parses a model's output into content, reasoning and tool calls (libllm 0.4). */
export declare function chatParse(raw: string, opts: { template?: string | null; model?: Model | null; params?: object | string | null }): ParsedMessage;

/** "MAJOR.MINOR.PATCH" of the loaded libllm. */
export declare function version(): string;
/** One token for each session (one model) in one evaluation pass, on a worker thread (libllm 0.4). */
export declare function nextBatch(sessions: readonly Session[]): Promise<BatchResult[]>;
/** Loads a GGUF file on a worker thread. */
export declare function loadModel(path: string, opts?: ModelOptions): Promise<Model>;
/** Loads a GGUF file on the JS thread (blocking it). */
export declare function loadModelSync(path: string, opts?: ModelOptions): Model;
/** Loads a model whose bytes come from JS, on the JS thread; reads during generation are run on the JS thread. */
export declare function loadModelIo(
    source: Buffer | Uint8Array | number | { fd: number } | ByteSource,
    opts?: IoOptions,
): Model;
/** The raw koffi functions of llm.h (loaded on first use), for calls this binding does not wrap. */
export declare function lib(): Record<string, ((...args: any[]) => any) & { async: (...args: any[]) => void }>;

export declare const POOLING_UNSPECIFIED: -1;
export declare const POOLING_NONE: 0;
export declare const POOLING_MEAN: 1;
export declare const POOLING_CLS: 2;
export declare const POOLING_LAST: 3;
export declare const POOLING_RANK: 4;
