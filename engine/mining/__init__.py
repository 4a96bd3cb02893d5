"""Horn rule mining with AMIE 3 semantics (rule model, measures, search, counting engines)."""
