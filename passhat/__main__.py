"""`python -m passhat`: the same as the `passhat` command."""

from passhat.cli import console_main

console_main()
