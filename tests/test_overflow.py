"""Recognising a context overflow in each upstream's words, and nothing else: one case per wording."""
import pytest

from bridge.overflow import Overflow, find

# (what the upstream's error object says, what it reports). Wordings as the servers print them.
OVERFLOWS = {
    "openai": ({"message": "This model's maximum context length is 128000 tokens. However, your messages "
                           "resulted in 130512 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"},
               Overflow(limit=128000, prompt=130512)),
    "openai, the code alone": ({"message": "Your input exceeds the context window of this model.",
                                "type": "invalid_request_error", "code": "context_length_exceeded"},
                               Overflow()),
    "openai, older, with the completion": (
        {"message": "This model's maximum context length is 4097 tokens, however you requested 4231 tokens "
                    "(3975 in your prompt; 256 for the completion). Please reduce your prompt; or completion length."},
        Overflow(limit=4097, prompt=3975, output=256)),
    "vllm, messages and completion": (
        {"message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
                    "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages "
                    "or completion.", "type": "BadRequestError", "code": 400},
        Overflow(limit=4096, prompt=4000, output=1000)),
    "vllm 0.10-0.17, input alone": (
        {"message": "This model's maximum context length is 32768 tokens. However, your request has 40000 input "
                    "tokens. Please reduce the length of the input messages.", "type": "BadRequestError", "code": 400},
        Overflow(limit=32768, prompt=40000)),
    "vllm 0.10-0.17, max_tokens": (
        {"message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context "
                    "length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
         "type": "BadRequestError", "code": 400},
        Overflow(limit=4096, prompt=2778, output=8000)),
    "vllm 0.18+": (
        {"message": "This model's maximum context length is 8192 tokens. However, you requested 64 output tokens "
                    "and your prompt contains at least 10000 input tokens, for a total of at least 10064 tokens. "
                    "Please reduce the length of the input prompt or the number of requested output tokens. "
                    "(parameter=input_tokens, value=10000)", "type": "BadRequestError", "code": 400},
        Overflow(limit=8192, prompt=10000, output=64)),
    "vllm 0.18+, max_tokens over the window": (
        {"message": "max_tokens=32000 cannot be greater than max_model_len=max_total_tokens=16384. Please request "
                    "fewer output tokens. (parameter=max_tokens, value=32000)", "type": "BadRequestError"},
        Overflow(limit=16384, output=32000)),
    "deepseek": ({"message": "This model's maximum context length is 65536 tokens. However, you requested 70000 "
                             "tokens (70000 in the messages, 0 in the completion). Please reduce the length of the "
                             "messages or completion.", "type": "invalid_request_error"},
                 Overflow(limit=65536, prompt=70000, output=0)),
    "openrouter": ({"message": "This endpoint's maximum context length is 8192 tokens. However, you requested about "
                               "12000 tokens (10000 of text input, 2000 in the output). Please reduce the length of "
                               "either one, or use the \"middle-out\" transform to compress your prompt automatically.",
                    "code": 400},
                   Overflow(limit=8192, prompt=10000, output=2000)),
    "llama.cpp": ({"code": 400, "message": "the request exceeds the available context size, try increasing it",
                   "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096},
                  Overflow(limit=4096, prompt=5000)),
    "llama.cpp, older": ({"code": 400, "message": "the request exceeds the available context size. try increasing "
                                                  "the context size or enable context shift",
                          "type": "invalid_request_error"}, Overflow()),
    "ollama": ({"message": "the input length exceeds the context length"}, Overflow()),
    "lm studio": ({"message": "Trying to keep the first 6269 tokens when context the overflows. However, the model "
                              "is loaded with context length of only 4096 tokens, which is not enough."},
                  Overflow(limit=4096)),
    "mistral": ({"message": "Prompt contains 10000 tokens and 0 draft tokens, too large for model with 8192 maximum "
                            "context length"}, Overflow(limit=8192, prompt=10000)),
    "anthropic, prompt": ({"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 "
                                                                      "maximum"},
                          Overflow(limit=200000, prompt=210000)),
    "anthropic, prompt and max_tokens": (
        {"type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: 188240 + "
                                                     "21333 > 200000, decrease input length or `max_tokens` and try again"},
        Overflow(limit=200000, prompt=188240, output=21333)),
}

NOT_OVERFLOWS = {
    "output cap": {"message": "max_tokens is too large: 128000. This model supports at most 16384 completion "
                              "tokens, whereas you provided 128000.", "type": "invalid_request_error", "code": None},
    "anthropic output cap": {"type": "invalid_request_error", "message": "max_tokens: 100000 > 64000, which is the "
                             "maximum allowed number of output tokens for claude-sonnet-4-20250514"},
    "one string too long": {"message": "Invalid 'messages[3].content': string too long. Expected a string with "
                                       "maximum length 1048576, but got a string with length 2097152 instead.",
                            "code": "string_above_max_length"},
    "tokens per minute": {"message": "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
                                     "Limit 30000, Used 29000, Requested 5000.", "code": "rate_limit_exceeded"},
    "anthropic body bytes": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number "
                                                                     "of bytes."},
    "a tool without its result": {"message": "messages.3: `tool_use` ids were found without `tool_result` blocks"},
}


@pytest.mark.parametrize("detail, expected", OVERFLOWS.values(), ids=OVERFLOWS.keys())
def test_each_wording_of_an_overflow_is_found_with_the_numbers_it_gives(detail, expected):
    assert find(detail) == expected


@pytest.mark.parametrize("detail", NOT_OVERFLOWS.values(), ids=NOT_OVERFLOWS.keys())
def test_errors_that_only_look_like_an_overflow_are_not_one(detail):
    assert find(detail) is None


@pytest.mark.parametrize("detail", [None, "prompt is too long", {"message": 7}, {}])
def test_an_error_object_of_no_known_shape_is_no_overflow(detail):
    assert find(detail) is None
