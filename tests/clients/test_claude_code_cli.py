"""The real Claude Code CLI through the bridge: what `claude -p` prints, and what reaches the
OpenAI-compatible model server behind the bridge (the fake upstream), a Chat one or, at the end, an
OpenAI Responses one.

The CLI is the npm package pinned in tests/clients/package.json, which `make test` installs into
.clients/ where npm exists. Without it these tests skip, except under CI=true, where a missing
CLI is a failure. Each run is hermetic: a fresh HOME and config folder, a dummy key, the bridge
on loopback as ANTHROPIC_BASE_URL, and the switches that keep Claude Code from calling anything
else (telemetry, error reports, auto-update, non-essential traffic). Its debug log is kept, since
Claude Code hides a refused request from the user: it retries, then works around it.
"""

import dataclasses
import json
import os
import pathlib
import uuid

import pytest

from tests.fake_upstream import ResponsesRules, chat_stream, fixture, json_reply, responses_answer, responses_stream
from tests.helpers.clis import pinned_cli, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "@anthropic-ai/claude-code"
VERSION = json.loads((ROOT / "tests" / "clients" / "package.json").read_text())["dependencies"][PACKAGE]
CLAUDE = ROOT / ".clients" / "node_modules" / ".bin" / "claude"
TIMEOUT = 60  # seconds for one `claude -p`; each takes one or two here
QUIET = {  # documented switches: nothing leaves the machine but the calls to ANTHROPIC_BASE_URL
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


@pytest.fixture(scope="module")
def claude_cli(tmp_path_factory):
    return pinned_cli("Claude Code", CLAUDE, VERSION, tmp_path_factory.mktemp("claude-version"))


@dataclasses.dataclass
class Run:
    stdout: str
    stderr: str
    api_errors: list  # the debug log's "API error" lines: requests Claude Code was refused

    @property
    def transcript(self):  # for assertion messages
        errors = "\n".join(self.api_errors) or "none"
        return f"claude stdout:\n{self.stdout}\nclaude stderr:\n{self.stderr}\nAPI errors in its debug log:\n{errors}"


class ClaudeCode:
    """`claude -p` in a fresh HOME and project folder, talking to the bridge at `base_url`."""

    def __init__(self, executable, base_url, root):
        self.executable, self.base_url = executable, base_url
        self.home, self.project = root / "home", root / "project"
        (self.home / ".claude").mkdir(parents=True)
        self.project.mkdir()

    def run(self, prompt, *options):
        debug = self.home / "debug.log"
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-dummy-key-for-tests",
            **QUIET,
        }
        command = [str(self.executable), "-p", prompt, "--debug-file", str(debug), *options]
        done = run_cli(command, self.project, env, TIMEOUT)
        log = debug.read_text(errors="replace").splitlines() if debug.exists() else []
        run = Run(done.stdout, done.stderr, [line for line in log if "API error" in line])
        assert done.returncode == 0, f"claude -p exited with {done.returncode}\n{run.transcript}"
        return run


@pytest.fixture
def claude(claude_cli, bridge, tmp_path):
    return ClaudeCode(claude_cli, bridge.url, tmp_path)


def model_server(*turns):
    """The fake's answer to anything: the conversation's turn n (a request carrying tools and n tool
    results) gets `turns[n]`, the last one after that; a side request without tools a short text,
    and a non-streamed request (Claude Code's fallback after a failed stream) a recorded body."""

    def answer(request):
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("stream") is not True:
            return fixture("openai/text.json")
        if not body.get("tools"):
            return chat_stream("ok")
        results = sum(message.get("role") == "tool" for message in body["messages"])
        return turns[min(results, len(turns) - 1)]

    return answer


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def conversation(fake, prompt):
    """The upstream requests of the main conversation: with tools, and the user's prompt."""
    return [
        r.body
        for r in fake.requests
        if r.path.endswith("/chat/completions")
        and isinstance(r.body, dict)
        and r.body.get("tools")
        and any(m["role"] == "user" and prompt in text_of(m.get("content")) for m in r.body["messages"])
    ]


def tool_names(body):
    return [tool["function"]["name"] for tool in body["tools"]]


def answer_to(body, call_id):
    """The tool message answering `call_id` in an upstream request, or None."""
    return next((m for m in body["messages"] if m["role"] == "tool" and m.get("tool_call_id") == call_id), None)


