// The given entities that are in the graph, with their private id and text label (if any).
// $e: list of entities.
UNWIND $e AS id
MATCH (e:Entity {graph: $graph, id: id})
RETURN e.id AS e, e.label AS label, e.private_id AS private
