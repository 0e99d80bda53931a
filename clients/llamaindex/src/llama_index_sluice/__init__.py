"""LlamaIndex integration of Sluice (README.md beside this package; docs/clients.md).

    from llama_index_sluice import SluiceReader, SluiceRetriever

    retriever = SluiceRetriever("docs", top_k=4)
    nodes = retriever.retrieve("how do leases expire")   # NodeWithScore, best first
    documents = SluiceReader().load_data("docs")         # the collection's text, as Sluice parsed it

Both call Sluice through its Python SDK (`sluice_client`), configured as it is: arguments, else
SLUICE_INGEST_ADDRESS, SLUICE_SEARCH_ADDRESS, SLUICE_API_KEY (or `make run`'s credentials file).
"""

from __future__ import annotations

from .filters import where_of
from .readers import SluiceReader
from .retrievers import SluiceRetriever

__version__ = "0.1.0"

__all__ = ["SluiceReader", "SluiceRetriever", "where_of"]
