"""Jinja templates loaded by name from a folder, with StrictUndefined (a missing context value
is an error, not an empty string). Every backend renders its sources through one of these."""

from functools import lru_cache
from pathlib import Path

import jinja2

SHARED_TEMPLATES = Path(__file__).parent / "templates"


@lru_cache(maxsize=None)
def _environment(folder: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render(folder, template_name: str, **context) -> str:
    """Render `template_name` from `folder` (a backend's templates directory)."""
    return _environment(Path(folder)).get_template(template_name).render(**context)
