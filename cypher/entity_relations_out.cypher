// The relations leaving the given entities, with their fact counts (Think-on-Graph's relation
// search). $h: list of entities.
UNWIND $h AS id
MATCH (:Entity {graph: $graph, id: id})-[x]->()
RETURN type(x) AS r, count(*) AS n
