// One step of a relation path, backwards: the subjects of relation $r towards the given objects.
// $t: list of entities; $r: the relation (a Relation parameter, also the type placeholder).
UNWIND $t AS id
MATCH (h)-[:{{rel:r}}]->(t:Entity {graph: $graph, id: id})
RETURN h.id AS h, $r AS r, t.id AS t
