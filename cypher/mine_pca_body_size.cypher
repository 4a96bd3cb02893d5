// Rule mining: PCA body size, the distinct head bindings that satisfy the body and whose
// functional variable has some fact of the head relation (an EXISTS filter).
{{body}}
{{existential}}
WITH DISTINCT {{head_vars}}
{{limit}}
RETURN count(*) AS n
