// Triples leaving the given entities that have at most $cap outgoing triples (one hop of
// k-hop retrieval with a hub cap: a hub is not expanded). $h: list of entities; $cap: int.
UNWIND $h AS id
MATCH (h:Entity {graph: $graph, id: id})
WHERE COUNT { (h)-->() } <= $cap
MATCH (h)-[x]->(t)
RETURN h.id AS h, type(x) AS r, t.id AS t, $cap AS cap
