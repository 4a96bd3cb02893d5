// Every distinct entity of the graph (every Entity node has an edge).
MATCH (e:Entity {graph: $graph})
RETURN e.id AS e
