// Triples entering the given entities (one hop of k-hop retrieval). $t: list of entities.
UNWIND $t AS id
MATCH (h)-[x]->(t:Entity {graph: $graph, id: id})
RETURN h.id AS h, type(x) AS r, t.id AS t
