"""SOPS + age decryption: round trips with real keys, wrong key, tampering, and a
cross-check of our age layer against the real `age` CLI when it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from meshpilot.gitops.render.sops import SopsError, decrypt_document, load_identities
from meshpilot.gitops.render.sops import age as agelib
from tests.gitops_fixtures import age_encrypt, armor, new_age_key, sops_encrypt

TREE = {
    "db": {"password": "s3cr3t-value", "port": 5432, "ratio": 0.25, "on": True},
    "hosts": ["a.example", "b.example"],
    "public_unencrypted": "visible",
    "empty": "",
    "nothing": None,
}


def _ids(*keys: str) -> list[agelib.AgeIdentity]:
    return agelib.parse_identities("\n".join(keys), "test-keys")


def test_round_trip_restores_every_type() -> None:
    key = new_age_key()
    text = sops_encrypt(TREE, [key.recipient])
    assert "s3cr3t-value" not in text and "visible" in text
    assert decrypt_document(text, "v.secret.yaml", _ids(key.identity)) == TREE


def test_any_of_several_recipients_opens_the_file() -> None:
    one, two = new_age_key(), new_age_key()
    text = sops_encrypt(TREE, [one.recipient, two.recipient])
    assert decrypt_document(text, "f.yaml", _ids(two.identity)) == TREE


def test_wrong_key_names_the_file_and_recipient() -> None:
    right, wrong = new_age_key(), new_age_key()
    text = sops_encrypt(TREE, [right.recipient])
    with pytest.raises(SopsError) as err:
        decrypt_document(text, "clusters/dev/a/dev-values-a.secret.yaml", _ids(wrong.identity))
    message = str(err.value)
    assert "clusters/dev/a/dev-values-a.secret.yaml" in message
    assert right.recipient in message and wrong.identity not in message


def test_no_identity_configured() -> None:
    text = sops_encrypt(TREE, [new_age_key().recipient])
    with pytest.raises(SopsError, match="no age identity configured"):
        decrypt_document(text, "f.yaml", [])


def test_swapped_values_fail_authentication() -> None:
    key = new_age_key()
    doc = yaml.safe_load(sops_encrypt({"a": "one", "b": "two"}, [key.recipient]))
    doc["a"], doc["b"] = doc["b"], doc["a"]
    with pytest.raises(SopsError, match=r"f\.yaml: a: AES-GCM authentication failed"):
        decrypt_document(yaml.safe_dump(doc), "f.yaml", _ids(key.identity))


def test_changed_unencrypted_value_is_a_mac_mismatch() -> None:
    key = new_age_key()
    text = sops_encrypt(TREE, [key.recipient]).replace("visible", "changed")
    with pytest.raises(SopsError, match="MAC mismatch"):
        decrypt_document(text, "f.yaml", _ids(key.identity))


def test_removed_value_is_a_mac_mismatch() -> None:
    key = new_age_key()
    doc = yaml.safe_load(sops_encrypt({"a": "one", "b": "two"}, [key.recipient]))
    del doc["b"]
    with pytest.raises(SopsError, match="MAC mismatch"):
        decrypt_document(yaml.safe_dump(doc), "f.yaml", _ids(key.identity))


def test_plain_file_is_not_sops() -> None:
    with pytest.raises(SopsError, match="not a SOPS-encrypted file"):
        decrypt_document("a: 1\n", "f.yaml", [])


def test_identities_from_file_and_text(tmp_path: Path) -> None:
    one, two = new_age_key(), new_age_key()
    key_file = tmp_path / "keys.txt"
    key_file.write_text(f"# created: now\n# public key: {one.recipient}\n{one.identity}\n")
    ids = load_identities(key_file, two.identity)
    assert {i.recipient for i in ids} == {one.recipient, two.recipient}
    assert one.identity not in repr(ids)


def test_bad_identity_line_names_source_and_line_only(tmp_path: Path) -> None:
    key_file = tmp_path / "keys.txt"
    key_file.write_text("# comment\nAGE-SECRET-KEY-1NOTAKEY\n")
    with pytest.raises(agelib.AgeError, match=r"keys.txt:2: not an age identity") as err:
        load_identities(key_file)
    assert "NOTAKEY" not in str(err.value)


@pytest.mark.skipif(shutil.which("age") is None, reason="age CLI not installed")
def test_age_layer_interoperates_with_the_age_cli(tmp_path: Path) -> None:
    key = new_age_key()
    (tmp_path / "id.txt").write_text(key.identity + "\n")
    secret = b"\x01" * 32
    # Real age encrypts, we decrypt.
    real = subprocess.run(
        ["age", "-a", "-r", key.recipient], input=secret, capture_output=True, check=True
    ).stdout
    assert agelib.decrypt(agelib.dearmor(real.decode()), _ids(key.identity)) == secret
    # Our test encryptor's output opens with real age (so our fixtures are real age files).
    ours = tmp_path / "ours.age"
    ours.write_text(armor(age_encrypt(secret, [key.recipient])))
    out = subprocess.run(
        ["age", "-d", "-i", str(tmp_path / "id.txt"), str(ours)], capture_output=True, check=True
    ).stdout
    assert out == secret
