"""bridge: the OpenAI APIs <-> the Anthropic Messages API, both ways, streamed and not.

A newcomer's map, from the wire inwards:

- app.py            create_app(): settings, the upstream client, one blueprint per front,
                    the error handlers (every error as JSON in the client's protocol).
- settings.py       every BRIDGE_* setting, read once at start-up and validated.
- routes.py         BRIDGE_ROUTES: model names -> upstream deployments (the old settings are
                    the default routes); failover.py picks a deployment and moves a call on
                    when one fails before answering; caps.py, a deployment's max_tokens cap.
- passthrough.py    a client on its route's own protocol: checked, relayed untranslated.
- auth.py           client keys, and which credential goes to a deployment.
- models.py         GET /v1/models[/{id}], in either protocol; cli.py: `bridge check`.
- http.py           reading a request body, writing a JSON or SSE answer (routes share it).
- upstream.py       the pooled HTTP client: timeouts, the only retries, errors as BridgeError.
- streaming.py      the relay: upstream SSE in, translated events out as they arrive,
                    keep-alives, closing the upstream when the client leaves; Framing per front.
- worker.py         gunicorn's gthread worker with admission, client deadlines and a stream
                    loop (stream_loop.py: one thread relaying every parked stream).
- translator.py     the stream-translator contract every stream.py implements.
- errors.py         the one error type, BridgeError, rendered in either protocol.
- observability.py  the access log line and Prometheus metrics of each request.
- usage.py          usage per client (Prometheus, and each day's in Redis) and client limits
                    (rpm, tpm, tokens per day) shared through Redis; admission.py applies them.
- schemas/          validation: __init__.py is the toolkit, one module per client protocol.
- a direction       <client protocol>_to_<upstream protocol>/: routes.py (the thin blueprint of
                    the front, which also hands a route of its own protocol to pass-through),
                    request.py (request translation), response.py (answer translation),
                    stream.py (stream translation). Translators are pure: dicts in, dicts
                    out, no Flask, requests or prometheus_client (tests/test_layers.py).
                    chat_to_messages/ (OpenAI Chat client, Anthropic upstream),
                    messages_to_chat/ (Anthropic client, OpenAI-compatible upstream; tokens.py
                    estimates count_tokens), responses_to_messages/ (OpenAI Responses client).
- shared rules      model_map.py (client model names), tool_names.py, overflow.py (context
                    overflow in any wording), ratelimit.py (retry and rate-limit headers),
                    shapes.py (the types an upstream answer must have), json_codec.py, sse.py.

Adding a front: a schema module for its protocol built from schemas/__init__.py; a
<front>_to_<upstream>/ package whose request.py returns (upstream body, Context) and whose
stream.py subclasses translator.StreamTranslator; a Framing in streaming.py if its SSE differs;
its blueprint registered in app.py and its paths in app.client_protocol().
"""
