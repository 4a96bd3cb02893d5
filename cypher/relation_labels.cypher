// Text labels of the graph's relations ((:Relation {graph, name, label}) nodes, set by a load).
MATCH (r:Relation {graph: $graph})
WHERE r.label IS NOT NULL
RETURN r.name AS r, r.label AS label
