"""OpenAI Responses (Codex CLI, the openai SDK's Responses client) -> a Chat Completions server
(vLLM, Ollama, llama.cpp...)."""
