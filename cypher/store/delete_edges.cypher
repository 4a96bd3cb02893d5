// Delete every relationship of the graph, in bounded transactions (auto-commit only).
MATCH (:Entity {graph: $graph})-[x]->()
CALL (x) { DELETE x } IN TRANSACTIONS OF $batch ROWS
