// One batch of relation labels: $rows = [[relation name, label], ...] (relations of the graph only).
UNWIND $rows AS row
MERGE (r:Relation {graph: $graph, name: row[0]})
SET r.label = row[1]
