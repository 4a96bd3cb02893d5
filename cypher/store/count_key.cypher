// Number of entity nodes stored under the graph key $graph (a graph or a staging key).
MATCH (e:Entity {graph: $graph})
RETURN count(e) AS n
