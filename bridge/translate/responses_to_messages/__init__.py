"""OpenAI Responses (Codex CLI, the Agents SDK, every Responses API client) -> Anthropic Messages."""
