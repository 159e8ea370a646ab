"""The layers stay apart: imports go one way, down the list below, and never in a circle.

Translators are also pure: they import nothing of the web or the network.
"""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# From the top down: a module may import its own layer's modules and the layers below it.
LAYERS = [
    ("assembly", ["bridge/app.py", "bridge/cli.py", "bridge/__init__.py"]),
    ("fronts", ["bridge/fronts/"]),  # one thin blueprint per client protocol
    ("gateway", ["bridge/gateway/"]),  # where a call goes: routes, failover, the upstream client
    ("policy", ["bridge/policy/"]),  # who may call, and how much
    ("serve", ["bridge/serve/"]),  # gunicorn's worker, the stream loop, the relay, metrics
    ("settings", ["bridge/settings.py"]),
    ("translate", ["bridge/translate/"]),  # the pure translator pairs
    ("protocols", ["bridge/protocols/"]),  # what each wire protocol is
]
BENCHMARKS = ("bench/",)


def layer_of(path):
    for rank, (_, places) in enumerate(LAYERS):
        if any(path == place or (place.endswith("/") and path.startswith(place)) for place in places):
            return rank
    raise AssertionError(f"{path} is in no layer: add it to LAYERS")


def module_path(module):
    """The file of a dotted module of this checkout, or None for one from elsewhere."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(ROOT).as_posix()
    return None


def imports(path):
    """The checkout's files that `path` imports, at its top or inside a function."""
    package = path.rsplit("/", 1)[0].split("/")
    found = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], node.module or ""]).strip(".")
            base = base if node.level else node.module
            # `from x import y`: the module x.y where y is one, else x
            modules = [f"{base}.{a.name}" if module_path(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        found.update(module_path(module) for module in modules)
    return found - {None, path}


def sources(*tops):
    return sorted(p.relative_to(ROOT).as_posix() for top in tops for p in (ROOT / top).rglob("*.py"))


def graph(*tops):
    return {path: imports(path) for path in sources(*tops)}


def circles(edges):
    """Each strongly connected group of more than one file (Tarjan's algorithm)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def test_no_import_climbs_to_a_higher_layer():
    climbing = [
        f"{path} ({LAYERS[layer_of(path)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for path, targets in graph("bridge").items()
        for target in targets
        if target.startswith("bridge/") and layer_of(target) < layer_of(path)
    ]
    assert climbing == []


@pytest.mark.parametrize("tops", [("bridge",), BENCHMARKS])
def test_no_files_import_each_other_in_a_circle(tops):
    assert circles(graph(*tops)) == []


def test_the_service_imports_nothing_of_the_benchmarks():
    wrong = [
        f"{path} imports {target}"
        for path, targets in graph("bridge").items()
        for target in targets
        if target.startswith(BENCHMARKS)
    ]
    assert wrong == []


def pair_of(path):
    """The translator pair, bridge/translate/<client>_to_<upstream>/, that a file is in, or None."""
    parts = path.split("/")
    return parts[2] if parts[:2] == ["bridge", "translate"] and len(parts) > 3 else None


def test_no_translator_pair_imports_another_pair():
    """A pair imports its own modules and the shared ones of translate/ and protocols/, and
    translate/'s shared modules import no pair: what two pairs share is a shared module."""
    edges = graph("bridge/translate")
    assert {"chat_to_messages", "messages_to_chat", "responses_to_messages"} <= {pair_of(path) for path in edges}
    crossing = [
        f"{path} imports {target}"
        for path, targets in edges.items()
        for target in targets
        if pair_of(target) not in (None, pair_of(path))
    ]
    assert crossing == []


def test_the_layer_test_sees_a_climbing_import(tmp_path):
    """The checks above read real imports: a gateway module importing a front is seen."""
    assert "bridge/fronts/http.py" in imports("bridge/fronts/chat.py")
    assert layer_of("bridge/fronts/http.py") < layer_of("bridge/gateway/routes.py")
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


TRANSLATORS = [
    f"bridge.translate.{direction}.{stage}"
    for direction in ("chat_to_messages", "messages_to_chat", "responses_to_messages", "responses_to_chat")
    for stage in ("request", "response", "stream")
] + [
    "bridge.translate.tokens",
    "bridge.translate.translator",
    "bridge.translate.anthropic_request",
    "bridge.translate.anthropic_response",
    "bridge.translate.anthropic_stream",
    "bridge.translate.chat_request",
    "bridge.translate.chat_response",
    "bridge.translate.chat_stream",
    "bridge.translate.responses_client",
    "bridge.translate.responses_events",
    "bridge.gateway.passthrough",
    "bridge.gateway.caps",
    "bridge.gateway.routes",
    "bridge.protocols.schemas.anthropic",
    "bridge.protocols.schemas.openai",
    "bridge.protocols.schemas.responses",
]
WEB_AND_NETWORK = ("flask", "werkzeug", "requests", "urllib3", "prometheus_client")


@pytest.mark.parametrize("module", TRANSLATORS)
def test_a_translator_imports_nothing_of_flask_requests_or_prometheus(module):
    """A fresh interpreter, so what another test imported does not hide an import."""
    probe = f"import sys, {module}\nprint(' '.join(sorted(m for m in {WEB_AND_NETWORK!r} if m in sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == [], f"{module} loads {', '.join(loaded)}"
