// Delete every entity node of the graph (edges first: see delete_edges), in bounded transactions.
MATCH (e:Entity {graph: $graph})
CALL (e) { DETACH DELETE e } IN TRANSACTIONS OF $batch ROWS
