"""What `make setup` leaves in .venv beyond the packages pyproject.toml asks for."""
import importlib.util


def test_no_parser_built_at_every_jsonschema_import():
    """scripts/setup.sh removes rfc3987-syntax (jsonschema's "iri" format check), whose import
    builds a parser: 3.4 s of CPU in every process importing jsonschema, nbformat among them."""
    assert importlib.util.find_spec("rfc3987_syntax") is None, "run `make setup` again (scripts/setup.sh)"
