"""bridge: OpenAI Chat Completions <-> Anthropic Messages translator."""
