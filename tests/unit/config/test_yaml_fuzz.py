"""Fuzz the YAML reader with text built from a grammar of the constructs that once raised or
exploded (tags, anchors and aliases, merges, nesting, huge integers, odd Unicode): it never
raises, every problem names a line of the file, and memory stays bounded. Derandomized and
capped in examples and time, so CI runs the same few seconds every time."""

from __future__ import annotations

import copy
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot import bounded_json
from meshpilot.config.yaml_load import YAMLInputError, load_yaml_all
from meshpilot.config.yaml_source import read_text

MEMORY_LIMIT = 50 * 2**20
FUZZ = settings(
    max_examples=300,
    deadline=2000,  # ms per example; a bounded read of these texts takes a few
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ANCHORS = [f"a{i}" for i in range(4)]
TAGS = [
    "!!int", "!!bool", "!!float", "!!timestamp", "!!binary", "!!null", "!!str", "!!merge",
    "!!value", "!!set", "!!omap", "!!python/object:os.system", "!foo", "!<tag:x,2000:y>",
]  # fmt: skip
WORDS = [
    "abc", "x", "1", "-0", "0x1F", "0o17", "1_000", "1e400", ".nan", "-.inf", "yes", "on",
    "~", "null", "2024-01-02", "2024-13-45T99:99:99Z", "<<", "=", "AAAA", "!!!", "é", "\u202e",
    "\U0001f600", "\ufeff", "\u0085", "\t", "'quote'", '"dq"',
]  # fmt: skip

big_ints = st.integers(4000, 6000).map(lambda n: "9" * n)
odd_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12).map(
    lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
)
words = st.sampled_from(WORDS) | big_ints | odd_text
tagged = st.tuples(st.sampled_from(TAGS), words).map(" ".join)
alias = st.sampled_from(ANCHORS).map(lambda a: f"*{a}")
scalar = words | tagged | alias


def _anchored(node: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.none() | st.sampled_from(ANCHORS), node).map(
        lambda pair: f"&{pair[0]} {pair[1]}" if pair[0] else pair[1]
    )


def _collections(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    key = words | st.just("<<")
    flow_seq = st.lists(children, max_size=5).map(lambda items: "[" + ", ".join(items) + "]")
    flow_map = st.lists(st.tuples(key, children), max_size=5).map(
        lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    )
    return _anchored(flow_seq | flow_map)


flow_node = st.recursive(_anchored(scalar), _collections, max_leaves=30)
# Laughs of any width and depth: each level an anchored list of aliases to the previous one.
laughs = st.tuples(st.integers(1, 12), st.integers(1, 10)).map(
    lambda wd: "".join(
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else 'lol'] * wd[0])}]\n" for i in range(wd[1])
    )
)
deep = st.integers(150, 1100).map(lambda n: "k: " + "[" * n + "]" * n + "\n")
block_doc = st.lists(st.tuples(words | st.just("<<"), flow_node), min_size=1, max_size=6).map(
    lambda pairs: "".join(f"{k}: {v}\n" for k, v in pairs)
)
documents = st.lists(block_doc | laughs | deep | flow_node, min_size=1, max_size=3).map(
    "---\n".join
)
# Raw text too, with surrogates: a file decoded with errors="surrogateescape" holds them.
yaml_text = documents | st.text(max_size=200)


def _peak_memory(text: str) -> int:
    tracemalloc.start()
    try:
        result = read_text(text, "fuzz.yaml")
        for diag in result.diagnostics:
            assert diag.file == "fuzz.yaml"
            assert 1 <= diag.line <= text.count("\n") + 2, (diag, text)
        try:
            load_yaml_all(text, "fuzz.yaml")
        except YAMLInputError as exc:
            assert str(exc).startswith("fuzz.yaml:")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@FUZZ
@given(yaml_text)
def test_reader_never_raises_and_memory_stays_bounded(text: str) -> None:
    assert _peak_memory(text) < MEMORY_LIMIT


json_text = st.recursive(
    st.sampled_from(["1", '"s"', "null", "1e999", "9" * 5000, "[", "{", '{"a":']),
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]")
        | st.lists(inner, max_size=3).map(lambda xs: "{" + ",".join(f'"k":{x}' for x in xs) + "}")
    ),
    max_leaves=20,
) | st.integers(1, 100_000).map(lambda n: "[" * n + "]" * n)


@FUZZ
@given(json_text)
def test_bounded_json_raises_only_value_error(text: str) -> None:
    try:
        value = bounded_json.loads(text)
    except ValueError as exc:
        assert str(exc)
        return
    copy.deepcopy(value)  # what walks the value next stays clear of the recursion limit
