// Triples leaving the given entities (one hop of k-hop retrieval). $h: list of entities.
UNWIND $h AS id
MATCH (h:Entity {graph: $graph, id: id})-[x]->(t)
RETURN h.id AS h, type(x) AS r, t.id AS t
