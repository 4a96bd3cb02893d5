// Number of triples (KG facts) in the graph.
MATCH (:Entity {graph: $graph})-[x]->()
RETURN count(x) AS n