def test_a_prompt_prints_the_models_text(claude, fake):
    """`claude -p` on a Chat upstream: the prompt arrives as a streamed Chat request, the text comes back."""
    fake.default = model_server(chat_stream("Hi there, from the fake model."))
    run = claude.run("say hi")
    assert run.stdout.strip() == "Hi there, from the fake model.", run.transcript
    assert run.api_errors == [], run.transcript
    [sent] = conversation(fake, "say hi")
    assert sent["stream"] is True and sent["model"].startswith("claude-"), sent["model"]
    assert sent["messages"][0]["role"] == "system" and "Claude" in sent["messages"][0]["content"]
    assert {"Bash", "Read", "ToolSearch"} <= set(tool_names(sent))
    assert {tool["type"] for tool in sent["tools"]} == {"function"}


def test_a_read_tool_call_runs_in_claude_code_and_its_result_goes_back_as_a_tool_message(claude, fake):
    """The agent loop: the model's Chat tool call reaches Claude Code as a Read it runs, and the file's
    content comes back upstream as the role:"tool" answer to that call."""
    secret = uuid.uuid4().hex
    notes = claude.project / "notes.txt"
    notes.write_text(f"the secret word is {secret}\n")
    prompt = "Read notes.txt and tell me the secret word"
    fake.default = model_server(
        chat_stream(tool_calls=[("call_read_1", "Read", {"file_path": str(notes)})]),
        chat_stream("The file has a secret word in it."),
    )
    run = claude.run(prompt, "--allowedTools", "Read")
    assert run.stdout.strip() == "The file has a secret word in it.", run.transcript
    assert run.api_errors == [], run.transcript
    first, second = conversation(fake, prompt)
    assert answer_to(first, "call_read_1") is None
    [call] = next(m for m in second["messages"] if m["role"] == "assistant" and m.get("tool_calls"))["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_read_1", "Read")
    assert json.loads(call["function"]["arguments"]) == {"file_path": str(notes)}
    result = answer_to(second, "call_read_1")
    assert result is not None and secret in text_of(result["content"]), second["messages"][-3:]


def test_a_tool_search_result_reaches_the_model_on_the_first_try(claude, fake):
    """ToolSearch loads a deferred tool with a tool_reference block. A refused request costs Claude Code
    two silent retries, then it turns tool search off: the request must pass the first time, name the
    loaded tool, and offer it."""
    prompt = "Fetch https://example.com"
    search = {"query": "select:WebFetch", "max_results": 1}
    fake.default = model_server(
        chat_stream(tool_calls=[("call_search_1", "ToolSearch", search)]), chat_stream("WebFetch is ready.")
    )
    run = claude.run(prompt)
    assert run.api_errors == [], run.transcript
    assert run.stdout.strip() == "WebFetch is ready.", run.transcript
    turns = conversation(fake, prompt)
    assert "ToolSearch" in tool_names(turns[0]) and "WebFetch" not in tool_names(turns[0])
    answered = [body for body in turns if answer_to(body, "call_search_1")]
    assert len(answered) == 1, f"the ToolSearch result reached the upstream {len(answered)} times"
    [body] = answered
    result = text_of(answer_to(body, "call_search_1")["content"])
    assert "WebFetch" in result, result
    assert {"WebFetch", "ToolSearch"} <= set(tool_names(body)), tool_names(body)


# Beta flags Bedrock takes (the supported list of AWS's Anthropic request parameters, in part).
BEDROCK_BETAS = {
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "context-management-2025-06-27",
    "context-1m-2025-08-07",
    "effort-2025-11-24",
    "tool-search-tool-2025-10-19",
}


