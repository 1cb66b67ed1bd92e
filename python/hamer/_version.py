"""The package version: the project version of CMakeLists.txt (a test
checks that they and the library's hamer_version() agree)."""
__version__ = "0.1.0"
