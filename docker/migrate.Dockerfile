# migrate: applies the Alembic migrations once (`sluice-migrate`) and exits; run before ingest-api.
# Build from the repository root: docker build -f docker/migrate.Dockerfile .
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
RUN pip install -c requirements.lock ./libs/protos ./libs/common ./services/ingest-api

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --create-home --home-dir /home/sluice sluice
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SLUICE_LOG_JSON=true
USER sluice
ENTRYPOINT ["sluice-migrate"]
