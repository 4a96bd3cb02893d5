// Rule mining: facts, distinct subjects and distinct objects of every relation.
MATCH (s:Entity {graph: $graph})-[x]->(o)
RETURN type(x) AS r, count(*) AS facts, count(DISTINCT s) AS subjects, count(DISTINCT o) AS objects
