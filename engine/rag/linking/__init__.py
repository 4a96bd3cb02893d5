"""Linking a question to the graph: its topic entity (:mod:`.entities`) and the relation path
it asks about (:mod:`.linker`: the :class:`~kgengine.rag.linking.linker.RelationLinker`
protocol and its implementations), with their parts — a question's pattern (:mod:`.patterns`),
words (:mod:`.words`), cues (:mod:`.cues`), the ranking of the paths around the topic
(:mod:`.ranking`), what a training split teaches (:mod:`.vocabulary`, :mod:`.classifier`,
:mod:`.learning`)."""
