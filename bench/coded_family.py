"""The Family KG with its relation names replaced by opaque codes (``kin_1`` .. ``kin_12``, in
the sorted order of the real names), as a TSV for ``kgengine load tsv``: a BRINK-style build
on it asks "What is the kin 8 of e0123?", which only the code itself can link (docs/rag.md,
"Answering what training did not cover").

    python bench/coded_family.py -o family-codes.tsv
    kgengine load tsv --path family-codes.tsv --graph family-codes
    kgengine brink build --graph family-codes --max-len 3 -o fcodes --load
    kgengine eval --questions fcodes/questions_test.jsonl --graph family-codes-brink-incomplete -o eval-codes
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kgengine.loaders import read_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    triples = list(read_dataset("family", splits=["facts"]).triples)
    codes = {r: f"kin_{i + 1}" for i, r in enumerate(sorted({t.relation for t in triples}))}
    lines = (f"{t.head}\t{codes[t.relation]}\t{t.tail}\n" for t in triples)
    args.out.write_text("".join(lines), encoding="utf-8")
    print(f"{args.out}: {len(triples):,} triples; " + ", ".join(f"{r} -> {c}" for r, c in codes.items()))


if __name__ == "__main__":
    main()
