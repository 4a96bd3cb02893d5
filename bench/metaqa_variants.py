"""MetaQA test sets in wordings its templates never use, for measuring how the answerer
generalises (docs/rag.md, "Answering what training did not cover"):

- ``reworded``: every question with synonyms of our own substituted word by word (the table
  below; none of these words occurs in any MetaQA question, checked when the files are
  written), e.g. "what movies did [X] direct" -> "what pictures did [X] helm";
- ``no-brackets``: the ``[brackets]`` around the topic removed (free-text questions: the
  answerer must find the topic in the text).

Each variant folder holds ``N-hop/qa_test.txt`` (rewritten) beside the untouched
``qa_dev.txt`` (the training split) and ``qa_test_qtype.txt``, so that
``kgengine eval --questions VARIANT/N-hop/qa_test.txt --graph metaqa`` learns from the
original dev wording and is scored on the new one.

    python bench/metaqa_variants.py --metaqa ../shared/datasets/metaqa -o /tmp/metaqa-variants
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

# our synonyms, "metaqa-word=ours": none of ours occurs in any MetaQA question
_PAIRS = """
    movies=pictures movie=picture films=pictures film=picture
    directed=helmed direct=helm director=filmmaker directors=filmmakers
    starred=featured acted=performed act=perform star=feature actors=performers actor=performer
    appear=feature appears=features
    written=penned wrote=penned write=pen co-wrote=co-penned writer=scribe writers=scribes
    screenwriter=scenarist screenwriters=scenarists
    genres=categories genre=category types=kinds languages=tongues language=tongue spoken=used
    release=premiere released=premiered describe=characterise described=characterised
"""
SYNONYMS = dict(pair.split("=") for pair in _PAIRS.split())
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_BRACKET = re.compile(r"\[([^\]]*)\]")


def reword(text: str) -> str:
    """Substitute outside the [topic] only (a title keeps its words)."""
    parts = re.split(r"(\[[^\]]*\])", text)
    return "".join(p if p.startswith("[") else _WORD.sub(lambda m: SYNONYMS.get(m.group(0), m.group(0)), p)
                   for p in parts)


def unbracket(text: str) -> str:
    return _BRACKET.sub(r"\1", text)


def write_variant(metaqa: Path, out: Path, name: str, rewrite) -> None:
    vocabulary: set[str] = set()
    for hops in (1, 2, 3):
        for split in ("train", "dev", "test"):
            path = metaqa / f"{hops}-hop" / f"qa_{split}.txt"
            if path.is_file():
                for line in path.read_text(encoding="utf-8").splitlines():
                    question = _BRACKET.sub(" ", line.split("\t")[0])
                    vocabulary.update(w.lower() for w in _WORD.findall(question))
    used = {w for v in SYNONYMS.values() for w in v.split()} & vocabulary
    if name == "reworded" and used:
        raise SystemExit(f"synonyms that MetaQA already uses: {sorted(used)}")
    for hops in (1, 2, 3):
        source, target = metaqa / f"{hops}-hop", out / name / f"{hops}-hop"
        target.mkdir(parents=True, exist_ok=True)
        lines = []
        for line in (source / "qa_test.txt").read_text(encoding="utf-8").splitlines():
            question, answers = line.split("\t", 1)
            lines.append(f"{rewrite(question)}\t{answers}")
        (target / "qa_test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        for keep in ("qa_dev.txt", "qa_test_qtype.txt", "qa_dev_qtype.txt"):
            if (source / keep).is_file():
                shutil.copyfile(source / keep, target / keep)
        print(f"{target / 'qa_test.txt'}: {len(lines)} questions, e.g. {lines[0].split(chr(9))[0]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metaqa", type=Path, required=True, help="MetaQA folder (1-hop/, 2-hop/, 3-hop/)")
    parser.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args()
    write_variant(args.metaqa, args.out, "reworded", reword)
    write_variant(args.metaqa, args.out, "no-brackets", unbracket)


if __name__ == "__main__":
    main()
