"""Values at every limit arrive intact, with their types, at load (on every load path)
and through set_option."""

from __future__ import annotations

import pytest

from harness.options import Option

from .maps import every_type, single

VALUES = {
    "int32-min": -(2**31),
    "int32-max": 2**31 - 1,
    "int-zero": 0,
    "int-minus-one": -1,
    "true": True,
    "false": False,
    "empty-string": "",
    "string-255-bytes": "s" * 255,
    "string-255-bytes-multibyte": "é" * 127 + "x",
    "utf8-2-byte": "ümlaut",
    "utf8-3-byte": "日本語のオプション",
    "utf8-4-byte": "🚀🧪",
    "string-looks-like-int": "1",
    "string-looks-like-bool": "true",
}

KEYS = {
    "key-1-byte": "k",
    "key-63-bytes": "k" * 63,
    "key-63-bytes-multibyte": "ключ" * 7 + "k" * 7,
    "key-utf8": "clé_日本",
}

# Probes under names of any shape: declared (probes=), as the harness registers a probe only
# under its own names (Probe...) or declared ones.
IDS = {
    "id-1-byte": "P",
    "id-63-bytes": "P" * 63,
    "id-utf8": "\u041f\u0440\u043e\u0431a\U0001f680",  # Cyrillic "Prob", Latin "a", an emoji
}


def _value(value):
    return single("ProbeA", Option("value", value))


def _key(key):
    return single("ProbeA", Option(key, 7), Option("other", "x"))


def _backend_id(backend_id):
    return single(backend_id, Option("threads", 2))


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_value_at_limit_at_load(et, load_path, value):
    et.load(_value(value), path=load_path).raise_for_differences()


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_value_at_limit_by_set_option(et, value):
    et.set(_value(value)).raise_for_differences()


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
def test_key_at_limit_at_load(et, load_path, key):
    et.load(_key(key), path=load_path).raise_for_differences()


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
def test_key_at_limit_by_set_option(et, key):
    et.set(_key(key)).raise_for_differences()


@pytest.mark.parametrize("backend_id", IDS.values(), ids=IDS.keys())
def test_backend_id_at_limit_at_load(et, load_path, backend_id):
    et.load(_backend_id(backend_id), path=load_path, probes=(backend_id,)).raise_for_differences()


@pytest.mark.parametrize("backend_id", IDS.values(), ids=IDS.keys())
def test_backend_id_at_limit_by_set_option(et, backend_id):
    et.set(_backend_id(backend_id), probes=(backend_id,)).raise_for_differences()


def test_full_backend_of_every_type_at_load(et, load_path):
    """As many options as one backend may carry here: 64 (the wire's limit), or the
    device's announced options_per_backend when its RAM holds fewer."""
    options = every_type("ProbeA", et.options_per_backend)
    et.load(options, path=load_path).raise_for_differences()


def test_full_backend_of_every_type_by_set_option(et):
    et.set(every_type("ProbeA", et.options_per_backend)).raise_for_differences()
