// One batch of labels: $rows = [[entity id, label], ...] (entities of the graph only).
UNWIND $rows AS row
MATCH (e:Entity {graph: $graph, id: row[0]})
SET e.label = row[1]
