// Switch graph $graph to the data loaded under the staging key $staging, in ONE transaction
// (statements separated by ";", run together): the old data moves to the key $old (removed
// after the commit), the staged data takes the graph's name, the metadata becomes $meta.
// Only nodes carry the key (edges hang off them), so this touches nodes, never edges.
MATCH (e:Entity {graph: $graph}) SET e.graph = $old;
MATCH (e:Entity {graph: $staging}) SET e.graph = $graph;
MATCH (r:Relation {graph: $graph}) SET r.graph = $old;
MATCH (r:Relation {graph: $staging}) SET r.graph = $graph;
MERGE (g:Graph {name: $graph}) SET g = $meta, g.name = $graph
