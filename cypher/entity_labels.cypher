// Text labels of the graph's entities (a node property here).
MATCH (e:Entity {graph: $graph})
WHERE e.label IS NOT NULL
RETURN e.id AS e, e.label AS label
