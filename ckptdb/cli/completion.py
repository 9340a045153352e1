"""``ckptdb completion``: the shell completion script of the ``ckptdb`` command."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from .app import main


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    bash:  eval "$(ckptdb completion bash)"    (e.g. in ~/.bashrc)
    zsh:   eval "$(ckptdb completion zsh)"     (e.g. in ~/.zshrc)
    fish:  ckptdb completion fish > ~/.config/fish/completions/ckptdb.fish
    """
    cls = get_completion_class(shell)
    assert cls is not None  # the choices are the shells click supports
    # A script of ckptdb's own (no value from a file), which the shell must get exactly.
    click.echo(cls(main, {}, "ckptdb", "_CKPTDB_COMPLETE").source())


COMMANDS = [completion]
