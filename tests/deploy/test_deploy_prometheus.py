"""The shipped dashboard and alert rules against the real Prometheus (Debian's package), started
on a loopback port with its own config and data directory, never the system service: it scrapes
a bridge under gunicorn serving SDK traffic through the fake upstream, and every panel query of
deploy/grafana/bridge.json and every recording rule must return data. promtool checks the rules
and runs their unit tests (deploy/prometheus/bridge-rules.test.yml), one case per alert."""

import contextlib
import json
import re
import subprocess
import time

import anthropic
import openai
import pytest
import requests

from bench.processes import ROOT, free_port, wait_for
from tests.fake_upstream import FakeUpstream, fixture, json_reply
from tests.helpers.programs import program
from tests.helpers.servers import gunicorn

DASHBOARD = ROOT / "deploy" / "grafana" / "bridge.json"
RULES = ROOT / "deploy" / "prometheus" / "bridge-rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "bridge-rules.test.yml"
# Grafana's values for the dashboard's variables with every value selected.
EVERYTHING = {"$model": ".*", "$deployment": ".*", "$client": ".*", "$team": ".*", "$__rate_interval": "1m"}
HI = [{"role": "user", "content": "Say hi"}]


def dashboard():
    return json.loads(DASHBOARD.read_text())


def panel_queries():
    """(panel title, PromQL with every variable at its "All" value) for each query of each panel."""
    queries = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in EVERYTHING.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"{panel['title']}: a variable the test does not know: {expr}"
            queries.append((panel["title"], expr))
    return queries


def recorded_names():
    return re.findall(r"^\s*- record: (\S+)$", RULES.read_text(), re.M)


