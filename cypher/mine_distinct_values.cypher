// Rule mining (instantiated atoms): distinct values of the variable cand_value in a rule.
{{head}}
{{body}}
RETURN count(DISTINCT cand_value) AS n
