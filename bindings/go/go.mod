module libllm/llm

go 1.19
