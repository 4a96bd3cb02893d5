// Every triple of the graph.
MATCH (h:Entity {graph: $graph})-[x]->(t)
RETURN h.id AS h, type(x) AS r, t.id AS t
