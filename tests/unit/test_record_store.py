"""FileStore passes the RecordStore contract (tests/records_contract.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from passhat.records.store import FileStore, RecordStore
from tests.records_contract import CONTRACT, StoreFactory


@pytest.mark.parametrize("check", CONTRACT, ids=lambda check: check.__name__)
def test_file_store_contract(check: Callable[[StoreFactory], None], tmp_path: Path) -> None:
    """A directory store keeps the contract that every record store keeps."""

    def make(name: str) -> RecordStore:
        return FileStore(str(tmp_path / name))

    check(make)