@contextlib.contextmanager
def prometheus(workdir, target):
    """Prometheus scraping `target` (host:port) every second, evaluating the shipped rules."""
    binary = program("prometheus")
    workdir.mkdir()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "bridge", "static_configs": [{"targets": [target]}]}],
    }
    (workdir / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    with open(workdir / "prometheus.log", "wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(url, process), f"prometheus on {url} (log: {workdir / 'prometheus.log'})")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _ready(url, process):
    if process.poll() is not None:
        raise RuntimeError(f"prometheus exited with {process.returncode}")
    try:
        return requests.get(f"{url}/-/ready", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def query(url, expr):
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


def answer(recorded):
    """The fake upstream's answer to each protocol, streamed or not; Anthropic's with cached tokens."""
    streamed = isinstance(recorded.body, dict) and recorded.body.get("stream")
    if recorded.path.endswith("/v1/messages"):
        return fixture("anthropic/text.sse" if streamed else "anthropic/cache_usage.json")
    return fixture("openai/text.sse" if streamed else "openai/text.json")


def traffic(url, fake):
    """Each client protocol streamed and not, a failover, refusals by a client limit and by a
    budget (the soft one of team-a's team is passed at once too), and a 503."""
    chat = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-watch-a", max_retries=0)
    messages = anthropic.Anthropic(base_url=url, api_key="sk-watch-a", max_retries=0)
    for stream in (False, True):
        answered = chat.chat.completions.create(model="claude-watch", messages=HI, stream=stream)
        if stream:
            assert "".join(chunk.choices[0].delta.content or "" for chunk in answered if chunk.choices)
        request = {"model": "claude-chat", "max_tokens": 64, "messages": HI}
        if stream:
            with messages.messages.stream(**request) as streamed:
                assert streamed.get_final_text()
        else:
            assert messages.messages.create(**request).content
    limited = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-watch-b", max_retries=0)
    with contextlib.suppress(openai.RateLimitError):
        for _ in range(2):  # rpm=1
            limited.chat.completions.create(model="claude-watch", messages=HI)
    spent = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-watch-c", max_retries=0)

    def refused_by_its_budget():  # once its first call's cost is in Redis
        try:
            spent.chat.completions.create(model="claude-watch", messages=HI)
        except openai.RateLimitError as error:
            return "budget" in str(error)
        return False

    wait_for(refused_by_its_budget, "team-c's refusal by its budget")
    fake.reply(json_reply({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, 503))
    with pytest.raises(openai.InternalServerError) as refused:
        chat.chat.completions.create(model="claude-on-the-default-route", messages=HI)
    assert refused.value.status_code == 503


def test_promtool_checks_the_rules_and_their_unit_tests_pass():
    promtool = program("promtool", "prometheus")
    for command in (["check", "rules", str(RULES)], ["test", "rules", str(RULE_TESTS)]):
        run = subprocess.run([promtool, *command], capture_output=True, text=True, cwd=RULES.parent)
        assert run.returncode == 0, run.stdout + run.stderr
    alerts = re.findall(r"^\s*- alert: (\S+)$", RULES.read_text(), re.M)
    tested = set(re.findall(r"^\s*alertname: (\S+)$", RULE_TESTS.read_text(), re.M))
    assert alerts and set(alerts) == tested, "every alert has a unit test"
    runbook = (ROOT / "docs" / "operator.md").read_text()
    assert [alert for alert in alerts if f"`{alert}`" not in runbook] == [], "every alert has a runbook line"


def test_every_panel_and_recording_rule_returns_data_from_a_bridge_serving_sdk_traffic(tmp_path, fake, redis_server):
    program("prometheus")
    refusing = FakeUpstream(listening=False)  # a deployment that is down: calls fail over from it
    price = {"input": 3, "output": 15, "cache_read": 0.3}
    deployments = [
        {"name": "west", "protocol": "anthropic", "base_url": refusing.url, "prices": price},
        {"name": "east", "protocol": "anthropic", "base_url": fake.url, "prices": price},
    ]
    routes = {"cooldown_seconds": 1, "routes": [{"models": ["claude-watch"], "deployments": deployments}]}
    fake.default = answer
    bridge = gunicorn(
        tmp_path / "bridge",
        fake,
        BRIDGE_WORKERS="2",
        BRIDGE_ROUTES=json.dumps(routes),
        BRIDGE_MODEL_MAP='{"claude-chat": "gpt-watch"}',
        BRIDGE_CLIENT_KEYS="team-a:sk-watch-a team=platform,team-b:sk-watch-b,team-c:sk-watch-c",
        BRIDGE_REDIS_URL=redis_server.url,
        BRIDGE_CLIENT_LIMITS="team-b rpm=1",
        BRIDGE_BUDGETS="team:platform day=0.000001 soft,key:team-c day=0.000001",
        BRIDGE_RETRIES="1",
    )
    try:
        with prometheus(tmp_path / "prometheus", f"127.0.0.1:{bridge.port}") as url:
            wait_for(lambda: query(url, 'up{job="bridge"} == 1'), "prometheus's first scrape of the bridge")
            traffic(bridge.url, fake)
            time.sleep(2.5)  # scrapes between the rounds: rates need two samples of a series
            traffic(bridge.url, fake)
            checks = [*panel_queries(), *((name, name) for name in recorded_names())]
            assert len(checks) > 30

            def empty():
                return [check for check in checks if not query(url, check[1])]

            with contextlib.suppress(TimeoutError):
                wait_for(lambda: not empty(), "every query to return data")
            assert empty() == []
            for variable in dashboard()["templating"]["list"][1:]:
                metric, label = re.match(r"label_values\((\w+), (\w+)\)", variable["query"]["query"]).groups()
                found = requests.get(f"{url}/api/v1/label/{label}/values", params={"match[]": metric}).json()
                assert found["data"], f"variable {variable['name']} has no values"
            cooling = query(url, "bridge_deployment_cooling")
            assert {sample["metric"]["deployment"] for sample in cooling} >= {"west", "east"}
    finally:
        bridge.stop()
        refusing.close()
