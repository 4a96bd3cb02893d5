// Seeded random private ids of the graph's entities (a node property here).
MATCH (e:Entity {graph: $graph})
WHERE e.private_id IS NOT NULL
RETURN e.id AS e, e.private_id AS private
