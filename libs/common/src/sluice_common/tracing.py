"""OpenTelemetry tracing: one trace follows a document from its upload through its worker.

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: then
each process exports its spans with OTLP over HTTP (protobuf), named `sluice-<service>`
unless `OTEL_SERVICE_NAME` says otherwise, and every other `OTEL_*` variable of the SDK
applies. Off, nothing is instrumented and nothing is sent (`make run` stays silent).

- gRPC servers and clients are traced (opentelemetry-instrumentation-grpc), except health
  checks, reflection and the worker's long-polls and lease renewals, which would bury the
  documents' traces under their own.
- The upload's trace context is stored with its job (ingestion_jobs.trace_context, W3C
  `traceparent`) and handed to the worker with the claimed job (Job.trace_context): the
  worker's spans for that job (claim, stages, embedding batches, the calls back to
  ingest-api, the commit) are children of the upload's span.
- Log lines carry `trace_id` and `span_id` whenever a span is current (sluice_common.logs).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate, trace
from opentelemetry.util.types import AttributeValue

if TYPE_CHECKING:
    import grpc

TRACER_NAME = "sluice"
# Calls that are not about one document: untraced even when tracing is on.
UNTRACED_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection")
UNTRACED_METHODS = ("ClaimJob", "RenewLease")

_enabled = False


def endpoint_configured() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def enabled() -> bool:
    return _enabled


def configure_tracing(service: str) -> bool:
    """Install the SDK with an OTLP/HTTP exporter when an endpoint is configured; True if on.

    Call once per process, before its servers and channels are made."""
    global _enabled
    if _enabled or not endpoint_configured():
        return _enabled
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or f"sluice-{service}"
    # The provider flushes its batch at interpreter exit (shutdown_on_exit), after SIGTERM's drain.
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _enabled = True
    return True


def _filter() -> Callable[[object], bool]:
    from opentelemetry.instrumentation.grpc import filters

    untraced = [filters.service_name(name) for name in UNTRACED_SERVICES] + [filters.method_name(m) for m in UNTRACED_METHODS]
    return filters.negate(filters.any_of(*untraced))


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """For grpc.aio servers (sluice_common.serving); empty when tracing is off."""
    if not _enabled:
        return []
    from opentelemetry.instrumentation.grpc import aio_server_interceptor

    return [aio_server_interceptor(filter_=_filter())]  # type: ignore[no-untyped-call]  # the instrumentation is unannotated


def aio_client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    if not _enabled:
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors as interceptors

    return list(interceptors(filter_=_filter()))  # type: ignore[no-untyped-call]  # the instrumentation is unannotated


def traced_channel(channel: grpc.Channel) -> grpc.Channel:
    """A sync channel whose calls are traced (unchanged when tracing is off)."""
    if not _enabled:
        return channel
    import grpc
    from opentelemetry.instrumentation.grpc import client_interceptor

    return grpc.intercept_channel(channel, client_interceptor(filter_=_filter()))  # type: ignore[no-untyped-call]  # the instrumentation is unannotated


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def current_trace_context() -> str | None:
    """The current span's context as stored with a job (JSON of W3C headers), or None."""
    if not _enabled:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return json.dumps(carrier, sort_keys=True) if carrier else None


def decode_trace_context(stored: str | None) -> dict[str, str]:
    """The stored JSON back as headers; anything unreadable is no context (never an error)."""
    if not stored:
        return {}
    try:
        value = json.loads(stored)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


@contextlib.contextmanager
def job_span(
    name: str, carrier: Mapping[str, str], attributes: Mapping[str, AttributeValue] | None = None
) -> Iterator[trace.Span]:
    """A span, current for the block, whose parent is the context a job carries (its upload)."""
    parent = propagate.extract(dict(carrier)) if carrier else None
    with tracer().start_as_current_span(
        name, context=parent, kind=trace.SpanKind.CONSUMER, attributes=dict(attributes or {})
    ) as span:
        yield span


@contextlib.contextmanager
def span(name: str, **attributes: AttributeValue) -> Iterator[trace.Span]:
    """A child of the current span for the block (a stage, an embedding batch)."""
    with tracer().start_as_current_span(name, attributes=attributes) as current:
        yield current


def record_span(name: str, carrier: Mapping[str, str], start_ns: int, end_ns: int, **attributes: AttributeValue) -> None:
    """A finished span under a job's context, for something timed before the job was known (its claim)."""
    if not _enabled:
        return
    parent = propagate.extract(dict(carrier)) if carrier else None
    recorded = tracer().start_span(name, context=parent, kind=trace.SpanKind.CLIENT, attributes=attributes, start_time=start_ns)
    recorded.end(end_time=end_ns)


def annotate(**attributes: AttributeValue) -> None:
    """Attributes on the current span (search: mode and hit count)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(attributes)


def add_trace_ids(_logger: object, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: `trace_id` and `span_id` of the current span, when there is one."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


__all__ = [
    "add_trace_ids",
    "aio_client_interceptors",
    "annotate",
    "configure_tracing",
    "current_trace_context",
    "decode_trace_context",
    "enabled",
    "endpoint_configured",
    "job_span",
    "record_span",
    "server_interceptors",
    "span",
    "traced_channel",
    "tracer",
]
