// Create or overwrite the metadata node of graph $graph with the properties $meta.
MERGE (g:Graph {name: $graph})
SET g = $meta, g.name = $graph
