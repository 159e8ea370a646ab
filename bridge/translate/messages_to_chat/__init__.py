"""Client speaks Anthropic Messages; the upstream speaks OpenAI Chat Completions."""
