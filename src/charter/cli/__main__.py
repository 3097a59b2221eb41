"""`python -m charter.cli`: the `charter` command."""

from __future__ import annotations

from charter.cli import main

main()
