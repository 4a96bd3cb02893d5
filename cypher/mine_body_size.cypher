// Rule mining: body size, the distinct bindings of the head variables that satisfy the body;
// the limit placeholder is empty or a LIMIT (AMIE's lazy counting).
{{body}}
WITH DISTINCT {{head_vars}}
{{limit}}
RETURN count(*) AS n
