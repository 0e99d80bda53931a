"""The statements that resolve a collection to a generation (rows.CollectionRow), and the
embedders in use. A collection's columns come first, in CollectionRow's order."""

from __future__ import annotations

_COLLECTION_COLUMNS = (
    "SELECT c.id, c.name, g.embedder_provider, g.embedder_model, g.dimensions, c.tenant_id,"
    " g.id AS generation_id, g.number AS generation, c.chunk_overlap, g.vector_precision, c.reranker"
)

# The tenant's collection by name, at its ACTIVE generation (what a search uses by default).
ACTIVE_SQL = (
    _COLLECTION_COLUMNS + " FROM collections c JOIN collection_generations g ON g.collection_id = c.id AND g.state = 'ACTIVE'"
    " WHERE c.tenant_id = %s AND c.name = %s"
)
# At one given generation, ACTIVE or BUILDING (the reindex quality gate, eval_gate.py).
GENERATION_SQL = (
    _COLLECTION_COLUMNS + " FROM collections c JOIN collection_generations g ON g.collection_id = c.id"
    " WHERE c.tenant_id = %s AND c.name = %s AND g.id = %s AND g.state IN ('ACTIVE', 'BUILDING')"
)
# At the generation numbered so, whatever its state, and that state: NULL columns of the
# generation when it has no such generation (rows.NumberedCollectionRow).
NUMBERED_SQL = (
    _COLLECTION_COLUMNS + ", g.state"
    " FROM collections c LEFT JOIN collection_generations g ON g.collection_id = c.id AND g.number = %s"
    " WHERE c.tenant_id = %s AND c.name = %s"
)
# Every tenant's embedders (rows.EmbedderRow): a SECURITY DEFINER function shows search these
# three columns of every collection and nothing else (migration 0004).
EMBEDDERS_SQL = "SELECT provider, model, dimensions FROM sluice_embedders_in_use()"
