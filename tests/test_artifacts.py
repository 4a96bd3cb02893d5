"""The one artifact cache (kgengine.artifacts): hits and misses, keys that follow content (a
training file's bytes, a graph's load) and versions, broken files rebuilt, writes that a kill
cannot tear, and the one cache-directory rule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.toy_kg import triples
from kgengine import artifacts
from kgengine.artifacts import (
    Artifact,
    ArtifactCache,
    cache_root,
    content_key,
    file_digest,
    graph_stamp,
)
from kgengine.oxigraph.store import OxigraphStore

TOY = triples("""
Alice | knows | Bob
Bob | knows | Carol
Carol | lives_in | Paris
""")


def write_json(value: dict, path: Path) -> None:
    path.write_text(json.dumps(value), encoding="utf-8")


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


NOTES = Artifact("notes", 1, ".json", write=write_json, read=read_json)


class Builder:
    """A build that counts its calls."""

    def __init__(self, value: dict) -> None:
        self.value, self.calls = value, 0

    def __call__(self) -> dict:
        self.calls += 1
        return dict(self.value)


def test_a_miss_builds_writes_and_reads_back_and_a_hit_reads(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    build = Builder({"n": 1})
    first = cache.load_or_build(NOTES, content_key("a"), build, label="toy")
    assert (first.value, first.hit, first.saved, build.calls) == ({"n": 1}, False, True, 1)
    assert first.path.parent == tmp_path / "notes" and first.path.name.startswith("toy-")
    assert first.path.suffix == ".json" and read_json(first.path) == {"n": 1}
    second = cache.load_or_build(NOTES, content_key("a"), build, label="toy")
    assert (second.value, second.hit, second.path, build.calls) == ({"n": 1}, True, first.path, 1)
    assert cache.load(NOTES, content_key("a"), label="toy") == {"n": 1}
    # another key is another entry
    assert cache.load(NOTES, content_key("b"), label="toy") is None
    assert not cache.load_or_build(NOTES, content_key("b"), build, label="toy").hit and build.calls == 2
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == sorted(
        [first.path.name, cache.path(NOTES, content_key("b"), "toy").name])  # no temporary left


def test_the_value_returned_on_a_miss_is_the_one_read_back(tmp_path: Path) -> None:
    """What the first run gets is what every later run reads (a format that rounds, say)."""
    rounding = Artifact("rounded", 1, ".json", write=lambda v, p: write_json({"x": round(v["x"], 2)}, p),
                        read=read_json)
    cached = ArtifactCache(tmp_path).load_or_build(rounding, "k", lambda: {"x": 0.123456})
    assert cached.value == {"x": 0.12}


def test_a_version_bump_invalidates(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    build = Builder({"n": 1})
    old = cache.load_or_build(NOTES, "k", build)
    bumped = Artifact("notes", 2, ".json", write=write_json, read=read_json)
    new = cache.load_or_build(bumped, "k", build)
    assert not new.hit and build.calls == 2 and new.path != old.path
    assert cache.load_or_build(bumped, "k", build).hit


def test_invalidate_removes_the_entry(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    build = Builder({"n": 1})
    path = cache.load_or_build(NOTES, "k", build).path
    cache.invalidate(NOTES, "k")
    assert not path.exists()
    assert not cache.load_or_build(NOTES, "k", build).hit and build.calls == 2
    cache.invalidate(NOTES, "never built")  # nothing to remove: no error


def test_a_broken_file_is_removed_and_rebuilt(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    build = Builder({"n": 1})
    path = cache.load_or_build(NOTES, "k", build).path
    for broken in ("{\"n\": ", "", "not json"):
        path.write_text(broken, encoding="utf-8")
        assert cache.load(NOTES, "k") is None  # a plain load leaves it as it is
        assert path.read_text(encoding="utf-8") == broken
        rebuilt = cache.load_or_build(NOTES, "k", build)
        assert (rebuilt.value, rebuilt.hit) == ({"n": 1}, False)
    assert build.calls == 4


def test_a_build_that_fails_leaves_the_cache_as_it_was(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)

    def failing(value: dict, path: Path) -> None:
        path.write_text("half", encoding="utf-8")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.load_or_build(Artifact("notes", 1, ".json", write=failing, read=read_json), "k", dict)
    assert list((tmp_path / "notes").iterdir()) == []


def test_a_writer_killed_while_writing_leaves_the_old_file_and_no_partial(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    path = cache.load_or_build(NOTES, "k", Builder({"n": 1})).path
    # a process that rewrites the entry and is killed (SIGKILL) halfway through writing it
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from kgengine.artifacts import Artifact, ArtifactCache

        def dying(value, path):
            with open(path, "w") as out:
                out.write('{{"n": 2, "half')
                out.flush()
                os.kill(os.getpid(), signal.SIGKILL)

        notes = Artifact("notes", 1, ".json", write=dying, read=lambda path: None)
        ArtifactCache(Path({str(tmp_path)!r})).save(notes, "k", lambda target: dying(None, target))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert read_json(path) == {"n": 1}  # the old file, whole
    leftovers = [p for p in path.parent.iterdir() if p != path]
    assert len(leftovers) == 1 and leftovers[0].name.startswith(f".{path.name}.")  # its temporary
    assert cache.load_or_build(NOTES, "k", Builder({"n": 3})).value == {"n": 1}  # still a hit
    # the next write in the folder removes the dead writer's temporary (a live one's stays)
    live = path.parent / f".{path.name}.{os.getpid()}.abcdefgh.tmp"
    live.write_text("mine", encoding="utf-8")
    cache.load_or_build(NOTES, "other", Builder({"n": 4}))
    assert not leftovers[0].exists() and live.exists()


def test_concurrent_builders_of_one_key_both_leave_a_valid_entry(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    folder = Artifact("bundle", 1, "", write=lambda v, p: (p / "a.json").write_text(json.dumps(v)),
                      read=lambda p: json.loads((p / "a.json").read_text()), folder=True)

    def build_while_another_finishes() -> dict:
        # another process renames the same entry into place while this one builds
        ArtifactCache(tmp_path).load_or_build(folder, "k", lambda: {"by": "other"})
        return {"by": "this"}

    cached = cache.load_or_build(folder, "k", build_while_another_finishes)
    assert cached.value == {"by": "other"} and not cached.hit  # the first folder stays
    assert [p.name for p in (tmp_path / "bundle").iterdir()] == [cached.path.name]

    def build_file_while_another_finishes() -> dict:
        ArtifactCache(tmp_path).load_or_build(NOTES, "k", lambda: {"by": "other"})
        return {"by": "this"}

    # a file: the last rename wins
    assert cache.load_or_build(NOTES, "k", build_file_while_another_finishes).value == {"by": "this"}


def test_drop_other_keys_keeps_one_entry_per_label(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    first = cache.load_or_build(NOTES, "load-1", Builder({"n": 1}), label="slot", drop_other_keys=True)
    neighbour = cache.load_or_build(NOTES, "x", Builder({"n": 0}), label="slot-2")
    second = cache.load_or_build(NOTES, "load-2", Builder({"n": 2}), label="slot", drop_other_keys=True)
    assert not first.path.exists() and second.path.exists() and neighbour.path.exists()


def test_a_value_that_cannot_be_written_is_returned_unsaved_when_allowed(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cache = ArtifactCache(blocker / "sub")
    with pytest.raises(OSError):
        cache.load_or_build(NOTES, "k", Builder({"n": 1}))
    cached = cache.load_or_build(NOTES, "k", Builder({"n": 1}), unsaved_ok=True)
    assert (cached.value, cached.hit, cached.saved) == ({"n": 1}, False, False)


def test_a_training_file_is_keyed_by_its_bytes(tmp_path: Path) -> None:
    train = tmp_path / "train.jsonl"
    train.write_text('{"q": 1}\n', encoding="utf-8")
    key = file_digest(train)
    assert len(key) == 64
    # touched: another modification time, the same bytes: the same key
    later = train.stat().st_mtime_ns + 5_000_000_000
    os.utime(train, ns=(later, later))
    assert file_digest(train) == key
    # a copy elsewhere: the same key
    copy = tmp_path / "elsewhere" / "copy.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(train.read_bytes())
    assert file_digest(copy) == key
    # other bytes of the same size: another key
    stamp = train.stat()
    train.write_text('{"q": 2}\n', encoding="utf-8")
    os.utime(train, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1))  # a new time, even on a coarse clock
    assert file_digest(train) != key


def test_a_reloaded_graph_has_a_new_stamp(tmp_path: Path) -> None:
    with OxigraphStore(str(tmp_path / "store")) as store:
        store.load("toy", TOY, dataset="toy")
        first = graph_stamp(store, "toy")
        assert graph_stamp(store, "toy") == first  # stable
        old = store.graph_info("toy").loaded_at
        while store.graph_info("toy").loaded_at == old:  # the load stamp has 1 s resolution
            time.sleep(0.25)
            store.load("toy", TOY, dataset="toy", replace=True)
        assert graph_stamp(store, "toy") != first  # the same triples, reloaded
        store.load("other", TOY, dataset="toy")
        assert graph_stamp(store, "other") != graph_stamp(store, "toy")


def test_the_cache_directory_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'cache = "{tmp_path / "from-config"}"\n', encoding="utf-8")
    monkeypatch.setenv("KGENGINE_CONFIG", str(config))
    monkeypatch.setenv(artifacts.CACHE_ENV, str(tmp_path / "from-env"))
    assert cache_root() == tmp_path / "from-env" and cache_root("rules") == tmp_path / "from-env" / "rules"
    assert ArtifactCache().path(NOTES, "k").parent == tmp_path / "from-env" / "notes"
    monkeypatch.delenv(artifacts.CACHE_ENV)
    assert cache_root("llm") == tmp_path / "from-config" / "llm"
    monkeypatch.setenv("KGENGINE_CONFIG", str(tmp_path / "none.toml"))
    assert cache_root("mining").parts[-2:] == ("kgengine", "mining")
