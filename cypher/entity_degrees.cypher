// Degree (in + out, one per triple end: a self-loop counts twice) of the given entities.
// $e: list of entities; entities not in the graph give no row.
UNWIND $e AS id
MATCH (e:Entity {graph: $graph, id: id})
WITH e, COUNT { (e)-->() } + COUNT { (e)<--() } AS degree
WHERE degree > 0
RETURN e.id AS e, degree
