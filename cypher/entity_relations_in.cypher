// The relations entering the given entities, with their fact counts (Think-on-Graph's relation
// search). $t: list of entities.
UNWIND $t AS id
MATCH ()-[x]->(:Entity {graph: $graph, id: id})
RETURN type(x) AS r, count(*) AS n
