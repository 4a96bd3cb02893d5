// Rule mining: the support of every candidate atom of a refinement in one query: distinct head
// bindings per type of the candidate relationship. One MATCH per atom, so that two atoms may
// bind the same relationship (homomorphism semantics, as in SPARQL and AMIE).
{{head}}
{{body}}
{{candidate}}
WITH DISTINCT type(cand_rel) AS cand_rel, {{head_vars}}
RETURN cand_rel, count(*) AS support
