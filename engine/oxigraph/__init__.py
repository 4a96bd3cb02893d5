"""The Oxigraph backend: an embedded RDF store in a directory on disk (pyoxigraph).

One job a module: ``store`` (the backend class :class:`~kgengine.oxigraph.store.OxigraphStore`),
``layout`` (what a store directory is and which named graphs hold a graph), ``nquads`` (a load's
N-Quads text), ``bulk`` (streaming it into pyoxigraph's Rust bulk loader), ``values``
(pyoxigraph terms ⇄ Python values), ``snapshots`` (the private RocksDB checkpoints readers
and ``kgengine serve`` read), ``locks`` (who holds the writer lock), ``workers`` (a user's
query run in a :mod:`kgengine.serve.worker` process)."""
