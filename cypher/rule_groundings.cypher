// Groundings of a rule body: distinct substitutions of the rule's variables that make every
// body atom a fact. The body is one MATCH per atom (so two atoms may bind the same
// relationship, as in SPARQL); the head filter is empty or a WHERE [NOT] EXISTS on the head.
// Placeholders are generated from the rule and escaped by kgengine.mining.groundings/compile.
{{body}}
{{head_filter}}
RETURN DISTINCT {{returns}}
ORDER BY {{order}}
{{limit}}
