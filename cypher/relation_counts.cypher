// Facts per relation.
MATCH (:Entity {graph: $graph})-[x]->()
RETURN type(x) AS r, count(*) AS n
