// The 0.1 ABI kept alive in libllm.so for hosts built against llm.h 0.1, whose *_init functions took
// no version argument: C cannot overload, and such a host calling the two-argument function would
// pass a garbage version. The shared library exports these under the symbol version LLM_0.1 (see
// cmake/llm.map); the dynamic linker binds 0.1 binaries (their references are unversioned, or
// LLM_0.1) here and everything built against the current header to the @@LLM_0.2 definitions.
// They fill exactly the 0.1 layouts: model params version 3, session params version 1.
// Only in the shared library: static links and tests have no symbol versions.
#include "llm.h"

#if defined(__ELF__)

extern "C" {

// Default visibility for the .symver aliases; the names themselves are not llm_* and so stay local.
LLM_API void llmcompat_0_1_model_params_init(llm_model_params *p) {
    if (p) llm_model_params_init(p, 3);
}

LLM_API void llmcompat_0_1_session_params_init(llm_session_params *p) {
    if (p) llm_session_params_init(p, 1);
}

}  // extern "C"

__asm__(".symver llmcompat_0_1_model_params_init, llm_model_params_init@LLM_0.1");
__asm__(".symver llmcompat_0_1_session_params_init, llm_session_params_init@LLM_0.1");

#endif
