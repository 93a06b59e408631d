#ifndef LLM_GO_BRIDGE_H
#define LLM_GO_BRIDGE_H
#include <stdint.h>
#include <stdlib.h>

#include "llm.h"

int32_t llm_go_generate(llm_session *s, const char *prompt, int32_t max_tokens, uintptr_t handle);
int32_t llm_go_model_load(const char *path, llm_model_params *p, uintptr_t handle, llm_model **out);
int32_t llm_go_session_save_io(llm_session *s, uintptr_t handle);
int32_t llm_go_session_load_io(llm_session *s, uintptr_t handle);
#endif
