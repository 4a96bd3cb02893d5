// Number of distinct entities (heads or tails) in the graph: every Entity node has an edge.
MATCH (e:Entity {graph: $graph})
RETURN count(e) AS n
