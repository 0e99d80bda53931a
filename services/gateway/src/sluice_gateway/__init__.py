"""sluice-gateway: every public RPC of Sluice as JSON over HTTP/1.1 (docs/http.md).

Unary RPCs in the Connect protocol's unary shape (`POST /sluice.v1.SearchService/Search`, a
JSON body in the protobuf JSON mapping), server streams as server-sent events, uploads from a
raw HTTP body, an OpenAPI 3 document generated from the proto descriptors, and Dify's External
Knowledge API (`POST /retrieval`). It forwards to ingest-api and search over gRPC with the
caller's own `authorization` header and holds no credentials of its own.
"""
