// Delete the relation-label nodes of the graph (they have no edges), in bounded transactions.
MATCH (r:Relation {graph: $graph})
CALL (r) { DELETE r } IN TRANSACTIONS OF $batch ROWS
