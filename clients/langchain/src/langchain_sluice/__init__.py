"""LangChain integration of Sluice (README.md beside this package; docs/clients.md).

    from langchain_sluice import SluiceRetriever, SluiceUploader

    SluiceUploader("docs").upload_documents(splits)          # LangChain Documents (or upload_files)
    retriever = SluiceRetriever(collection="docs", top_k=4)
    documents = retriever.invoke("how do leases expire")    # hits as Documents, best first
    documents = SluiceLoader("docs").load()                 # the collection's text, as Sluice parsed it

Both call Sluice through its Python SDK (`sluice_client`), configured as it is: arguments, else
SLUICE_INGEST_ADDRESS, SLUICE_SEARCH_ADDRESS, SLUICE_API_KEY (or `make run`'s credentials file).
"""

from __future__ import annotations

from .loader import SluiceLoader
from .metadata import hit_metadata, sluice_metadata
from .retrievers import SluiceRetriever
from .uploader import SluiceUploader

__version__ = "0.1.0"

__all__ = ["SluiceLoader", "SluiceRetriever", "SluiceUploader", "hit_metadata", "sluice_metadata"]
