"""Client speaks OpenAI Chat Completions; the upstream speaks Anthropic Messages."""
