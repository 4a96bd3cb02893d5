"""The graph as the answering layer reads it: relation paths (:mod:`.steps`), the
:class:`~kgengine.rag.graph.view.GraphView` protocol and the algorithms over it (:mod:`.view`),
its two implementations (:mod:`.store`: the store's named queries; :mod:`.memory`: the
graph in memory)."""
