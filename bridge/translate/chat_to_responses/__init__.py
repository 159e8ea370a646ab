"""Client speaks OpenAI Chat Completions; the upstream speaks OpenAI's Responses API (codex models)."""
