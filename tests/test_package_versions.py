"""posenc_lib.records.package_versions: the versions a chapter prints."""

from importlib.metadata import version

import pytest

from posenc_lib import package_versions


def test_package_versions() -> None:
    """Each name with its installed version, in order; nothing or a missing one fails."""
    assert package_versions(["torch", "pandas"]) == (
        f"torch {version('torch')}, pandas {version('pandas')}")
    with pytest.raises(ValueError, match="names"):
        package_versions([])
    with pytest.raises(ImportError):
        package_versions(["no_such_package_posenc"])
