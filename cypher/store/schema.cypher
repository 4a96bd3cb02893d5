// Schema, created before any load (idempotent; statements separated by ";").
// (graph, id) is the entity key: a composite property uniqueness constraint, which
// Community 5.26 supports (NODE KEY constraints are Enterprise-only). Its backing index
// serves MERGE / lookups by (graph, id); it cannot serve graph-only lookups, hence the
// second index. Graph metadata nodes are unique by name; relation-label nodes by
// (graph, name).
CREATE CONSTRAINT kgengine_entity_key IF NOT EXISTS
FOR (e:Entity) REQUIRE (e.graph, e.id) IS UNIQUE;
CREATE INDEX kgengine_entity_graph IF NOT EXISTS
FOR (e:Entity) ON (e.graph);
CREATE CONSTRAINT kgengine_graph_name IF NOT EXISTS
FOR (g:Graph) REQUIRE g.name IS UNIQUE;
CREATE CONSTRAINT kgengine_relation_key IF NOT EXISTS
FOR (r:Relation) REQUIRE (r.graph, r.name) IS UNIQUE