def test_a_prompt_reaches_claude_on_bedrock_signed_and_its_stream_comes_back(
    claude_cli, start_bridge, monkeypatch, tmp_path
):
    """Claude Code through the bridge to a Bedrock deployment (tests/fake_clouds.py): its Messages
    requests go on as InvokeModelWithResponseStream, SigV4-signed (the fake refuses any other),
    and the event-stream frames come back to it as its own SSE."""
    from tests.fake_clouds import ACCESS_KEY, REGION, SECRET_KEY, SESSION_TOKEN, FakeBedrock
    from tests.fake_upstream import json_reply, messages_stream

    for name, value in (
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
        ("AWS_SESSION_TOKEN", SESSION_TOKEN),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", str(tmp_path / "aws-config")),
        ("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials")),
    ):
        monkeypatch.setenv(name, value)
    bedrock = FakeBedrock()
    try:

        def answer(request):
            if request.path.endswith("/invoke-with-response-stream"):
                return messages_stream("Hi there, from Bedrock.")
            if request.path.endswith("/count-tokens"):
                return json_reply({"inputTokens": 10})
            return fixture("anthropic/text.json")

        bedrock.default = answer
        bedrock.betas = BEDROCK_BETAS  # Claude Code sends more, which Bedrock would refuse: the route keeps them back
        deployment = {
            "name": "bedrock",
            "cloud": "bedrock",
            "region": REGION,
            "endpoint_url": bedrock.url,
            "model": "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "betas": sorted(BEDROCK_BETAS),
        }
        routes = {"routes": [{"models": ["claude-*"], "deployments": [deployment]}]}
        live = start_bridge(BRIDGE_ROUTES=json.dumps(routes), BRIDGE_CLIENT_KEYS="cc:sk-ant-dummy-key-for-tests")
        run = ClaudeCode(claude_cli, live.url, tmp_path).run("say hi")
        assert run.stdout.strip() == "Hi there, from Bedrock.", run.transcript
        assert run.api_errors == [], run.transcript
        streamed = [r for r in bedrock.requests if r.path.endswith("/invoke-with-response-stream")]
        assert streamed and all(r.body["anthropic_version"] == "bedrock-2023-05-31" for r in streamed)
        assert any(r.body.get("tools") and "say hi" in json.dumps(r.body["messages"]) for r in streamed)
        assert all(bedrock.refusal(r) is None for r in bedrock.requests), "every request signed"
        assert {b for r in streamed for b in r.body.get("anthropic_beta", ())} <= BEDROCK_BETAS
    finally:
        bedrock.close()


# -- on an OpenAI Responses upstream ------------------------------------------------------------


@pytest.fixture
def claude_on_responses(claude_cli, start_bridge, other_fake, tmp_path):
    """Claude Code on a bridge whose claude-* models are served by a Responses deployment on
    `other_fake`, which keeps OpenAI's rules (store:false item ids, unknown fields...)."""
    other_fake.rules = ResponsesRules()
    deployment = {"name": "responses", "protocol": "openai-responses", "base_url": f"{other_fake.url}/v1"}
    routes = {"routes": [{"models": ["claude-*"], "deployments": [{**deployment, "model": "gpt-5"}]}]}
    live = start_bridge(BRIDGE_ROUTES=json.dumps(routes))
    return ClaudeCode(claude_cli, live.url, tmp_path)


def responses_server(*turns):
    """model_server for a Responses upstream: the input-token count, a side request's text, and
    turn n (a request with tools and n function_call_output items) `turns[n]`."""

    def answer(request):
        body = request.body if isinstance(request.body, dict) else {}
        if request.path.endswith("/input_tokens"):
            return json_reply({"object": "response.input_tokens", "input_tokens": 100})
        if body.get("stream") is not True:
            return json_reply(responses_answer("ok"))
        if not body.get("tools"):
            return responses_stream("ok")
        results = sum(item.get("type") == "function_call_output" for item in body["input"])
        return turns[min(results, len(turns) - 1)]

    return answer


def responses_conversation(fake, prompt):
    """The Responses requests of the main conversation: with tools, and the user's prompt."""
    return [
        r.body
        for r in fake.requests
        if r.path.endswith("/responses")
        and r.body.get("tools")
        and any(item.get("role") == "user" and prompt in text_of(item.get("content")) for item in r.body["input"])
    ]


def test_on_responses_a_prompt_prints_the_models_text(claude_on_responses, other_fake):
    other_fake.default = responses_server(responses_stream("Hi there, from the Responses model."))
    run = claude_on_responses.run("say hi")
    assert run.stdout.strip() == "Hi there, from the Responses model.", run.transcript
    assert run.api_errors == [], run.transcript
    [sent] = responses_conversation(other_fake, "say hi")
    assert sent["stream"] is True and sent["model"] == "gpt-5" and sent["store"] is False
    assert "Claude" in sent["instructions"] and {"Bash", "Read"} <= {tool["name"] for tool in sent["tools"]}


