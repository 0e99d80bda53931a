"""An upload client that stops half-way: `python -m chaos.upload_client ADDRESS COLLECTION FILE MIME`.

It streams FILE with the driver's `channel()` and `upload_messages()`, prints "HALF" once half
of the bytes are sent, then blocks until the driver SIGKILLs it: a client killed mid-stream.
"""

from __future__ import annotations

import sys
import threading
import uuid
from pathlib import Path

from sluice.v1 import document_service_pb2_grpc

from .corpus import Document
from .driver import call_metadata, channel, upload_messages


def main() -> None:
    address, collection, path, mime_type = sys.argv[1:5]
    document = Document(collection, Path(path).name, Path(path).read_bytes(), mime_type)
    never = threading.Event()

    def after_piece(sent: int, total: int) -> None:
        if sent * 2 >= total:
            print("HALF", sent, total, flush=True)
            never.wait()  # the driver kills us here, with the stream open

    stub = document_service_pb2_grpc.DocumentServiceStub(channel(address))
    stub.UploadDocument(
        upload_messages(document, f"chaos-interrupted-{uuid.uuid4()}", after_piece), timeout=120, metadata=call_metadata()
    )
    print("COMPLETED", flush=True)  # must not happen: the driver kills us first


if __name__ == "__main__":
    main()
