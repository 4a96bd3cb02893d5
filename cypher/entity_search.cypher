// Entities whose private id equals the text or whose label starts with it, ignoring case.
// $text: the search text, lower-cased by the caller.
MATCH (e:Entity {graph: $graph})
WHERE toLower(e.private_id) = $text OR toLower(e.label) STARTS WITH $text
RETURN e.id AS e, e.label AS label, e.private_id AS private, $text AS text
