"""A Wikidata5m-shaped synthetic KG with planted rules, for the mining tests and benchmarks.

Shape (scaled by the number of triples; at 21M it is Wikidata5m's size): ~4.6M entities and
822 relations whose sizes follow a power law, subjects and objects drawn from power laws over
the entities (hub entities), and an ``instance of`` relation P31 with about one fact per
entity whose objects are a few thousand classes, the largest holding ~40% of them (a hub
relation with a hub object, like Q5 "human").

Planted rules: relations made from others, so that the true rules are known:

- inverse      q(y, x) <= p(x, y)
- hierarchy    q(x, y) <= p(x, y)
- composition  q(x, z) <= p1(x, y), p2(y, z)   (p2 functional: one object per subject)

each head keeping a chosen share ``keep`` of the body's groundings plus ``noise`` x that many
random facts. Their measures are computed here exactly, with numpy set operations on the
generated triples (independently of the miner), and say whether a rule passes the thresholds.

Entities are ``Q<k>``, relations ``P<k>`` (P31 the hub); ``write_wikidata5m`` writes the
Wikidata5m transductive + alias files that ``kgengine load wikidata5m`` reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from kgengine.mining.rules import Atom, Rule

WIKIDATA5M_TRIPLES = 20_624_575  # train + valid + test
WIKIDATA5M_ENTITIES = 4_594_485
WIKIDATA5M_RELATIONS = 822
HUB_RELATION = 31  # P31, instance of


@dataclass(frozen=True)
class PlantedRule:
    kind: str  # inverse | hierarchy | composition
    head: int  # relation ids
    body: tuple[int, ...]
    keep: float
    noise: float

    @property
    def rule(self) -> Rule:
        head = Atom(f"P{self.head}", "?a", "?b")
        if self.kind == "inverse":
            return Rule.of((Atom(f"P{self.body[0]}", "?b", "?a"),), head)
        if self.kind == "hierarchy":
            return Rule.of((Atom(f"P{self.body[0]}", "?a", "?b"),), head)
        return Rule.of((Atom(f"P{self.body[0]}", "?a", "?c"), Atom(f"P{self.body[1]}", "?c", "?b")), head)


@dataclass(frozen=True)
class TrueMeasures:
    support: int
    head_size: int
    body_size: int
    pca_body_size: int  # on the head's functional side, as AMIE counts it

    def passes(self, min_hc: float, min_conf: float, min_pca: float) -> bool:
        return (self.support >= min_hc * self.head_size and self.body_size > 0
                and self.support >= min_conf * self.body_size
                and self.pca_body_size > 0 and self.support >= min_pca * self.pca_body_size)


@dataclass
class SyntheticKG:
    entities: int
    relations: list[int]  # relation ids (P-numbers)
    facts: dict[int, np.ndarray] = field(default_factory=dict)  # relation -> sorted s*n+o keys
    planted: list[PlantedRule] = field(default_factory=list)

    @property
    def triples(self) -> int:
        return sum(len(k) for k in self.facts.values())

    def pairs(self, relation: int) -> tuple[np.ndarray, np.ndarray]:
        keys = self.facts[relation]
        return keys // self.entities, keys % self.entities

    def iter_triples(self):
        from kgengine.model import Triple

        for r in sorted(self.facts):
            s, o = self.pairs(r)
            for a, b in zip(s.tolist(), o.tolist(), strict=True):
                yield Triple(f"Q{a + 1}", f"P{r}", f"Q{b + 1}")

    # -- exact measures of a planted rule --------------------------------------------------------
    def body_keys(self, planted: PlantedRule) -> np.ndarray:
        """Distinct (a, b) head bindings of the body, as a*n+b keys."""
        n = self.entities
        if planted.kind == "inverse":
            s, o = self.pairs(planted.body[0])
            return np.unique(o * n + s)
        if planted.kind == "hierarchy":
            return self.facts[planted.body[0]]
        x, y = self.pairs(planted.body[0])
        ys, zs = self.pairs(planted.body[1])
        return np.unique(_join(x, y, ys, zs, n))

    def measures(self, planted: PlantedRule) -> TrueMeasures:
        n = self.entities
        head = self.facts[planted.head]
        body = self.body_keys(planted)
        hs, ho = head // n, head % n
        subject_side = len(np.unique(hs)) >= len(np.unique(ho))  # AMIE's functional variable
        known = np.unique(hs if subject_side else ho)
        side = body // n if subject_side else body % n
        return TrueMeasures(
            support=int(np.isin(body, head, assume_unique=True).sum()),
            head_size=len(head),
            body_size=len(body),
            pca_body_size=int(np.isin(side, known).sum()))

    def expected(self, min_hc: float = 0.1, min_conf: float = 0.3, min_pca: float = 0.4,
                 min_initial_support: int = 100) -> dict[Rule, TrueMeasures]:
        """The planted rules a miner with these thresholds must output, with their measures."""
        out = {}
        for planted in self.planted:
            m = self.measures(planted)
            if m.head_size >= min_initial_support and m.passes(min_hc, min_conf, min_pca):
                out[planted.rule] = m
        return out


def _join(x: np.ndarray, y: np.ndarray, ys: np.ndarray, zs: np.ndarray, n: int) -> np.ndarray:
    """(x, z) keys of x -p1-> y -p2-> z for a functional p2 (ys distinct, sorted)."""
    pos = np.minimum(np.searchsorted(ys, y), max(len(ys) - 1, 0))
    hit = (ys[pos] == y) if len(ys) else np.zeros(len(y), dtype=bool)
    return x[hit] * n + zs[pos[hit]]


def _power_law_cdf(n: int, exponent: float) -> np.ndarray:
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -exponent)
    return cdf / cdf[-1]


def _draw(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(cdf) - 1)


def planted_kg(triples: int, seed: int = 0, planted_per_kind: int = 8) -> SyntheticKG:
    """About ``triples`` distinct facts in Wikidata5m's shape, with planted rules.

    Entities have types (power-law sizes: the largest, like Wikidata's humans, holds ~40%);
    each relation links a domain type to a range type, subjects drawn from a mild power law
    within the domain, objects from a steeper one within the range (hub objects, like
    countries); P31 links ~90% of the entities to their type's class entity."""
    rng = np.random.default_rng(seed)
    scale = triples / WIKIDATA5M_TRIPLES
    n = max(400, int(WIKIDATA5M_ENTITIES * scale))
    n_relations = min(WIKIDATA5M_RELATIONS, max(8 * planted_per_kind + 8, int(822 * scale ** 0.3)))
    others = [r for r in range(1, 3 * n_relations) if r != HUB_RELATION]
    relation_ids = [HUB_RELATION, *others[: n_relations - 1]]
    kg = SyntheticKG(n, relation_ids)
    n_types = 40
    shares = np.arange(1, n_types + 1, dtype=np.float64) ** -1.3
    bounds = np.concatenate([[0], np.cumsum(np.maximum(5, (n * shares / shares.sum()).astype(np.int64)))])
    bounds = np.minimum(bounds, n)
    bounds[-1] = n
    order = rng.permutation(n)  # entity ids in random order, so types are not id ranges
    members = [order[bounds[t] : bounds[t + 1]] for t in range(n_types)]
    type_cdf = np.cumsum(shares / shares.sum())
    cdfs: dict[tuple[int, float], np.ndarray] = {}

    def entities(type_: int, size: int, exponent: float) -> np.ndarray:
        cdf = cdfs.get((type_, exponent))
        if cdf is None:
            cdf = cdfs[(type_, exponent)] = _power_law_cdf(len(members[type_]), exponent)
        return members[type_][_draw(rng, cdf, size)]

    def a_type() -> int:
        return int(min(np.searchsorted(type_cdf, rng.random()), n_types - 1))

    def store(relation: int, s: np.ndarray, o: np.ndarray) -> None:
        keep = s != o  # no reflexive facts (the miner's atoms never bind one variable twice)
        kg.facts[relation] = np.unique(s[keep] * n + o[keep])

    # P31: ~90% of the entities -> their type's class (an entity of the last type)
    classes = members[-1][:n_types]
    typed = np.concatenate([np.full(len(m), t) for t, m in enumerate(members)])
    instances = np.concatenate(members)
    chosen = rng.random(n) < 0.9
    store(HUB_RELATION, instances[chosen], classes[typed[chosen]])

    subject_exponent, object_exponent = 0.6, 1.0
    free = relation_ids[1:]
    heads, bodies = free[: 3 * planted_per_kind], free[3 * planted_per_kind :]
    body_share = 0.3 * triples / (4 * planted_per_kind)  # facts per body relation
    keeps = [0.9, 0.7, 0.5, 0.35, 0.2, 0.8, 0.6, 0.4]
    noises = [0.05, 0.3, 0.1, 0.6, 0.05, 1.5, 0.2, 0.02]
    next_body = iter(bodies)
    for kind_index, kind in enumerate(("inverse", "hierarchy", "composition")):
        for i in range(planted_per_kind):
            head = heads[kind_index * planted_per_kind + i]
            keep, noise = keeps[i % len(keeps)], noises[(i + kind_index) % len(noises)]
            size = max(150, int(body_share * (0.3 + 1.4 * rng.random())))
            domain, range_ = a_type(), a_type()
            if kind == "composition":
                p1, p2 = next(next_body), next(next_body)
                middle = a_type()
                middles = np.unique(entities(middle, size, subject_exponent))
                store(p2, middles, entities(range_, len(middles), object_exponent))  # functional
                store(p1, entities(domain, size, subject_exponent), rng.choice(middles, size))
                x, y = kg.pairs(p1)
                ys, zs = kg.pairs(p2)
                body = np.unique(_join(x, y, ys, zs, n))
                body_s, body_o = body // n, body % n
                members_ = (p1, p2)
            else:
                p = next(next_body)
                store(p, entities(domain, size, subject_exponent), entities(range_, size, object_exponent))
                s, o = kg.pairs(p)
                body_s, body_o = (o, s) if kind == "inverse" else (s, o)
                members_ = (p,)
                if kind == "inverse":
                    domain, range_ = range_, domain
            picked = rng.random(len(body_s)) < keep
            extra = int(noise * picked.sum())
            store(head, np.concatenate([body_s[picked], entities(domain, extra, subject_exponent)]),
                  np.concatenate([body_o[picked], entities(range_, extra, object_exponent)]))
            kg.planted.append(PlantedRule(kind, head, members_, keep, noise))
    # the other relations: power-law sizes filling the rest of the triples
    rest = [r for r in bodies if r not in kg.facts]
    left = max(0, triples - kg.triples)
    if rest:
        weights = np.arange(1, len(rest) + 1, dtype=np.float64) ** -1.1
        sizes = np.maximum(20, (left * weights / weights.sum()).astype(np.int64))
        for r, size in zip(rest, sizes.tolist(), strict=True):
            domain, range_ = a_type(), a_type()
            store(r, entities(domain, size, subject_exponent), entities(range_, size, object_exponent))
    return kg


def write_wikidata5m(kg: SyntheticKG, directory: Path) -> None:
    """The KG as Wikidata5m's transductive files (all facts in train) with alias files."""
    directory.mkdir(parents=True, exist_ok=True)
    n = kg.entities
    with (directory / "wikidata5m_transductive_train.txt").open("w") as fh:
        for r in sorted(kg.facts):
            keys = kg.facts[r]
            for start in range(0, len(keys), 1 << 20):
                chunk = keys[start : start + (1 << 20)]
                fh.write("".join(map(f"Q{{}}\tP{r}\tQ{{}}\n".format,
                                     (chunk // n + 1).tolist(), (chunk % n + 1).tolist())))
    for split in ("valid", "test"):
        (directory / f"wikidata5m_transductive_{split}.txt").write_text("")
    with (directory / "wikidata5m_entity.txt").open("w") as fh:
        for start in range(0, n, 1 << 20):
            ids = range(start + 1, min(n, start + (1 << 20)) + 1)
            fh.write("".join(f"Q{q}\tentity {q}\n" for q in ids))
    with (directory / "wikidata5m_relation.txt").open("w") as fh:
        fh.write("".join(f"P{r}\trelation {r}\n" for r in kg.relations))



def dense_kg(entities: int = 120, relations: int = 40, triples: int = 10_000,
             seed: int = 0) -> list[tuple[str, str, str]]:
    """A small dense KG (few entities, many relations, ~70% of the pairs linked by some
    relation): where a miner's candidate counts, not the data, dominate. Relation sizes vary
    (power law); pairs are uniform, so its rules are chance correlations."""
    rng = np.random.default_rng(seed)
    weights = np.arange(1, relations + 1, dtype=np.float64) ** -0.7
    sizes = np.maximum(30, (triples * weights / weights.sum()).astype(np.int64))
    out: set[tuple[str, str, str]] = set()
    for r, size in enumerate(sizes.tolist()):
        s = rng.integers(0, entities, 2 * size)
        o = rng.integers(0, entities, 2 * size)
        pairs = list(dict.fromkeys((a, b) for a, b in zip(s.tolist(), o.tolist(), strict=True) if a != b))
        out.update((f"e{a}", f"r{r}", f"e{b}") for a, b in pairs[:size])
    return sorted(out)