def test_on_responses_a_tool_loop_carries_the_reasoning_item_back_byte_for_byte(claude_on_responses, other_fake):
    """The model reasons, then calls Read; Claude Code runs it and sends the next turn, whose input
    holds the first answer's reasoning item as the upstream sent it, then the call and its output."""
    secret = uuid.uuid4().hex
    notes = claude_on_responses.project / "notes.txt"
    notes.write_text(f"the secret word is {secret}\n")
    prompt = "Read notes.txt and tell me the secret word"
    first = responses_stream(
        reasoning=("I should read the file first.", "gAAAAAB-encrypted-" + secret[:8]),
        function_calls=[("call_read_1", "Read", {"file_path": str(notes)})],
    )
    other_fake.default = responses_server(first, responses_stream("The file has a secret word in it."))
    run = claude_on_responses.run(prompt, "--allowedTools", "Read")
    assert run.stdout.strip() == "The file has a secret word in it.", run.transcript
    assert run.api_errors == [], run.transcript
    turns = responses_conversation(other_fake, prompt)
    second = turns[-1]
    sent = next(
        json.loads(raw.split(b"data: ", 1)[1]) for raw in first.events if b'"reasoning"' in raw and b"item.done" in raw
    )
    reasoning = [item for item in second["input"] if item.get("type") == "reasoning"]
    assert [json.dumps(item) for item in reasoning] == [json.dumps(sent["item"])], reasoning
    after = second["input"][second["input"].index(reasoning[0]) + 1 :]
    assert after[0] == {
        "type": "function_call",
        "call_id": "call_read_1",
        "name": "Read",
        "arguments": json.dumps({"file_path": str(notes)}, separators=(",", ":")),
    }
    assert after[1]["type"] == "function_call_output" and secret in text_of(after[1]["output"])


def test_a_prompt_reaches_claude_on_vertex_with_a_google_token_and_its_stream_comes_back(
    claude_cli, start_bridge, tmp_path
):
    """Claude Code through the bridge to a Vertex AI deployment (tests/fake_clouds.py): its Messages
    requests go on as streamRawPredict with a token google-auth got from a service-account key
    (the fake takes no other), and the answer's events come back to it as they came."""
    from bench.clouds import service_account
    from tests.fake_clouds import FakeTokenEndpoint, FakeVertex
    from tests.fake_upstream import json_reply, messages_stream

    key_file = tmp_path / "service-account.json"
    tokens = FakeTokenEndpoint(None)
    tokens.public_key = service_account(key_file, tokens.url)

    def answer(request):
        if request.path.endswith(":streamRawPredict"):
            return messages_stream("Hi there, from Vertex.")
        if "count-tokens" in request.path:
            return json_reply({"input_tokens": 10})
        return fixture("anthropic/text.json")

    vertex = FakeVertex(tokens, answer)
    try:
        deployment = {
            "name": "vertex",
            "cloud": "vertex",
            "project": "bridge-test",
            "region": "us-east5",
            "endpoint_url": vertex.url,
            "credentials_file": str(key_file),
            "model": "claude-sonnet-4-5@20250929",
        }
        routes = {"routes": [{"models": ["claude-*"], "deployments": [deployment]}]}
        live = start_bridge(BRIDGE_ROUTES=json.dumps(routes), BRIDGE_CLIENT_KEYS="cc:sk-ant-dummy-key-for-tests")
        run = ClaudeCode(claude_cli, live.url, tmp_path).run("say hi")
        assert run.stdout.strip() == "Hi there, from Vertex.", run.transcript
        assert run.api_errors == [], run.transcript
        streamed = [r for r in vertex.requests if r.path.endswith(":streamRawPredict")]
        assert streamed and all(r.body["anthropic_version"] == "vertex-2023-10-16" for r in streamed)
        assert all("model" not in r.body for r in streamed), "Vertex takes the model from the path"
        assert any(r.body.get("tools") and "say hi" in json.dumps(r.body["messages"]) for r in streamed)
        held = {r.headers["authorization"].partition(" ")[2] for r in vertex.requests}
        assert held and held <= set(tokens.issued), "every request with a token google-auth was issued"
    finally:
        vertex.close()
        tokens.close()
