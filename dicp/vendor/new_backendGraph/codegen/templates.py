"""Jinja templates of the reference backend, loaded by name with StrictUndefined."""
from functools import lru_cache
from pathlib import Path

import jinja2

TEMPLATE_DIR = Path(__file__).parent / "templates"
INCLUDE_DIR = Path(__file__).parent / "include"


@lru_cache(maxsize=None)
def _environment():
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render(template_name, **context):
    return _environment().get_template(template_name).render(**context)
