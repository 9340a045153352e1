"""The global options (--keys-file, --keys-env, --busy-timeout) go before or after the
subcommand, once for every command; without a key the CLI names its own options, not
Python's ``keys=`` (issue 26, item 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import ckptdb
from ckptdb import errors
from ckptdb.cli import main

KEY = bytes(range(32))
GLOBAL = {"--keys-file", "--keys-env", "--busy-timeout"}


def _run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(main, list(args), env=env)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture
def encrypted(tmp_path: Path) -> tuple[str, str]:
    """(DB with the encrypted namespace t/x holding state.json, its key file)."""
    path = tmp_path / "enc.ckpt"
    with ckptdb.open(path, keys={"a": KEY}) as db:
        db.set_encryption("t/", key_id="a")
        db.commit("t/x", {"state.json": b'{"secret": 1}'})
        db.commit("plain", {"state.json": b"{}"})
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"a": KEY.hex()}))
    keys.chmod(0o600)
    return str(path), str(keys)


def test_global_options_work_before_or_after_the_subcommand(encrypted: tuple[str, str]) -> None:
    db, keys = encrypted
    before = _run("--keys-file", keys, "cat", db, "t/x", "state.json").stdout
    after = _run("cat", db, "t/x", "state.json", "--keys-file", keys).stdout
    between = _run("cat", "--keys-file", keys, db, "t/x", "state.json").stdout
    assert before == after == between == '{"secret": 1}'
    # In a command group too (`keys list DB`), after the subcommand.
    listed = json.loads(_run("keys", "list", db, "--json", "--keys-file", keys).stdout)
    assert listed[0]["key_id"] == "a"
    # --keys-env after the subcommand.
    env = {"MY_KEYS": json.dumps({"a": KEY.hex()})}
    shown = _run("cat", db, "t/x", "state.json", "--keys-env", "MY_KEYS", env=env).stdout
    assert shown == '{"secret": 1}'


def test_after_the_subcommand_beats_before_it_and_the_environment(
    encrypted: tuple[str, str], tmp_path: Path
) -> None:
    db, keys = encrypted
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"a": bytes(32).hex()}))
    wrong.chmod(0o600)
    env = {"CKPTDB_KEYS_FILE": str(wrong)}
    assert _run("cat", db, "t/x", "state.json", "--keys-file", keys, env=env).stdout
    assert _run("--keys-file", str(wrong), "cat", db, "t/x", "state.json", "--keys-file", keys)
    # The environment alone still applies (and here it is the wrong key).
    mismatch = _run("cat", db, "t/x", "state.json", code=14, env=env)
    assert "key_mismatch" in mismatch.stderr


def test_without_a_key_the_cli_names_its_options(encrypted: tuple[str, str]) -> None:
    db, _ = encrypted
    missing = _run("cat", db, "t/x", "state.json", code=14)
    message = missing.stderr
    assert message.startswith("error: key_unavailable: namespaces under 't/' are encrypted")
    assert "--keys-file PATH" in message and "$CKPTDB_KEYS_FILE" in message
    assert "--keys-env NAME" in message and "keys={" not in message
    refused = json.loads(_run("keys", "set", db, "u/", "--key-id", "b", "--json", code=14).stdout)
    assert refused["code"] == "key_unavailable" and "--keys-file" in refused["message"]
    assert "keys={" not in refused["message"] and refused["key_id"]
    # The library keeps the advice for a Python caller.
    with ckptdb.open(db) as handle, pytest.raises(errors.KeyUnavailableError) as caught:
        handle.current("t/x").read("state.json")  # type: ignore[union-attr]
    assert "keys={key_id: <32-byte key>}" in str(caught.value)


def _commands(group: click.Group, path: str = "ckptdb") -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        out.append((f"{path} {name}", cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, f"{path} {name}")
    return out


def test_every_command_takes_the_global_options_once(tmp_path: Path) -> None:
    for name, cmd in _commands(main):
        options = [o for p in cmd.params if isinstance(p, click.Option) for o in p.opts]
        assert set(options) >= GLOBAL, name
        assert all(options.count(o) == 1 for o in GLOBAL), name
    root = {o for p in main.params for o in p.opts}
    assert root >= GLOBAL
    # A bad value is a usage error wherever it is given.
    db = str(tmp_path / "x.ckpt")
    _run("init", db)
    assert "busy-timeout" in _run("namespaces", db, "--busy-timeout", "-1", code=2).stderr
