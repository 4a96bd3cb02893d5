// Facts of one relation. $r: the relation (a Relation parameter, also the type placeholder).
MATCH (h:Entity {graph: $graph})-[:{{rel:r}}]->(t)
RETURN h.id AS h, $r AS r, t.id AS t
