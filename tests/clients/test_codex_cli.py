"""The real Codex CLI through bridge's /v1/responses: what `codex exec --json` prints, and what
reaches the Anthropic Messages server, or the Chat-only server, behind bridge (the fake upstream).

The CLI is the npm package pinned in tests/clients/package.json (a ~315 MB native binary in an
optional dependency), which `make test` installs into .clients/ where npm exists. Without it
these tests skip, except under CI=true, where a missing CLI is a failure. Each run is hermetic
(tests/fixtures/clients/codex-0.171.0/CODEX.md §1): a fresh HOME and CODEX_HOME whose
config.toml points a `wire_api = "responses"` provider at bridge, a dummy key in the provider's
env_key, the switches that stop every other outbound call, and proxies that lead nowhere for
anything that would still try.
"""

import dataclasses
import json
import os
import pathlib
import shutil

import pytest

from tests.fake_upstream import chat_stream, messages_stream
from tests.helpers.clis import pinned_cli, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "@openai/codex"
VERSION = json.loads((ROOT / "tests" / "clients" / "package.json").read_text())["dependencies"][PACKAGE]
CODEX = ROOT / ".clients" / "node_modules" / ".bin" / "codex"
CATALOG = ROOT / "tests" / "fixtures" / "clients" / f"codex-{VERSION}" / "model_catalog.json"
MODEL = "claude-sonnet-4-5"  # the catalogue's slug: a first-class Codex model, so apply_patch is declared too
TIMEOUT = 90  # seconds for one `codex exec`; each takes a few here
KEY = "sk-dummy-key-for-codex-tests"
NOWHERE = "http://127.0.0.1:9"  # the discard port: a proxy that refuses whatever still tries to go out


@pytest.fixture(scope="module")
def codex_cli(tmp_path_factory):
    return pinned_cli("Codex", CODEX, VERSION, tmp_path_factory.mktemp("codex-version"))


