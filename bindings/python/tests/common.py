"""Shared test settings: the model path (LLM_SHARED_DIR, default ../../../shared beside the repo)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package dir bindings/python

SHARED = os.environ.get("LLM_SHARED_DIR") or os.path.join(HERE, "..", "..", "..", "..", "shared")
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
PROMPT = "Once upon a time"
STORY = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
