// ESM entry point: the CommonJS module (index.js) with its exports as named exports too.
import llm from './index.js';

export default llm;
export const {
    version, setLogLevel, LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF, lib, loadModel, loadModelSync, loadModelIo,
    Model, Session, LlmError, applyChatTemplate, applyChatTemplateJson, chatParse, nextBatch,
    OK, DONE, STOPPED, ERR_INVALID_ARGUMENT, ERR_IO, ERR_FORMAT, ERR_UNSUPPORTED, ERR_OUT_OF_MEMORY,
    ERR_CONTEXT_FULL, ERR_BUFFER_TOO_SMALL, ERR_CANCELLED, ERR_INTERNAL, ERR_NOT_FOUND, KV_F32, KV_F16, KV_Q8_0,
    RESIDENCY_RESIDENT, RESIDENCY_STREAMED, RESIDENCY_BUDGET, PAGE_CACHE_KEEP, PAGE_CACHE_DROP, PAGE_CACHE_DIRECT,
    PAGE_CACHE_MAP,
    POOLING_UNSPECIFIED, POOLING_NONE, POOLING_MEAN, POOLING_CLS, POOLING_LAST, POOLING_RANK,
} = llm;
