"""bridge: the OpenAI APIs <-> the Anthropic Messages API, both ways, streamed and not.

The folders are the layers, from the wire inwards; a module imports its own layer and the
layers below it, never one above (tests/test_layers.py):

- app.py, cli.py  create_app() assembling the service; the `bridge` command.
- fronts/         one thin blueprint per client protocol, and http.py: read, admit, route, forward.
- gateway/        where a call goes: routes, failover, pass-through, the upstream client, caps.
- policy/         who may call and how much: client keys, request limits, usage, admission.
- serve/          gunicorn's worker, its stream loop, the relay, metrics and the access log.
- settings.py     every BRIDGE_* setting, read once at start-up and validated.
- translate/      the pure translator pairs, <client>_to_<upstream>/{request,response,stream}.py,
                  what the pairs share (anthropic_*.py), the stream-translator contract.
- protocols/      what each wire protocol is: schemas, the one error type, SSE, answer shapes.

docs/development.md says how to add a front or a pair.
"""
