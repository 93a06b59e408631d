// llm.h must compile cleanly as C++ too (hosts include it from C++ apps).
#include "llm.h"
static_assert(LLM_OK == 0, "status codes are part of the ABI");