@dataclasses.dataclass
class Run:
    stdout: str
    stderr: str

    @property
    def events(self):
        """The --json stdout: one JSON event a line (thread.started, item.completed, turn.completed...)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    def items(self, kind):
        return [e["item"] for e in self.events if e["type"] == "item.completed" and e["item"]["type"] == kind]

    @property
    def transcript(self):  # for assertion messages
        return f"codex stdout:\n{self.stdout}\ncodex stderr:\n{self.stderr[-4000:]}"


class Codex:
    """`codex exec` in a fresh HOME, CODEX_HOME and work folder, its model provider bridge at `base_url`."""

    def __init__(self, executable, base_url, root):
        self.executable = executable
        self.home, self.codex_home, self.work = root / "home", root / "codex-home", root / "work"
        for folder in (self.home, self.codex_home, self.work):
            folder.mkdir()
        shutil.copy(CATALOG, self.codex_home / "model_catalog.json")
        (self.codex_home / "config.toml").write_text(f'''
model = "{MODEL}"
model_provider = "bridge"
model_catalog_json = "{self.codex_home / "model_catalog.json"}"
check_for_update_on_startup = false
[analytics]
enabled = false
[features]
plugins = false
apps = false
[model_providers.bridge]
name = "bridge"
base_url = "{base_url}/v1"
env_key = "BRIDGE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
''')

    def exec(self, prompt):
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            "BRIDGE_API_KEY": KEY,
            "NO_PROXY": "127.0.0.1,localhost",
            **{name: NOWHERE for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
        }
        command = [str(self.executable), "exec", "--skip-git-repo-check", "--json", "-s", "danger-full-access", prompt]
        done = run_cli(command, self.work, env, TIMEOUT)
        run = Run(done.stdout, done.stderr)
        assert done.returncode == 0, f"codex exec exited with {done.returncode}\n{run.transcript}"
        return run


@pytest.fixture
def codex(codex_cli, bridge, tmp_path):
    return Codex(codex_cli, bridge.url, tmp_path)


@pytest.fixture
def chat_codex(codex_cli, start_bridge, fake, tmp_path):
    """Codex through a bridge whose every model is served by a Chat-only server (vLLM, Ollama...)
    that wants its reasoning back in the history (BRIDGE_OPENAI_REASONING_HISTORY, as DeepSeek)."""
    deployment = {
        "name": "local",
        "protocol": "openai-chat",
        "base_url": f"{fake.url}/v1",
        "model": CHAT_MODEL,
        "reasoning_history": True,
    }
    routes = {"default_routes": False, "routes": [{"models": ["*"], "deployments": [deployment]}]}
    return Codex(codex_cli, start_bridge(BRIDGE_ROUTES=json.dumps(routes)).url, tmp_path)


CHAT_MODEL = "qwen3-coder"  # the Chat server's name for the model Codex calls MODEL
THOUGHT = "The user wants the command run; exec_command runs it."


def tool_results(body):
    return [
        block
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def text_of(content):
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [])


def model_server(*turns):
    """The fake's answer to any request: turn n (a request carrying n tool results) gets `turns[n]`,
    the last one after that."""

    def answer(request):
        return turns[min(len(tool_results(request.body)), len(turns) - 1)]

    return answer


def test_a_prompt_prints_the_models_text(codex, fake):
    fake.default = model_server(messages_stream("Hi there, from Claude behind bridge."))
    run = codex.exec("say hi")
    assert [item["text"] for item in run.items("agent_message")] == ["Hi there, from Claude behind bridge."], (
        run.transcript
    )
    assert run.events[-1]["type"] == "turn.completed", run.transcript
    [sent] = fake.requests
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == KEY
    assert sent.body["model"] == MODEL and sent.body["stream"] is True
    assert "say hi" in text_of(sent.body["messages"][-1]["content"])
    assert {"exec_command", "apply_patch"} <= {tool["name"] for tool in sent.body["tools"]}


def test_a_shell_tool_call_runs_in_codex_and_its_output_goes_back_as_a_tool_result(codex, fake):
    """The agent loop: Codex runs the model's exec_command and sends its output, which reaches the
    upstream as the tool_result of that tool_use."""
    fake.default = model_server(
        messages_stream(tool_uses=[("toolu_codex_1", "exec_command", {"cmd": "echo hello-from-codex"})]),
        messages_stream("The command printed hello-from-codex."),
    )
    run = codex.exec("run echo hello-from-codex")
    assert [item["text"] for item in run.items("agent_message")] == ["The command printed hello-from-codex."], (
        run.transcript
    )
    [command] = run.items("command_execution")
    assert "hello-from-codex" in command["aggregated_output"], run.transcript
    first, second = [request.body for request in fake.requests]
    assert tool_results(first) == []
    [use] = [block for block in second["messages"][-2]["content"] if block["type"] == "tool_use"]
    assert (use["id"], use["name"], use["input"]) == ("toolu_codex_1", "exec_command", {"cmd": "echo hello-from-codex"})
    [result] = tool_results(second)
    assert result["tool_use_id"] == "toolu_codex_1" and "hello-from-codex" in text_of(result.get("content"))


def tool_messages(body):
    return [message for message in body["messages"] if message["role"] == "tool"]


def chat_server(*turns):
    """The fake Chat server's answer to any request: turn n (a request carrying n tool messages)
    gets `turns[n]`, the last one after that."""

    def answer(request):
        return turns[min(len(tool_messages(request.body)), len(turns) - 1)]

    return answer


def test_a_prompt_on_a_chat_server_prints_the_models_text(chat_codex, fake):
    fake.default = chat_server(chat_stream("Hi there, from a Chat server behind bridge."))
    run = chat_codex.exec("say hi")
    assert [item["text"] for item in run.items("agent_message")] == ["Hi there, from a Chat server behind bridge."], (
        run.transcript
    )
    assert run.events[-1]["type"] == "turn.completed", run.transcript
    [sent] = fake.requests
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == CHAT_MODEL and sent.body["stream"] is True
    assert sent.body["messages"][0]["role"] == "system" and "say hi" in text_of(sent.body["messages"][-1]["content"])
    assert {"exec_command", "apply_patch"} <= {tool["function"]["name"] for tool in sent.body["tools"]}


def test_an_exec_command_loop_on_a_chat_server_sends_the_output_back_as_a_tool_message(chat_codex, fake):
    """Codex runs the model's exec_command and sends its output, which reaches the Chat server as
    the role:"tool" message answering that call; the model's reasoning, shown by Codex, comes back
    as the reasoning_content of the call's assistant message."""
    fake.default = chat_server(
        chat_stream(reasoning=THOUGHT, tool_calls=[("call_codex_1", "exec_command", {"cmd": "echo hello-from-codex"})]),
        chat_stream("The command printed hello-from-codex."),
    )
    run = chat_codex.exec("run echo hello-from-codex")
    assert [item["text"] for item in run.items("reasoning")] == [THOUGHT], run.transcript
    assert [item["text"] for item in run.items("agent_message")] == ["The command printed hello-from-codex."], (
        run.transcript
    )
    [command] = run.items("command_execution")
    assert "hello-from-codex" in command["aggregated_output"], run.transcript
    first, second = [request.body for request in fake.requests]
    assert tool_messages(first) == []
    [assistant] = [message for message in second["messages"] if message.get("tool_calls")]
    [call] = assistant["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("call_codex_1", "exec_command")
    assert json.loads(call["function"]["arguments"]) == {"cmd": "echo hello-from-codex"}
    [output] = tool_messages(second)
    assert output["tool_call_id"] == "call_codex_1" and "hello-from-codex" in output["content"]
    assert second["messages"].index(output) == second["messages"].index(assistant) + 1
    assert assistant["reasoning_content"] == THOUGHT
