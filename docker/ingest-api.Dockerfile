# ingest-api: the public DocumentService and the workers' JobService. Owns every write.
# Build from the repository root: docker build -f docker/ingest-api.Dockerfile .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock ./
COPY libs/protos libs/protos
COPY libs/common libs/common
COPY services/ingest-api services/ingest-api
# requirements.lock pins every version; only what this service needs is installed.
RUN pip install -c requirements.lock ./libs/protos ./libs/common ./services/ingest-api

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --create-home --home-dir /home/sluice sluice
COPY --from=build /opt/venv /opt/venv
COPY docker/healthcheck.py /usr/local/bin/sluice-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SLUICE_BIND=0.0.0.0:50051 \
    SLUICE_METRICS_PORT=9464 \
    SLUICE_LOG_JSON=true
USER sluice
EXPOSE 50051 9464
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "/usr/local/bin/sluice-healthcheck", "grpc", "localhost:50051"]
# SIGTERM: health goes NOT_SERVING, in-flight calls get SLUICE_SHUTDOWN_GRACE_SECONDS.
STOPSIGNAL SIGTERM
ENTRYPOINT ["sluice-ingest-api"]
