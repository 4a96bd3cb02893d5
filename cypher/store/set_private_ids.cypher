// One batch of private ids: $rows = [[entity id, private id], ...].
UNWIND $rows AS row
MATCH (e:Entity {graph: $graph, id: row[0]})
SET e.private_id = row[1]
