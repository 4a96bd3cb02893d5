// One step of a relation path, forwards: the objects of relation $r from the given subjects.
// $h: list of entities; $r: the relation (a Relation parameter, also the type placeholder).
UNWIND $h AS id
MATCH (h:Entity {graph: $graph, id: id})-[:{{rel:r}}]->(t)
RETURN h.id AS h, $r AS r, t.id AS t
