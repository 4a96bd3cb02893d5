// Remove the metadata node of graph $graph.
MATCH (g:Graph {name: $graph})
DELETE g
