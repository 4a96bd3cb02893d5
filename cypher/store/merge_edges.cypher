// One batch of triples of one relation: $rows = [[head id, tail id], ...].
// MERGE everywhere, so a retried batch or a duplicate input triple adds nothing.
UNWIND $rows AS row
MERGE (h:Entity {graph: $graph, id: row[0]})
MERGE (t:Entity {graph: $graph, id: row[1]})
MERGE (h)-[:{{rel:relation}}]->(t)
