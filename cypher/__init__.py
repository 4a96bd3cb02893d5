"""Cypher twins of the named queries: ``cypher/NAME.cypher`` beside ``sparql/NAME.rq``.

Every ``sparql/NAME.rq`` has a twin here with the same name, the same result columns (the
``RETURN ... AS name`` aliases equal the SPARQL variable names) and the same semantics; the
parity test (tests/test_parity.py) runs each pair on both backends and compares the
order-normalised rows. ``kgengine.neo4j_store.Neo4jStore.run`` executes them.

Conventions (read this before writing a twin)
---------------------------------------------

Data model
    ``(:Entity {graph, id, label, private_id})`` nodes; one relationship type per relation,
    the type *is* the relation name verbatim (``type(x)`` returns it); each graph variant
    (dataset, complete / incomplete KG) is kept apart by the ``graph`` property, so every
    pattern must be anchored on ``(:Entity {graph: $graph})`` (the edges of a graph only
    join nodes of that graph, so anchoring one end is enough). Nodes are only created with
    an edge (labels of entities that are in no triple are skipped, as in the Oxigraph
    backend), so the ``:Entity`` nodes of a graph are exactly its entities. Relation labels
    live in ``(:Relation {graph, name, label})`` nodes without edges (read by
    ``relation_labels``). Graph metadata lives in ``(:Graph {name, ...})`` nodes, never
    touched by named queries.

Parameters
    ``$graph`` (the graph name, a string) is always passed. Every keyword argument of
    ``store.run(name, graph, **params)`` is passed as a Cypher parameter of the same name
    (``$h``): :class:`kgengine.model.Entity` and :class:`kgengine.model.Relation` values
    become plain strings (entity id / relation name), numbers and strings stay as they
    are, and a list / tuple / set becomes a Cypher list, used with ``UNWIND $h AS id`` or
    ``WHERE x.id IN $h``. Where the twin SPARQL query has a ``VALUES ?h {}`` block, the
    Cypher parameter ``$h`` is that list. Never build Cypher text from values.

Relation-typed parameters: ``{{rel:NAME}}``
    Relationship types cannot be Cypher parameters. Neo4j 5.26 does accept dynamic types
    ``-[x:$($r)]->`` in MATCH, but plans them as an all-relationships scan plus a filter
    (checked with EXPLAIN on 5.26.31), i.e. a full graph scan per query. So a query that
    matches a relation given as a parameter writes the placeholder ``{{rel:NAME}}`` where
    the type goes::

        MATCH (h:Entity {graph: $graph})-[:{{rel:r}}]->(t)
        RETURN h.id AS h, $r AS r, t.id AS t

    ``Neo4jStore.run`` replaces ``{{rel:NAME}}`` with the backtick-escaped type of the
    parameter ``NAME`` (backticks doubled: ```a``b``` for ``a`b``) after validating it
    (Neo4j only refuses empty names and NUL characters); for a non-empty list of relations
    it writes the alternation ```r1`|`r2```. The value is *also* passed
    as the ordinary parameter ``$NAME`` (a string, or a list of strings), so the query can
    return it or compare ``type(x) = $NAME`` / ``type(x) IN $NAME``. A ``{{rel:NAME}}``
    whose parameter is missing, or not a Relation / list of Relations, is an error. Each
    distinct relation gives a distinct query text, so Neo4j plans and caches it per type
    (the planner picks the relationship-type scan / expand-by-type, which a ``WHERE
    type(x) = $r`` filter cannot); the first use of a type costs one plan compilation.

Template queries
    ``store.run_template(name, graph, parts, **params)`` also fills ``{{name}}``
    placeholders (word-character names) from ``parts``: patterns generated and escaped by the
    caller (e.g. :mod:`kgengine.mining.compile`). Both kinds are filled in one pass, so
    text inserted for one placeholder is never scanned again.

Results
    Rows are dicts keyed by the RETURN aliases with the Oxigraph backend's Python values:
    entity ids and relation names as ``str``, counts as ``int``, missing as ``None``.
    Return ``e.id`` / ``type(x)``, never nodes or relationships.

Backend-internal statements
    ``cypher/store/*.cypher`` (schema, batched loading, deletion, graph metadata) are the
    Neo4j backend's own plumbing; they have no SPARQL twin (the Oxigraph backend does the
    same through pyoxigraph's API) and are not named queries: ``query_names`` ignores them.

Header comments
    Start the file with ``// one-line description`` (the twin's ``#`` comment). Whole-line
    ``//`` comments are removed before any placeholder is filled, so a comment may name
    ``{{rel:r}}`` or a template's ``{{body}}`` harmlessly; comments after code are not. A
    ``# graph: entities`` SPARQL header needs nothing special here: labels and private ids
    are node properties.
"""
