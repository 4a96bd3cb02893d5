"""``kgengine serve``: a SPARQL 1.1 Protocol endpoint over an Oxigraph store.

Layout: :mod:`.app` (Starlette, HTTP and the protocol) hands every query to :mod:`.pool`,
a pool of worker processes (:mod:`.worker`) that each open the store and serialise results
with :mod:`.formats`; :mod:`kgengine.sparqltext` holds the few lexical checks made on query text."""
