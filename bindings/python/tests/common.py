"""Shared test settings: the model path (LLM_SHARED_DIR, default ../../../shared beside the repo)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package dir bindings/python

SHARED = os.environ.get("LLM_SHARED_DIR") or os.path.join(HERE, "..", "..", "..", "..", "shared")
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
PROMPT = "Once upon a time"
STORY = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
HEADER = os.path.join(HERE, "..", "..", "..", "include", "llm.h")
# A short ChatML template, two messages and what Python's Jinja2 renders (trim_blocks, lstrip_blocks).
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CHATML_MESSAGES = [("system", "You are terse."), ("user", "Hi!")]
CHATML_RENDERED = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
# The ChatML instruct copy of stories260K that run_tests.sh writes (bindings/chat_fixture.py), or None.
CHAT_MODEL = os.environ.get("LLM_CHAT_MODEL") or None
