"""python -m bench.profile: where the bridge spends its CPU, request by request.

Sampling profilers attached to gunicorn here see every blocked thread as
busy, so this profiles in-process instead: the bridge app and the
reference relay app are called as WSGI apps in one thread, one request
after another, against the real bench upstream (another process, another
core). Per request it reports CPU microseconds for relay and bridge side
by side (the difference is the bridge's own work, gunicorn excluded), then
profiles the bridge with pyinstrument (call tree) and cProfile (functions
by own time), written to bench/out/profile-<direction>-<kind>.{txt,html}.
"""

import argparse
import cProfile
import importlib
import io
import json
import os
import pstats
import sys
import time

from . import servers
from .directions import CLIENT_KEYS, DIRECTIONS, bridge_routes

OUT = servers.ROOT / "bench" / "out"


def _environ(path, body, headers):
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8080",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


def call(app, path, body, headers):
    """One request through a WSGI app, the way gunicorn drives it; returns the body size."""
    status = []
    result = app(_environ(path, body, headers), lambda s, h, exc_info=None: status.append(s))
    size = 0
    try:
        for chunk in result:
            size += len(chunk)
    finally:
        if hasattr(result, "close"):
            result.close()
    if not status or not status[0].startswith("200"):
        raise RuntimeError(f"{path}: {status}")
    return size


def cpu_us(app, path, body, headers, count):
    start = time.process_time()
    for _ in range(count):
        call(app, path, body, headers)
    return (time.process_time() - start) / count * 1e6


def apps(upstream_url, log_level="WARNING"):
    """(relay, bridge) WSGI apps against the upstream, the bridge as deployed: client keys (the
    bench clients send `sk-bench`), a routes file and request limits set but far from refusing.
    Its access lines are INFO. The environment's OTEL_* variables reach the bridge: its cost with
    traces on can be measured."""
    os.environ["BENCH_UPSTREAM"] = upstream_url
    relay = importlib.import_module("bench.relay").app
    from bridge import settings
    from bridge.app import create_app

    bridge = create_app(
        settings.load(
            {
                **{name: value for name, value in os.environ.items() if name.startswith("OTEL_")},
                "BRIDGE_OPENAI_BASE_URL": f"{upstream_url}/v1",
                "BRIDGE_ANTHROPIC_BASE_URL": upstream_url,
                "BRIDGE_ROUTES": bridge_routes(upstream_url),
                "BRIDGE_CLIENT_KEYS": CLIENT_KEYS,
                "BRIDGE_MAX_BODY_BYTES": str(8 * 1024 * 1024),
                "BRIDGE_MAX_JSON_VALUES": "200000",
                "BRIDGE_MAX_MESSAGES": "2000",
                "BRIDGE_MAX_CONTENT_BLOCKS": "5000",
                "BRIDGE_MAX_TOOLS": "500",
                "BRIDGE_LOG_LEVEL": log_level,
            }
        )
    )
    return relay, bridge


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per measurement")
    args = parser.parse_args(argv)
    from pyinstrument import Profiler

    OUT.mkdir(exist_ok=True)
    servers.pin_self()
    upstream = servers.upstream()
    pins = servers.pinning()
    if pins:  # the app under test on its own core, as under gunicorn
        os.sched_setaffinity(0, {pins[0]})
    try:
        relay_app, bridge_app = apps(upstream.url)
        print("| direction | kind | relay CPU µs/request | bridge CPU µs/request | bridge − relay |")
        print("|---|---|---:|---:|---:|")
        for name, d in DIRECTIONS.items():
            for kind, stream in (("body", False), ("stream", True)):
                model = "bench-n50"
                relay_args = (d.upstream_path, encode(d.upstream_body(model, stream)), d.upstream_headers)
                bridge_args = (d.client_path, encode(d.client_body(model, stream)), d.client_headers)
                try:
                    for app, request in ((relay_app, relay_args), (bridge_app, bridge_args)):
                        cpu_us(app, *request, 200)  # warm up
                except RuntimeError as exc:  # a pair not written yet: the others still run
                    print(f"| {name} | {kind} | not profiled: {exc} | | |", flush=True)
                    continue
                relay = min(cpu_us(relay_app, *relay_args, args.requests // 4) for _ in range(4))
                bridge = min(cpu_us(bridge_app, *bridge_args, args.requests // 4) for _ in range(4))
                print(f"| {name} | {kind} | {relay:.0f} | {bridge:.0f} | {bridge - relay:.0f} |", flush=True)
                _profile(Profiler, bridge_app, bridge_args, args.requests, f"profile-{name}-{kind}")
    finally:
        upstream.stop()
    print(f"\ncall trees and function lists: {OUT.relative_to(servers.ROOT)}/profile-*.txt (and .html)")
    return 0


def encode(body):
    """A request body as the client sends it."""
    return json.dumps(body, ensure_ascii=False).encode()


def _profile(profiler_class, app, request, count, stem):
    profiler = profiler_class(interval=0.0002)
    profiler.start()
    for _ in range(count):
        call(app, *request)
    profiler.stop()
    (OUT / f"{stem}.html").write_text(profiler.output_html())
    tree = profiler.output_text(unicode=True, color=False)
    functions = cProfile.Profile(time.thread_time)  # CPU time: a blocked call costs nothing
    functions.enable()
    for _ in range(count):
        call(app, *request)
    functions.disable()
    listing = io.StringIO()
    pstats.Stats(functions, stream=listing).sort_stats("tottime").print_stats(40)
    (OUT / f"{stem}.txt").write_text(tree + "\n\n" + listing.getvalue())


if __name__ == "__main__":
    raise SystemExit(main())
