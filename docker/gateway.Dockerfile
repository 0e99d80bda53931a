# sluice-gateway: every public RPC as JSON over HTTP, /openapi.json, Dify's /retrieval
# (docs/http.md). No database, no model, no key: it forwards each caller's own key.
# Build from the repository root: docker build -f docker/gateway.Dockerfile .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock ./
COPY libs/protos libs/protos
COPY libs/common libs/common
COPY services/gateway services/gateway
RUN pip install -c requirements.lock ./libs/protos ./libs/common ./services/gateway

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --create-home --home-dir /home/sluice sluice
COPY --from=build /opt/venv /opt/venv
COPY docker/healthcheck.py /usr/local/bin/sluice-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SLUICE_GATEWAY_BIND=0.0.0.0:8080 \
    SLUICE_LOG_JSON=true
USER sluice
EXPOSE 8080
# /healthz answers 2xx once both backends report SERVING.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "/usr/local/bin/sluice-healthcheck", "http", "http://localhost:8080/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["sluice-gateway"]
