"""Client speaks Anthropic Messages; the upstream speaks the OpenAI Responses API."""
