// Triples entering the given entities that have at most $cap incoming triples (one hop of
// k-hop retrieval with a hub cap: a hub is not expanded). $t: list of entities; $cap: int.
UNWIND $t AS id
MATCH (t:Entity {graph: $graph, id: id})
WHERE COUNT { (t)<--() } <= $cap
MATCH (h)-[x]->(t)
RETURN h.id AS h, type(x) AS r, t.id AS t, $cap AS cap
