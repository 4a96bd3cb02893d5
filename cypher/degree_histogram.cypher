// Degree distribution: how many entities have each degree (in + out, one per triple end).
// Out- and in-degree are counted separately so a self-loop counts twice, as in SPARQL.
MATCH (e:Entity {graph: $graph})
WITH COUNT { (e)-->() } + COUNT { (e)<--() } AS degree
WHERE degree > 0
RETURN degree, count(*) AS n
