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


def test_require_version() -> None:
    """The installed version passes; another stops with the command that installs the book's."""
    from posenc_lib import __version__, require_version

    require_version(f"v{__version__}", "https://example.org/repo")
    with pytest.raises(ImportError, match=r"this book needs v999\.0\.0.*--force-reinstall"):
        require_version("v999.0.0", "https://example.org/repo")
    with pytest.raises(ImportError, match=r"git\+https://example\.org/repo@v999\.0\.0"):
        require_version("v999.0.0", "https://example.org/repo")
    with pytest.raises(ValueError, match="version"):
        require_version(__version__, "https://example.org/repo")
