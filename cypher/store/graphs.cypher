// Metadata of every graph (all of them, or the one named $name when given).
MATCH (g:Graph)
WHERE $name IS NULL OR g.name = $name
RETURN properties(g) AS meta
ORDER BY g.name
