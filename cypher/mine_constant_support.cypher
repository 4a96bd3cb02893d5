// Rule mining (instantiated atoms): support per entity bound to the dangling variable.
{{head}}
{{body}}
WITH DISTINCT cand_value.id AS cand_value, {{head_vars}}
RETURN cand_value, count(*) AS support
